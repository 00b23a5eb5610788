//! The acquirer reached over HTTP: [`Gateway`] spoken as Mercado Pago's Orders API for online
//! payments ([`super::online_orders`]). Every call that can move money carries a key on the
//! wire: a charge its downstream key (derived from the claim, so a claim lost in a power cut is
//! tried again into the same charge), a refund its own, a capture or undo one derived from the
//! order. The bundled simulator (`crates/adquirente`, its own process and ledger) answers it; a
//! real acquirer is put in its place by configuration (`--gateway-url`, `--gateway-token`).

use super::online_orders::{
    self, Found, NewOrder, NewPayment, NewTransactions, RefundAsk, RefundOf, VoidAnswer, VoidAsk,
    WireMetadata, WireMethod, WireOrder,
};
use super::{ChargeOrder, Gateway, GatewayError, GatewayRefund, GatewayResult};
use crate::domain::{CaptureState, CaptureStep, Centavos, DownstreamKey, MerchantId};
use crate::provider_http::{mercado_pago_error, NoAnswer, ProviderHttp};
use reqwest::{Method, StatusCode};

impl From<NoAnswer> for GatewayError {
    fn from(e: NoAnswer) -> Self {
        GatewayError::Unavailable(e.0)
    }
}

/// The acquirer at a base URL, with its access token.
#[derive(Debug, Clone)]
pub struct HttpGateway {
    http: ProviderHttp,
}

impl HttpGateway {
    /// A client of the acquirer at `base`.
    pub fn new(base: &str, token: &str) -> Self {
        Self {
            http: ProviderHttp::new(base, token),
        }
    }

    /// The acquirer's error code in a refusal.
    fn code(body: &str) -> String {
        mercado_pago_error(body).0
    }

    /// A refusal the server has no move for: the acquirer did nothing, and says why.
    fn refused(status: StatusCode, body: &str) -> GatewayError {
        GatewayError::Unavailable(format!(
            "o adquirente recusou ({status}): {}",
            body.chars().take(300).collect::<String>()
        ))
    }

    fn result(order: &WireOrder, fresh: bool) -> Result<GatewayResult, GatewayError> {
        order.result(fresh).map_err(GatewayError::Unavailable)
    }

    /// `GET /v1/orders/{id}`.
    async fn order(&self, id: &str) -> Result<WireOrder, GatewayError> {
        let (status, body) = self.http.get(&format!("/v1/orders/{id}")).await?;
        match status {
            StatusCode::OK => Ok(ProviderHttp::json(&body)?),
            _ => Err(Self::refused(status, &body)),
        }
    }
}

#[async_trait::async_trait]
impl Gateway for HttpGateway {
    async fn charge(
        &self,
        downstream_key: DownstreamKey,
        merchant: &MerchantId,
        order: ChargeOrder,
    ) -> Result<GatewayResult, GatewayError> {
        let amount = order.valor.as_reais();
        let body = NewOrder {
            kind: "online".into(),
            processing_mode: "automatic".into(),
            capture_mode: if order.captura { "automatic" } else { "manual" }.into(),
            external_reference: downstream_key.as_ref().to_string(),
            total_amount: amount.clone(),
            description: order.metadata.descricao.clone(),
            transactions: NewTransactions {
                payments: vec![NewPayment {
                    amount,
                    payment_method: WireMethod {
                        token: Some(order.cartao.as_str().to_string()),
                        ..WireMethod::of(order.plano)
                    },
                }],
            },
            metadata: WireMetadata::of(merchant.as_ref(), &order.metadata),
        };
        let (status, text) = self
            .http
            .send(
                self.http
                    .keyed(Method::POST, "/v1/orders", downstream_key.as_ref())
                    .json(&body),
            )
            .await?;
        match status {
            StatusCode::CREATED | StatusCode::OK => {
                Self::result(&ProviderHttp::json(&text)?, status == StatusCode::CREATED)
            }
            StatusCode::CONFLICT if Self::code(&text) == online_orders::VOIDED => {
                Err(GatewayError::Voided)
            }
            _ => Err(Self::refused(status, &text)),
        }
    }

