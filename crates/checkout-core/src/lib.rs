//! Pagar's client engine: a write-ahead outbox in SQLite, the payment client and the replayer.
//!
//! `Checkout::pay` commits the attempt — its fresh `Idempotency-Key` and its exact request
//! bytes — before the first byte goes out; every retry, after a timeout, a lost response or a
//! crash of this process, carries the same key and bytes. Knows nothing of Tauri.

pub mod client;
pub mod closing;
pub mod config;
pub mod domain;
pub mod drawer;
pub mod engine;
pub mod error;
pub mod export;
pub mod fiscal;
pub mod outbox;
pub mod sale_view;

pub use closing::{Closing, Discrepancy, DiscrepancyKind, MethodTally, PixTotals};
pub use config::Config;
pub use domain::{
    format_brl, installments, mask_card, AttemptId, AttemptKind, AttemptState, Capture, CardMethod,
    CardPlan, CardToken, Centavos, Financing, IdempotencyKey, MachineCharge, MachineStatus, Means,
    Net, PayMethod, PaymentId, PixCharge, PixStatus, PlanOffer, PlanRules, RefundReason, SaleId,
    Tally, Total, UnixMillis,
};
pub use drawer::{Drawer, DrawerKind, DrawerMove};
pub use engine::{Checkout, Connectivity, Event, OpenSale};
pub use error::{CoreError, Result};
pub use outbox::{Attempt, PayOutcome, QueueSummary, RefundBalance, Target};
pub use sale_view::SaleView;
