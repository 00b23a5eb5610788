//! The card gateway the server charges through ([`Gateway`]), and the bundled simulator
//! ([`simulator::SimulatedGateway`]) with its own ledger.

pub mod simulator;

use crate::clock::Millis;
use crate::domain::{
    CaptureState, CaptureStep, CardPlan, CardToken, Centavos, DownstreamKey, MerchantId,
};
use simulator::{LedgerRow, RefundLedgerRow};

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
    /// Charges (or returns the earlier result for) `downstream_key`; refused with
    /// [`GatewayError::Voided`] once the key was voided. `captura: false` only authorizes: the
    /// amount is held on the card until [`Gateway::settle_authorization`] captures or undoes it,
    /// or the hold lapses.
    async fn charge(
        &self,
        downstream_key: DownstreamKey,
        merchant: &MerchantId,
        valor: Centavos,
        cartao: CardToken,
        plano: Option<CardPlan>,
        captura: bool,
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
