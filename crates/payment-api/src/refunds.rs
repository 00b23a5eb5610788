//! Executing `POST /pagamentos/{id}/estornos` under an idempotency key: the same claim, lease,
//! fencing and replay as a payment (see `payments.rs`), with one step more.
//!
//! 1. **claim** the key (shared with payments: a key is a merchant's, whatever it executes);
//! 2. **hold** the amount against the payment: the refund row is created `pendente` and
//!    `payments.estornado` grows, in one transaction whose guarded `UPDATE` the database decides
//!    (`estornado + valor <= payments.valor`, with a `CHECK` behind it), so concurrent refunds on
//!    any number of replicas can never pay back more than was charged. A takeover finds its
//!    key's hold and keeps it. A refusal (no such payment, declined payment, too much) frees the
//!    key and stores nothing;
//! 3. **refund** at the gateway under a downstream key derived from (merchant, key) in the refund
//!    namespace, so a takeover gets the earlier refund back instead of paying back twice;
//! 4. **finish**: the refund's outcome and the response in one transaction under the fence; a
//!    declined refund gives its amount back to the payment in the same transaction.

use crate::domain::{DownstreamKey, PaymentId, RefundId, RefundRequest, RefundStatus};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::gateway::{ChargeDecision, GatewayRefund};
use crate::payments::{answer_finished, Answer, Prepared, Recovered};
use crate::schema::RefundBody;
use crate::state::AppState;
use crate::store::{Abandoned, FinishOutcome, Hold, Refund, RefundCompletion, StoredResponse};

/// Holds, refunds and finishes a claimed refund key.
pub(crate) async fn execute(
    state: &AppState,
    p: &Prepared,
    payment: &PaymentId,
    request: &RefundRequest,
    fence: i64,
    faults: &Faults,
) -> Result<Answer> {
    let asked = Refund {
        id: RefundId::new(),
        payment_id: payment.clone(),
        merchant: p.merchant.clone(),
        idempotency_key: p.key.clone(),
        valor: request.valor,
        status: RefundStatus::Pendente,
        motivo: request.motivo.clone(),
        referencia: request.referencia.clone(),
        recusa: None,
        estorno_gateway: None,
        created_at: 0,
    };
    let held = match state.store().hold_refund(asked.clone(), fence).await? {
        // The key held this refund before: a takeover, or the key purged and sent again.
        Hold::Held(r) if !same_request(&r, &asked) => {
            tracing::warn!(refund = %r.id, "refund key sent again with another request");
            state.store().forget(&p.merchant, &p.key, fence).await?;
            return Err(ApiError::FingerprintMismatch);
        }
        Hold::Held(r) if r.status != RefundStatus::Pendente => {
            return answer_decided(state, p, &r, fence).await;
        }
        Hold::Held(r) => *r,
        Hold::LeaseLost => return Err(ApiError::LeaseLost),
        refused => {
            // Nothing was held: the key is freed and nothing is stored, like a validation error.
            state.store().forget(&p.merchant, &p.key, fence).await?;
            return Err(match refused {
                Hold::NoPayment => ApiError::NotFound,
                Hold::NotApproved => ApiError::NotRefundable,
                Hold::Exceeds { left } => ApiError::RefundExceeds { left },
                Hold::Held(_) | Hold::LeaseLost => unreachable!("matched above"),
            });
        }
    };
    let refunded = match ask_gateway(state, &held).await {
        Ok(r) => r,
        Err(e) => {
            // The hold stays with the key; the client's retry takes the key over at once and
            // asks the gateway again under the same downstream key.
            let _ = state.store().release(&p.merchant, &p.key, fence).await;
            return Err(e);
        }
    };
    if refunded.fresh {
        state
            .metrics()
            .refund(refunded.decision == ChargeDecision::Aprovado);
    }
    faults.after_charge();
    let (done, response, finished) = finish(state, held, refunded, fence).await?;
    if finished == FinishOutcome::Stored {
        tracing::info!(status = response.status, refund = %done.id, payment = %done.payment_id, replay = false, "refund executed");
    }
    answer_finished(state, p, finished, response, state.store().now_ms(), fence).await
}

/// Whether the refund a key held is the one this request asks for: the same payment, amount,
/// reason and reference (a key's refund never changes what it pays back).
fn same_request(held: &Refund, asked: &Refund) -> bool {
    held.payment_id == asked.payment_id
        && held.valor == asked.valor
        && held.motivo == asked.motivo
        && held.referencia == asked.referencia
}

