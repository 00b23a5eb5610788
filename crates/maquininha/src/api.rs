//! The Orders API a till's server calls (`/v1/orders…`, bearer token) and the QA routes
//! (`/qa/…`). Errors are Mercado Pago's shape: `{"errors": [{"code", "message", "details"}]}`.

use crate::notify::Notifier;
use crate::store::{now_ms, Answer, Created, Ledger, NewOrder, Order, OrderAsk, Refused, Status};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use pagar_rules::decimal;
use provider_kit::rfc3339;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What every route shares.
pub struct Shared {
    pub store: Arc<Ledger>,
    pub token: String,
    pub terminals: Vec<String>,
    pub notifier: Arc<Notifier>,
    pub expiration: Duration,
    /// Terminals QA made stop answering: they take no order until told to answer again.
    pub silent: Mutex<Vec<String>>,
}

type St = State<Arc<Shared>>;

pub fn router(state: Arc<Shared>) -> Router {
    let api = Router::new()
        .route("/v1/orders", post(create_order))
        .route("/v1/orders/{id}", get(get_order))
        .route("/v1/orders/{id}/cancel", post(cancel_order))
        .route("/v1/orders/{id}/refund", post(refund_order))
        .route_layer(axum::middleware::from_fn_with_state(
            provider_kit::AccessToken(state.token.as_str().into()),
            provider_kit::require_access_token,
        ));
    Router::new()
        .merge(api)
        .route("/qa/contagens", get(qa_counts))
        .route("/qa/orders", get(qa_orders))
        .route("/qa/notificacoes", put(qa_notification_url))
        .with_state(state)
}

/// A refusal, answered in Mercado Pago's error body: `{"errors": [{"code", "message", "details"}]}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"errors": [{"code": self.code, "message": self.message, "details": []}]});
        (self.status, Json(body)).into_response()
    }
}

/// A refusal answered at once.
pub fn error(status: StatusCode, code: &'static str, message: &str) -> Response {
    ApiError::new(status, code, message).into_response()
}

fn refused(e: Refused) -> Response {
    match e {
        Refused::KeyReused => error(
            StatusCode::CONFLICT,
            "idempotency_key_already_used",
            "the X-Idempotency-Key was already used with another request",
        ),
        Refused::TerminalBusy(id) => error(
            StatusCode::CONFLICT,
            "already_queued_order_on_terminal",
            &format!("the terminal already has an open order: {id}"),
        ),
        Refused::NotFound => error(StatusCode::NOT_FOUND, "order_not_found", "order not found"),
        Refused::WrongStatus(s) => error(
            StatusCode::CONFLICT,
            "order_status_conflict",
            &format!("the order is {s}"),
        ),
        Refused::Db(e) => {
            tracing::error!(error = %e, "ledger");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "internal error",
            )
        }
    }
}

/// The transaction's status and detail for an order's.
fn payment_status(o: &Order) -> (&'static str, &str) {
    match o.status {
        Status::Processed => ("processed", "accredited"),
        s => (s.as_str(), o.status_detail.as_str()),
    }
}

/// An order as `GET /v1/orders/{id}` shows it.
pub fn order_json(o: &Order) -> Value {
    let amount = decimal::format(o.ask.centavos);
    let (pay_status, pay_detail) = payment_status(o);
    let mut payment = json!({
        "id": o.payment_id,
        "amount": amount,
        "status": pay_status,
        "status_detail": pay_detail,
    });
    if let Some(card) = &o.card_type {
        payment["payment_method"] = json!({
            "type": card,
            "installments": o.ask.installments.unwrap_or(1),
        });
    }
    let mut transactions = json!({"payments": [payment]});
    if o.status == Status::Refunded {
        transactions["refunds"] = json!([{
            "id": format!("REF{}", &o.payment_id[3..]),
            "transaction_id": o.payment_id,
            "amount": amount,
            "status": "processed",
        }]);
    }
    json!({
        "id": o.id,
        "type": "point",
        "processing_mode": "automatic",
        "external_reference": o.ask.external_reference,
        "description": o.ask.description,
        "country_code": "BRA",
        "currency": "BRL",
        "status": o.status.as_str(),
        "status_detail": o.status_detail,
        "total_amount": amount,
        "created_date": rfc3339(o.created_ms),
        "last_updated_date": rfc3339(o.updated_ms),
        "expiration_date": rfc3339(o.expires_ms),
        "version": o.version,
        "transactions": transactions,
        "config": {
            "point": {"terminal_id": o.ask.terminal_id, "print_on_terminal": "no_ticket"},
            "payment_method": {
                "default_type": o.ask.default_type,
                "default_installments": o.ask.installments,
            },
        },
    })
}

/// The request's `X-Idempotency-Key`, mandatory on every write, as on the real API.
fn idempotency_key(headers: &HeaderMap) -> Result<String, ApiError> {
    let key = headers
        .get("x-idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty() && k.len() <= 64);
    key.map(str::to_string).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "missing_idempotency_key",
            "the X-Idempotency-Key header is required (1 to 64 characters)",
        )
    })
}

