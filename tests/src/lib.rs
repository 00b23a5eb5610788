//! End-to-end tests live in `tests/`; `checkout-driver` is the small program they kill, and
//! [`trial_client`] the till the randomized trials start, kill and start again.

pub mod trial_client;
