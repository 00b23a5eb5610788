//! Cards at the card machine: an order per key, written with its key's answer in one transaction
//! ([`MachineStore::finish_machine`]); what the provider later says of it is applied once
//! ([`MachineStore::settle_machine`]): a paid order becomes a payment in the same transaction.

use super::*;
use crate::domain::{CardPlan, MachineId, MachineStatus};

/// The columns of `machine_orders`, in the order both stores read and write them.
pub(crate) const MACHINE_COLUMNS: &str = "id, merchant, idempotency_key, order_id, maquininha, valor, plano, status, estado, motivo, plano_pago, descricao, referencia, terminal, created_at, updated_at";

/// A card-machine payment as it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineOrder {
    /// `pay_…` (shares the payments' id space and routes).
    pub id: PaymentId,
    /// Owner.
    pub merchant: MerchantId,
    /// The key that made it.
    pub idempotency_key: IdempotencyKey,
    /// The provider's order id.
    pub order_id: String,
    /// The machine it was sent to.
    pub maquininha: MachineId,
    /// Amount asked.
    pub valor: Centavos,
    /// The plan offered first at the machine (`None`: the customer chose there).
    pub plano: Option<CardPlan>,
    /// Where it stands.
    pub status: MachineStatus,
    /// The provider's own word for it (`created`, `at_terminal`, `processed`, …), for the screen.
    pub estado: String,
    /// Why it was declined or cancelled (the provider's `status_detail`).
    pub motivo: Option<String>,
    /// How the customer paid, once paid.
    pub plano_pago: Option<CardPlan>,
    /// Free text from the request.
    pub descricao: Option<String>,
    /// Client reference from the request.
    pub referencia: Option<String>,
    /// The till that sent it.
    pub terminal: Option<TerminalId>,
    /// Creation time (store clock).
    pub created_at: Millis,
    /// Last change (store clock).
    pub updated_at: Millis,
}

/// The columns of a `machine_orders` row as a driver reads them.
#[derive(Debug)]
pub(crate) struct MachineColumns {
    pub(crate) id: String,
    pub(crate) merchant: String,
    pub(crate) idempotency_key: String,
    pub(crate) order_id: String,
    pub(crate) maquininha: String,
    pub(crate) valor: i64,
    pub(crate) plano: Option<String>,
    pub(crate) status: String,
    pub(crate) estado: String,
    pub(crate) motivo: Option<String>,
    pub(crate) plano_pago: Option<String>,
    pub(crate) descricao: Option<String>,
    pub(crate) referencia: Option<String>,
    pub(crate) terminal: Option<String>,
    pub(crate) created_at: Millis,
    pub(crate) updated_at: Millis,
}

fn plan(what: &str, stored: Option<String>) -> StoreResult<Option<CardPlan>> {
    stored
        .map(|p| CardPlan::parse_stored(&p).map_err(|e| corrupt(what, e)))
        .transpose()
}

impl MachineColumns {
    pub(crate) fn parse(self) -> StoreResult<MachineOrder> {
        Ok(MachineOrder {
            id: PaymentId::from_stored(self.id),
            merchant: MerchantId::parse(&self.merchant).map_err(|e| corrupt("merchant", e))?,
            idempotency_key: IdempotencyKey::parse(self.idempotency_key.as_bytes())
                .map_err(|e| corrupt("idempotency_key", e))?,
            order_id: self.order_id,
            maquininha: MachineId::parse(&self.maquininha)
                .ok_or_else(|| corrupt("maquininha", &self.maquininha))?,
            valor: Centavos::new(self.valor).map_err(|e| corrupt("valor", e))?,
            plano: plan("plano", self.plano)?,
            status: MachineStatus::parse(&self.status).map_err(|e| corrupt("status", e))?,
            estado: self.estado,
            motivo: self.motivo,
            plano_pago: plan("plano_pago", self.plano_pago)?,
            descricao: self.descricao,
            referencia: self.referencia,
            terminal: self
                .terminal
                .map(|t| TerminalId::parse(&t).map_err(|e| corrupt("terminal", e)))
                .transpose()?,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// What the provider says of an order now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineUpdate {
    /// `aguardando` while a card may still pay it; otherwise how it ended.
    pub status: MachineStatus,
    /// The provider's own word for it.
    pub estado: String,
    /// Why it was declined or cancelled.
    pub motivo: Option<String>,
    /// How it was paid, when it was.
    pub plano_pago: Option<CardPlan>,
}

/// Card-machine payments.
#[async_trait::async_trait]
pub trait MachineStore: Clocked {
    /// Stores the order and the first answer if `fence` still holds the key.
    async fn finish_machine(
        &self,
        completion: AwaitedCompletion<MachineOrder>,
    ) -> StoreResult<FinishOutcome>;
    /// An order by payment id, for its merchant.
    async fn machine_order(
        &self,
        merchant: &MerchantId,
        id: &PaymentId,
    ) -> StoreResult<Option<MachineOrder>>;
    /// The order of a provider order id (any merchant: a notification names only the order),
    /// with the fingerprint of the request that made it.
    async fn machine_by_order(
        &self,
        order_id: &str,
    ) -> StoreResult<Option<(MachineOrder, Option<Fingerprint>)>>;
    /// A merchant's orders whose `field` is `value`, oldest first.
    async fn machine_by(
        &self,
        merchant: &MerchantId,
        by: Lookup<'_>,
    ) -> StoreResult<Vec<MachineOrder>>;
    /// Applies what the provider says to an order still `aguardando` (a final status ends it;
    /// `aguardando` only follows the provider's word); an `aprovado` one becomes a payment
    /// (`meio` `maquininha`) in the same transaction. True when something changed.
    async fn settle_machine(&self, order_id: &str, update: &MachineUpdate) -> StoreResult<bool>;
    /// Orders still waiting, least recently changed first, at most `limit`.
    async fn machines_waiting(&self, limit: usize) -> StoreResult<Vec<MachineOrder>>;
}
