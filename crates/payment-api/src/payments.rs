//! Executing `POST /pagamentos` under an idempotency key.
//!
//! Phases, each its own transaction (after Brandur Leach's rocket-rides-atomic):
//! 1. **claim** — INSERT the key under `UNIQUE (merchant, key)` with a lease and fencing token
//!    (recovery point `started`), or learn from the existing row what to do instead;
//! 2. **charge** — call the gateway with a downstream key derived from (merchant, key), so a
//!    takeover after a crash gets the earlier charge back instead of charging again;
//! 3. **finish** — insert the payment and store the response in one transaction, only if this
//!    worker's fence still holds the key (recovery point `finished`).

use crate::domain::{
    BodyDigest, CardToken, DownstreamKey, Fingerprint, IdempotencyKey, KeyOperation, MerchantId,
    PaymentId, PaymentRequest, PaymentStatus, RefundRequest,
};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::gateway::{ChargeDecision, GatewayError, GatewayResult};
use crate::metrics::RequestOutcome;
use crate::replay_cache::Completed;
use crate::schema::PaymentBody;
use crate::state::AppState;
use crate::store::{
    Abandoned, Claim, Completion, FinishOutcome, NextAction, Payment, StoredResponse,
};
use std::time::Instant;
use tracing::Instrument;

/// How a request that was not refused is answered. The HTTP layer turns it into a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// This request executed the payment; the answer is durable.
    First(StoredResponse),
    /// The key completed earlier: its stored answer, to be sent again byte for byte.
    Replay(StoredResponse),
}

/// What a key executes: a charge, or a refund of one of the merchant's payments.
#[derive(Debug)]
pub(crate) enum Operation {
    /// `POST /pagamentos`.
    Payment(PaymentRequest),
    /// `POST /pagamentos/{id}/estornos`.
    Refund {
        /// The payment to pay back.
        payment: PaymentId,
        /// Amount and reason.
        request: RefundRequest,
    },
}

/// A request that passed every check that happens before execution.
#[derive(Debug)]
pub struct Prepared {
    pub(crate) merchant: MerchantId,
    pub(crate) key: IdempotencyKey,
    pub(crate) fingerprint: Fingerprint,
    pub(crate) op: Operation,
    /// The request body as JSON bytes, kept with the claim for the recovery worker (the key row's
    /// `operation` says what it is).
    body: Vec<u8>,
    /// The digest of the bytes as received, when the HTTP layer had them.
    pub(crate) digest: Option<BodyDigest>,
}

impl Prepared {
    /// What the key executes.
    fn operation(&self) -> KeyOperation {
        match self.op {
            Operation::Payment(_) => KeyOperation::Pagamento,
            Operation::Refund { .. } => KeyOperation::Estorno,
        }
    }

    /// The `referencia` a look-up finds the execution by while it runs (payments only: a refund
    /// is looked up among its payment's refunds).
    fn referencia(&self) -> Option<String> {
        match &self.op {
            Operation::Payment(request) => request.referencia.clone(),
            Operation::Refund { .. } => None,
        }
    }

    /// Validates a payment's body and fingerprints it. Nothing is stored for a request that
    /// fails here.
    pub fn new(merchant: MerchantId, key: IdempotencyKey, body: serde_json::Value) -> Result<Self> {
        let request = PaymentRequest::from_json(&body).map_err(ApiError::Validation)?;
        let fingerprint = Fingerprint::of("POST", "/pagamentos", &body);
        Ok(Self {
            merchant,
            key,
            fingerprint,
            op: Operation::Payment(request),
            body: serde_json::to_vec(&body).expect("a JSON value serialises"),
            digest: None,
        })
    }

