//! Refunds: the amount held against its payment under the key's fence, then decided.

use super::*;

/// The columns of `refunds`, in the order both stores read them.
pub(crate) const REFUND_COLUMNS: &str =
    "id, payment_id, merchant, idempotency_key, valor, status, motivo, referencia, recusa, estorno_gateway, created_at";

/// A refund as it is stored. Its amount is held against its payment from the moment it is
/// created (`pendente`) until the gateway declines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    /// `est_…`
    pub id: RefundId,
    /// The payment it pays back.
    pub payment_id: PaymentId,
    /// Owner.
    pub merchant: MerchantId,
    /// The idempotency key that asked for it.
    pub idempotency_key: IdempotencyKey,
    /// Amount.
    pub valor: Centavos,
    /// Held, paid back, or declined.
    pub status: RefundStatus,
    /// The merchant's reason, from the request.
    pub motivo: Option<String>,
    /// The client's reference, from the request.
    pub referencia: Option<String>,
    /// The gateway's decline code, for a declined refund.
    pub recusa: Option<String>,
    /// The gateway's refund id, once it answered.
    pub estorno_gateway: Option<String>,
    /// Creation time (store clock).
    pub created_at: Millis,
}

/// The columns of a `refunds` row as a driver reads them (see [`PaymentColumns`]).
#[derive(Debug)]
pub(crate) struct RefundColumns {
    pub(crate) id: String,
    pub(crate) payment_id: String,
    pub(crate) merchant: String,
    pub(crate) idempotency_key: String,
    pub(crate) valor: i64,
    pub(crate) status: String,
    pub(crate) motivo: Option<String>,
    pub(crate) referencia: Option<String>,
    pub(crate) recusa: Option<String>,
    pub(crate) estorno_gateway: Option<String>,
    pub(crate) created_at: Millis,
}

impl RefundColumns {
    pub(crate) fn parse(self) -> StoreResult<Refund> {
        Ok(Refund {
            id: RefundId::from_stored(self.id),
            payment_id: PaymentId::from_stored(self.payment_id),
            merchant: MerchantId::parse(&self.merchant).map_err(|e| corrupt("merchant", e))?,
            idempotency_key: IdempotencyKey::parse(self.idempotency_key.as_bytes())
                .map_err(|e| corrupt("idempotency_key", e))?,
            valor: Centavos::new(self.valor).map_err(|e| corrupt("valor", e))?,
            status: RefundStatus::parse(&self.status).map_err(|e| corrupt("status", e))?,
            motivo: self.motivo,
            referencia: self.referencia,
            recusa: self.recusa,
            estorno_gateway: self.estorno_gateway,
            created_at: self.created_at,
        })
    }
}

/// What holding a refund's amount came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// The amount is held: this refund (new, or the one this key held before a takeover).
    Held(Box<Refund>),
    /// The merchant has no such payment.
    NoPayment,
    /// The payment was declined: there is nothing to pay back.
    NotApproved,
    /// The payment is an authorization not captured (pending, undone or lapsed): nothing was
    /// taken to pay back.
    NotCaptured,
    /// The amount is more than what is left to refund (`left` centavos, refunds in progress
    /// counted as taken).
    Exceeds {
        /// What could still be refunded.
        left: i64,
    },
    /// The fence no longer holds the key (a takeover): nothing was held.
    LeaseLost,
}

/// The write that completes a refund key: the refund's outcome and the response, in one
/// transaction; a declined refund gives its amount back to the payment in the same one.
#[derive(Debug, Clone)]
pub struct RefundCompletion {
    /// Owner of the key.
    pub merchant: MerchantId,
    /// The key.
    pub key: IdempotencyKey,
    /// The token [`NextAction::StartProcessing`] gave this worker.
    pub fence: i64,
    /// The refund with its final status.
    pub refund: Refund,
    /// The response to store for replays.
    pub response: StoredResponse,
}

/// Refunds and the amounts they hold against their payments.
#[async_trait::async_trait]
pub trait RefundStore: Clocked {
    /// Holds a refund's amount against its payment, if `fence` still holds the key and this key
    /// did not hold one before: the refund row is created `pendente` and `payments.estornado`
    /// grows by its amount in one transaction, by an `UPDATE … WHERE estornado + valor <=
    /// payments.valor` the database decides (with a `CHECK` behind it). A key that held a refund
    /// before gets that refund back as `Held`, in whatever status it is (a takeover finds it
    /// `pendente`; a key purged and sent again finds it decided). Nothing is written when the
    /// answer is not a new `Held`. `refund` is as it is created (`pendente`); the store sets
    /// `created_at`.
    async fn hold_refund(&self, refund: Refund, fence: i64) -> StoreResult<Hold>;
    /// Decides a `pendente` refund and stores the response, if `fence` still holds the key; a
    /// declined refund gives its amount back to the payment in the same transaction. Nothing is
    /// written (`LeaseLost`) unless the refund was still `pendente`, so an amount is never given
    /// back twice.
    async fn finish_refund(&self, done: RefundCompletion) -> StoreResult<FinishOutcome>;
    /// The refund a key asked for, if it got as far as holding its amount.
    async fn refund_by_key(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<Refund>>;
    /// A payment's refunds, oldest first.
    async fn refunds_of(
        &self,
        merchant: &MerchantId,
        payment: &PaymentId,
    ) -> StoreResult<Vec<Refund>>;
}
