//! The card gateway the server charges through ([`Gateway`]), and the bundled simulator
//! ([`simulator::SimulatedGateway`]) with its own ledger.

pub mod http;
pub mod online_orders;
pub mod simulator;

use crate::clock::Millis;
use crate::domain::{
    CaptureState, CaptureStep, CardPlan, CardToken, Centavos, DownstreamKey, Fingerprint,
    MerchantId, TerminalId,
};
use simulator::{LedgerRow, RefundLedgerRow};

/// One charge as the server asks the gateway for it.
#[derive(Debug, Clone)]
pub struct ChargeOrder {
    /// The amount.
    pub valor: Centavos,
    /// The card.
    pub cartao: CardToken,
    /// The card method and installments (`None`: crédito à vista).
    pub plano: Option<CardPlan>,
    /// False: authorize only (captured or undone later).
    pub captura: bool,
    /// What the merchant keeps with the charge at the gateway.
    pub metadata: ChargeMetadata,
}

/// What the merchant tells the gateway about a charge: the gateway keeps it with the charge and
/// gives it back with it, as card gateways keep a charge's `metadata` (Stripe) or
/// `merchantReference` and `metadata` (Adyen). The server sends what its payment adds to the
/// charge and the fingerprint of the request that made it, so a charge found later without its
/// request still becomes the payment that request made, and its key still answers that request:
/// the server's claim of a key is a relaxed write, which a power cut can take while the gateway,
/// a system of its own, keeps the charge; a cancellation by key then finds the charge with no
/// request beside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChargeMetadata {
    /// The fingerprint of the request that charged.
    pub fingerprint: Option<Fingerprint>,
    /// The client's own reference.
    pub referencia: Option<String>,
    /// The payment's description.
    pub descricao: Option<String>,
    /// The till that sent it.
    pub terminal: Option<TerminalId>,
}

/// [`ChargeMetadata`] as a ledger keeps it: a JSON object of the fields that are set.
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct StoredMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    referencia: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    descricao: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    terminal: Option<String>,
}

impl ChargeMetadata {
    /// The JSON a ledger keeps; `None` when nothing is set.
    pub fn to_stored(&self) -> Option<String> {
        if *self == Self::default() {
            return None;
        }
        let stored = StoredMetadata {
            fingerprint: self.fingerprint.as_ref().map(|f| f.as_ref().to_string()),
            referencia: self.referencia.clone(),
            descricao: self.descricao.clone(),
            terminal: self.terminal.as_ref().map(|t| t.as_ref().to_string()),
        };
        Some(serde_json::to_string(&stored).expect("strings serialise"))
    }

    /// Reads back what [`ChargeMetadata::to_stored`] wrote (`None`: a charge kept without it).
    pub fn from_stored(stored: Option<&str>) -> Result<Self, String> {
        let Some(json) = stored else {
            return Ok(Self::default());
        };
        let s: StoredMetadata = serde_json::from_str(json).map_err(|e| e.to_string())?;
        Ok(Self {
            fingerprint: s.fingerprint.map(Fingerprint::from_stored),
            referencia: s.referencia,
            descricao: s.descricao,
            terminal: s
                .terminal
                .map(|t| TerminalId::parse(&t).map_err(|e| e.to_string()))
                .transpose()?,
        })
    }
}

/// What the gateway decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayResult {
    /// The gateway's charge id.
    pub cobranca_id: String,
    /// The amount charged.
    pub valor: Centavos,
    /// Approved, or declined with a reason code.
    pub decision: ChargeDecision,
    /// False when the gateway had charged this downstream key before and returned that charge.
    pub fresh: bool,
    /// The card method and installments charged, as the gateway recorded them.
    pub plano: Option<CardPlan>,
    /// An authorization (`captura: false`): where it stands; `None` for a charge captured at once.
    pub captura: Option<CaptureState>,
    /// When an authorization lapses at the gateway unless captured (store clock, epoch ms).
    pub autorizacao_expira_em: Option<Millis>,
    /// What the merchant kept with the charge.
    pub metadata: ChargeMetadata,
}

impl GatewayResult {
    /// The result a ledger row records.
    pub fn from_ledger(row: LedgerRow, fresh: bool) -> Self {
        Self {
            cobranca_id: row.cobranca_id,
            valor: row.valor,
            decision: match row.motivo {
                None => ChargeDecision::Aprovado,
                Some(m) => ChargeDecision::Recusado(m),
            },
            fresh,
            plano: row.plano,
            captura: row.captura,
            autorizacao_expira_em: row.captura_expira_em,
            metadata: row.metadata,
        }
    }
}