/// The body with its object keys in order, so the same request hashes the same however sent.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

fn bad(message: &str) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
}

/// `expiration_time` as ISO 8601 `PT…` with seconds, minutes or hours (30 s to 3 h).
fn expiration(v: Option<&Value>) -> Result<Option<Duration>, ApiError> {
    let Some(v) = v else { return Ok(None) };
    let s = v
        .as_str()
        .ok_or_else(|| bad("expiration_time must be a string"))?;
    let rest = s
        .strip_prefix("PT")
        .ok_or_else(|| bad("expiration_time: use PT<n>S, PT<n>M or PT<n>H"))?;
    let (n, unit) = rest.split_at(rest.len().saturating_sub(1));
    let n: u64 = n
        .parse()
        .map_err(|_| bad("expiration_time: use PT<n>S, PT<n>M or PT<n>H"))?;
    let secs = match unit {
        "S" => n,
        "M" => n * 60,
        "H" => n * 3600,
        _ => return Err(bad("expiration_time: use PT<n>S, PT<n>M or PT<n>H")),
    };
    if !(30..=3 * 3600).contains(&secs) {
        return Err(bad(
            "expiration_time must be between 30 seconds and 3 hours",
        ));
    }
    Ok(Some(Duration::from_secs(secs)))
}

/// Reads an order request into what the ledger stores, or says what is wrong with it.
fn new_order(s: &Shared, key: String, body: &Value) -> Result<NewOrder, ApiError> {
    if body.get("type").and_then(Value::as_str) != Some("point") {
        return Err(bad("type must be \"point\""));
    }
    let reference = body
        .get("external_reference")
        .and_then(Value::as_str)
        .filter(|r| {
            !r.is_empty()
                && r.len() <= 64
                && r.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .ok_or_else(|| bad("external_reference: 1 to 64 letters, digits, - or _"))?;
    let payments = body
        .pointer("/transactions/payments")
        .and_then(Value::as_array)
        .filter(|p| p.len() == 1)
        .ok_or_else(|| bad("transactions.payments must hold exactly one payment"))?;
    let centavos = payments[0]
        .get("amount")
        .and_then(Value::as_str)
        .and_then(decimal::parse)
        .filter(|c| (1..=pagar_rules::MAX_CENTAVOS).contains(c))
        .ok_or_else(|| bad("amount must be a string of reais with two decimals, like \"10.00\""))?;
    let terminal = body
        .pointer("/config/point/terminal_id")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("config.point.terminal_id is required"))?;
    if !s.terminals.iter().any(|t| t == terminal) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "terminal_not_found",
            format!("unknown terminal {terminal}"),
        ));
    }
    let default_type = match body.pointer("/config/payment_method/default_type") {
        None | Some(Value::Null) => None,
        Some(Value::String(t))
            if ["debit_card", "credit_card", "voucher_card"].contains(&t.as_str()) =>
        {
            Some(t.clone())
        }
        Some(_) => return Err(bad("default_type: debit_card, credit_card or voucher_card")),
    };
    let installments = match body.pointer("/config/payment_method/default_installments") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .filter(|n| (1..=i64::from(pagar_rules::MAX_PARCELAS)).contains(n))
                .ok_or_else(|| bad("default_installments: a whole number from 1 to 12"))?,
        ),
    };
    if installments.is_some_and(|n| n > 1) && default_type.as_deref() != Some("credit_card") {
        return Err(bad("installments above 1 need default_type credit_card"));
    }
    let description = body
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_string);
    let expires_in = expiration(body.get("expiration_time"))?.unwrap_or(s.expiration);
    Ok(NewOrder {
        idempotency_key: key,
        fingerprint: hex::encode(Sha256::digest(canonical(body).as_bytes())),
        ask: OrderAsk {
            terminal_id: terminal.to_string(),
            external_reference: reference.to_string(),
            centavos,
            default_type,
            installments,
            description,
        },
        expires_ms: now_ms() + i64::try_from(expires_in.as_millis()).unwrap_or(i64::MAX / 2),
    })
}

/// `POST /v1/orders`.
async fn create_order(State(s): St, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let key = match idempotency_key(&headers) {
        Ok(k) => k,
        Err(e) => return e.into_response(),
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return bad("the body is not JSON").into_response();
    };
    let new = match new_order(&s, key, &body) {
        Ok(n) => n,
        Err(e) => return e.into_response(),
    };
    match s.store.create(&new) {
        Ok(Created::New(o)) => {
            tracing::info!(order = %o.id, terminal = %o.ask.terminal_id, "order created");
            (StatusCode::CREATED, Json(order_json(&o))).into_response()
        }
        Ok(Created::Again(o)) => (StatusCode::CREATED, Json(order_json(&o))).into_response(),
        Err(e) => refused(e),
    }
}

/// `GET /v1/orders/{id}`.
async fn get_order(State(s): St, Path(id): Path<String>) -> Response {
    match s.store.order(&id) {
        Ok(o) => Json(order_json(&o)).into_response(),
        Err(e) => refused(e),
    }
}

