//! Cards at the card machine: an order per key, written with its key's answer in one transaction
//! ([`Awaiting::finish_awaited`]); what the provider later says of it is applied once
//! ([`MachineStore::settle_machine`]): a paid order becomes a payment in the same transaction.

use super::*;
use crate::domain::{CardPlan, MachineId, MachineStatus};

/// A card-machine payment as it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineOrder {
    /// What it stores as every resource paid later does (its id, key, amount, request's words).
    pub head: AwaitedHead,
    /// The provider's order id.
    pub order_id: String,
    /// The machine it was sent to.
    pub maquininha: MachineId,
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
}

fn plan(what: &str, stored: Option<String>) -> StoreResult<Option<CardPlan>> {
    stored
        .map(|p| CardPlan::parse_stored(&p).map_err(|e| corrupt(what, e)))
        .transpose()
}

impl AwaitedRecord for MachineOrder {
    const TABLE: &'static str = "machine_orders";
    const PROVIDER_ID: &'static str = "order_id";

    fn head(&self) -> &AwaitedHead {
        &self.head
    }

    fn provider_id(&self) -> &str {
        &self.order_id
    }

    fn own_cells(&self) -> Vec<(&'static str, Cell)> {
        vec![
            ("order_id", Cell::text(&self.order_id)),
            ("maquininha", Cell::text(self.maquininha.as_ref())),
            ("plano", Cell::opt_text(self.plano.map(|p| p.as_stored()))),
            ("status", Cell::text(self.status.as_str())),
            ("estado", Cell::text(&self.estado)),
            ("motivo", Cell::opt_text(self.motivo.as_ref())),
            (
                "plano_pago",
                Cell::opt_text(self.plano_pago.map(|p| p.as_stored())),
            ),
        ]
    }

    fn read_own(head: AwaitedHead, r: &StoredRow) -> StoreResult<Self> {
        Ok(MachineOrder {
            head,
            order_id: r.text("order_id")?,
            maquininha: r.parsed("maquininha", |m| {
                MachineId::parse(m).ok_or("maquininha inválida")
            })?,
            plano: plan("plano", r.opt_text("plano")?)?,
            status: r.parsed("status", MachineStatus::parse)?,
            estado: r.text("estado")?,
            motivo: r.opt_text("motivo")?,
            plano_pago: plan("plano_pago", r.opt_text("plano_pago")?)?,
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
pub trait MachineStore: AwaitedStore {
    /// Applies what the provider says to an order still `aguardando` (a final status ends it;
    /// `aguardando` only follows the provider's word); an `aprovado` one becomes a payment
    /// (`meio` `maquininha`) in the same transaction. True when something changed.
    async fn settle_machine(&self, order_id: &str, update: &MachineUpdate) -> StoreResult<bool>;
    /// Orders still waiting, least recently changed first, at most `limit`.
    async fn machines_waiting(&self, limit: usize) -> StoreResult<Vec<MachineOrder>> {
        let filter = "status = 'aguardando' ORDER BY updated_at, id LIMIT $1";
        self.awaited_where(filter.into(), vec![Cell::int(limit as i64)])
            .await
    }
}
