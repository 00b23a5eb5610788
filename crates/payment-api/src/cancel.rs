//! Cancel by key: `POST /pagamentos/cancelamentos` (the anchor is Square's
//! `CancelPaymentByIdempotencyKey`). A client in doubt about a payment key (a try refused, a look-up
//! that found nothing) makes it certain before it makes a new key for the same sale:
//!
//! - the key charged → the answer is its payment (approved or declined), and nothing is charged;
//! - the key is executing → 409 with `Retry-After`, as a retry of the payment would get;
//! - nothing was charged → the key is **burned**: its row is marked cancelled (every later request
//!   with it is refused 422 `idempotency-key-cancelled`), and its downstream key is voided at the
//!   gateway, which is the fence that holds even against a worker stalled past its lease.
//!
//! A cancellation is itself idempotent: asked again, it answers the same. It claims the key the
//! way a request does (an INSERT under `UNIQUE (merchant, key)`, or a fenced takeover of an
//! abandoned execution), so it cannot race an execution of the same key into both outcomes.

use crate::domain::{DownstreamKey, IdempotencyKey, MerchantId};
use crate::error::{ApiError, Result};
use crate::gateway::GatewayResult;
use crate::payments::{complete_charge, ChargeSettled, HeldExecution};
use crate::state::AppState;
use crate::store::{CancelClaim, Payment, PaymentField};

/// What a cancellation settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancellation {
    /// Nothing was charged under the key, and nothing ever will be.
    Cancelled,
    /// The key had made this payment (approved or declined).
    Payment(Box<Payment>),
}

/// Cancels `key` of `merchant`, or answers the payment it made.
pub async fn cancel(
    state: &AppState,
    merchant: &MerchantId,
    key: &IdempotencyKey,
) -> Result<Cancellation> {
    let store = state.store();
    // A key purged after it completed still has its payment, kept forever.
    if let Some(payment) = store
        .payments_by(merchant, PaymentField::IdempotencyKey, key.as_ref())
        .await?
        .into_iter()
        .next()
    {
        return Ok(Cancellation::Payment(Box::new(payment)));
    }
    match store
        .claim_for_cancel(merchant, key, state.lease_ms())
        .await?
    {
        CancelClaim::Cancelled => Ok(Cancellation::Cancelled),
        CancelClaim::NotAPayment => Err(ApiError::NotAPaymentKey),
        CancelClaim::InProgress { retry_after_ms } => Err(in_progress(retry_after_ms)),
        CancelClaim::Completed { payment_id } => {
            let id = payment_id
                .ok_or_else(|| ApiError::Internal("a completed key has no payment id".into()))?;
            let payment = store
                .payment(merchant, &id)
                .await?
                .ok_or_else(|| ApiError::Internal(format!("the payment {id} of a key is gone")))?;
            Ok(Cancellation::Payment(Box::new(payment)))
        }
        CancelClaim::Hold {
            fence,
            fingerprint,
            request,
            ..
        } => {
            let held = HeldExecution {
                merchant,
                key,
                fence,
                fingerprint: &fingerprint,
                request: request.as_deref(),
            };
            settle(state, &held).await
        }
    }
}

/// Settles a key held for cancelling under its fence: voids it at the gateway and marks it
/// cancelled, or, if the gateway had charged it, completes it with that charge's payment. Also the
/// recovery worker's step for a cancellation whose worker died.
pub(crate) async fn settle(state: &AppState, held: &HeldExecution<'_>) -> Result<Cancellation> {
    let Some(charged) = void_and_mark(state, held.merchant, held.key, held.fence).await? else {
        return Ok(Cancellation::Cancelled);
    };
    match complete_charge(state, held, &charged).await? {
        ChargeSettled::Payment(payment) => Ok(Cancellation::Payment(payment)),
        // Another worker holds the key now; it is the one to ask again.
        ChargeSettled::Mismatch | ChargeSettled::LeaseLost => Err(in_progress(0)),
    }
}

/// Voids the key's downstream key at the gateway, then marks the key cancelled under `fence`.
/// `Some(charge)` when the gateway had charged it already (nothing is marked).
async fn void_and_mark(
    state: &AppState,
    merchant: &MerchantId,
    key: &IdempotencyKey,
    fence: i64,
) -> Result<Option<GatewayResult>> {
    let downstream = DownstreamKey::derive(merchant, key);
    if let Some(charged) = state.gateway().void(&downstream, merchant).await? {
        return Ok(Some(charged));
    }
    if !state.store().mark_cancelled(merchant, key, fence).await? {
        // The key is void at the gateway either way; who holds it now will find that out.
        return Err(in_progress(0));
    }
    tracing::info!(merchant = %merchant, key = key.as_ref(), "key cancelled: it can never charge");
    Ok(None)
}

fn in_progress(retry_after_ms: i64) -> ApiError {
    ApiError::KeyInProgress {
        retry_after_secs: u64::try_from((retry_after_ms + 999) / 1000)
            .unwrap_or(1)
            .max(1),
    }
}
