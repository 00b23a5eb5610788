//! Cancel by key: `POST /pagamentos/cancelamentos` (the anchor is Square's
//! `CancelPaymentByIdempotencyKey`). A client in doubt about a payment key (a try refused, a look-up
//! that found nothing) makes it certain before it makes a new key for the same sale:
//!
//! - the key charged → the answer is its payment (approved or declined), and nothing is charged;
//! - the key is executing → 409 with `Retry-After`, as a retry of the payment would get;
//! - the key made a Pix charge the customer can still pay → 409 `pix-aguardando`: only the Pix's
//!   own cancel (`POST /pagamentos/{id}/cancelamento`) removes it at the provider, so "cancelled"
//!   here would be a promise nobody keeps; a Pix closed unpaid is not a payment key (422);
//! - nothing was charged → the key is **burned**: its row is marked cancelled (every later request
//!   with it is refused 422 `idempotency-key-cancelled`), and its downstream key is voided at the
//!   gateway, which is the fence that holds even against a worker stalled past its lease.
//!
//! A cancellation is itself idempotent: asked again, it answers the same. It claims the key the
//! way a request does (an INSERT under `UNIQUE (merchant, key)`, or a fenced takeover of an
//! abandoned execution), so it cannot race an execution of the same key into both outcomes.

use crate::clock::Millis;
use crate::domain::{CancelByKey, CancelRules, IdempotencyKey, KeyOperation, MerchantId};
use crate::error::{ApiError, Result};
use crate::idempotency::{
    in_progress, Held, KeyResource, Operation, Recover, Recovery, ResourceState,
};
use crate::payments::Payments;
pub use crate::payments::Voided as Cancellation;
use crate::store::Lookup;
use crate::store::{CancelClaim, KeyStore, PaymentStore};
use std::sync::Arc;

/// Cancellation by key, with what it needs: the key table, the payments, the payment
/// operation that voids a key at the gateway or completes it with its charge, and what each
/// operation declared a cancellation does to its keys.
#[derive(Debug)]
pub struct Cancel {
    keys: Arc<dyn KeyStore>,
    stored: Arc<dyn PaymentStore>,
    payments: Arc<Payments>,
    rules: CancelRules,
    resources: Vec<Arc<dyn KeyResource>>,
    lease_ms: Millis,
}

impl Cancel {
    /// The use case on these parts: card payments' keys are voided downstream.
    pub fn new(
        keys: Arc<dyn KeyStore>,
        stored: Arc<dyn PaymentStore>,
        payments: Arc<Payments>,
        lease_ms: Millis,
    ) -> Self {
        Self {
            keys,
            stored,
            payments,
            rules: CancelRules::default().with(Payments::KIND, Payments::CANCEL_BY_KEY),
            resources: Vec::new(),
            lease_ms,
        }
    }

    /// Adds an operation's rule (its [`Operation::CANCEL_BY_KEY`]), with the resource a
    /// cancellation asks when the rule says so.
    pub fn declare<O: Operation>(mut self, resource: Option<Arc<dyn KeyResource>>) -> Self {
        self.rules = self.rules.with(O::KIND, O::CANCEL_BY_KEY);
        if let Some(r) = resource {
            debug_assert_eq!(r.kind(), O::KIND);
            self.resources.push(r);
        }
        self
    }

    /// Cancels `key` of `merchant`, or answers the payment it made.
    pub async fn cancel(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> Result<Cancellation> {
        // A key purged after it completed still has its payment, kept forever.
        if let Some(payment) = self
            .stored
            .payments_by(merchant, Lookup::key(key))
            .await?
            .into_iter()
            .next()
        {
            return Ok(Cancellation::Payment(Box::new(payment)));
        }
        // A resource that outlives its key (a Pix charge) answers for itself.
        for resource in &self.resources {
            if self.rules.of(&resource.kind()) == CancelByKey::AskResource {
                match resource.state_for_cancel(merchant, key).await? {
                    ResourceState::None => {}
                    ResourceState::Open(refusal) => return Err(refusal),
                    ResourceState::Closed => return Err(ApiError::NotAPaymentKey),
                }
            }
        }
        match self
            .keys
            .claim_for_cancel(merchant, key, self.lease_ms, &self.rules)
            .await?
        {
            CancelClaim::Cancelled => Ok(Cancellation::Cancelled),
            CancelClaim::NotAPayment => Err(ApiError::NotAPaymentKey),
            CancelClaim::InProgress { retry_after_ms } => Err(in_progress(retry_after_ms)),
            CancelClaim::Completed { payment_id } => {
                let id = payment_id.ok_or_else(|| {
                    ApiError::Internal("a completed key has no payment id".into())
                })?;
                let payment = self.stored.payment(merchant, &id).await?.ok_or_else(|| {
                    ApiError::Internal(format!("the payment {id} of a key is gone"))
                })?;
                Ok(Cancellation::Payment(Box::new(payment)))
            }
            CancelClaim::Hold {
                fence,
                fingerprint,
                request,
                ..
            } => {
                let held = Held {
                    keys: self.keys.as_ref(),
                    merchant,
                    key,
                    fence,
                    fingerprint: &fingerprint,
                    request: request.as_deref(),
                };
                self.payments.void_or_complete(&held).await
            }
        }
    }
}

/// A cancellation whose worker died is finished by the recovery worker: the key is voided at
/// the gateway and marked cancelled (or completed with the charge the gateway had made).
#[async_trait::async_trait]
impl Recover for Cancel {
    fn kind(&self) -> KeyOperation {
        KeyOperation::CANCELAMENTO
    }

    async fn recover(&self, held: &Held<'_>, _created_at: Millis) -> Result<Recovery> {
        Ok(match self.payments.void_or_complete(held).await? {
            Cancellation::Cancelled => Recovery::Cancelled,
            Cancellation::Payment(_) => Recovery::Completed,
        })
    }
}