    /// Validates a refund's body and fingerprints it with its path (so the same key cannot
    /// refund another payment). Nothing is stored for a request that fails here.
    pub fn refund(
        merchant: MerchantId,
        key: IdempotencyKey,
        payment: String,
        body: serde_json::Value,
    ) -> Result<Self> {
        let request = RefundRequest::from_json(&body).map_err(ApiError::Validation)?;
        let Some(payment_id) = PaymentId::from_path(&payment) else {
            return Err(ApiError::NotFound);
        };
        let fingerprint =
            Fingerprint::of("POST", &format!("/pagamentos/{payment}/estornos"), &body);
        Ok(Self {
            merchant,
            key,
            fingerprint,
            op: Operation::Refund {
                payment: payment_id,
                request,
            },
            body: serde_json::to_vec(&body).expect("a JSON value serialises"),
            digest: None,
        })
    }
}

/// Runs a prepared request: replays, refuses, or executes it exactly once.
pub async fn create(state: &AppState, p: Prepared, faults: &Faults) -> Result<Answer> {
    faults.before_execution().await?;

    // Fast path: a completed key is replayed from memory or a read connection, without
    // queueing a write. The claim below still decides every key that is not completed.
    let now = state.store().now_ms();
    if let Some(done) = state.replays().get(&p.merchant, &p.key, now) {
        if done.fingerprint != p.fingerprint {
            return Err(ApiError::FingerprintMismatch);
        }
        if p.digest.is_some() && done.digest != p.digest {
            // The same request in other bytes (key order, spaces): remember these too.
            remember(state, &p, done.response.clone(), done.completed_at);
        }
        return Ok(replay(state, done.response.clone()));
    }
    if state.store().lookup_before_claim() {
        let started = Instant::now();
        let existing = state.store().lookup_key(&p.merchant, &p.key).await?;
        state.metrics().store_op("lookup_key", started);
        if let Some(record) = existing {
            if record.cancelled {
                return Err(ApiError::KeyCancelled);
            }
            if record.fingerprint != p.fingerprint {
                return Err(ApiError::FingerprintMismatch);
            }
            if let (Some(saved), Some(completed_at)) = (record.response, record.completed_at) {
                remember(state, &p, saved.clone(), completed_at);
                return Ok(replay(state, saved));
            }
        }
    }

    // From the claim on, the work runs in its own task: a client that hangs up (a timeout,
    // a dropped Wi-Fi) must not cancel an execution halfway, or every retry would find the
    // key held by a worker that no longer exists. Its lines name the merchant and the key.
    let span = tracing::info_span!("execution", merchant = %p.merchant, key = %p.key.as_ref());
    let task = tokio::spawn(claim_and_execute(state.clone(), p, faults.clone()).instrument(span));
    task.await
        .map_err(|e| ApiError::Internal(format!("execution task failed: {e}")))?
}

async fn claim_and_execute(state: AppState, p: Prepared, faults: Faults) -> Result<Answer> {
    let state = &state;
    let started = Instant::now();
    let next = state
        .store()
        .claim(Claim {
            merchant: p.merchant.clone(),
            key: p.key.clone(),
            fingerprint: p.fingerprint.clone(),
            request: p.body.clone(),
            lease_ms: state.lease_ms(),
            operation: p.operation(),
            referencia: p.referencia(),
        })
        .await?;
    state.metrics().store_op("claim", started);
    match next {
        NextAction::ReturnSavedResponse {
            response,
            completed_at,
        } => {
            remember(state, &p, response.clone(), completed_at);
            Ok(replay(state, response))
        }
        NextAction::FingerprintMismatch => Err(ApiError::FingerprintMismatch),
        NextAction::Cancelled => Err(ApiError::KeyCancelled),
        NextAction::InProgress { retry_after_ms } => Err(ApiError::KeyInProgress {
            retry_after_secs: u64::try_from((retry_after_ms + 999) / 1000)
                .unwrap_or(1)
                .max(1),
        }),
        NextAction::StartProcessing { fence, takeover } => {
            if takeover {
                tracing::warn!(fence, "lease expired: taking over the key");
            }
            match &p.op {
                Operation::Payment(request) => execute(state, &p, request, fence, &faults).await,
                Operation::Refund { payment, request } => {
                    crate::refunds::execute(state, &p, payment, request, fence, &faults).await
                }
            }
        }
    }
}

