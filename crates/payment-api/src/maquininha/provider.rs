//! The card machine's provider as the server talks to it, in the shape of Mercado Pago's Point
//! Orders API: `POST /v1/orders` under a mandatory `X-Idempotency-Key`, `GET /v1/orders/{id}`,
//! `POST /v1/orders/{id}/cancel` and `/refund` (each under its own key), with a bearer token. The
//! bundled simulator (`crates/maquininha`) answers them; a real provider is put in its place by
//! configuration (its URL and access token).

use crate::domain::{CardMethod, CardPlan, Centavos, MachineId, OrderKey};
use crate::provider_http::{mercado_pago_error, Answer, NoAnswer, ProviderHttp};
use reqwest::Method;
use serde::Deserialize;

/// What the provider answered.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The provider refused the request (4xx, with its code and message): nothing was made.
    #[error("a maquininha recusou: {0}")]
    Refused(String),
    /// The provider could not be asked, or failed: nothing known to have changed there.
    #[error("maquininha indisponível: {0}")]
    Unavailable(String),
}

/// An order as the provider reports it (the part the server reads).
#[derive(Debug, Clone, Deserialize)]
pub struct Order {
    /// Its id (`ORD…`).
    pub id: String,
    /// `created`, `at_terminal`, `processed`, `failed`, `canceled`, `expired`, `refunded`, …
    pub status: String,
    /// Why, for `failed` and `canceled`.
    #[serde(default)]
    pub status_detail: String,
    /// `"12.34"`.
    pub total_amount: String,
    /// Its payment.
    pub transactions: Transactions,
}

/// `transactions` of an order.
#[derive(Debug, Clone, Deserialize)]
pub struct Transactions {
    /// The payment (one per order here).
    pub payments: Vec<OrderPayment>,
}

/// One payment of an order.
#[derive(Debug, Clone, Deserialize)]
pub struct OrderPayment {
    /// Its id at the provider.
    pub id: String,
    /// How the customer paid, once processed.
    #[serde(default)]
    pub payment_method: Option<PaymentMethod>,
}

/// `payment_method` of a processed payment.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentMethod {
    /// `debit_card`, `credit_card`, `voucher_card`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Installments.
    #[serde(default)]
    pub installments: Option<u8>,
}

/// Where an order stands, as the server treats it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderState {
    /// A card may still pay it (`created`, `at_terminal`, or any state this client does not
    /// know: never taken for final).
    Open,
    /// Paid (`processed`, or `refunded` later).
    Paid,
    /// Declined at the machine (`failed`).
    Declined,
    /// Cancelled (`canceled`).
    Canceled,
    /// Nobody paid in time (`expired`).
    Expired,
}

impl Order {
    /// Where it stands.
    pub fn state(&self) -> OrderState {
        match self.status.as_str() {
            "processed" | "refunded" => OrderState::Paid,
            "failed" => OrderState::Declined,
            "canceled" => OrderState::Canceled,
            "expired" => OrderState::Expired,
            _ => OrderState::Open,
        }
    }

    /// How it was paid, as a plan: the card's function the customer chose at the machine, with
    /// the installments and financing asked (`asked`); `None` when the provider does not say.
    pub fn paid_plan(&self, asked: Option<CardPlan>) -> Option<CardPlan> {
        let method = self
            .transactions
            .payments
            .first()?
            .payment_method
            .as_ref()?;
        let (function, parcelas) = match method.kind.as_str() {
            "debit_card" => (CardMethod::Debito, 1),
            "voucher_card" => (CardMethod::Voucher, 1),
            "credit_card" => (CardMethod::Credito, method.installments.unwrap_or(1)),
            _ => return asked,
        };
        let financing = asked
            .filter(|p| p.method == CardMethod::Credito && parcelas > 1)
            .and_then(|p| p.financing)
            .map(|f| f.as_str())
            .unwrap_or("loja");
        let stored = match (function, parcelas) {
            (CardMethod::Credito, 2..) => format!("credito:{parcelas}:{financing}"),
            (f, _) => f.as_str().to_string(),
        };
        CardPlan::parse_stored(&stored).ok().or(asked)
    }
}

/// What a cancel did.
#[derive(Debug, Clone)]
pub enum CancelAnswer {
    /// Cancelled (now or before): it can no longer be paid.
    Canceled(Order),
    /// The machine took the order: only the machine can end it now.
    AtTerminal,
    /// It had already ended otherwise (paid, declined, expired): read it.
    Ended,
}

/// The card machine's provider.
#[async_trait::async_trait]
pub trait MachineProvider: Send + Sync + std::fmt::Debug {
    /// `POST /v1/orders` under `key`: the order for `valor` at `machine`, or, for a key used
    /// before, the order it made.
    async fn create(
        &self,
        key: &OrderKey,
        machine: &MachineId,
        valor: Centavos,
        plano: Option<CardPlan>,
        reference: &str,
        descricao: Option<&str>,
    ) -> Result<Order, ProviderError>;
    /// `GET /v1/orders/{id}`; `None` when there is none.
    async fn get(&self, id: &str) -> Result<Option<Order>, ProviderError>;
    /// `POST /v1/orders/{id}/cancel` under `key`.
    async fn cancel(&self, id: &str, key: &OrderKey) -> Result<CancelAnswer, ProviderError>;
    /// `POST /v1/orders/{id}/refund` under `key`: the whole order paid back.
    async fn refund(&self, id: &str, key: &OrderKey) -> Result<Order, ProviderError>;
}

