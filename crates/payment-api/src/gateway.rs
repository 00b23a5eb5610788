//! The card gateway the server charges through, and the bundled simulator with its ledger.

use crate::domain::{CardToken, Centavos, DownstreamKey, MerchantId, PaymentStatus};
use crate::error::StoreError;
use crate::store::{LedgerCharge, LedgerRefund, LedgerRow, RefundLedgerRow, Store};
use std::sync::Arc;
use std::time::Duration;

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
    /// The gateway could not be asked (the simulator's store failed).
    #[error(transparent)]
    Unavailable(#[from] StoreError),
}

/// A card gateway. Calls carrying the same downstream key charge at most once.
#[async_trait::async_trait]
pub trait Gateway: Send + Sync + std::fmt::Debug + 'static {
    /// Charges (or returns the earlier result for) `downstream_key`; refused with
    /// [`GatewayError::Voided`] once the key was voided.
    async fn charge(
        &self,
        downstream_key: DownstreamKey,
        merchant: &MerchantId,
        valor: Centavos,
        cartao: CardToken,
    ) -> Result<GatewayResult, GatewayError>;

    /// The charge made under `downstream_key`, if any (asks; never charges).
    async fn find_charge(
        &self,
        downstream_key: &DownstreamKey,
    ) -> Result<Option<GatewayResult>, StoreError>;

    /// Voids `downstream_key` so that it can never charge (Square's cancel by idempotency key):
    /// `Some(charge)` when it had charged already, `None` once it is void.
    async fn void(
        &self,
        downstream_key: &DownstreamKey,
        merchant: &MerchantId,
    ) -> Result<Option<GatewayResult>, StoreError>;

    /// Pays `valor` of the charge `cobranca_id` back (or returns the earlier result for
    /// `downstream_key`). The server has already held the amount against the payment.
    async fn refund(
        &self,
        downstream_key: DownstreamKey,
        merchant: &MerchantId,
        cobranca_id: &str,
        valor: Centavos,
    ) -> Result<GatewayRefund, StoreError>;
}

/// The bundled simulator: decides from the test card token and records one ledger row per
/// downstream key in the store's database.
#[derive(Debug)]
pub struct SimulatedGateway {
    store: Arc<dyn Store>,
    slow: Duration,
}

impl SimulatedGateway {
    /// A simulator writing its ledger to `store`; `tok_lento` takes `slow` before it answers.
    pub fn new(store: Arc<dyn Store>, slow: Duration) -> Self {
        Self { store, slow }
    }
}

#[async_trait::async_trait]
impl Gateway for SimulatedGateway {
    async fn charge(
        &self,
        downstream_key: DownstreamKey,
        merchant: &MerchantId,
        valor: Centavos,
        cartao: CardToken,
    ) -> Result<GatewayResult, GatewayError> {
        let (status, motivo) = match cartao {
            CardToken::Aprovado | CardToken::EstornoRecusado | CardToken::EstornoLento => {
                (PaymentStatus::Aprovado, None)
            }
            CardToken::Lento => {
                tokio::time::sleep(self.slow).await;
                (PaymentStatus::Aprovado, None)
            }
            CardToken::Recusado => (PaymentStatus::Recusado, Some("cartao_recusado")),
            CardToken::SaldoInsuficiente => (PaymentStatus::Recusado, Some("saldo_insuficiente")),
        };
        let charged = self
            .store
            .ledger_charge(LedgerCharge {
                downstream_key,
                merchant: merchant.clone(),
                valor,
                status,
                motivo,
                cartao: cartao.as_str(),
            })
            .await?
            .ok_or(GatewayError::Voided)?;
        Ok(GatewayResult::from_ledger(charged.row, charged.fresh))
    }

    async fn find_charge(
        &self,
        downstream_key: &DownstreamKey,
    ) -> Result<Option<GatewayResult>, StoreError> {
        Ok(self
            .store
            .ledger_row(downstream_key)
            .await?
            .map(|row| GatewayResult::from_ledger(row, false)))
    }

    async fn void(
        &self,
        downstream_key: &DownstreamKey,
        merchant: &MerchantId,
    ) -> Result<Option<GatewayResult>, StoreError> {
        Ok(self
            .store
            .ledger_void(downstream_key, merchant)
            .await?
            .map(|row| GatewayResult::from_ledger(row, false)))
    }

    async fn refund(
        &self,
        downstream_key: DownstreamKey,
        merchant: &MerchantId,
        cobranca_id: &str,
        valor: Centavos,
    ) -> Result<GatewayRefund, StoreError> {
        // A refund executed before is answered as it was, without its card's delay.
        if let Some(row) = self.store.refund_ledger_row(&downstream_key).await? {
            return Ok(GatewayRefund::from_ledger(row, false));
        }
        let card = self.store.ledger_card(cobranca_id).await?;
        let card = card.as_deref().and_then(|c| CardToken::parse(c).ok());
        let (status, motivo) = match card {
            Some(CardToken::EstornoRecusado) => (PaymentStatus::Recusado, Some("estorno_recusado")),
            Some(CardToken::EstornoLento) => {
                tokio::time::sleep(self.slow).await;
                (PaymentStatus::Aprovado, None)
            }
            _ => (PaymentStatus::Aprovado, None),
        };
        let done = self
            .store
            .ledger_refund(LedgerRefund {
                downstream_key,
                cobranca_id: cobranca_id.to_string(),
                merchant: merchant.clone(),
                valor,
                status,
                motivo,
            })
            .await?;
        Ok(GatewayRefund::from_ledger(done.row, done.fresh))
    }
}