/// What the gateway decided for one charge: approval or decline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeDecision {
    /// Approved.
    Aprovado,
    /// Declined with a reason code.
    Recusado(String),
}

/// What the gateway decided for one refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayRefund {
    /// The gateway's refund id.
    pub estorno_id: String,
    /// Paid back, or declined with a reason code.
    pub decision: ChargeDecision,
    /// False when the gateway had executed this downstream key before and returned that refund.
    pub fresh: bool,
}

impl GatewayRefund {
    /// The result a refund ledger row records.
    pub fn from_ledger(row: RefundLedgerRow, fresh: bool) -> Self {
        Self {
            estorno_id: row.estorno_id,
            decision: match row.motivo {
                None => ChargeDecision::Aprovado,
                Some(m) => ChargeDecision::Recusado(m),
            },
            fresh,
        }
    }
}

/// Why a gateway call did not give a result.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The downstream key was voided: it never charges.
    #[error("a chave desta cobrança foi anulada no gateway")]
    Voided,
    /// The charge is no authorization (it was captured with its charge, or declined).
    #[error("esta cobrança não é uma autorização pendente de captura")]
    NotAnAuthorization,
    /// The gateway could not be asked, or did not answer: what it said, or why not.
    #[error("gateway indisponível: {0}")]
    Unavailable(String),
}

/// A card gateway. Calls carrying the same downstream key charge at most once.
#[async_trait::async_trait]
pub trait Gateway: Send + Sync + std::fmt::Debug + 'static {
    /// Charges (or returns the earlier result for, with the metadata it was made with)
    /// `downstream_key`; refused with [`GatewayError::Voided`] once the key was voided.
    /// `captura: false` only authorizes: the
    /// amount is held on the card until [`Gateway::settle_authorization`] captures or undoes it,
    /// or the hold lapses.
    async fn charge(
        &self,
        downstream_key: DownstreamKey,
        merchant: &MerchantId,
        order: ChargeOrder,
    ) -> Result<GatewayResult, GatewayError>;

    /// Captures or undoes the authorization `cobranca_id` (`None`: only reads it), and answers
    /// where it stands afterwards. The move is made once, from `pendente` only, and only in time:
    /// a capture after the authorization was undone or lapsed, or an undo after it was captured,
    /// changes nothing and answers the state it is in, so a capture and an undo never both take
    /// effect. Asked again, a step answers the same state (idempotent at the gateway).
    async fn settle_authorization(
        &self,
        cobranca_id: &str,
        step: Option<CaptureStep>,
    ) -> Result<CaptureState, GatewayError>;

    /// The charge made under `downstream_key`, if any (asks; never charges).
    async fn find_charge(
        &self,
        downstream_key: &DownstreamKey,
    ) -> Result<Option<GatewayResult>, GatewayError>;

    /// Voids `downstream_key` so that it can never charge (Square's cancel by idempotency key):
    /// `Some(charge)` when it had charged already, `None` once it is void.
    async fn void(
        &self,
        downstream_key: &DownstreamKey,
        merchant: &MerchantId,
    ) -> Result<Option<GatewayResult>, GatewayError>;

    /// Pays `valor` of the charge `cobranca_id` back (or returns the earlier result for
    /// `downstream_key`). The server has already held the amount against the payment.
    async fn refund(
        &self,
        downstream_key: DownstreamKey,
        merchant: &MerchantId,
        cobranca_id: &str,
        valor: Centavos,
    ) -> Result<GatewayRefund, GatewayError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charge_metadata_reads_back_what_it_stored_and_nothing_for_none() {
        let full = ChargeMetadata {
            fingerprint: Some(Fingerprint::from_stored("ab12".into())),
            referencia: Some("venda-1".into()),
            descricao: Some("café \"forte\"".into()),
            terminal: Some(TerminalId::parse("caixa-01").unwrap()),
        };
        let stored = full.to_stored().unwrap();
        assert_eq!(ChargeMetadata::from_stored(Some(&stored)), Ok(full));
        assert_eq!(ChargeMetadata::default().to_stored(), None);
        assert_eq!(
            ChargeMetadata::from_stored(None),
            Ok(ChargeMetadata::default())
        );
        let only_ref = ChargeMetadata {
            referencia: Some("r".into()),
            ..ChargeMetadata::default()
        };
        assert_eq!(
            only_ref.to_stored().as_deref(),
            Some(r#"{"referencia":"r"}"#)
        );
        assert!(ChargeMetadata::from_stored(Some(r#"{"terminal":"caixa 1"}"#)).is_err());
        assert!(ChargeMetadata::from_stored(Some("not json")).is_err());
    }
}
