//! HTTP surface: routes, handlers, the OpenAPI document. Handlers are thin: they parse headers and
//! bodies into domain types and call [`crate::payments`].

use crate::conn::ConnHandle;
use crate::domain::{IdempotencyKey, KeyError, MerchantId};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::metrics::Outcome;
use crate::payments::{self, Prepared};
use crate::state::AppState;
use crate::store::{LedgerRow, Payment, PaymentField};
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use utoipa::OpenApi;

/// The router, with admin routes only when an admin token is configured.
pub fn app(state: AppState) -> Router {
    let mut router = Router::new()
        .route("/pagamentos", get(list_payments).post(create_payment))
        .route("/pagamentos/{id}", get(get_payment))
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
        .layer(middleware::from_fn_with_state(state.clone(), limit_headers));
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

async fn limit_headers(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let size: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if size > state.max_header_bytes() {
        return ApiError::HeadersTooLarge(state.max_header_bytes()).into_response();
    }
    next.run(req).await
}

fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<MerchantId> {
    if headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .nth(1)
        .is_some()
    {
        return Err(ApiError::DuplicateHeader("Authorization"));
    }
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme is case-insensitive (RFC 9110 §11.1).
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(token)
        })
        .ok_or(ApiError::Unauthorized)?;
    state
        .merchant_for(token.trim())
        .ok_or(ApiError::Unauthorized)
}

fn idempotency_key(headers: &HeaderMap) -> Result<IdempotencyKey> {
    let mut values = headers.get_all("idempotency-key").iter();
    let first = values.next().ok_or(KeyError::Missing)?;
    if values.next().is_some() {
        return Err(KeyError::Duplicate.into());
    }
    Ok(IdempotencyKey::parse(first.as_bytes())?)
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

async fn read_body(body: Body, limit: usize, deadline: Duration) -> Result<serde_json::Value> {
    let read = tokio::time::timeout(deadline, axum::body::to_bytes(body, limit))
        .await
        .map_err(|_| ApiError::RequestTimeout(deadline.as_millis() as u64))?;
    let bytes = read.map_err(|e| {
        let too_large = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
        if too_large {
            ApiError::PayloadTooLarge(limit)
        } else {
            ApiError::MalformedJson(format!("corpo incompleto: {e}"))
        }
    })?;
    crate::domain::parse_json_strict(&bytes).map_err(ApiError::MalformedJson)
}

/// Body of `POST /pagamentos` (documentation; the handler validates the raw JSON itself so that
/// every field error is reported and the fingerprint covers the body as sent).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct NovoPagamento {
    /// Amount in centavos, 1–100 000 000.
    valor: i64,
    /// Card token: `tok_aprovado`, `tok_recusado`, `tok_saldo_insuficiente`, `tok_lento`.
    cartao: String,
    /// Free text, up to 255 characters.
    descricao: Option<String>,
    /// Client reference, up to 255 characters; findable forever with `GET /pagamentos?referencia=`.
    referencia: Option<String>,
}

/// An RFC 9457 problem.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct Problem {
    /// Stable type URI, `urn:pagar:problem:<slug>`.
    #[serde(rename = "type")]
    kind: String,
    /// Short summary.
    title: String,
    /// HTTP status.
    status: u16,
    /// What happened, in pt-BR.
    detail: String,
    /// Whether retrying the same request with the same key may succeed.
    retryable: bool,
}