pub(crate) fn remember(
    state: &AppState,
    p: &Prepared,
    response: StoredResponse,
    completed_at: crate::clock::Millis,
) {
    state.replays().put(
        &p.merchant,
        &p.key,
        Completed {
            fingerprint: p.fingerprint.clone(),
            digest: p.digest,
            response,
            completed_at,
        },
    );
}

/// A retry that sends the very bytes of a request this server completed (and remembers) is
/// answered from memory before its body is parsed, validated and fingerprinted: same bytes, same
/// fingerprint. Anything else (`None`) goes the whole way through [`create`]. Faults before
/// execution apply as they do there.
pub async fn replay_same_bytes(
    state: &AppState,
    merchant: &MerchantId,
    key: &IdempotencyKey,
    digest: &BodyDigest,
    faults: &Faults,
) -> Result<Option<Answer>> {
    let now = state.store().now_ms();
    match state.replays().get(merchant, key, now) {
        Some(done) if done.digest.as_ref() == Some(digest) => {
            faults.before_execution().await?;
            Ok(Some(replay(state, done.response.clone())))
        }
        _ => Ok(None),
    }
}

pub(crate) fn replay(state: &AppState, saved: StoredResponse) -> Answer {
    state.metrics().request(RequestOutcome::replay);
    Answer::Replay(saved)
}

async fn execute(
    state: &AppState,
    p: &Prepared,
    request: &PaymentRequest,
    fence: i64,
    faults: &Faults,
) -> Result<Answer> {
    let downstream = DownstreamKey::derive(&p.merchant, &p.key);
    let started = Instant::now();
    let charged = state
        .gateway()
        .charge(downstream, &p.merchant, request.valor, request.cartao)
        .await;
    state.metrics().store_op("gateway_charge", started);
    let charged = match charged {
        Ok(c) => c,
        Err(GatewayError::Voided) => {
            // The key was cancelled while this worker held it (a cancellation took an expired
            // lease over) or cancelled and then purged: it never charges.
            state
                .store()
                .mark_cancelled(&p.merchant, &p.key, fence)
                .await?;
            return Err(ApiError::KeyCancelled);
        }
        Err(GatewayError::Unavailable(e)) => {
            // Nothing durable happened at the gateway's side we cannot find again (the downstream
            // key makes the next try idempotent); free the key so the client's retry runs now.
            let _ = state.store().release(&p.merchant, &p.key, fence).await;
            return Err(e.into());
        }
    };
    if charged.fresh {
        state
            .metrics()
            .charge(charged.decision == ChargeDecision::Aprovado);
    }
    faults.after_charge();

    if !charged.fresh {
        if let Some(done) = reconcile(state, p, request, fence, &charged).await? {
            return Ok(done);
        }
    }
    let created_at = state.store().now_ms();
    let (payment, response) = build_payment(&p.merchant, &p.key, request, &charged, created_at);
    let started = Instant::now();
    let finished = state
        .store()
        .finish(Completion {
            merchant: p.merchant.clone(),
            key: p.key.clone(),
            fence,
            payment: payment.clone(),
            response: response.clone(),
            fingerprint: p.fingerprint.clone(),
        })
        .await?;
    state.metrics().store_op("finish", started);
    if finished == FinishOutcome::Stored {
        tracing::info!(status = response.status, payment = %payment.id, replay = false, "payment executed");
    }
    answer_finished(state, p, finished, response, created_at, fence).await
}

/// The answer of an execution whose completion was (or, its lease lost, was not) written.
pub(crate) async fn answer_finished(
    state: &AppState,
    p: &Prepared,
    finished: FinishOutcome,
    response: StoredResponse,
    completed_at: crate::clock::Millis,
    fence: i64,
) -> Result<Answer> {
    match finished {
        FinishOutcome::Stored => {
            remember(state, p, response.clone(), completed_at);
            state.metrics().request(RequestOutcome::first);
            Ok(Answer::First(response))
        }
        FinishOutcome::LeaseLost => {
            // A retry took the key over while we ran; whatever it stored is the answer.
            tracing::warn!(fence, "lease lost: this worker's result was not written");
            match state.store().lookup_key(&p.merchant, &p.key).await? {
                Some(record) if record.cancelled => Err(ApiError::KeyCancelled),
                Some(record) if record.response.is_some() => {
                    Ok(replay(state, record.response.expect("checked above")))
                }
                _ => Err(ApiError::LeaseLost),
            }
        }
    }
}