/// The Orders API over HTTP.
#[derive(Debug, Clone)]
pub struct HttpMachineProvider {
    http: ProviderHttp,
}

impl HttpMachineProvider {
    /// A client of the provider at `base`.
    pub fn new(base: &str, token: &str) -> Self {
        Self {
            http: ProviderHttp::new(base, token),
        }
    }

    /// `POST /v1/orders/{id}/{verb}` under `key`.
    async fn post_order(&self, id: &str, verb: &str, key: &OrderKey) -> Result<Answer, NoAnswer> {
        let path = format!("/v1/orders/{id}/{verb}");
        self.http
            .send(self.http.keyed(Method::POST, &path, key.as_ref()))
            .await
    }
}

impl From<NoAnswer> for ProviderError {
    fn from(e: NoAnswer) -> Self {
        ProviderError::Unavailable(e.0)
    }
}

/// What the cashier reads of a refused order: the provider's codes a till meets, in words; any
/// other with the provider's own message.
fn refusal_in_words(code: &str, message: &str) -> String {
    match code {
        "already_queued_order_on_terminal" => {
            "a maquininha já tem um pedido aberto: termine ou cancele o anterior".to_string()
        }
        "terminal_not_found" => "o provedor não conhece esta maquininha".to_string(),
        _ => format!("{message} ({code})"),
    }
}

/// Mercado Pago's `default_type` and `default_installments` for a plan.
fn default_type(plano: Option<CardPlan>) -> serde_json::Value {
    match plano {
        None => serde_json::json!({}),
        Some(p) => serde_json::json!({
            "default_type": match p.method {
                CardMethod::Debito => "debit_card",
                CardMethod::Credito => "credit_card",
                CardMethod::Voucher => "voucher_card",
            },
            "default_installments": p.parcelas,
        }),
    }
}

#[async_trait::async_trait]
impl MachineProvider for HttpMachineProvider {
    async fn create(
        &self,
        key: &OrderKey,
        machine: &MachineId,
        valor: Centavos,
        plano: Option<CardPlan>,
        reference: &str,
        descricao: Option<&str>,
    ) -> Result<Order, ProviderError> {
        let mut body = serde_json::json!({
            "type": "point",
            "external_reference": reference,
            "transactions": {"payments": [{"amount": valor.as_reais()}]},
            "config": {
                "point": {"terminal_id": machine.as_ref(), "print_on_terminal": "no_ticket"},
                "payment_method": default_type(plano),
            },
        });
        if let Some(d) = descricao {
            body["description"] = serde_json::json!(d.chars().take(150).collect::<String>());
        }
        let (status, text) = self
            .http
            .send(
                self.http
                    .keyed(Method::POST, "/v1/orders", key.as_ref())
                    .json(&body),
            )
            .await?;
        match status.as_u16() {
            200 | 201 => Ok(ProviderHttp::json(&text)?),
            _ => {
                let (code, message) = mercado_pago_error(&text);
                Err(ProviderError::Refused(refusal_in_words(&code, &message)))
            }
        }
    }

    async fn get(&self, id: &str) -> Result<Option<Order>, ProviderError> {
        let (status, text) = self.http.get(&format!("/v1/orders/{id}")).await?;
        match status.as_u16() {
            200 => Ok(Some(ProviderHttp::json(&text)?)),
            404 => Ok(None),
            _ => Err(ProviderError::Refused(mercado_pago_error(&text).1)),
        }
    }

    async fn cancel(&self, id: &str, key: &OrderKey) -> Result<CancelAnswer, ProviderError> {
        let (status, text) = self.post_order(id, "cancel", key).await?;
        match status.as_u16() {
            200 | 201 => Ok(CancelAnswer::Canceled(ProviderHttp::json(&text)?)),
            409 => {
                // At the terminal (only the machine ends it), or ended otherwise: the order
                // says which.
                let order = self.get(id).await?.ok_or_else(|| {
                    ProviderError::Unavailable(format!("o pedido {id} sumiu da maquininha"))
                })?;
                Ok(match order.state() {
                    OrderState::Open => CancelAnswer::AtTerminal,
                    OrderState::Canceled => CancelAnswer::Canceled(order),
                    _ => CancelAnswer::Ended,
                })
            }
            _ => Err(ProviderError::Refused(mercado_pago_error(&text).1)),
        }
    }

    async fn refund(&self, id: &str, key: &OrderKey) -> Result<Order, ProviderError> {
        let (status, text) = self.post_order(id, "refund", key).await?;
        match status.as_u16() {
            200 | 201 => Ok(ProviderHttp::json(&text)?),
            _ => Err(ProviderError::Refused(mercado_pago_error(&text).1)),
        }
    }
}
