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
    BodyDigest, CaptureStep, FieldError, IdempotencyKey, Means, MerchantId, PaymentId, PixRequest,
    PixStatus,
};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::idempotency::{Answer, Keyed, Operation};
use crate::listing::{Cursor, RangeParams};
use crate::metrics::RequestOutcome;
use crate::payments::Payments;
use crate::pix::Pix;
use crate::refunds::Refunds;
use crate::schema::{
    CancelamentoBody, EmAndamento, Health, Ledger, LedgerEntry, NovoCancelamento, NovoEstorno,
    NovoPagamento, PaymentBody, PaymentCreated, PaymentDetail, PaymentList, PaymentRead,
    PixPaymentBody, Problem, RefundBody, RefundLedgerEntry, VendaBody,
};
use crate::state::AppState;
use crate::store::{PaymentField, StoredResponse};
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

/// The router, with admin routes only when an admin token is configured.
pub fn app(state: AppState) -> Router {
    let mut router = Router::new()
        .route("/pagamentos", get(list_payments).post(create_payment))
        .route("/pagamentos/cancelamentos", post(cancel_payment_key))
        .route("/pagamentos/{id}", get(get_payment))
        .route("/pagamentos/{id}/estornos", post(create_refund))
        .route("/pagamentos/{id}/captura", post(capture_payment))
        .route("/pagamentos/{id}/desfazimento", post(undo_payment))
        .route("/pagamentos/{id}/cancelamento", post(cancel_pix))
        .route("/vendas/{referencia}", get(get_sale))
        .route("/webhooks/pix", post(pix_webhook))
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
        (status = 201, description = "Approved (`Idempotent-Replayed: true` on replays); for `\"metodo\": \"pix\"`, a `PagamentoPix` answered `aguardando` with its QR's text, replayed byte for byte while its later state is read with `GET /pagamentos/{id}`", body = PaymentCreated,
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

/// One payment of the caller's merchant.
#[utoipa::path(
    get,
    path = "/pagamentos/{id}",
    params(("id" = String, Path, description = "`pay_…`"), WaitQuery),
    responses(
        (status = 200, description = "A card payment as it was answered, with what was refunded, what is left to refund, and its refunds (`PaymentDetail`); or a Pix in its state now (`PagamentoPix`)", body = PaymentRead),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn get_payment(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    Path(id): Path<String>,
    query: std::result::Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response> {
    let Query(wait) = query.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    let id = PaymentId::from_path(&id).ok_or(ApiError::NotFound)?;
    // A card payment answers from its row, as before; a Pix is read from its charge (a received
    // one is a payment too, `meio` `pix`, but its state is the charge's).
    let payment = state.store().payment(&merchant, &id).await?;
    if let Some(payment) = payment.filter(|p| p.meio != Means::Pix) {
        let refunds = state.store().refunds_of(&merchant, &id).await?;
        return Ok(Json(PaymentDetail::new(&payment, &refunds)).into_response());
    }
    let charge = state
        .store()
        .pix_charge(&merchant, &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let charge = match (wait.aguardar, state.pix()) {
        (Some(secs), Some(pix)) if charge.status == PixStatus::Aguardando => {
            wait_for_change(&state, pix, &merchant, &id, charge, secs).await?
        }
        _ => charge,
    };
    let refunds = state.store().refunds_of(&merchant, &id).await?;
    Ok(Json(PixPaymentBody::with_refunds(&charge, &refunds)).into_response())
}

/// A sale paid in parts, by the till's reference: its total, what its tenders paid and hold,
/// and what is missing.
#[utoipa::path(
    get,
    path = "/vendas/{referencia}",
    params(("referencia" = String, Path, description = "The till's id of the sale (`venda.referencia` of its tenders)"), SaleQuery),
    responses(
        (status = 200, description = "The sale and its tenders", body = VendaBody),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn get_sale(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    Path(referencia): Path<String>,
    query: std::result::Result<Query<SaleQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response> {
    let Query(q) = query.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    let terminal = q
        .terminal
        .as_deref()
        .map(crate::domain::TerminalId::parse)
        .transpose()
        .map_err(|e| ApiError::BadQuery(e.to_string()))?;
    let sale = state
        .store()
        .sale(&merchant, terminal.as_ref(), &referencia)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(VendaBody::from(&sale)).into_response())
}

/// `?terminal=` on `GET /vendas/{referencia}`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SaleQuery {
    /// The till whose sale it is (as its tenders said in `terminal`); none: a sale whose tenders
    /// named no terminal.
    terminal: Option<String>,
}

/// `?aguardar=N` on `GET /pagamentos/{id}`: a long poll.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct WaitQuery {
    /// For a Pix still `aguardando`: answer as soon as it changes, or after this many seconds
    /// (at most 30) with it unchanged.
    aguardar: Option<u64>,
}

/// Longest long poll, in seconds.
const MAX_WAIT_SECS: u64 = 30;

/// Re-reads a waiting Pix charge whenever this server settles one, and at least every second
/// (another replica may have settled it), until it changes or `secs` pass.
async fn wait_for_change(
    state: &AppState,
    pix: &crate::state::PixParts,
    merchant: &MerchantId,
    id: &PaymentId,
    mut charge: crate::store::PixCharge,
    secs: u64,
) -> Result<crate::store::PixCharge> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs.min(MAX_WAIT_SECS));
    while charge.status == PixStatus::Aguardando && tokio::time::Instant::now() < deadline {
        let changed = pix.settler.changed().notified();
        let tick = tokio::time::sleep_until(
            deadline.min(tokio::time::Instant::now() + Duration::from_secs(1)),
        );
        tokio::select! {
            _ = changed => {}
            _ = tick => {}
        }
        charge = state
            .store()
            .pix_charge(merchant, id)
            .await?
            .ok_or(ApiError::NotFound)?;
    }
    Ok(charge)
}

/// Cancels a Pix the customer has not paid: removed at the Pix provider, then `cancelado`.
/// Idempotent; a Pix already paid stays paid (its state is the answer either way).
#[utoipa::path(
    post,
    path = "/pagamentos/{id}/cancelamento",
    params(("id" = String, Path, description = "The Pix payment (`pay_…`)")),
    responses(
        (status = 200, description = "The Pix as it now stands: `cancelado`, or `aprovado` when the customer paid first", body = PixPaymentBody),
        (status = 401, description = "Bad API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such Pix for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "No Pix provider configured (`pix-indisponivel`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The Pix provider did not answer; nothing changed, try again", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn cancel_pix(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    Path(id): Path<String>,
) -> Result<Json<PixPaymentBody>> {
    let id = PaymentId::from_path(&id).ok_or(ApiError::NotFound)?;
    let pix = state.pix().ok_or(ApiError::PixUnavailable)?;
    let charge = pix.settler.cancel(&merchant, &id).await?;
    Ok(Json(PixPaymentBody::from(&charge)))
}

/// The Pix provider's webhook (`{webhookUrl}/pix`): signature and timestamp checked on the raw
/// bytes, then each charge it names read back from the provider and settled. Answered 200 once
/// every charge is recorded; 401 for a bad signature (nothing recorded); 503 when the provider
/// cannot be read back (the provider sends it again, and the poll settles it anyway).
#[utoipa::path(
    post,
    path = "/webhooks/pix",
    request_body(content = String, description = "The API Pix callback: `{\"pix\": [{\"endToEndId\", \"txid\", \"valor\", \"horario\"}]}`", content_type = "application/json"),
    params(
        ("webhook-id" = String, Header, description = "Standard Webhooks message id"),
        ("webhook-timestamp" = i64, Header, description = "Unix seconds; more than 5 minutes away is refused"),
        ("webhook-signature" = String, Header, description = "`v1,<base64 HMAC-SHA256>`, space separated when signed with more than one secret"),
    ),
    responses(
        (status = 200, description = "Recorded (or already recorded: each Pix counts once)"),
        (status = 401, description = "Bad or missing signature, or stale timestamp; nothing recorded", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "No Pix provider configured", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The provider could not be read back; send again", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn pix_webhook(State(state): State<AppState>, req: Request) -> Response {
    let result = async {
        let pix = state.pix().ok_or(ApiError::PixUnavailable)?;
        let (parts, body) = req.into_parts();
        let bytes = read_body(body, state.max_body_bytes(), state.body_timeout()).await?;
        pix.verifier.verify(&bytes, &parts.headers)?;
        let note = crate::pix::webhook::Notification::parse(&bytes)?;
        for txid in note.txids() {
            pix.settler
                .settle(&txid, crate::store::Via::Webhook)
                .await?;
        }
        Ok::<_, ApiError>(())
    }
    .await;
    match result {
        Ok(()) => logged(StatusCode::OK.into_response(), None, None, "webhook"),
        Err(e) => {
            let (_, slug, _, _) = e.describe();
            if matches!(e, ApiError::WebhookRejected(_)) {
                tracing::warn!(error = %e, "Pix webhook refused");
            }
            logged(e.into_response(), None, None, slug)
        }
    }
}

/// A lookup by exactly one of `referencia` and `idempotency_key`, or a time range (`desde` and
/// `ate`, with `cursor`, `limite` and `terminal`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PaymentQuery {
    /// The client's reference.
    referencia: Option<String>,
    /// The idempotency key that created the payment.
    idempotency_key: Option<String>,
    /// Range: from this instant (inclusive), RFC 3339 with an offset, e.g. `2026-12-01T00:00:00-03:00`.
    desde: Option<String>,
    /// Range: up to this instant (exclusive), RFC 3339; at most 92 days after `desde`.
    ate: Option<String>,
    /// Range: the `proximo` of the previous page.
    cursor: Option<String>,
    /// Range: page size, 1–1000 (default 100).
    limite: Option<String>,
    /// Range: only payments sent with this `terminal`.
    terminal: Option<String>,
}

/// Finds payments by `referencia` or by `idempotency_key`, for a client resolving an attempt whose
/// outcome it does not know; `em_andamento` lists the keys still executing for it.
#[utoipa::path(
    get,
    path = "/pagamentos",
    params(PaymentQuery),
    responses(
        (status = 200, description = "The payments found (oldest first); empty when none. A look-up by `referencia` or `idempotency_key` also lists in `em_andamento` the keys still executing for it: no payment *and* nothing in progress is the only answer that means \"never charged\" (until a cancellation burns the key, a key in progress can still charge). A range answers one page in `(criado_em, id)` order and `proximo`, the cursor of the next page (`null` on the last): each payment that existed when the listing began is on exactly one page, however many are added meanwhile", body = PaymentList),
        (status = 400, description = "Not exactly one of `referencia`, `idempotency_key` and a range", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Bad API key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A bad range: `desde`/`ate` missing or not RFC 3339, `ate` not after `desde` or over 92 days later, a bad `limite`, `cursor` or `terminal`", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list_payments(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    query: std::result::Result<Query<PaymentQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<PaymentList>> {
    let Query(q) = query.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    let range = RangeParams {
        desde: q.desde,
        ate: q.ate,
        cursor: q.cursor,
        limite: q.limite,
        terminal: q.terminal,
    };
    if range.any() {
        if q.referencia.is_some() || q.idempotency_key.is_some() {
            return Err(ApiError::BadQuery(
                "informe referencia, idempotency_key ou um intervalo (desde e ate), não mais de um"
                    .into(),
            ));
        }
        let page = range.parse().map_err(ApiError::Validation)?;
        let found = state.store().payments_page(&merchant, &page).await?;
        let proximo = (found.len() == page.limit)
            .then(|| found.last())
            .flatten()
            .map(|last| {
                Cursor {
                    created_at: last.created_at,
                    id: last.id.clone(),
                }
                .encode()
            });
        return Ok(Json(PaymentList {
            pagamentos: found.iter().map(PaymentBody::from).collect(),
            proximo: Some(proximo),
            em_andamento: None,
            pix: None,
        }));
    }
    if [&q.referencia, &q.idempotency_key]
        .into_iter()
        .flatten()
        .any(|v| v.chars().any(char::is_control))
    {
        // Nothing is ever stored with one (requests refuse them), and PostgreSQL cannot even
        // compare a NUL.
        return Err(ApiError::BadQuery(
            "referencia e idempotency_key não têm caracteres de controle".into(),
        ));
    }
    let (field, value) = match (q.referencia, q.idempotency_key) {
        (Some(r), None) => (PaymentField::Referencia, r),
        (None, Some(k)) => (PaymentField::IdempotencyKey, k),
        _ => return Err(ApiError::BadQuery(
            "informe exatamente um de: referencia, idempotency_key, ou um intervalo (desde e ate)"
                .into(),
        )),
    };
    // Executions first: one that completes between the two reads is then seen as a payment (or
    // still as in progress), never as neither.
    let executing = state
        .store()
        .keys_in_progress(&merchant, field, &value)
        .await?;
    let pagamentos = state.store().payments_by(&merchant, field, &value).await?;
    let pix = state.store().pix_by(&merchant, field, &value).await?;
    Ok(Json(PaymentList {
        pagamentos: pagamentos.iter().map(PaymentBody::from).collect(),
        proximo: None,
        em_andamento: Some(executing.iter().map(EmAndamento::from).collect()),
        pix: (!pix.is_empty()).then(|| pix.iter().map(PixPaymentBody::from).collect()),
    }))
}

/// Liveness: the process serves HTTP. The body also says how long completed idempotency keys
/// are kept (`key_retention_secs`), so a client knows when a key may have been purged and an old
/// attempt must be looked up by `referencia` before it is sent again.
#[utoipa::path(get, path = "/health", responses((status = 200, body = Health)))]
pub(crate) async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        key_retention_secs: state.key_retention_secs(),
    })
}

/// Readiness: the store answers and takes writes (SQLite: its writer thread runs; PostgreSQL: a
/// pooled connection answers). What a load balancer should route by.
#[utoipa::path(get, path = "/health/ready", responses((status = 200, body = Health), (status = 503, body = Problem)))]
pub(crate) async fn ready(State(state): State<AppState>) -> Result<Json<Health>> {
    state.store().ready().await?;
    Ok(Json(Health {
        status: "ready",
        key_retention_secs: state.key_retention_secs(),
    }))
}

async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        state.metrics().encode(),
    )
}