/// The payment and the response for a charge the gateway made.
fn build_payment(
    merchant: &MerchantId,
    key: &IdempotencyKey,
    request: &PaymentRequest,
    charged: &GatewayResult,
    created_at: crate::clock::Millis,
) -> (Payment, StoredResponse) {
    let payment = Payment {
        valor: request.valor,
        descricao: request.descricao.clone(),
        referencia: request.referencia.clone(),
        terminal: request.terminal.clone(),
        ..from_charge(merchant, key, charged, created_at)
    };
    let response = response_for(&payment);
    (payment, response)
}

/// The answer a payment was (and is again) sent as: the same bytes every time.
pub(crate) fn response_for(payment: &Payment) -> StoredResponse {
    StoredResponse {
        status: payment.status.http_status(),
        body: PaymentBody::bytes_of(payment),
    }
}

/// The gateway returned a charge it had made before. If that charge already has its payment,
/// this key was sent again after its retention purged it: the same request gets the original
/// payment (answered as a replay; no second payment row), another request a 422 (and the key is
/// left free, so the original request can still get its payment). `None`: the charge has no
/// payment yet (a takeover after a crash), so the caller stores it.
async fn reconcile(
    state: &AppState,
    p: &Prepared,
    request: &PaymentRequest,
    fence: i64,
    charged: &GatewayResult,
) -> Result<Option<Answer>> {
    let Some((existing, fingerprint)) = state
        .store()
        .payment_by_charge(&charged.cobranca_id)
        .await?
    else {
        return Ok(None);
    };
    let same = match fingerprint {
        Some(fp) => fp == p.fingerprint,
        // Stored before fingerprints were kept: compare what the payment records.
        None => {
            existing.valor == request.valor
                && existing.descricao == request.descricao
                && existing.referencia == request.referencia
        }
    };
    if !same {
        tracing::warn!(payment = %existing.id, "key sent again after its retention with another request");
        state.store().forget(&p.merchant, &p.key, fence).await?;
        return Err(ApiError::FingerprintMismatch);
    }
    tracing::info!(payment = %existing.id, "key sent again after its retention: answered with its payment");
    answer_existing(
        state,
        p,
        fence,
        existing.id.as_ref(),
        response_for(&existing),
    )
    .await
    .map(Some)
}

/// Completes a key sent again after its retention with the answer of what it made before (a
/// payment, a refund: `resource`), and answers that as a replay; nothing else moves.
pub(crate) async fn answer_existing(
    state: &AppState,
    p: &Prepared,
    fence: i64,
    resource: &str,
    response: StoredResponse,
) -> Result<Answer> {
    match state
        .store()
        .finish_existing(&p.merchant, &p.key, fence, resource, response.clone())
        .await?
    {
        FinishOutcome::Stored => {
            remember(state, p, response.clone(), state.store().now_ms());
            Ok(replay(state, response))
        }
        FinishOutcome::LeaseLost => Err(ApiError::LeaseLost),
    }
}

/// What one pass of the recovery worker did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// Abandoned keys whose charge (or refund) was found and whose outcome is now stored.
    pub completed: u64,
    /// Abandoned keys the gateway never charged, released for the client's next try.
    pub released: u64,
    /// Abandoned cancellations finished: their keys are void.
    pub cancelled: u64,
    /// Keys that could not be settled in this pass (logged with the key; the next pass tries
    /// again). One never stops the pass.
    pub failed: u64,
}

