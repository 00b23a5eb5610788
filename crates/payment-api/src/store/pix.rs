//! Pix charges and the Pix received for them. A charge is written with its key's answer in one
//! transaction ([`Awaiting::finish_awaited`]); a Pix received is recorded under its end-to-end id
//! (`PRIMARY KEY`) in the same transaction as its effect on the charge
//! ([`PixStore::record_received`]), so a webhook delivered three times and a poll that finds the
//! same Pix apply it once.

use super::*;
use crate::domain::{PixStatus, Txid};

/// A Pix charge as it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PixCharge {
    /// What it stores as every resource paid later does (its id, key, amount, request's words).
    pub head: AwaitedHead,
    /// The provider's charge id.
    pub txid: Txid,
    /// Where it stands.
    pub status: PixStatus,
    /// The BR Code ("Pix copia e cola"), also drawn as the QR.
    pub copia_e_cola: String,
    /// The provider's payload URL for the charge.
    pub location: String,
    /// When it expires (provider's creation time + its `expiracao`).
    pub expira_em: Millis,
    /// The end-to-end id of the Pix that paid it.
    pub e2eid: Option<String>,
    /// When that Pix was paid (provider's `horario`).
    pub pago_em: Option<Millis>,
    /// What that Pix carried, in centavos.
    pub valor_recebido: Option<i64>,
}

impl AwaitedRecord for PixCharge {
    const TABLE: &'static str = "pix_charges";
    const PROVIDER_ID: &'static str = "txid";

    fn head(&self) -> &AwaitedHead {
        &self.head
    }

    fn provider_id(&self) -> &str {
        self.txid.as_ref()
    }

    fn own_cells(&self) -> Vec<(&'static str, Cell)> {
        vec![
            ("txid", Cell::text(self.txid.as_ref())),
            ("status", Cell::text(self.status.as_str())),
            ("copia_e_cola", Cell::text(&self.copia_e_cola)),
            ("location", Cell::text(&self.location)),
            ("expira_em", Cell::int(self.expira_em)),
            ("e2eid", Cell::opt_text(self.e2eid.as_ref())),
            ("pago_em", Cell::Int(self.pago_em)),
            ("valor_recebido", Cell::Int(self.valor_recebido)),
        ]
    }

    fn read_own(head: AwaitedHead, r: &StoredRow) -> StoreResult<Self> {
        Ok(PixCharge {
            head,
            txid: r.parsed("txid", |t| Txid::parse(t).ok_or("txid inválido"))?,
            status: r.parsed("status", PixStatus::parse)?,
            copia_e_cola: r.text("copia_e_cola")?,
            location: r.text("location")?,
            expira_em: r.int("expira_em")?,
            e2eid: r.opt_text("e2eid")?,
            pago_em: r.opt_int("pago_em")?,
            valor_recebido: r.opt_int("valor_recebido")?,
        })
    }
}

/// How a Pix received was learned of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A signed webhook (read back from the provider before it is recorded).
    Webhook,
    /// A poll of the provider.
    Consulta,
}

impl Via {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Via::Webhook => "webhook",
            Via::Consulta => "consulta",
        }
    }
}

/// A Pix the provider says was received for a txid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PixReceived {
    /// Its end-to-end id (unique in the whole Pix system).
    pub end_to_end_id: String,
    /// The charge it paid.
    pub txid: Txid,
    /// What it carried, in centavos.
    pub valor: i64,
    /// When it was paid (provider clock).
    pub horario: Millis,
    /// How it was learned of.
    pub via: Via,
}

/// Pix charges, and the Pix received for them.
#[async_trait::async_trait]
pub trait PixStore: AwaitedStore {
    /// Records a Pix received, once per end-to-end id, and in the same transaction moves its
    /// charge: `aguardando` → `aprovado`; `expirado` or `cancelado` →
    /// `recebido_apos_cancelamento`. A Pix seen before its charge was stored is recorded with
    /// no charge and applied to it when seen again. True when this call recorded or applied it
    /// (false: both were done already).
    async fn record_received(&self, received: &PixReceived) -> StoreResult<bool>;
    /// Moves a charge still `aguardando` to `to` (`expirado` or `cancelado`); false when it was
    /// no longer waiting.
    async fn close_pix(&self, txid: &Txid, to: PixStatus) -> StoreResult<bool>;
    /// Charges to ask the provider about: every one waiting, and those closed unpaid since
    /// `closed_since` (a customer may still pay them). At most `limit`, in `(updated_at, id)`
    /// order from just after `after` (a page: the poller goes through all of them page by page,
    /// so no charge waits behind more than a page of others).
    async fn pix_to_poll(
        &self,
        closed_since: Millis,
        after: Option<(Millis, String)>,
        limit: usize,
    ) -> StoreResult<Vec<PixCharge>> {
        let (after_at, after_id) = after.unwrap_or((Millis::MIN, String::new()));
        let filter = "(status = 'aguardando'
                       OR (status IN ('expirado', 'cancelado') AND updated_at >= $1))
                      AND (updated_at, id) > ($2, $3)
                      ORDER BY updated_at, id LIMIT $4";
        let params = vec![
            Cell::int(closed_since),
            Cell::int(after_at),
            Cell::text(after_id),
            Cell::int(limit as i64),
        ];
        self.awaited_where(filter.into(), params).await
    }
}