/// The answer a cancel or refund key was given before, replayed; another order's or kind's key
/// is refused.
fn replayed(s: &Shared, key: &str, id: &str, kind: &str) -> Option<Response> {
    let a = match s.store.answer(key) {
        Ok(a) => a?,
        Err(e) => return Some(refused(e)),
    };
    if a.order_id != id || a.kind != kind {
        return Some(refused(Refused::KeyReused));
    }
    let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::OK);
    Some((status, [(header::CONTENT_TYPE, "application/json")], a.body).into_response())
}

/// Answers `order` 200 and keeps the answer under `key`.
fn answer_kept(s: &Shared, key: &str, kind: &str, order: &Order) -> Response {
    let body = order_json(order).to_string();
    let kept = Answer {
        order_id: order.id.clone(),
        kind: kind.to_string(),
        status: 200,
        body: body.clone(),
    };
    if let Err(e) = s.store.keep_answer(key, &kept) {
        return refused(e);
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// `POST /v1/orders/{id}/cancel`: only while `created`. Once the machine took the order only the
/// machine can cancel it; an order already canceled (by either) answers as it stands.
async fn cancel_order(State(s): St, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let key = match idempotency_key(&headers) {
        Ok(k) => k,
        Err(e) => return e.into_response(),
    };
    if let Some(r) = replayed(&s, &key, &id, "cancel") {
        return r;
    }
    let order =
        match s
            .store
            .transition(&id, &[Status::Created], Status::Canceled, "canceled", None)
        {
            Ok(o) => {
                s.notifier.notify(&o);
                o
            }
            Err(Refused::WrongStatus("canceled")) => match s.store.order(&id) {
                Ok(o) => o,
                Err(e) => return refused(e),
            },
            Err(Refused::WrongStatus("at_terminal")) => {
                return error(
                    StatusCode::CONFLICT,
                    "cannot_cancel_order",
                    "the order is at the terminal: only the terminal can cancel it now",
                )
            }
            Err(Refused::WrongStatus(other)) => {
                return error(
                    StatusCode::CONFLICT,
                    "cannot_cancel_order",
                    &format!("an order {other} cannot be canceled"),
                )
            }
            Err(e) => return refused(e),
        };
    answer_kept(&s, &key, "cancel", &order)
}

/// `POST /v1/orders/{id}/refund`: the whole of a `processed` order (an order refunded already
/// answers as it stands).
async fn refund_order(State(s): St, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let key = match idempotency_key(&headers) {
        Ok(k) => k,
        Err(e) => return e.into_response(),
    };
    if let Some(r) = replayed(&s, &key, &id, "refund") {
        return r;
    }
    let order = match s.store.transition(
        &id,
        &[Status::Processed],
        Status::Refunded,
        "refunded",
        None,
    ) {
        Ok(o) => {
            s.notifier.notify(&o);
            o
        }
        Err(Refused::WrongStatus("refunded")) => match s.store.order(&id) {
            Ok(o) => o,
            Err(e) => return refused(e),
        },
        Err(Refused::WrongStatus(other)) => {
            return error(
                StatusCode::CONFLICT,
                "cannot_refund_order",
                &format!("an order {other} cannot be refunded"),
            )
        }
        Err(e) => return refused(e),
    };
    answer_kept(&s, &key, "refund", &order)
}

async fn qa_counts(State(s): St) -> Response {
    match s.store.counts() {
        Ok(c) => Json(c).into_response(),
        Err(e) => refused(e),
    }
}

async fn qa_orders(State(s): St) -> Response {
    match s.store.orders() {
        Ok(all) => Json(all.iter().map(order_json).collect::<Vec<_>>()).into_response(),
        Err(e) => refused(e),
    }
}

/// `PUT /qa/notificacoes {"url": …, "modo"?: "entregue" | "perdida" | "duplicada"}`: where
/// notifications go from now on (`null`: nowhere), and how they are delivered.
async fn qa_notification_url(State(s): St, Json(body): Json<Value>) -> Response {
    let delivery = match body.get("modo") {
        None => None,
        Some(m) => match m.as_str().and_then(crate::notify::Delivery::parse) {
            Some(d) => Some(d),
            None => return bad("modo: entregue, perdida or duplicada").into_response(),
        },
    };
    if let Some(d) = delivery {
        s.notifier.set_delivery(d);
    }
    match body.get("url") {
        None if delivery.is_some() => StatusCode::NO_CONTENT.into_response(),
        Some(Value::String(u)) if u.starts_with("http://") || u.starts_with("https://") => {
            s.notifier.set_url(Some(u.clone()));
            StatusCode::NO_CONTENT.into_response()
        }
        Some(Value::Null) => {
            s.notifier.set_url(None);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => bad("url: an http(s) URL, or null").into_response(),
    }
}

/// Expires the orders past their time, every `every`.
pub async fn expire_every(s: Arc<Shared>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        match s.store.expire_due(now_ms()) {
            Ok(expired) => expired.iter().for_each(|o| s.notifier.notify(o)),
            Err(e) => tracing::warn!(error = %e, "expiry pass failed"),
        }
    }
}
