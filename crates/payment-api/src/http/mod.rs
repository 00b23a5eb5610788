//! HTTP surface: routes, handlers, the OpenAPI document. Handlers are thin: they parse headers and
//! bodies into domain types and run them through [`crate::idempotency::Runner`].

mod extract;
mod front;
mod openapi;

pub use extract::{Admin, Key, Merchant};
pub use openapi::ApiDoc;

use crate::captures::AuthorizationSteps;
use crate::conn::ConnHandle;
use crate::domain::{
    BodyDigest, CaptureStep, FieldError, IdempotencyKey, MachineRequest, MachineStatus, Means,
    MerchantId, PaymentId, PixRequest, PixStatus,
};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::idempotency::{Answer, Keyed, Operation};
use crate::listing::{Cursor, RangeParams};
use crate::maquininha::Maquininha;
use crate::metrics::RequestOutcome;
use crate::payments::Payments;
use crate::pix::Pix;
use crate::refunds::Refunds;
use crate::schema::{
    CancelamentoBody, EmAndamento, Health, Ledger, MachinePaymentBody, NovoCancelamento,
    NovoEstorno, NovoPagamento, PaymentBody, PaymentCreated, PaymentDetail, PaymentList,
    PaymentRead, PixPaymentBody, Problem, RefundBody, VendaBody,
};
use crate::state::AppState;
use crate::store::{Awaiting, MachineOrder, PaymentField, PixCharge, StoredResponse};
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use front::Logged;
use serde::Deserialize;
use std::future::Future;
use std::time::Duration;
use utoipa::OpenApi;

mod pix_routes;
mod reads;
mod service;

pub use pix_routes::*;
pub use reads::*;
pub use service::*;

/// The router, with admin routes only when an admin token is configured.
pub fn app(state: AppState) -> Router {
    let mut router = Router::new()
        .route("/pagamentos", get(list_payments).post(create_payment))
        .route("/pagamentos/cancelamentos", post(cancel_payment_key))
        .route("/pagamentos/{id}", get(get_payment))
        .route("/pagamentos/{id}/estornos", post(create_refund))
        .route("/pagamentos/{id}/captura", post(capture_payment))
        .route("/pagamentos/{id}/desfazimento", post(undo_payment))
        .route("/pagamentos/{id}/cancelamento", post(cancel_waiting))
        .route("/vendas/{referencia}", get(get_sale))
        .route("/webhooks/pix", post(pix_webhook))
        .route("/webhooks/maquininha", post(machine_notification))
        .route("/health", get(health))
        .route("/health/ready", get(ready))
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(metrics));
    if state.admin_token().is_some() {
        router = router
            .route("/admin/ledger", get(admin_ledger))
            .route("/admin/faults", get(admin_get_faults).put(admin_put_faults));
    }
    let router = router
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(front::FrontLayer {
            max_header_bytes: state.max_header_bytes(),
        });
    match cors(state.cors_origins()) {
        Some(cors) => router.layer(cors).with_state(state),
        None => router.with_state(state),
    }
}

/// Browsers may call the API from the configured origins (`*`: any). It authenticates with
/// bearer tokens only (never cookies), so a cross-origin page learns nothing it could not get
/// with the key itself; the app's embedded sandbox allows no origin at all.
fn cors(origins: &str) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{HeaderName, Method};
    use tower_http::cors::AllowOrigin;
    let origins = origins.trim();
    let allow = if origins == "*" {
        AllowOrigin::any()
    } else {
        let list: Vec<HeaderValue> = origins
            .split(',')
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        if list.is_empty() {
            return None;
        }
        AllowOrigin::list(list)
    };
    Some(
        tower_http::cors::CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::PUT])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static("idempotency-key"),
            ])
            .expose_headers([
                HeaderName::from_static("idempotent-replayed"),
                header::RETRY_AFTER,
            ])
            .max_age(std::time::Duration::from_secs(600)),
    )
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| {
            let mime = mime.trim().to_ascii_lowercase();
            mime == "application/json"
                || (mime.starts_with("application/") && mime.ends_with("+json"))
        })
}

/// A body as JSON, strictly (a field given twice is refused).
fn parse_json(bytes: &[u8]) -> Result<serde_json::Value> {
    crate::domain::parse_json_strict(bytes).map_err(|e| ApiError::MalformedJson(e.0))
}