/// Brandur Leach's "completer": finishes executions abandoned after a crash without waiting for
/// the client to retry. A key still `started` whose lease ended more than `stale_ms` ago is taken
/// over (a new fence, so a worker that is only late can no longer write), then settled by what
/// the gateway says of its downstream key: charged → its payment is stored the way the request
/// path stores it ([`complete_charge`]) and the answer becomes replayable (so a look-up by
/// `referencia` finds every real charge); never charged → the key is released with its request
/// for the client's retry (and looked at again on the next pass, in case a stalled worker
/// charges it after all), or, once older than the key retention, cancelled. A cancellation left
/// halfway is finished. A key that fails is logged and counted, and the pass goes on.
pub async fn recover_abandoned(
    state: &AppState,
    stale_ms: crate::clock::Millis,
) -> Result<Recovered> {
    let mut done = Recovered::default();
    for a in state.store().abandoned(stale_ms, 100).await? {
        if let Err(e) = recover_one(state, &a, &mut done).await {
            // The next pass tries it again; say which key and the store's own words.
            tracing::warn!(merchant = %a.merchant, key = a.key.as_ref(), operation = %a.operation, error = ?e, "recovery: could not settle this key now; going on with the others");
            state.metrics().recovered("failed");
            done.failed += 1;
        }
    }
    Ok(done)
}

async fn recover_one(state: &AppState, a: &Abandoned, done: &mut Recovered) -> Result<()> {
    let Some(fence) = state
        .store()
        .take_over(&a.merchant, &a.key, a.fence, state.lease_ms())
        .await?
    else {
        return Ok(()); // a client retry got there first
    };
    let held = HeldExecution {
        merchant: &a.merchant,
        key: &a.key,
        fence,
        fingerprint: &a.fingerprint,
        request: a.request.as_deref(),
    };
    match a.operation {
        KeyOperation::Estorno => crate::refunds::recover(state, a, fence, done).await,
        KeyOperation::Cancelamento => {
            let settled = crate::cancel::settle(state, &held).await?;
            tracing::info!(merchant = %a.merchant, key = a.key.as_ref(), ?settled, "recovery: abandoned cancellation finished");
            state.metrics().recovered("completed");
            done.cancelled += 1;
            Ok(())
        }
        KeyOperation::Pagamento => {
            let downstream = DownstreamKey::derive(&a.merchant, &a.key);
            let Some(charged) = state.gateway().find_charge(&downstream).await? else {
                let retention_ms = i64::try_from(state.key_retention_secs())
                    .unwrap_or(i64::MAX / 1000)
                    .saturating_mul(1000);
                if state.store().now_ms() - a.created_at > retention_ms {
                    // No client retries a key this old without looking it up first: burn it, so
                    // that a worker still stalled somewhere can never charge it.
                    let settled = crate::cancel::settle(state, &held).await?;
                    tracing::info!(merchant = %a.merchant, key = a.key.as_ref(), ?settled, "recovery: never charged and older than the key retention; key cancelled");
                    state.metrics().recovered("cancelled");
                    done.cancelled += 1;
                } else {
                    // Kept with its request, lease ended: the client's retry takes it over and
                    // charges once under the same downstream key; if a worker that was only
                    // stalled charges it meanwhile, a later pass finds that charge and stores it.
                    state.store().release(&a.merchant, &a.key, fence).await?;
                    tracing::info!(merchant = %a.merchant, key = a.key.as_ref(), "recovery: never charged; key released for the client's retry");
                    state.metrics().recovered("released");
                    done.released += 1;
                }
                return Ok(());
            };
            match complete_charge(state, &held, &charged).await? {
                ChargeSettled::Payment(payment) => {
                    tracing::warn!(merchant = %a.merchant, key = a.key.as_ref(), payment = %payment.id, "recovery: charged before a crash; payment stored");
                    state.metrics().recovered("completed");
                    done.completed += 1;
                }
                ChargeSettled::Mismatch | ChargeSettled::LeaseLost => {}
            }
            Ok(())
        }
    }
}

