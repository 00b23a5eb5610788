//! Pagar's payment API: an HTTP server that honours `Idempotency-Key`.
//!
//! Every key charges the gateway at most once; completed keys replay their stored response byte
//! for byte; a unique constraint decides which of two concurrent duplicates runs. See
//! `ARCHITECTURE.md` for the invariants and `../shared/SPEC.md` §2 for the contract.

pub mod awaited;
pub mod cancel;
pub mod captures;
pub mod clock;
pub mod config;
pub mod conn;
pub mod domain;
pub mod error;
pub mod faults;
pub mod gateway;
pub mod http;
pub mod idempotency;
pub mod listing;
pub mod logging;
pub mod maquininha;
pub mod metrics;
pub mod payments;
pub mod pix;
pub mod provider_http;
pub mod redact;
pub mod refunds;
pub mod schema;
pub mod server;
pub mod settlement;
pub mod state;
pub mod store;
mod tenders;

pub use config::Config;
pub use error::{ApiError, Result};
pub use server::{start, start_with_store, RunningServer};
