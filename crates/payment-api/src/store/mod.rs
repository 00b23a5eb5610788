//! Storage, split by what it keeps: the idempotency keys ([`KeyStore`]), payments and their
//! listing ([`PaymentStore`]), refunds ([`RefundStore`]). Each dialect (`sqlite/`, `postgres/`)
//! implements each concern in a file of its own. The gateway simulator's ledger lives in the same
//! database but is its own interface (`crate::gateway::simulator::SimulatorLedger`).
//!
//! A store owns its clock: lease and retention times are read where the data lives, so that
//! every process sharing one database agrees on them.

mod awaited;
mod claim;
mod error;
mod keys;
mod machine;
mod payments;
mod pix;
#[cfg(feature = "postgres")]
mod postgres;
mod refunds;
mod sales;
mod sqlite;

pub use awaited::*;
#[cfg(feature = "postgres")]
pub use error::describe_postgres;
pub use error::StoreError;
pub use keys::*;
pub use machine::*;
pub use payments::*;
pub use pix::*;
#[cfg(feature = "postgres")]
pub use postgres::{PgOptions, PgStore};
pub use refunds::*;
pub use sales::*;
pub use sqlite::SqliteStore;

use crate::clock::Millis;
use crate::domain::{
    CancelRules, CaptureState, CardPlan, Centavos, Fingerprint, IdempotencyKey, KeyOperation,
    Means, MerchantId, PaymentAsk, PaymentId, PaymentStatus, RefundId, RefundStatus, TerminalId,
};

/// The write that completes the key of a resource a customer pays later (a Pix charge, a
/// card-machine order): the resource and the key's first answer, in one transaction.
#[derive(Debug, Clone)]
pub struct AwaitedCompletion<R> {
    /// The key's fencing token.
    pub fence: i64,
    /// The resource to insert (its merchant and key are the key's).
    pub resource: R,
    /// The first answer, replayed from now on.
    pub response: StoredResponse,
    /// The request's fingerprint, kept with the resource.
    pub fingerprint: Fingerprint,
}

/// Result of store operations.
pub type StoreResult<T> = std::result::Result<T, StoreError>;

/// What a client can look its payments (and the keys still executing) up by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentField {
    /// The client's own reference (`referencia`).
    Referencia,
    /// The idempotency key that created the payment.
    IdempotencyKey,
}

/// A look-up of a merchant's payments (and keys still executing) by one field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup<'a> {
    /// The field.
    pub field: PaymentField,
    /// Its value.
    pub value: &'a str,
}

impl<'a> Lookup<'a> {
    /// By the idempotency key that made it.
    pub fn key(key: &'a IdempotencyKey) -> Self {
        Lookup {
            field: PaymentField::IdempotencyKey,
            value: key.as_ref(),
        }
    }
}

impl PaymentField {
    /// Its column in `payments`.
    fn column(self) -> &'static str {
        match self {
            PaymentField::Referencia => "referencia",
            PaymentField::IdempotencyKey => "idempotency_key",
        }
    }

    /// Its column in `idempotency_keys`.
    pub(crate) fn key_column(self) -> &'static str {
        match self {
            PaymentField::Referencia => "referencia",
            PaymentField::IdempotencyKey => "key",
        }
    }
}

/// A stored value no domain type accepts.
pub(crate) fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

/// The store's clock, shared by every concern.
pub trait Clocked: Send + Sync + std::fmt::Debug + 'static {
    /// The store's current time.
    fn now_ms(&self) -> Millis;
}

/// A whole store: every concern of one database, and its health.
#[async_trait::async_trait]
pub trait Store:
    KeyStore + PaymentStore + RefundStore + PixStore + MachineStore + SaleStore
{
    /// Answers when the store can serve.
    async fn health(&self) -> StoreResult<()>;
    /// Answers when the store can take writes as well (readiness): by default, [`Store::health`].
    async fn ready(&self) -> StoreResult<()> {
        self.health().await
    }
}
