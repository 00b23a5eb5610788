//! The acquirer's routes (`/v1/orders…`, `/qa/ledger`), every one behind the access token.
//! Refusals are Mercado Pago's error body: `{"errors": [{"code", "message"}]}`.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use payment_api::domain::{CaptureStep, CardToken, Centavos, DownstreamKey, MerchantId};
use payment_api::gateway::online_orders::{
    self, payment_id, Found, NewOrder, RefundAsk, VoidAnswer, VoidAsk, WireOrder, WireRefund,
};
use payment_api::gateway::simulator::{ChargeRef, LedgerRow, SimulatedGateway, SimulatorLedger};
use payment_api::gateway::{ChargeOrder, Gateway, GatewayError, GatewayResult};
use payment_api::schema::Ledger;
use payment_api::store::SqliteStore;
use serde_json::json;
use std::sync::Arc;

/// What every route shares.
pub struct Shared {
    pub gateway: SimulatedGateway,
    pub ledger: Arc<SqliteStore>,
    pub token: String,
}

type St = State<Arc<Shared>>;

pub fn router(state: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/orders", post(create_order).get(find_order))
        .route("/v1/orders/cancel-by-idempotency-key", post(void_key))
        .route("/v1/orders/{id}", get(get_order))
        .route("/v1/orders/{id}/capture", post(capture_order))
        .route("/v1/orders/{id}/cancel", post(cancel_order))
        .route("/v1/orders/{id}/refund", post(refund_order))
        .route("/qa/ledger", get(qa_ledger))
        .route_layer(axum::middleware::from_fn_with_state(
            provider_kit::AccessToken(state.token.as_str().into()),
            provider_kit::require_access_token,
        ))
        .with_state(state)
}

/// A refusal, answered in Mercado Pago's error body.
struct Refusal {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl Refusal {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    fn bad(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = json!({"errors": [{"code": self.code, "message": self.message, "details": []}]});
        (self.status, Json(body)).into_response()
    }
}

/// The ledger failing or a card taking too long is the acquirer's own trouble: a 5xx, which a
/// client tries again under the same key.
impl From<GatewayError> for Refusal {
    fn from(e: GatewayError) -> Self {
        match e {
            GatewayError::Voided => Self::new(
                StatusCode::CONFLICT,
                online_orders::VOIDED,
                "this idempotency key was voided: it never charges",
            ),
            GatewayError::NotAnAuthorization => Self::new(
                StatusCode::CONFLICT,
                online_orders::NOT_AN_AUTHORIZATION,
                "the order is no authorization waiting for capture",
            ),
            GatewayError::Unavailable(why) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "internal_error", why)
            }
        }
    }
}

impl From<payment_api::store::StoreError> for Refusal {
    fn from(e: payment_api::store::StoreError) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "internal_error",
            e.to_string(),
        )
    }
}

type Answer = Result<Response, Refusal>;

/// The `X-Idempotency-Key` a request must carry.
fn idempotency_key(headers: &HeaderMap) -> Result<DownstreamKey, Refusal> {
    let raw = headers
        .get("x-idempotency-key")
        .ok_or_else(|| Refusal::bad("idempotency_key_required", "X-Idempotency-Key is required"))?;
    raw.to_str()
        .ok()
        .and_then(DownstreamKey::received)
        .ok_or_else(|| {
            Refusal::bad(
                "invalid_idempotency_key",
                "X-Idempotency-Key: 1 to 255 visible ASCII characters",
            )
        })
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    serde_json::from_slice(body).map_err(|e| Refusal::bad("invalid_body", e.to_string()))
}

fn amount(field: &str, s: &str) -> Result<Centavos, Refusal> {
    pagar_rules::decimal::parse(s)
        .and_then(|c| Centavos::new(c).ok())
        .ok_or_else(|| Refusal::bad("invalid_amount", format!("{field}: \"12.34\", above zero")))
}

/// An order in the answer, with its status.
fn order(status: StatusCode, order: WireOrder) -> Response {
    (status, Json(order)).into_response()
}

fn wire(row: &LedgerRow) -> WireOrder {
    WireOrder::of(
        &GatewayResult::from_ledger(row.clone(), false),
        &row.downstream_key,
        row.merchant.as_ref(),
    )
}

async fn row(s: &Shared, id: &str) -> Result<LedgerRow, Refusal> {
    s.ledger
        .ledger_row(ChargeRef::Id(id))
        .await?
        .ok_or_else(|| Refusal::new(StatusCode::NOT_FOUND, "order_not_found", "no such order"))
}