/// Creates a payment, or replays the stored answer for a key already used.
#[utoipa::path(
    post,
    path = "/pagamentos",
    request_body = NovoPagamento,
    params(("Idempotency-Key" = String, Header, description = "Required. 1–255 visible ASCII characters (0x21–0x7E); the bare form `abc` and the structured-field string `\"abc\"` are the same key. A fresh UUID per checkout attempt.")),
    responses(
        (status = 201, description = "Approved (`Idempotent-Replayed: true` on replays)", body = Payment,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with this key")),
            example = json!({"id":"pay_01a22fa12b2a7548958ed7ad12747e3e","status":"aprovado","valor":1234,"moeda":"BRL","referencia":"venda-0042","idempotency_key":"2b0a4a52-0d57-4b0e-9f43-3c1d1f1e2a10","cobranca_id":"ch_01a22fa12b2a7548958ed7ac30b17adf","criado_em":"2026-12-01T03:23:41.226Z"})),
        (status = 402, description = "Declined; stored and replayed like an approval", body = Payment,
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
async fn create_payment(State(state): State<AppState>, req: Request) -> Response {
    let conn = req
        .extensions()
        .get::<ConnectInfo<ConnHandle>>()
        .map(|c| c.0.clone());
    let result = async {
        let (parts, body) = req.into_parts();
        let merchant = authenticate(&state, &parts.headers)?;
        let key = idempotency_key(&parts.headers)?;
        let faults = state.faults();
        if crate::faults::fires(faults.reset_before_body_probability) {
            if let Some(conn) = &conn {
                tracing::warn!(key = key.as_ref(), %merchant, "fault: reset before reading the body");
                conn.reset();
                return Err(ApiError::InjectedFault);
            }
        }
        if !is_json(&parts.headers) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let json = read_body(body, state.max_body_bytes(), state.body_timeout()).await?;
        let prepared = Prepared::new(merchant, key, json)?;
        payments::create(&state, prepared, &faults, conn.as_ref()).await
    }
    .await;
    result.unwrap_or_else(|e| {
        let (status, slug, _, _) = e.describe();
        tracing::info!(
            status = status.as_u16(),
            problem = slug,
            replay = false,
            "payment request not executed"
        );
        state.metrics().request(Outcome::rejected_or_failed(&e));
        e.into_response()
    })
}

/// One payment of the caller's merchant.
#[utoipa::path(
    get,
    path = "/pagamentos/{id}",
    params(("id" = String, Path, description = "`pay_…`")),
    responses(
        (status = 200, body = Payment),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
async fn get_payment(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Payment>> {
    let merchant = authenticate(&state, &headers)?;
    state
        .store()
        .payment(&merchant, &id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound)
}

/// Lookup by exactly one of the parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PaymentQuery {
    /// The client's reference.
    referencia: Option<String>,
    /// The idempotency key that created the payment.
    idempotency_key: Option<String>,
}

/// Payments found by a lookup.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PaymentList {
    /// Oldest first; empty when none.
    pagamentos: Vec<Payment>,
}

/// Finds payments by `referencia` or by `idempotency_key`, for a client resolving an attempt whose
/// outcome it does not know.
#[utoipa::path(
    get,
    path = "/pagamentos",
    params(PaymentQuery),
    responses(
        (status = 200, description = "The payments found (oldest first); empty when none", body = PaymentList),
        (status = 400, description = "Not exactly one of `referencia` and `idempotency_key`", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Bad API key", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
async fn list_payments(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: std::result::Result<Query<PaymentQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<PaymentList>> {
    let merchant = authenticate(&state, &headers)?;
    let Query(q) = query.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    let pagamentos = match (q.referencia, q.idempotency_key) {
        (Some(r), None) => {
            state
                .store()
                .payments_by(&merchant, PaymentField::Referencia, &r)
                .await?
        }
        (None, Some(k)) => {
            state
                .store()
                .payments_by(&merchant, PaymentField::IdempotencyKey, &k)
                .await?
        }
        _ => {
            return Err(ApiError::BadQuery(
                "informe exatamente um de: referencia, idempotency_key".into(),
            ))
        }
    };
    Ok(Json(PaymentList { pagamentos }))
}

/// Liveness: the process serves HTTP. The body also says how long completed idempotency keys
/// are kept (`key_retention_secs`), so a client knows when a key may have been purged and an old
/// attempt must be looked up by `referencia` before it is sent again.
#[utoipa::path(get, path = "/health", responses((status = 200, body = Health)))]
async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        key_retention_secs: state.key_retention_secs(),
    })
}

/// Readiness: the store answers and takes writes (SQLite: its writer thread runs; PostgreSQL: a
/// pooled connection answers). What a load balancer should route by.
#[utoipa::path(get, path = "/health/ready", responses((status = 200, body = Health), (status = 503, body = Problem)))]
async fn ready(State(state): State<AppState>) -> Result<Json<Health>> {
    state.store().ready().await?;
    Ok(Json(Health {
        status: "ready",
        key_retention_secs: state.key_retention_secs(),
    }))
}

/// `GET /health`'s answer.
#[derive(Serialize, utoipa::ToSchema)]
struct Health {
    /// `ok` (liveness) or `ready` (readiness).
    status: &'static str,
    /// How long completed idempotency keys are kept before the reaper deletes them.
    key_retention_secs: u64,
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

fn authenticate_admin(state: &AppState, headers: &HeaderMap) -> Result<()> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme is case-insensitive (RFC 9110 §11.1).
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(token)
        });
    match (given, state.admin_token()) {
        (Some(g), Some(t)) if constant_time_eq(g.trim().as_bytes(), t.as_bytes()) => Ok(()),
        _ => Err(ApiError::AdminUnauthorized),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The gateway ledger: one row per real charge.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Ledger {
    /// Number of rows.
    total: usize,
    /// Rows, oldest first.
    cobrancas: Vec<LedgerRow>,
}

/// QA: the gateway ledger, every merchant.
#[utoipa::path(get, path = "/admin/ledger", responses((status = 200, body = Ledger)), security(("admin" = [])))]
async fn admin_ledger(State(state): State<AppState>, headers: HeaderMap) -> Result<Json<Ledger>> {
    authenticate_admin(&state, &headers)?;
    let cobrancas = state.store().ledger().await?;
    Ok(Json(Ledger {
        total: cobrancas.len(),
        cobrancas,
    }))
}

/// QA: the fault profile in force.
#[utoipa::path(get, path = "/admin/faults", responses((status = 200, body = Faults)), security(("admin" = [])))]
async fn admin_get_faults(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Faults>> {
    authenticate_admin(&state, &headers)?;
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
async fn admin_put_faults(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Faults>> {
    authenticate_admin(&state, &headers)?;
    let json = read_body(body, state.max_body_bytes(), state.body_timeout()).await?;
    let faults: Faults =
        serde_json::from_value(json).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    faults
        .validate()
        .map_err(|e| ApiError::Validation(vec![crate::domain::FieldError::new("faults", e)]))?;
    if state.embedded() && faults.crash_after_charge_probability > 0.0 {
        return Err(ApiError::Validation(vec![crate::domain::FieldError::new(
            "crash_after_charge_probability",
            "não existe na API embutida no app: derrubaria o próprio caixa",
        )]));
    }
    tracing::warn!(?faults, "fault profile changed");
    state.set_faults(faults.clone());
    Ok(Json(faults))
}

struct SecuritySchemes;

impl utoipa::Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        for name in ["bearer", "admin"] {
            components.add_security_scheme(
                name,
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
        }
    }
}

/// The OpenAPI document, generated from the handlers' annotations.
#[derive(OpenApi)]
#[openapi(
    info(title = "Pagar payment API", description = "Honours Idempotency-Key: each key charges at most once and replays its stored answer."),
    paths(create_payment, get_payment, list_payments, health, ready, admin_ledger, admin_get_faults, admin_put_faults),
    components(schemas(NovoPagamento, Payment, PaymentList, Problem, Ledger, LedgerRow, Faults, Health)),
    modifiers(&SecuritySchemes)
)]
pub struct ApiDoc;

/// Shared by handlers that reply with stored bytes.
pub fn json_response(status: u16, body: Vec<u8>, replayed: bool) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut res = (status, body).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if replayed {
        h.insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    res
}
