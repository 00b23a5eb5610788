//! Pix charges and the Pix received for them. A charge is written with its key's answer in one
//! transaction ([`PixStore::finish_pix`]); a Pix received is recorded under its end-to-end id
//! (`PRIMARY KEY`) in the same transaction as its effect on the charge
//! ([`PixStore::record_received`]), so a webhook delivered three times and a poll that finds the
//! same Pix apply it once.

use super::*;
use crate::domain::{PixStatus, Txid};

/// The columns of `pix_charges`, in the order both stores read and write them.
pub(crate) const PIX_COLUMNS: &str = "id, merchant, idempotency_key, txid, valor, status, copia_e_cola, location, expira_em, e2eid, pago_em, valor_recebido, descricao, referencia, terminal, created_at, updated_at";

/// A Pix charge as it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PixCharge {
    /// `pay_…` (Pix charges share the payments' id space and routes).
    pub id: PaymentId,
    /// Owner.
    pub merchant: MerchantId,
    /// The key that created it.
    pub idempotency_key: IdempotencyKey,
    /// The provider's charge id.
    pub txid: Txid,
    /// Amount asked.
    pub valor: Centavos,
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

/// The columns of a `pix_charges` row as a driver reads them.
#[derive(Debug)]
pub(crate) struct PixColumns {
    pub(crate) id: String,
    pub(crate) merchant: String,
    pub(crate) idempotency_key: String,
    pub(crate) txid: String,
    pub(crate) valor: i64,
    pub(crate) status: String,
    pub(crate) copia_e_cola: String,
    pub(crate) location: String,
    pub(crate) expira_em: Millis,
    pub(crate) e2eid: Option<String>,
    pub(crate) pago_em: Option<Millis>,
    pub(crate) valor_recebido: Option<i64>,
    pub(crate) descricao: Option<String>,
    pub(crate) referencia: Option<String>,
    pub(crate) terminal: Option<String>,
    pub(crate) created_at: Millis,
    pub(crate) updated_at: Millis,
}

impl PixColumns {
    pub(crate) fn parse(self) -> StoreResult<PixCharge> {
        Ok(PixCharge {
            id: PaymentId::from_stored(self.id),
            merchant: MerchantId::parse(&self.merchant).map_err(|e| corrupt("merchant", e))?,
            idempotency_key: IdempotencyKey::parse(self.idempotency_key.as_bytes())
                .map_err(|e| corrupt("idempotency_key", e))?,
            txid: Txid::parse(&self.txid).ok_or_else(|| corrupt("txid", &self.txid))?,
            valor: Centavos::new(self.valor).map_err(|e| corrupt("valor", e))?,
            status: PixStatus::parse(&self.status).map_err(|e| corrupt("status", e))?,
            copia_e_cola: self.copia_e_cola,
            location: self.location,
            expira_em: self.expira_em,
            e2eid: self.e2eid,
            pago_em: self.pago_em,
            valor_recebido: self.valor_recebido,
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
pub trait PixStore: Clocked {
    /// Stores the charge and the first answer if `fence` still holds the key.
    async fn finish_pix(
        &self,
        completion: AwaitedCompletion<PixCharge>,
    ) -> StoreResult<FinishOutcome>;
    /// A charge by id, for its merchant.
    async fn pix_charge(
        &self,
        merchant: &MerchantId,
        id: &PaymentId,
    ) -> StoreResult<Option<PixCharge>>;
    /// The charge of a txid (any merchant: a webhook names only the txid), with the fingerprint
    /// of the request that made it.
    async fn pix_by_txid(
        &self,
        txid: &Txid,
    ) -> StoreResult<Option<(PixCharge, Option<Fingerprint>)>>;
    /// A merchant's charges whose `field` is `value`, oldest first.
    async fn pix_by(&self, merchant: &MerchantId, by: Lookup<'_>) -> StoreResult<Vec<PixCharge>>;
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
    ) -> StoreResult<Vec<PixCharge>>;
}
