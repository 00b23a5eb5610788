//! The gateway simulator's ledger as the QA-only admin route shows it: its charges and its refunds.

use super::*;

/// One charge in the gateway's ledger (admin route).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LedgerEntry {
    /// The gateway's charge id.
    pub cobranca_id: String,
    /// Key derived from (merchant, idempotency key); unique.
    pub downstream_key: String,
    /// Merchant charged for.
    pub merchant: String,
    /// Amount in centavos.
    pub valor: i64,
    /// `aprovado` or `recusado`.
    pub status: &'static str,
    /// Decline reason, if declined.
    pub motivo: Option<String>,
    /// Execution time, epoch ms.
    pub criado_em_ms: Millis,
    /// The plan charged (`debito`, `credito`, `voucher`, `credito:<n>:<loja|emissor>`), when
    /// the request named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plano: Option<String>,
    /// An authorization's state at the gateway (`pendente`, `capturada`, `desfeita`,
    /// `expirada`); absent for a charge captured at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub captura: Option<&'static str>,
}

impl From<&LedgerRow> for LedgerEntry {
    fn from(r: &LedgerRow) -> Self {
        Self {
            cobranca_id: r.cobranca_id.clone(),
            downstream_key: r.downstream_key.clone(),
            merchant: r.merchant.to_string(),
            valor: r.valor.get(),
            status: r.status.as_str(),
            motivo: r.motivo.clone(),
            criado_em_ms: r.created_at,
            plano: r.plano.map(|p| p.as_stored()),
            captura: r.captura.map(CaptureState::as_str),
        }
    }
}

/// One refund in the gateway's ledger (admin route).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RefundLedgerEntry {
    /// The gateway's refund id.
    pub estorno_id: String,
    /// Key derived from (merchant, idempotency key) in the refund namespace; unique.
    pub downstream_key: String,
    /// The charge paid back.
    pub cobranca_id: String,
    /// Merchant.
    pub merchant: String,
    /// Amount in centavos.
    pub valor: i64,
    /// `aprovado` (paid back) or `recusado`.
    pub status: &'static str,
    /// Decline reason, if declined.
    pub motivo: Option<String>,
    /// Execution time, epoch ms.
    pub criado_em_ms: Millis,
}

impl From<&RefundLedgerRow> for RefundLedgerEntry {
    fn from(r: &RefundLedgerRow) -> Self {
        Self {
            estorno_id: r.estorno_id.clone(),
            downstream_key: r.downstream_key.clone(),
            cobranca_id: r.cobranca_id.clone(),
            merchant: r.merchant.to_string(),
            valor: r.valor.get(),
            status: r.status.as_str(),
            motivo: r.motivo.clone(),
            criado_em_ms: r.created_at,
        }
    }
}

/// The gateway ledger: one row per real charge, one per real refund.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Ledger {
    /// Number of charges.
    pub total: usize,
    /// Charges, oldest first.
    pub cobrancas: Vec<LedgerEntry>,
    /// Refunds, oldest first.
    pub estornos: Vec<RefundLedgerEntry>,
}

impl Ledger {
    /// Every charge and refund a gateway simulator's ledger holds, oldest first.
    pub async fn read(
        ledger: &dyn crate::gateway::simulator::SimulatorLedger,
    ) -> crate::store::StoreResult<Self> {
        let cobrancas: Vec<LedgerEntry> = ledger.ledger().await?.iter().map(From::from).collect();
        let estornos = ledger
            .refund_ledger()
            .await?
            .iter()
            .map(From::from)
            .collect();
        Ok(Self {
            total: cobrancas.len(),
            cobrancas,
            estornos,
        })
    }
}
