//! Executing `POST /pagamentos` under an idempotency key.
//!
//! Phases, each its own transaction (after Brandur Leach's rocket-rides-atomic):
//! 1. **claim** — INSERT the key under `UNIQUE (merchant, key)` with a lease and fencing token
//!    (recovery point `started`), or learn from the existing row what to do instead;
//! 2. **charge** — call the gateway with a downstream key derived from (merchant, key), so a
//!    takeover after a crash gets the earlier charge back instead of charging again;
//! 3. **finish** — insert the payment and store the response in one transaction, only if this
//!    worker's fence still holds the key (recovery point `finished`).

use crate::conn::ConnHandle;
use crate::domain::{
    CardToken, DownstreamKey, Fingerprint, IdempotencyKey, MerchantId, PaymentRequest,
};
use crate::error::{ApiError, Result};
use crate::faults::{fires, Faults};
use crate::gateway::Outcome as GatewayOutcome;
use crate::http::json_response;
use crate::metrics::Outcome;
use crate::replay_cache::Completed;
use crate::state::AppState;
use crate::store::{Claim, Completion, FinishOutcome, NextAction, Payment, StoredResponse};
use axum::response::Response;
use std::time::{Duration, Instant};
use tracing::Instrument;

/// A request that passed every check that happens before execution.
#[derive(Debug)]
pub struct Prepared {
    merchant: MerchantId,
    key: IdempotencyKey,
    fingerprint: Fingerprint,
    request: PaymentRequest,
}

impl Prepared {
    /// Validates the body and fingerprints it. Nothing is stored for a request that fails here.
    pub fn new(merchant: MerchantId, key: IdempotencyKey, body: serde_json::Value) -> Result<Self> {
        let request = PaymentRequest::from_json(&body).map_err(ApiError::Validation)?;
        let fingerprint = Fingerprint::of("POST", "/pagamentos", &body);
        Ok(Self {
            merchant,
            key,
            fingerprint,
            request,
        })
    }
}

/// Runs a prepared request: replays, refuses, or executes it exactly once.
pub async fn create(
    state: &AppState,
    p: Prepared,
    faults: &Faults,
    conn: Option<&ConnHandle>,
) -> Result<Response> {
    let span = tracing::info_span!("pagamento", merchant = %p.merchant, key = p.key.as_ref());
    async move {
        if faults.latency_ms > 0 && fires(faults.latency_probability) {
            tokio::time::sleep(Duration::from_millis(faults.latency_ms)).await;
        }
        if fires(faults.rate_limit_probability) {
            tracing::warn!("fault: 429 before execution");
            return Err(ApiError::RateLimited);
        }
        if fires(faults.error_5xx_probability) {
            tracing::warn!("fault: 503 before execution");
            return Err(ApiError::InjectedFault);
        }

        // Fast path: a completed key is replayed from memory or a read connection, without
        // queueing a write. The claim below still decides every key that is not completed.
        let now = state.store().now_ms();
        if let Some(done) = state.replays().get(&p.merchant, &p.key, now) {
            if done.fingerprint != p.fingerprint {
                return Err(ApiError::FingerprintMismatch);
            }
            return Ok(replay(state, done.response.clone()));
        }
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

        // From the claim on, the work runs in its own task: a client that hangs up (a timeout,
        // a dropped Wi-Fi) must not cancel an execution halfway, or every retry would find the
        // key held by a worker that no longer exists.
        let task = tokio::spawn(
            claim_and_execute(state.clone(), p, faults.clone(), conn.cloned())
                .instrument(tracing::Span::current()),
        );
        task.await
            .map_err(|e| ApiError::Internal(format!("execution task failed: {e}")))?
    }
    .instrument(span)
    .await
}

async fn claim_and_execute(
    state: AppState,
    p: Prepared,
    faults: Faults,
    conn: Option<ConnHandle>,
) -> Result<Response> {
    let state = &state;
    let started = Instant::now();
    let next = state
        .store()
        .claim(Claim {
            merchant: p.merchant.clone(),
            key: p.key.clone(),
            fingerprint: p.fingerprint.clone(),
            lease_ms: state.lease_ms(),
        })
        .await?;
    state.metrics().store_op("claim", started);
    match next {
        NextAction::ReturnSavedResponse(saved) => Ok(replay(state, saved)),
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
            execute(state, &p, fence, &faults, conn.as_ref()).await
        }
    }
}

fn remember(
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
            response,
            completed_at,
        },
    );
}

fn replay(state: &AppState, saved: StoredResponse) -> Response {
    state.metrics().request(Outcome::replay);
    tracing::info!(
        status = saved.status,
        replay = true,
        "replayed stored response"
    );
    json_response(saved.status, saved.body, true)
}

async fn execute(
    state: &AppState,
    p: &Prepared,
    fence: i64,
    faults: &Faults,
    conn: Option<&ConnHandle>,
) -> Result<Response> {
    let downstream = DownstreamKey::derive(&p.merchant, &p.key);
    let charged = state
        .gateway()
        .charge(downstream, &p.merchant, p.request.valor, p.request.cartao)
        .await;
    let charged = match charged {
        Ok(c) => c,
        Err(e) => {
            // Nothing durable happened at the gateway's side we cannot find again (the downstream
            // key makes the next try idempotent); free the key so the client's retry runs now.
            let _ = state.store().release(&p.merchant, &p.key, fence).await;
            return Err(e.into());
        }
    };
    state
        .metrics()
        .charge(charged.outcome == GatewayOutcome::Aprovado);
    if fires(faults.crash_after_charge_probability) {
        tracing::error!("fault: aborting the process after the gateway charged");
        std::process::abort();
    }

    let (status_code, status, motivo) = match charged.outcome {
        GatewayOutcome::Aprovado => (201, "aprovado", None),
        GatewayOutcome::Recusado(m) => (402, "recusado", Some(m)),
    };
    let created_at = state.store().now_ms();
    let payment = Payment {
        id: format!("pay_{}", uuid::Uuid::now_v7().simple()),
        status: status.into(),
        valor: p.request.valor.get(),
        moeda: "BRL".into(),
        motivo,
        descricao: p.request.descricao.clone(),
        referencia: p.request.referencia.clone(),
        idempotency_key: p.key.as_ref().to_string(),
        cobranca_id: charged.cobranca_id,
        criado_em: crate::clock::rfc3339(created_at),
        merchant: p.merchant.to_string(),
    };
    let body = serde_json::to_vec(&payment).expect("a payment always serialises");
    let response = StoredResponse {
        status: status_code,
        body,
    };
    let started = Instant::now();
    let finished = state
        .store()
        .finish(Completion {
            merchant: p.merchant.clone(),
            key: p.key.clone(),
            fence,
            payment: payment.clone(),
            created_at,
            response: response.clone(),
        })
        .await?;
    state.metrics().store_op("finish", started);
    match finished {
        FinishOutcome::Stored => {
            remember(state, p, response.clone(), created_at);
            state.metrics().request(Outcome::first);
            tracing::info!(status = status_code, payment = %payment.id, replay = false, "payment executed");
            if fires(faults.drop_response_probability) {
                if let Some(conn) = conn {
                    tracing::warn!(payment = %payment.id, "fault: dropping the response after commit");
                    conn.close();
                }
            }
            Ok(json_response(response.status, response.body, false))
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

/// The card tokens the sandbox knows, for UIs that offer a choice.
pub fn sandbox_tokens() -> impl Iterator<Item = &'static str> {
    CardToken::ALL.into_iter().map(CardToken::as_str)
}
