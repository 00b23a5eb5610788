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
    BodyDigest, CardToken, DownstreamKey, Fingerprint, IdempotencyKey, MerchantId, PaymentId,
    PaymentRequest, PaymentStatus, RefundRequest,
};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::gateway::{ChargeDecision, GatewayResult};
use crate::metrics::RequestOutcome;
use crate::replay_cache::Completed;
use crate::schema::PaymentBody;
use crate::state::AppState;
use crate::store::{Claim, Completion, FinishOutcome, NextAction, Payment, StoredResponse};
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
    /// The request as JSON bytes, kept with the claim for the recovery worker: a payment's body,
    /// or `{"estorno": {"pagamento": id, "corpo": body}}` for a refund.
    body: Vec<u8>,
    /// The digest of the bytes as received, when the HTTP layer had them.
    pub(crate) digest: Option<BodyDigest>,
}

impl Prepared {
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
        let fingerprint =
            Fingerprint::of("POST", &format!("/pagamentos/{payment}/estornos"), &body);
        let kept = serde_json::json!({"estorno": {"pagamento": payment, "corpo": body}});
        Ok(Self {
            merchant,
            key,
            fingerprint,
            op: Operation::Refund {
                payment: PaymentId::from_stored(payment),
                request,
            },
            body: serde_json::to_vec(&kept).expect("a JSON value serialises"),
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
        Err(e) => {
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
    let (status, motivo) = match &charged.decision {
        ChargeDecision::Aprovado => (PaymentStatus::Aprovado, None),
        ChargeDecision::Recusado(m) => (PaymentStatus::Recusado, Some(m.clone())),
    };
    let payment = Payment {
        id: PaymentId::new(),
        status,
        valor: request.valor,
        motivo,
        descricao: request.descricao.clone(),
        referencia: request.referencia.clone(),
        idempotency_key: key.clone(),
        cobranca_id: charged.cobranca_id.clone(),
        created_at,
        merchant: merchant.clone(),
        terminal: request.terminal.clone(),
    };
    let response = response_for(&payment);
    (payment, response)
}

/// The answer a payment was (and is again) sent as: the same bytes every time.
fn response_for(payment: &Payment) -> StoredResponse {
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
    let response = response_for(&existing);
    match state
        .store()
        .finish_existing(&p.merchant, &p.key, fence, &existing.id, response.clone())
        .await?
    {
        FinishOutcome::Stored => {
            tracing::info!(payment = %existing.id, "key sent again after its retention: answered with its payment");
            remember(state, p, response.clone(), state.store().now_ms());
            Ok(Some(replay(state, response)))
        }
        FinishOutcome::LeaseLost => Err(ApiError::LeaseLost),
    }
}

/// What one pass of the recovery worker did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// Abandoned keys whose charge was found and whose payment is now stored.
    pub completed: u64,
    /// Abandoned keys the gateway never charged, released for the client's next try.
    pub released: u64,
}

/// Brandur Leach's "completer": finishes executions abandoned after a crash without waiting for
/// the client to retry. A key still `started` whose lease ended more than `stale_ms` ago is taken
/// over (a new fence, so a worker that is only late can no longer write), then settled from the
/// gateway's ledger by its downstream key: charged → its payment is stored and the answer becomes
/// replayable (so a lookup by `referencia` finds every real charge); never charged → the key is
/// released.
pub async fn recover_abandoned(
    state: &AppState,
    stale_ms: crate::clock::Millis,
) -> Result<Recovered> {
    let mut done = Recovered::default();
    for a in state.store().abandoned(stale_ms, 100).await? {
        let Some(fence) = state
            .store()
            .take_over(&a.merchant, &a.key, a.fence, state.lease_ms())
            .await?
        else {
            continue; // a client retry got there first
        };
        if crate::refunds::is_refund(a.request.as_deref()) {
            crate::refunds::recover(state, &a, fence, &mut done).await?;
            continue;
        }
        let downstream = DownstreamKey::derive(&a.merchant, &a.key);
        let Some(row) = state.store().ledger_row(&downstream).await? else {
            if state.store().forget(&a.merchant, &a.key, fence).await? {
                tracing::info!(merchant = %a.merchant, key = a.key.as_ref(), "recovery: never charged; key released");
                done.released += 1;
            }
            continue;
        };
        let request = a
            .request
            .as_deref()
            .and_then(|b| crate::domain::parse_json_strict(b).ok())
            .and_then(|v| PaymentRequest::from_json(&v).ok());
        let Some(request) = request else {
            // Claimed by a server that did not keep requests: only the client's retry can finish it.
            state.store().release(&a.merchant, &a.key, fence).await?;
            continue;
        };
        let charged = GatewayResult::from_ledger(row, false);
        let created_at = state.store().now_ms();
        let (payment, response) =
            build_payment(&a.merchant, &a.key, &request, &charged, created_at);
        let finished = state
            .store()
            .finish(Completion {
                merchant: a.merchant.clone(),
                key: a.key.clone(),
                fence,
                payment: payment.clone(),
                response,
                fingerprint: a.fingerprint.clone(),
            })
            .await?;
        if finished == FinishOutcome::Stored {
            tracing::warn!(merchant = %a.merchant, key = a.key.as_ref(), payment = %payment.id, "recovery: charged before a crash; payment stored");
            done.completed += 1;
        }
    }
    Ok(done)
}

/// The card tokens the sandbox knows, for UIs that offer a choice.
pub fn sandbox_tokens() -> impl Iterator<Item = &'static str> {
    CardToken::ALL.into_iter().map(CardToken::as_str)
}