/// A refund decided before its key was purged, asked again with the same request: the key
/// completes with that refund's answer (a replay), and no money moves again.
async fn answer_decided(
    state: &AppState,
    p: &Prepared,
    decided: &Refund,
    fence: i64,
) -> Result<Answer> {
    tracing::info!(refund = %decided.id, "refund key sent again after its retention: answered with its refund");
    crate::payments::answer_existing(state, p, fence, decided.id.as_ref(), response_for(decided))
        .await
}

/// Asks the gateway to pay `held` back, under the downstream key of its (merchant, key): the
/// earlier result if it was asked before, one refund otherwise.
async fn ask_gateway(state: &AppState, held: &Refund) -> Result<GatewayRefund> {
    let charge = state
        .store()
        .payment(&held.merchant, &held.payment_id)
        .await?
        .ok_or_else(|| ApiError::Internal("a held refund has no payment".into()))?;
    let downstream = DownstreamKey::derive_refund(&held.merchant, &held.idempotency_key);
    Ok(state
        .gateway()
        .refund(downstream, &held.merchant, &charge.cobranca_id, held.valor)
        .await?)
}

/// Stores the gateway's decision on `held` and its answer, if `fence` still holds the key.
async fn finish(
    state: &AppState,
    held: Refund,
    refunded: GatewayRefund,
    fence: i64,
) -> Result<(Refund, StoredResponse, FinishOutcome)> {
    let done = settled(held, refunded.decision, refunded.estorno_id);
    let response = response_for(&done);
    let finished = state
        .store()
        .finish_refund(RefundCompletion {
            merchant: done.merchant.clone(),
            key: done.idempotency_key.clone(),
            fence,
            refund: done.clone(),
            response: response.clone(),
        })
        .await?;
    Ok((done, response, finished))
}

/// The held refund as the gateway decided it.
fn settled(held: Refund, decision: ChargeDecision, estorno_id: String) -> Refund {
    let (status, recusa) = match decision {
        ChargeDecision::Aprovado => (RefundStatus::Aprovado, None),
        ChargeDecision::Recusado(m) => (RefundStatus::Recusado, Some(m)),
    };
    Refund {
        status,
        recusa,
        estorno_gateway: Some(estorno_id),
        ..held
    }
}

/// The answer a refund was (and is again) sent as.
fn response_for(refund: &Refund) -> StoredResponse {
    StoredResponse {
        status: refund.status.http_status(),
        body: RefundBody::bytes_of(refund),
    }
}

/// The recovery worker's part for an abandoned refund key it has taken over under `fence`. A
/// refund is rolled forward, never back: its amount is held, so the worker asks the gateway for it
/// under the key's downstream key (which returns the refund if the dead worker got that far, and
/// executes it once otherwise, even if a worker that was only slow asks too) and stores the
/// outcome. Giving the hold back instead would be unsafe: a slow worker could still be at the
/// gateway, and the freed amount could then be refunded twice. A key with no hold never reached
/// the gateway, and is freed.
pub(crate) async fn recover(
    state: &AppState,
    a: &Abandoned,
    fence: i64,
    done: &mut Recovered,
) -> Result<()> {
    let store = state.store();
    let Some(held) = store.refund_by_key(&a.merchant, &a.key).await? else {
        if store.forget(&a.merchant, &a.key, fence).await? {
            tracing::info!(merchant = %a.merchant, key = a.key.as_ref(), "recovery: refund never held; key released");
            state.metrics().recovered("released");
            done.released += 1;
        }
        return Ok(());
    };
    if held.status != RefundStatus::Pendente {
        // Decided before the key was purged and claimed again: the key completes with it.
        let response = response_for(&held);
        if store
            .finish_existing(&a.merchant, &a.key, fence, held.id.as_ref(), response)
            .await?
            == FinishOutcome::Stored
        {
            state.metrics().recovered("completed");
            done.completed += 1;
        }
        return Ok(());
    }
    let refunded = ask_gateway(state, &held).await?;
    let (refund, _, finished) = finish(state, held, refunded, fence).await?;
    if finished == FinishOutcome::Stored {
        tracing::warn!(merchant = %a.merchant, key = a.key.as_ref(), refund = %refund.id, "recovery: abandoned refund completed");
        state.metrics().recovered("completed");
        done.completed += 1;
    }
    Ok(())
}
