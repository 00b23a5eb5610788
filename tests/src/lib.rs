//! End-to-end tests live in `tests/`; `checkout-driver` is the small program they kill.
