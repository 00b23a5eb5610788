//! The card machine: `POST /pagamentos` naming a `"maquininha"`, under an idempotency key, run by
//! the same runner as every operation (`crate::idempotency`), and the settlement that follows.
//!
//! 1. **Order** ([`Maquininha`], an [`Operation`]): `POST /v1/orders` at the machine's provider
//!    under an `X-Idempotency-Key` derived from (merchant, key), so a retry or a takeover after a
//!    crash gets the same order back, never a second one. The order and its first answer,
//!    **201 `aguardando`**, are written in one fenced transaction; every replay repeats those
//!    bytes.
//! 2. **Settle** ([`MachineSettler`]): a signed notification or the poll reads the order back
//!    from the provider (a notification's body is never trusted) and applies it once: paid, it
//!    becomes a payment in the same transaction; declined, cancelled or expired, it is closed. The
//!    cashier's cancel asks the provider, which cancels only an order the machine has not taken:
//!    once a card can be presented only the machine ends it, and the answer says so instead of
//!    "cancelado".
//! 3. **Read**: `GET /pagamentos/{id}` gives the order's state now (and can wait for a change).

mod provider;
mod settle;

pub use provider::{
    CancelAnswer, HttpMachineProvider, MachineProvider, Order, OrderState, ProviderError,
};
pub use settle::{MachinePoll, MachineSettler, NotificationVerifier};

use crate::awaited::{self, Awaited, PaidLater, Parts};
use crate::clock::Millis;
use crate::domain::{
    FieldError, IdempotencyKey, KeyOperation, MachineRequest, MachineStatus, MerchantId, OrderKey,
    PaymentAsk,
};
use crate::error::{ApiError, Result};
use crate::idempotency::{Completed, Held, Keyed, Recovery};
use crate::schema::MachinePaymentBody;
use crate::store::{AwaitedHead, MachineOrder, MachineStore};

impl From<ProviderError> for ApiError {
    fn from(e: ProviderError) -> Self {
        ApiError::GatewayUnavailable(e.to_string())
    }
}

impl awaited::Refusal for ProviderError {
    fn refused(&self) -> Option<&str> {
        match self {
            ProviderError::Refused(detail) => Some(detail),
            ProviderError::Unavailable(_) => None,
        }
    }
}

/// The card-machine operation.
#[derive(Debug)]
pub struct Maquininha {
    parts: Parts<dyn MachineStore, dyn MachineProvider>,
}

impl Maquininha {
    /// The operation on these parts.
    pub fn new(parts: Parts<dyn MachineStore, dyn MachineProvider>) -> Self {
        Self { parts }
    }

    /// Validates a card-machine body and fingerprints it. Nothing is stored for a request that
    /// fails here.
    pub fn prepare(
        merchant: MerchantId,
        key: IdempotencyKey,
        body: serde_json::Value,
    ) -> Result<Keyed<MachineRequest>> {
        let request = MachineRequest::from_json(&body).map_err(ApiError::Validation)?;
        Ok(Keyed::new(merchant, key, "/pagamentos", &body, request))
    }

    /// The key's order at the provider: made now, or, for a key used before, the one it made.
    async fn order_for(
        &self,
        held: &Held<'_>,
        request: &MachineRequest,
    ) -> std::result::Result<Order, ProviderError> {
        let key = OrderKey::derive(held.merchant, held.key);
        self.parts
            .provider
            .create(
                &key,
                &request.maquininha,
                request.ask.valor,
                request.plano,
                // The reference the provider keeps is the order key itself: the same for every
                // retry of the request, and within its character set.
                key.as_ref(),
                request.ask.descricao.as_deref(),
            )
            .await
    }