    async fn settle_authorization(
        &self,
        cobranca_id: &str,
        step: Option<CaptureStep>,
    ) -> Result<CaptureState, GatewayError> {
        let order = match step {
            None => self.order(cobranca_id).await?,
            Some(step) => {
                let (verb, key) = match step {
                    CaptureStep::Capturar => ("capture", format!("{cobranca_id}:captura")),
                    CaptureStep::Desfazer => ("cancel", format!("{cobranca_id}:desfaz")),
                };
                let path = format!("/v1/orders/{cobranca_id}/{verb}");
                let (status, text) = self
                    .http
                    .send(self.http.keyed(Method::POST, &path, &key))
                    .await?;
                match status {
                    StatusCode::OK => ProviderHttp::json(&text)?,
                    StatusCode::CONFLICT
                        if Self::code(&text) == online_orders::NOT_AN_AUTHORIZATION =>
                    {
                        return Err(GatewayError::NotAnAuthorization)
                    }
                    _ => return Err(Self::refused(status, &text)),
                }
            }
        };
        Self::result(&order, false)?
            .captura
            .ok_or(GatewayError::NotAnAuthorization)
    }

    async fn find_charge(
        &self,
        downstream_key: &DownstreamKey,
    ) -> Result<Option<GatewayResult>, GatewayError> {
        let (status, text) = self
            .http
            .send(
                self.http
                    .at(Method::GET, "/v1/orders")
                    .query(&[("external_reference", downstream_key.as_ref())]),
            )
            .await?;
        if status != StatusCode::OK {
            return Err(Self::refused(status, &text));
        }
        let found: Found = ProviderHttp::json(&text)?;
        found
            .data
            .first()
            .map(|order| Self::result(order, false))
            .transpose()
    }

    async fn void(
        &self,
        downstream_key: &DownstreamKey,
        merchant: &MerchantId,
    ) -> Result<Option<GatewayResult>, GatewayError> {
        let ask = VoidAsk {
            idempotency_key: downstream_key.as_ref().to_string(),
            merchant: merchant.as_ref().to_string(),
        };
        let (status, text) = self
            .http
            .send_json(Method::POST, "/v1/orders/cancel-by-idempotency-key", &ask)
            .await?;
        if status != StatusCode::OK {
            return Err(Self::refused(status, &text));
        }
        let answer: VoidAnswer = ProviderHttp::json(&text)?;
        answer
            .order
            .map(|order| Self::result(&order, false))
            .transpose()
    }

    async fn refund(
        &self,
        downstream_key: DownstreamKey,
        _merchant: &MerchantId,
        cobranca_id: &str,
        valor: Centavos,
    ) -> Result<GatewayRefund, GatewayError> {
        // The payment to refund is named by its id at the acquirer: read from the order, never
        // guessed from the order's.
        let order = self.order(cobranca_id).await?;
        let payment = order.transactions.payments.first().ok_or_else(|| {
            GatewayError::Unavailable(format!("pedido {cobranca_id} sem pagamento"))
        })?;
        let ask = RefundAsk {
            transactions: vec![RefundOf {
                id: payment.id.clone(),
                amount: valor.as_reais(),
            }],
        };
        let path = format!("/v1/orders/{cobranca_id}/refund");
        let (status, text) = self
            .http
            .send(
                self.http
                    .keyed(Method::POST, &path, downstream_key.as_ref())
                    .json(&ask),
            )
            .await?;
        if status != StatusCode::CREATED && status != StatusCode::OK {
            return Err(Self::refused(status, &text));
        }
        let order: WireOrder = ProviderHttp::json(&text)?;
        order
            .transactions
            .refunds
            .iter()
            .find(|r| r.reference_id == downstream_key.as_ref())
            .map(|r| r.result(status == StatusCode::CREATED))
            .ok_or_else(|| {
                GatewayError::Unavailable(format!(
                    "o adquirente não listou o estorno pedido no pedido {cobranca_id}"
                ))
            })
    }
}