/// A key some worker holds under `fence`, with what was claimed with it.
pub(crate) struct HeldExecution<'a> {
    pub merchant: &'a MerchantId,
    pub key: &'a IdempotencyKey,
    pub fence: i64,
    pub fingerprint: &'a Fingerprint,
    /// The request kept with the key (none for a key a cancellation claimed).
    pub request: Option<&'a [u8]>,
}

/// What [`complete_charge`] stored.
#[derive(Debug)]
pub(crate) enum ChargeSettled {
    /// The key completed with this payment (new, or the one the charge already had).
    Payment(Box<Payment>),
    /// The charge's payment was made by another request under this key (purged, then reused):
    /// the key was deleted, so the request it holds now is answered 422 on its retry.
    Mismatch,
    /// Another worker took the key over meanwhile; nothing was written.
    LeaseLost,
}

/// Completes a held key whose charge the gateway made, without the client's request in hand: the
/// recovery worker's and the cancellation's step. A charge that already has its payment (one per
/// `cobranca_id`) completes the key with it; otherwise the payment is built from the request kept
/// with the key or, when there is none (a cancellation found a charge its worker never stored),
/// from the gateway's own record of the charge.
pub(crate) async fn complete_charge(
    state: &AppState,
    held: &HeldExecution<'_>,
    charged: &GatewayResult,
) -> Result<ChargeSettled> {
    let store = state.store();
    if let Some((existing, fingerprint)) = store.payment_by_charge(&charged.cobranca_id).await? {
        if fingerprint.is_some_and(|fp| fp != *held.fingerprint)
            && held.request.is_some()
            && existing.idempotency_key == *held.key
        {
            store.forget(held.merchant, held.key, held.fence).await?;
            return Ok(ChargeSettled::Mismatch);
        }
        let response = response_for(&existing);
        return Ok(
            match store
                .finish_existing(
                    held.merchant,
                    held.key,
                    held.fence,
                    existing.id.as_ref(),
                    response,
                )
                .await?
            {
                FinishOutcome::Stored => ChargeSettled::Payment(Box::new(existing)),
                FinishOutcome::LeaseLost => ChargeSettled::LeaseLost,
            },
        );
    }
    let request = held
        .request
        .and_then(|b| crate::domain::parse_json_strict(b).ok())
        .and_then(|v| PaymentRequest::from_json(&v).ok());
    let created_at = store.now_ms();
    let (payment, response) = match request {
        Some(request) => build_payment(held.merchant, held.key, &request, charged, created_at),
        None => {
            let payment = from_charge(held.merchant, held.key, charged, created_at);
            let response = response_for(&payment);
            (payment, response)
        }
    };
    let finished = store
        .finish(Completion {
            merchant: held.merchant.clone(),
            key: held.key.clone(),
            fence: held.fence,
            payment: payment.clone(),
            response,
            fingerprint: held.fingerprint.clone(),
        })
        .await?;
    Ok(match finished {
        FinishOutcome::Stored => ChargeSettled::Payment(Box::new(payment)),
        FinishOutcome::LeaseLost => ChargeSettled::LeaseLost,
    })
}

/// A payment as the gateway's record of the charge tells it (what the request adds is filled in
/// by [`build_payment`] when the request is at hand).
fn from_charge(
    merchant: &MerchantId,
    key: &IdempotencyKey,
    charged: &GatewayResult,
    created_at: crate::clock::Millis,
) -> Payment {
    let (status, motivo) = match &charged.decision {
        ChargeDecision::Aprovado => (PaymentStatus::Aprovado, None),
        ChargeDecision::Recusado(m) => (PaymentStatus::Recusado, Some(m.clone())),
    };
    Payment {
        id: PaymentId::new(),
        status,
        valor: charged.valor,
        motivo,
        descricao: None,
        referencia: None,
        idempotency_key: key.clone(),
        cobranca_id: charged.cobranca_id.clone(),
        created_at,
        merchant: merchant.clone(),
        terminal: None,
    }
}

/// The card tokens the sandbox knows, for UIs that offer a choice.
pub fn sandbox_tokens() -> impl Iterator<Item = &'static str> {
    CardToken::ALL.into_iter().map(CardToken::as_str)
}