async fn create_order(State(s): St, headers: HeaderMap, body: Bytes) -> Answer {
    let key = idempotency_key(&headers)?;
    let ask: NewOrder = parse(&body)?;
    if ask.kind != "online" {
        return Err(Refusal::bad("invalid_type", "type: only \"online\""));
    }
    let merchant = MerchantId::parse(&ask.metadata.merchant)
        .map_err(|e| Refusal::bad("invalid_metadata", format!("metadata.merchant: {e}")))?;
    let [payment] = ask.transactions.payments.as_slice() else {
        return Err(Refusal::bad(
            "invalid_transactions",
            "transactions.payments: exactly one payment",
        ));
    };
    let valor = amount("transactions.payments[0].amount", &payment.amount)?;
    if amount("total_amount", &ask.total_amount)? != valor {
        return Err(Refusal::bad(
            "invalid_total_amount",
            "total_amount differs from the payment's amount",
        ));
    }
    let cartao = payment
        .payment_method
        .token
        .as_deref()
        .and_then(|t| CardToken::parse(t).ok())
        .ok_or_else(|| Refusal::bad("invalid_token", "payment_method.token: unknown card token"))?;
    let plano = payment
        .payment_method
        .plan()
        .map_err(|e| Refusal::bad("invalid_payment_method", e))?;
    let captura = match ask.capture_mode.as_str() {
        "automatic" | "automatic_async" => true,
        "manual" => false,
        other => {
            return Err(Refusal::bad(
                "invalid_capture_mode",
                format!("capture_mode: automatic or manual, not {other}"),
            ))
        }
    };
    let metadata = ask
        .metadata
        .charge_metadata()
        .map_err(|e| Refusal::bad("invalid_metadata", e))?;
    let charged = s
        .gateway
        .charge(
            key.clone(),
            &merchant,
            ChargeOrder {
                valor,
                cartao,
                plano,
                captura,
                metadata,
            },
        )
        .await?;
    let status = if charged.fresh {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(order(
        status,
        WireOrder::of(&charged, key.as_ref(), merchant.as_ref()),
    ))
}

async fn get_order(State(s): St, Path(id): Path<String>) -> Answer {
    // An authorization whose time is up lapses when it is read, as at the real acquirer.
    match s.gateway.settle_authorization(&id, None).await {
        Ok(_) | Err(GatewayError::NotAnAuthorization) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(order(StatusCode::OK, wire(&row(&s, &id).await?)))
}

async fn settle(s: &Shared, headers: &HeaderMap, id: &str, step: CaptureStep) -> Answer {
    idempotency_key(headers)?;
    let found = row(s, id).await?;
    s.gateway.settle_authorization(id, Some(step)).await?;
    let settled = s
        .ledger
        .ledger_row(ChargeRef::Id(id))
        .await?
        .unwrap_or(found);
    Ok(order(StatusCode::OK, wire(&settled)))
}

async fn capture_order(State(s): St, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    settle(&s, &headers, &id, CaptureStep::Capturar).await
}

async fn cancel_order(State(s): St, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    settle(&s, &headers, &id, CaptureStep::Desfazer).await
}

async fn refund_order(
    State(s): St,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer {
    let key = idempotency_key(&headers)?;
    let ask: RefundAsk = parse(&body)?;
    let charge = row(&s, &id).await?;
    let [of] = ask.transactions.as_slice() else {
        return Err(Refusal::bad(
            "invalid_transactions",
            "transactions: exactly one payment",
        ));
    };
    if of.id != payment_id(&charge.cobranca_id) {
        return Err(Refusal::new(
            StatusCode::NOT_FOUND,
            "transaction_not_found",
            "no such payment in this order",
        ));
    }
    let valor = amount("transactions[0].amount", &of.amount)?;
    if valor > charge.valor {
        return Err(Refusal::bad(
            "invalid_amount",
            "a refund larger than the payment",
        ));
    }
    let refunded = s
        .gateway
        .refund(key.clone(), &charge.merchant, &id, valor)
        .await?;
    let mut answer = wire(&charge);
    answer.transactions.refunds = vec![WireRefund::of(&refunded, &id, key.as_ref(), valor)];
    let status = if refunded.fresh {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(order(status, answer))
}

#[derive(serde::Deserialize)]
struct Search {
    external_reference: String,
}

async fn find_order(State(s): St, Query(q): Query<Search>) -> Answer {
    let key = DownstreamKey::received(&q.external_reference).ok_or_else(|| {
        Refusal::bad(
            "invalid_external_reference",
            "external_reference: 1 to 255 visible ASCII characters",
        )
    })?;
    let found = s.ledger.ledger_row(ChargeRef::Key(&key)).await?;
    Ok(Json(Found {
        data: found.iter().map(wire).collect(),
    })
    .into_response())
}

async fn void_key(State(s): St, body: Bytes) -> Answer {
    let ask: VoidAsk = parse(&body)?;
    let key = DownstreamKey::received(&ask.idempotency_key).ok_or_else(|| {
        Refusal::bad(
            "invalid_idempotency_key",
            "idempotency_key: 1 to 255 visible ASCII characters",
        )
    })?;
    let merchant = MerchantId::parse(&ask.merchant)
        .map_err(|e| Refusal::bad("invalid_merchant", e.to_string()))?;
    let charged = s.ledger.ledger_void(&key, &merchant).await?;
    Ok(Json(VoidAnswer {
        order: charged.as_ref().map(wire),
    })
    .into_response())
}

async fn qa_ledger(State(s): St) -> Answer {
    Ok(Json(Ledger::read(s.ledger.as_ref()).await?).into_response())
}
