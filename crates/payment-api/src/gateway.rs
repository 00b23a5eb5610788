//! The card gateway the server charges through, and the bundled simulator with its ledger.

use crate::domain::{CardToken, Centavos, DownstreamKey, MerchantId, PaymentStatus};
use crate::error::StoreError;
use crate::store::{LedgerCharge, LedgerRow, Store};
use std::sync::Arc;
use std::time::Duration;

/// What the gateway decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayResult {
    /// The gateway's charge id.
    pub cobranca_id: String,
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

/// A card gateway. Calls carrying the same downstream key charge at most once.
#[async_trait::async_trait]
pub trait Gateway: Send + Sync + std::fmt::Debug + 'static {
    /// Charges (or returns the earlier result for) `downstream_key`.
    async fn charge(
        &self,
        downstream_key: DownstreamKey,
        merchant: &MerchantId,
        valor: Centavos,
        cartao: CardToken,
    ) -> Result<GatewayResult, StoreError>;
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
    ) -> Result<GatewayResult, StoreError> {
        let (status, motivo) = match cartao {
            CardToken::Aprovado => (PaymentStatus::Aprovado, None),
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
            })
            .await?;
        Ok(GatewayResult::from_ledger(charged.row, charged.fresh))
    }
}