/// QA: the gateway ledger, every merchant.
#[utoipa::path(get, path = "/admin/ledger", responses((status = 200, body = Ledger)), security(("admin" = [])))]
pub(crate) async fn admin_ledger(State(state): State<AppState>, _: Admin) -> Result<Json<Ledger>> {
    // Only the gateway simulator keeps a ledger the server can read.
    let ledger = state.ledger().ok_or(ApiError::NotFound)?;
    let cobrancas: Vec<LedgerEntry> = ledger
        .ledger()
        .await?
        .iter()
        .map(LedgerEntry::from)
        .collect();
    let estornos = ledger
        .refund_ledger()
        .await?
        .iter()
        .map(RefundLedgerEntry::from)
        .collect();
    Ok(Json(Ledger {
        total: cobrancas.len(),
        cobrancas,
        estornos,
    }))
}

/// QA: the fault profile in force.
#[utoipa::path(get, path = "/admin/faults", responses((status = 200, body = Faults)), security(("admin" = [])))]
pub(crate) async fn admin_get_faults(
    State(state): State<AppState>,
    _: Admin,
) -> Result<Json<Faults>> {
    Ok(Json(state.faults()))
}

/// QA: replaces the fault profile; fields left out are off.
#[utoipa::path(
    put,
    path = "/admin/faults",
    request_body = Faults,
    responses((status = 200, body = Faults), (status = 422, body = Problem, content_type = "application/problem+json")),
    security(("admin" = []))
)]
pub(crate) async fn admin_put_faults(
    State(state): State<AppState>,
    _: Admin,
    body: Body,
) -> Result<Json<Faults>> {
    let bytes = read_body(body, state.max_body_bytes(), state.body_timeout()).await?;
    let json = parse_json(&bytes)?;
    let faults: Faults =
        serde_json::from_value(json).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    faults
        .validate()
        .map_err(|e| ApiError::Validation(vec![FieldError::new("faults", e)]))?;
    if state.embedded() && faults.crash_after_charge_probability > 0.0 {
        return Err(ApiError::Validation(vec![FieldError::new(
            "crash_after_charge_probability",
            "não existe na API embutida no app: derrubaria o próprio caixa",
        )]));
    }
    tracing::warn!(?faults, "fault profile changed");
    state.set_faults(faults.clone());
    Ok(Json(faults))
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