    /// The order as stored, from what the provider answered and what the request adds.
    fn order_of(&self, held: &Held<'_>, request: &MachineRequest, order: &Order) -> MachineOrder {
        MachineOrder {
            head: AwaitedHead::new(
                held.merchant,
                held.key,
                &request.ask,
                self.parts.store.now_ms(),
            ),
            order_id: order.id.clone(),
            maquininha: request.maquininha.clone(),
            plano: request.plano,
            status: MachineStatus::Aguardando,
            estado: order.status.clone(),
            motivo: None,
            plano_pago: None,
        }
    }
}

impl Awaited for MachineOrder {
    const WHAT: &'static str = "card machine order";

    fn body(&self) -> Vec<u8> {
        MachinePaymentBody::bytes_of(self)
    }

    fn as_first(&self) -> Self {
        MachineOrder {
            status: MachineStatus::Aguardando,
            motivo: None,
            plano_pago: None,
            ..self.clone()
        }
    }

    fn still_payable(&self) -> Option<ApiError> {
        (self.status == MachineStatus::Aguardando).then_some(ApiError::MachineWaiting)
    }
}

impl awaited::PaidLaterRequest for MachineRequest {
    fn ask(&self) -> &PaymentAsk {
        &self.ask
    }

    fn from_json(body: &serde_json::Value) -> std::result::Result<Self, Vec<FieldError>> {
        MachineRequest::from_json(body)
    }
}

#[async_trait::async_trait]
impl PaidLater for Maquininha {
    type Request = MachineRequest;
    type Resource = MachineOrder;
    type Made = Order;
    type Error = ProviderError;
    type Store = dyn MachineStore;
    type Provider = dyn MachineProvider;
    const OPERATION: KeyOperation = KeyOperation::named("maquininha");
    const REFUSAL_FIELD: &'static str = "maquininha";
    const REFUSED: &'static str = "a maquininha recusou o pedido";

    fn parts(&self) -> &Parts<dyn MachineStore, dyn MachineProvider> {
        &self.parts
    }

    async fn ask_provider(
        &self,
        held: &Held<'_>,
        request: &MachineRequest,
    ) -> std::result::Result<Order, ProviderError> {
        self.order_for(held, request).await
    }

    fn stored(
        &self,
        held: &Held<'_>,
        request: &MachineRequest,
        order: Order,
    ) -> Result<MachineOrder> {
        Ok(self.order_of(held, request, &order))
    }

    /// Settled by asking the provider again under the key's order key: it answers the order it
    /// made (stored the way the request path stores it) and makes none twice. Refused, it made
    /// none: the key is released for the client's retry, or burned once too old. An order that
    /// nobody waits for any more (the key past its retention) and that no machine has taken is
    /// cancelled at the provider once stored: it would only surprise the next customer.
    async fn recover_key(&self, held: &Held<'_>, created_at: Millis) -> Result<Recovery> {
        let Some(request) = awaited::kept_request::<MachineRequest>(held).await? else {
            return Ok(Recovery::Released);
        };
        let stale = held.now_ms() - created_at > self.parts.key_retention_ms;
        let order = match self.order_for(held, &request).await {
            Ok(order) => order,
            Err(ProviderError::Refused(_)) if stale => {
                held.mark_cancelled().await?;
                return Ok(Recovery::Cancelled);
            }
            Err(ProviderError::Refused(_)) => {
                held.release().await?;
                return Ok(Recovery::Released);
            }
            Err(e) => return Err(e.into()),
        };
        let stored = self.order_of(held, &request, &order);
        let done = awaited::complete(held, &*self.parts.store, stored.clone()).await?;
        let recovery = awaited::recovered(held, &done, &stored);
        if matches!(done, Completed::First { .. }) && stale && order.status == "created" {
            let cancel = OrderKey::derive_cancel(held.merchant, held.key);
            if let Err(e) = self.parts.provider.cancel(&order.id, &cancel).await {
                tracing::warn!(order = %order.id, error = %e, "recovery: could not cancel a stale order; it expires at the provider");
            }
        }
        Ok(recovery)
    }
}