/// A body's bytes, within the size limit and the deadline.
async fn read_body(body: Body, limit: usize, deadline: Duration) -> Result<axum::body::Bytes> {
    // A small body has usually arrived with the headers: it is taken without arming a timer
    // (one per request, a visible share of a replay in `perf`); a body still on its way gets the
    // deadline from then.
    let mut read = std::pin::pin!(axum::body::to_bytes(body, limit));
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(read.as_mut().poll(cx))).await;
    let read = match first {
        std::task::Poll::Ready(read) => read,
        std::task::Poll::Pending => tokio::time::timeout(deadline, read)
            .await
            .map_err(|_| ApiError::RequestTimeout(deadline.as_millis() as u64))?,
    };
    let bytes = read.map_err(|e| {
        let too_large = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
        if too_large {
            ApiError::PayloadTooLarge(limit)
        } else {
            ApiError::MalformedJson(format!("corpo incompleto: {e}"))
        }
    })?;
    Ok(bytes)
}

/// Creates a payment, or replays the stored answer for a key already used.
#[utoipa::path(
    post,
    path = "/pagamentos",
    request_body = NovoPagamento,
    params(("Idempotency-Key" = String, Header, description = "Required. 1–255 visible ASCII characters (0x21–0x7E); the bare form `abc` and the structured-field string `\"abc\"` are the same key. A fresh UUID per checkout attempt.")),
    responses(
        (status = 201, description = "Approved (`Idempotent-Replayed: true` on replays); for `\"metodo\": \"pix\"`, a `PagamentoPix` answered `aguardando` with its QR's text, and for a body naming a `maquininha`, a `PagamentoMaquininha` answered `aguardando` once the order is at the machine's provider: both replayed byte for byte while their later state is read with `GET /pagamentos/{id}`", body = PaymentCreated,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with this key")),
            example = json!({"id":"pay_01a22fa12b2a7548958ed7ad12747e3e","status":"aprovado","valor":1234,"moeda":"BRL","referencia":"venda-0042","idempotency_key":"2b0a4a52-0d57-4b0e-9f43-3c1d1f1e2a10","cobranca_id":"ch_01a22fa12b2a7548958ed7ac30b17adf","meio":"cartao","criado_em":"2026-12-01T03:23:41.226Z"})),
        (status = 402, description = "Declined; stored and replayed like an approval", body = PaymentBody,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with this key")),
            example = json!({"id":"pay_01a22fa12b3774db88f5b4bd68d1e52c","status":"recusado","valor":500,"moeda":"BRL","motivo":"saldo_insuficiente","idempotency_key":"k-recusa-1","cobranca_id":"ch_01a22fa12b3774db88f5b4bcbe75a3e6","criado_em":"2026-12-01T03:23:41.239Z"})),
        (status = 400, description = "Bad key, malformed JSON, a field given twice, or `Authorization` sent twice; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Bad API key; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "The body did not arrive in time; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Same key in progress, or its execution taken over; retry after `Retry-After` with the same key", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying with the same key")),
            example = json!({"type":"urn:pagar:problem:key-in-progress","title":"Requisição em andamento","status":409,"detail":"outra requisição com esta Idempotency-Key está em andamento","retryable":true})),
        (status = 413, description = "Body over 16 KiB; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Content-Type is not JSON; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field (`validation`), or key reused with another body (`idempotency-key-reused`)", body = Problem, content_type = "application/problem+json",
            example = json!({"type":"urn:pagar:problem:validation","title":"Requisição inválida","status":422,"detail":"a requisição tem campos inválidos","retryable":false,"errors":[{"campo":"valor","erro":"valor deve ser maior que zero"},{"campo":"cartao","erro":"cartao desconhecido: use um token de cartão válido"}]})),
        (status = 429, description = "Rate limited; retry after `Retry-After` with the same key", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying with the same key"))),
        (status = 431, description = "Headers over 8 KiB; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Unavailable; retry with the same key", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying with the same key"))),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn create_payment(
    State(state): State<AppState>,
    merchant: Result<Merchant>,
    key: Result<Key>,
    req: Request,
) -> Response {
    let run = |state: AppState, m, k, json, digest, faults: Faults| async move {
        if PixRequest::wanted(&json) {
            let op = state.pix().ok_or(ApiError::PixUnavailable)?.op.clone();
            let keyed = Pix::prepare(m, k, json)?.with_digest(digest);
            return state.runner().run(op, keyed, &faults).await;
        }
        if MachineRequest::wanted(&json) {
            let op = state
                .machine()
                .ok_or(ApiError::MachineUnavailable)?
                .op
                .clone();
            let keyed = Maquininha::prepare(m, k, json)?.with_digest(digest);
            return state.runner().run(op, keyed, &faults).await;
        }
        let keyed = Payments::prepare(m, k, json)?.with_digest(digest);
        let op = state.payments().clone();
        state.runner().run(op, keyed, &faults).await
    };
    execute_keyed_with(state, merchant, key, req, run).await
}

/// Refunds part or all of a payment, or replays the stored answer for a key already used.
#[utoipa::path(
    post,
    path = "/pagamentos/{id}/estornos",
    request_body = NovoEstorno,
    params(
        ("id" = String, Path, description = "The payment to pay back (`pay_…`)"),
        ("Idempotency-Key" = String, Header, description = "Required, as for `POST /pagamentos`: one fresh key per refund the cashier asks for, the same on every retry of it. Keys are the merchant's, shared with payments: a key used for a payment answers 422 here."),
    ),
    responses(
        (status = 201, description = "Paid back (`Idempotent-Replayed: true` on replays)", body = RefundBody,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with this key")),
            example = json!({"id":"est_01a2305c9a4f7d21b6e0e1f3c2a4b5d6","pagamento":"pay_01a22fa12b2a7548958ed7ad12747e3e","status":"aprovado","valor":500,"moeda":"BRL","motivo":"devolução","idempotency_key":"9d7c1e2a-3b4f-4c5d-8e9f-0a1b2c3d4e5f","criado_em":"2026-12-01T03:30:02.114Z"})),
        (status = 402, description = "Declined by the gateway (`estorno_recusado`); stored and replayed like an approval, and its amount is free again", body = RefundBody),
        (status = 400, description = "Bad key or malformed JSON; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Bad API key; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such payment for this merchant; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Same key in progress; retry after `Retry-After` with the same key", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying with the same key"))),
        (status = 422, description = "Invalid field (`validation`), key reused with another request (`idempotency-key-reused`), a declined payment (`pagamento-nao-estornavel`), or more than is left to refund (`estorno-excede-saldo`; refunds in progress count as taken); nothing stored for the last two and the key stays free", body = Problem, content_type = "application/problem+json",
            example = json!({"type":"urn:pagar:problem:estorno-excede-saldo","title":"Estorno maior que o saldo do pagamento","status":422,"detail":"o estorno passa do que resta estornar deste pagamento: restam R$ 7,34 (734 centavos)","retryable":false})),
        (status = 503, description = "Unavailable; retry with the same key", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying with the same key"))),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn create_refund(
    State(state): State<AppState>,
    merchant: Result<Merchant>,
    key: Result<Key>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let prepare = move |m, k, json| Refunds::prepare(m, k, id, json);
    let op = state.refunds().clone();
    execute_keyed(state, merchant, key, req, op, prepare).await
}

/// Captures an authorized payment (`"captura": false`): the amount held on the card is taken.
#[utoipa::path(
    post,
    path = "/pagamentos/{id}/captura",
    request_body(content = String, description = "An empty JSON object, `{}`: the whole authorization is captured", content_type = "application/json"),
    params(
        ("id" = String, Path, description = "The authorized payment (`pay_…`, status `autorizado`)"),
        ("Idempotency-Key" = String, Header, description = "Required: one fresh key per capture, the same on every retry of it. Scoped to this path: the same key on another payment or on `/desfazimento` is 422."),
    ),
    responses(
        (status = 200, description = "Captured (now or by an earlier capture): the payment, `status` `aprovado`, `captura` `capturada`", body = PaymentBody),
        (status = 404, description = "No such payment for this merchant; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Same key in progress; retry after `Retry-After` with the same key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not an authorization (`nao-e-autorizacao`; nothing stored, the key stays free); or the authorization was undone (`autorizacao-desfeita`) or lapsed (`autorizacao-expirada`): nothing was taken and nothing can be — stored and replayed like any answer", body = Problem, content_type = "application/problem+json",
            example = json!({"type":"urn:pagar:problem:autorizacao-desfeita","title":"Autorização desfeita","status":422,"detail":"esta autorização foi desfeita: nada foi cobrado e nada pode mais ser capturado","retryable":false})),
        (status = 503, description = "Unavailable; retry with the same key", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn capture_payment(
    State(state): State<AppState>,
    merchant: Result<Merchant>,
    key: Result<Key>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let prepare =
        move |m, k, json| AuthorizationSteps::prepare(m, k, id, CaptureStep::Capturar, json);
    let op = std::sync::Arc::new(state.capture().clone());
    execute_keyed(state, merchant, key, req, op, prepare).await
}

/// Undoes an authorized payment: the hold on the card is released and nothing is taken.
#[utoipa::path(
    post,
    path = "/pagamentos/{id}/desfazimento",
    request_body(content = String, description = "An empty JSON object, `{}`", content_type = "application/json"),
    params(
        ("id" = String, Path, description = "The authorized payment (`pay_…`, status `autorizado`)"),
        ("Idempotency-Key" = String, Header, description = "Required: one fresh key per undo, the same on every retry of it."),
    ),
    responses(
        (status = 200, description = "Undone (now or by an earlier undo): the payment, `status` `desfeito`, `captura` `desfeita`; or, if it had lapsed, `expirado`", body = PaymentBody),
        (status = 404, description = "No such payment for this merchant; nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Same key in progress; retry after `Retry-After` with the same key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not an authorization (`nao-e-autorizacao`; nothing stored), or it was captured already (`pagamento-capturado`: refund it instead), stored and replayed", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Unavailable; retry with the same key", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn undo_payment(
    State(state): State<AppState>,
    merchant: Result<Merchant>,
    key: Result<Key>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let prepare =
        move |m, k, json| AuthorizationSteps::prepare(m, k, id, CaptureStep::Desfazer, json);
    let op = std::sync::Arc::new(state.undo().clone());
    execute_keyed(state, merchant, key, req, op, prepare).await
}

/// What every keyed `POST` does: authenticate, read the key and the JSON body (refusing before
/// anything is stored), run it under the key, and answer, first or replayed.
async fn execute_keyed<O: Operation>(
    state: AppState,
    merchant: Result<Merchant>,
    key: Result<Key>,
    req: Request,
    op: std::sync::Arc<O>,
    prepare: impl FnOnce(MerchantId, IdempotencyKey, serde_json::Value) -> Result<Keyed<O::Request>>,
) -> Response {
    let run = move |state: AppState, m, k, json, digest, faults: Faults| async move {
        let keyed = prepare(m, k, json)?.with_digest(digest);
        state.runner().run(op, keyed, &faults).await
    };
    execute_keyed_with(state, merchant, key, req, run).await
}

/// [`execute_keyed`] for a route whose operation depends on the body (`POST /pagamentos`: card
/// or Pix): `run` gets the parsed body after the replay fast path.
async fn execute_keyed_with<F, Fut>(
    state: AppState,
    merchant: Result<Merchant>,
    key: Result<Key>,
    req: Request,
    run: F,
) -> Response
where
    F: FnOnce(AppState, MerchantId, IdempotencyKey, serde_json::Value, BodyDigest, Faults) -> Fut,
    Fut: Future<Output = Result<Answer>>,
{
    let merchant = match merchant {
        Ok(Merchant(m)) => m,
        Err(e) => return refused(&state, e, None, None),
    };
    let key = match key {
        Ok(Key(k)) => k,
        Err(e) => return refused(&state, e, Some(merchant), None),
    };
    let conn = req
        .extensions()
        .get::<ConnectInfo<ConnHandle>>()
        .map(|c| c.0.clone());
    let faults = state.faults();
    let result = async {
        faults.before_body(conn.as_ref())?;
        let (parts, body) = req.into_parts();
        if !is_json(&parts.headers) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let bytes = read_body(body, state.max_body_bytes(), state.body_timeout()).await?;
        let digest = BodyDigest::of("POST", parts.uri.path(), &bytes);
        if let Some(answer) = state
            .runner()
            .replay_same_bytes(&merchant, &key, &digest, &faults)
            .await?
        {
            return Ok(answer);
        }
        let json = parse_json(&bytes)?;
        run(
            state.clone(),
            merchant.clone(),
            key.clone(),
            json,
            digest,
            faults.clone(),
        )
        .await
    }
    .await;
    let (res, outcome) = match result {
        Ok(Answer::First(stored)) => {
            faults.after_commit(conn.as_ref());
            (stored_response(stored, false), "first")
        }
        Ok(Answer::Replay(stored)) => (stored_response(stored, true), "replay"),
        Err(e) => return refused(&state, e, Some(merchant), Some(key)),
    };
    logged(res, Some(merchant), Some(key), outcome)
}

/// A keyed request that was refused or failed: counted, and its problem slug logged.
fn refused(
    state: &AppState,
    e: ApiError,
    merchant: Option<MerchantId>,
    key: Option<IdempotencyKey>,
) -> Response {
    let (_, outcome, _, _) = e.describe();
    state
        .metrics()
        .request(RequestOutcome::rejected_or_failed(&e));
    logged(e.into_response(), merchant, key, outcome)
}

/// A keyed request's answer with what its log line names (read by the front door).
fn logged(
    mut res: Response,
    merchant: Option<MerchantId>,
    key: Option<IdempotencyKey>,
    outcome: &'static str,
) -> Response {
    res.extensions_mut().insert(Logged {
        merchant,
        key,
        outcome,
    });
    res
}

/// Cancels a payment's idempotency key, or answers the payment it made: what a client does before
/// it makes a new key for a sale whose payment is in doubt.
#[utoipa::path(
    post,
    path = "/pagamentos/cancelamentos",
    request_body = NovoCancelamento,
    responses(
        (status = 200, description = "Settled: `cancelada` (the key never charged and now never will; any request with it is refused 422 `idempotency-key-cancelled`) or `pagamento` (the key's payment, approved or declined). The same answer however often it is asked", body = CancelamentoBody,
            example = json!({"idempotency_key":"2b0a4a52-0d57-4b0e-9f43-3c1d1f1e2a10","resultado":"cancelada"})),
        (status = 400, description = "Malformed JSON or a bad key", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Bad API key", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The key is executing now; ask again after `Retry-After`", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before asking again"))),
        (status = 409, description = "The key made a Pix charge the customer can still pay (`pix-aguardando`): cancel the Pix itself (`POST /pagamentos/{id}/cancelamento`) and wait for its answer", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The key belongs to a refund or to a Pix closed unpaid (`not-a-payment-key`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Unavailable; ask again", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn cancel_payment_key(
    State(state): State<AppState>,
    merchant: Result<Merchant>,
    req: Request,
) -> Response {
    let merchant = match merchant {
        Ok(Merchant(m)) => m,
        Err(e) => return refused(&state, e, None, None),
    };
    let mut key = None;
    let result = async {
        let (parts, body) = req.into_parts();
        if !is_json(&parts.headers) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let bytes = read_body(body, state.max_body_bytes(), state.body_timeout()).await?;
        let asked: NovoCancelamento = serde_json::from_value(parse_json(&bytes)?)
            .map_err(|e| ApiError::MalformedJson(e.to_string()))?;
        let k = IdempotencyKey::parse(asked.idempotency_key.as_bytes())?;
        key = Some(k.clone());
        let outcome = state.cancel().cancel(&merchant, &k).await?;
        Ok(CancelamentoBody::new(&k, outcome.payment()))
    }
    .await;
    match result {
        Ok(body) => {
            state.metrics().cancellation(body.resultado);
            logged(Json(body).into_response(), Some(merchant), key, "cancel")
        }
        Err(e) => refused(&state, e, Some(merchant), key),
    }
}

/// A stored answer as it is sent, the first time and on every replay.
fn stored_response(stored: StoredResponse, replayed: bool) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // A stored refusal (a capture of an undone authorization, say) is a problem; a 402 is the
    // declined payment or refund itself.
    let problem = stored.status >= 400 && stored.status != 402;
    let mut res = (status, stored.body).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(if problem {
            "application/problem+json"
        } else {
            "application/json"
        }),
    );
    if replayed {
        h.insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    res
}
