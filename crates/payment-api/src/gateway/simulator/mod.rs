//! The card gateway simulator: it decides from the test card token and records one ledger row
//! per downstream key in a ledger of its own ([`SimulatorLedger`], kept by a store's database but
//! read and written only here). A real gateway keeps its own; the server sees only [`Gateway`].

#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;

use super::{ChargeMetadata, ChargeOrder, Gateway, GatewayError, GatewayRefund, GatewayResult};
use crate::clock::Millis;
use crate::domain::{
    CaptureState, CaptureStep, CardMethod, CardPlan, CardToken, Centavos, DownstreamKey,
    MerchantId, PaymentStatus,
};
use crate::store::StoreError;
use crate::store::{corrupt, StoreResult};
use std::sync::Arc;
use std::time::Duration;

/// The ledger status of a void: the row that keeps a downstream key from ever charging. Listings
/// of charges leave these rows out.
pub(crate) const VOID_STATUS: &str = "anulado";

/// How a charge is found in the ledger.
#[derive(Debug, Clone, Copy)]
pub enum ChargeRef<'a> {
    /// By the downstream key it was made under.
    Key(&'a DownstreamKey),
    /// By the gateway's charge id.
    Id(&'a str),
}

impl<'a> ChargeRef<'a> {
    /// The ledger column it is found by, and the value.
    pub(crate) fn column(self) -> (&'static str, &'a str) {
        match self {
            ChargeRef::Key(k) => ("downstream_key", k.as_ref()),
            ChargeRef::Id(id) => ("cobranca_id", id),
        }
    }
}

/// What the gateway's ledger holds for a charge call.
#[derive(Debug, Clone)]
pub struct Charged {
    /// The one row for the downstream key.
    pub row: LedgerRow,
    /// True when this call made it; false when an earlier call had (a retry, a takeover, or
    /// the same key sent again after its retention).
    pub fresh: bool,
}

/// One charge the gateway simulator executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    /// The gateway's charge id.
    pub cobranca_id: String,
    /// Key derived from (merchant, idempotency key); unique.
    pub downstream_key: String,
    /// Merchant charged for.
    pub merchant: MerchantId,
    /// Amount charged.
    pub valor: Centavos,
    /// Approved or declined.
    pub status: PaymentStatus,
    /// Decline reason, if declined.
    pub motivo: Option<String>,
    /// Execution time, epoch ms.
    pub created_at: Millis,
    /// The card method and installments charged (`None`: not named).
    pub plano: Option<CardPlan>,
    /// An authorization's state (`None`: captured with the charge, or declined).
    pub captura: Option<CaptureState>,
    /// When an authorization lapses unless captured.
    pub captura_expira_em: Option<Millis>,
    /// What the merchant kept with the charge.
    pub metadata: ChargeMetadata,
}

impl LedgerRow {
    /// True when the card was (or may still be) charged: approved, and captured at once or an
    /// authorization not undone or lapsed. The charges a test counts.
    pub fn takes_money(&self) -> bool {
        self.status == PaymentStatus::Aprovado && self.captura.is_none_or(CaptureState::holds_money)
    }
}

/// The columns of a `gateway_ledger` row as a driver reads them (see [`PaymentColumns`]).
#[derive(Debug)]
pub(crate) struct LedgerColumns {
    pub(crate) cobranca_id: String,
    pub(crate) downstream_key: String,
    pub(crate) merchant: String,
    pub(crate) valor: i64,
    pub(crate) status: String,
    pub(crate) motivo: Option<String>,
    pub(crate) created_at: Millis,
    pub(crate) plano: Option<String>,
    pub(crate) captura: Option<String>,
    pub(crate) captura_expira_em: Option<Millis>,
    pub(crate) metadata: Option<String>,
}

impl LedgerColumns {
    pub(crate) fn parse(self) -> StoreResult<LedgerRow> {
        Ok(LedgerRow {
            merchant: MerchantId::parse(&self.merchant).map_err(|e| corrupt("merchant", e))?,
            valor: Centavos::new(self.valor).map_err(|e| corrupt("valor", e))?,
            status: PaymentStatus::parse(&self.status).map_err(|e| corrupt("status", e))?,
            cobranca_id: self.cobranca_id,
            downstream_key: self.downstream_key,
            motivo: self.motivo,
            created_at: self.created_at,
            plano: self
                .plano
                .map(|p| CardPlan::parse_stored(&p).map_err(|e| corrupt("plano", e)))
                .transpose()?,
            captura: self
                .captura
                .map(|c| CaptureState::parse(&c).map_err(|e| corrupt("captura", e)))
                .transpose()?,
            captura_expira_em: self.captura_expira_em,
            metadata: ChargeMetadata::from_stored(self.metadata.as_deref())
                .map_err(|e| corrupt("metadata", e))?,
        })
    }
}

/// A charge to record in the ledger (at most once per downstream key).
#[derive(Debug, Clone)]
pub struct LedgerCharge {
    /// Key derived from (merchant, idempotency key).
    pub downstream_key: DownstreamKey,
    /// Merchant.
    pub merchant: MerchantId,
    /// Amount.
    pub valor: Centavos,
    /// Approved or declined.
    pub status: PaymentStatus,
    /// Decline reason.
    pub motivo: Option<&'static str>,
    /// The test card charged (the simulator decides refunds of the charge by it).
    pub cartao: &'static str,
    /// The card method and installments asked for.
    pub plano: Option<CardPlan>,
    /// Authorize only, and let the hold lapse this long after the charge unless captured
    /// (`None`: captured at once).
    pub autorizacao_validade: Option<Millis>,
    /// What the merchant keeps with the charge.
    pub metadata: ChargeMetadata,
}

/// A refund for the gateway simulator to record (at most once per downstream key).
#[derive(Debug, Clone)]
pub struct LedgerRefund {
    /// Key derived from (merchant, idempotency key) in the refund namespace.
    pub downstream_key: DownstreamKey,
    /// The charge paid back.
    pub cobranca_id: String,
    /// Merchant.
    pub merchant: MerchantId,
    /// Amount.
    pub valor: Centavos,
    /// Paid back or declined.
    pub status: PaymentStatus,
    /// Decline reason.
    pub motivo: Option<&'static str>,
}

/// One refund the gateway simulator executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundLedgerRow {
    /// The gateway's refund id.
    pub estorno_id: String,
    /// Key derived from (merchant, idempotency key); unique.
    pub downstream_key: String,
    /// The charge paid back.
    pub cobranca_id: String,
    /// Merchant.
    pub merchant: MerchantId,
    /// Amount.
    pub valor: Centavos,
    /// Paid back (`aprovado`) or declined.
    pub status: PaymentStatus,
    /// Decline reason.
    pub motivo: Option<String>,
    /// Execution time, epoch ms.
    pub created_at: Millis,
}

/// The columns of a `gateway_refunds` row as a driver reads them.
#[derive(Debug)]
pub(crate) struct RefundLedgerColumns {
    pub(crate) estorno_id: String,
    pub(crate) downstream_key: String,
    pub(crate) cobranca_id: String,
    pub(crate) merchant: String,
    pub(crate) valor: i64,
    pub(crate) status: String,
    pub(crate) motivo: Option<String>,
    pub(crate) created_at: Millis,
}

impl RefundLedgerColumns {
    pub(crate) fn parse(self) -> StoreResult<RefundLedgerRow> {
        Ok(RefundLedgerRow {
            merchant: MerchantId::parse(&self.merchant).map_err(|e| corrupt("merchant", e))?,
            valor: Centavos::new(self.valor).map_err(|e| corrupt("valor", e))?,
            status: PaymentStatus::parse(&self.status).map_err(|e| corrupt("status", e))?,
            estorno_id: self.estorno_id,
            downstream_key: self.downstream_key,
            cobranca_id: self.cobranca_id,
            motivo: self.motivo,
            created_at: self.created_at,
        })
    }
}

/// What the gateway's refund ledger holds for a refund call.
#[derive(Debug, Clone)]
pub struct RefundCharged {
    /// The one row for the downstream key.
    pub row: RefundLedgerRow,
    /// True when this call made it.
    pub fresh: bool,
}

/// The simulator's ledger: charges, voids and refunds, each once per downstream key.
#[async_trait::async_trait]
pub trait SimulatorLedger: Send + Sync + std::fmt::Debug + 'static {
    /// Records a charge once per downstream key; returns the row that holds it (new or earlier),
    /// or `None` when the key was voided (it can never charge).
    async fn ledger_charge(&self, charge: LedgerCharge) -> StoreResult<Option<Charged>>;
    /// The ledger row of a charge, by its downstream key or its id, if it was ever charged (a
    /// void is not a charge).
    async fn ledger_row(&self, charge: ChargeRef<'_>) -> StoreResult<Option<LedgerRow>>;
    /// Every ledger row, oldest first (charges only: a void is not a charge).
    async fn ledger(&self) -> StoreResult<Vec<LedgerRow>>;
    /// Voids a downstream key at the simulator: a row under the ledger's `UNIQUE (downstream_key)`
    /// that is no charge, so no later charge of that key can be made. `Some(row)` when the key
    /// had charged already (nothing is written); `None` when it is void (now or before).
    async fn ledger_void(
        &self,
        downstream_key: &DownstreamKey,
        merchant: &MerchantId,
    ) -> StoreResult<Option<LedgerRow>>;
    /// The test card a charge was made with (the simulator decides refunds by it).
    async fn ledger_card(&self, cobranca_id: &str) -> StoreResult<Option<String>>;
    /// Records a refund once per downstream key; returns the row that holds it.
    async fn ledger_refund(&self, refund: LedgerRefund) -> StoreResult<RefundCharged>;
    /// The refund ledger row of a downstream key, if the gateway ever executed it.
    async fn refund_ledger_row(
        &self,
        downstream_key: &DownstreamKey,
    ) -> StoreResult<Option<RefundLedgerRow>>;
    /// Every refund the gateway executed, oldest first.
    async fn refund_ledger(&self) -> StoreResult<Vec<RefundLedgerRow>>;
    /// Moves the authorization `cobranca_id` from `pendente` to `target`, in one guarded write
    /// (`… WHERE captura = 'pendente'`): to `expirada` instead once its time is up (`target`
    /// `None`: only that). Answers the state it is in afterwards; `None` when it is no
    /// authorization.
    async fn ledger_settle(
        &self,
        cobranca_id: &str,
        target: Option<CaptureState>,
    ) -> StoreResult<Option<CaptureState>>;
}

/// The bundled simulator: decides from the test card token and records one ledger row per
/// downstream key in its [`SimulatorLedger`].
#[derive(Debug)]
pub struct SimulatedGateway {
    ledger: Arc<dyn SimulatorLedger>,
    slow: Duration,
    authorization_ttl: Millis,
}

/// How long an authorization holds by default before it lapses: seven days, as card schemes
/// allow for a sale.
pub const DEFAULT_AUTHORIZATION_TTL_MS: Millis = 7 * 24 * 3_600_000;

impl SimulatedGateway {
    /// A simulator keeping its ledger in `ledger`; `tok_lento` takes `slow` before it answers.
    pub fn new(ledger: Arc<dyn SimulatorLedger>, slow: Duration) -> Self {
        Self {
            ledger,
            slow,
            authorization_ttl: DEFAULT_AUTHORIZATION_TTL_MS,
        }
    }

    /// The same simulator, with authorizations lapsing `ttl` after they were made.
    pub fn with_authorization_ttl(mut self, ttl: Duration) -> Self {
        self.authorization_ttl = Millis::try_from(ttl.as_millis()).unwrap_or(Millis::MAX);
        self
    }

    /// What the card itself decides (after its method was accepted), with its delay.
    async fn decide(&self, cartao: CardToken) -> (PaymentStatus, Option<&'static str>) {
        match cartao {
            CardToken::Aprovado
            | CardToken::EstornoRecusado
            | CardToken::EstornoLento
            | CardToken::SomenteDebito
            | CardToken::Voucher
            | CardToken::SemParcelamento => (PaymentStatus::Aprovado, None),
            CardToken::Lento => {
                tokio::time::sleep(self.slow).await;
                (PaymentStatus::Aprovado, None)
            }
            CardToken::Recusado => (PaymentStatus::Recusado, Some("cartao_recusado")),
            CardToken::SaldoInsuficiente => (PaymentStatus::Recusado, Some("saldo_insuficiente")),
        }
    }

    /// Its ledger (the admin routes and the tests count charges in it).
    pub fn ledger(&self) -> &Arc<dyn SimulatorLedger> {
        &self.ledger
    }
}

/// Why a card refuses the method or installments asked, if it does (`None`: it takes them). A
/// request that names no method is a credit charge à vista. Only a voucher card pays a voucher;
/// a debit-only card takes only débito; `tok_sem_parcelamento` takes no parcelado.
fn refused_method(cartao: CardToken, plano: Option<CardPlan>) -> Option<&'static str> {
    let method = plano.map_or(CardMethod::Credito, |p| p.method);
    let parcelado = plano.is_some_and(|p| p.parcelas > 1);
    match (cartao, method) {
        (CardToken::Voucher, CardMethod::Voucher) => None,
        (CardToken::Voucher, _) | (_, CardMethod::Voucher) => Some("metodo_nao_aceito"),
        (CardToken::SomenteDebito, CardMethod::Debito) => None,
        (CardToken::SomenteDebito, _) => Some("metodo_nao_aceito"),
        (CardToken::SemParcelamento, _) if parcelado => Some("parcelamento_nao_permitido"),
        _ => None,
    }
}

/// The simulator's ledger failing is the gateway being unavailable, in the ledger's own words.
impl From<StoreError> for GatewayError {
    fn from(e: StoreError) -> Self {
        GatewayError::Unavailable(e.to_string())
    }
}

#[async_trait::async_trait]
impl Gateway for SimulatedGateway {
    async fn charge(
        &self,
        downstream_key: DownstreamKey,
        merchant: &MerchantId,
        order: ChargeOrder,
    ) -> Result<GatewayResult, GatewayError> {
        let ChargeOrder {
            valor,
            cartao,
            plano,
            captura,
            metadata,
        } = order;
        let (status, motivo) = match refused_method(cartao, plano) {
            Some(motivo) => (PaymentStatus::Recusado, Some(motivo)),
            None => self.decide(cartao).await,
        };
        let charged = self
            .ledger
            .ledger_charge(LedgerCharge {
                downstream_key,
                merchant: merchant.clone(),
                valor,
                status,
                motivo,
                cartao: cartao.as_str(),
                plano,
                autorizacao_validade: (!captura).then_some(self.authorization_ttl),
                metadata,
            })
            .await?
            .ok_or(GatewayError::Voided)?;
        Ok(GatewayResult::from_ledger(charged.row, charged.fresh))
    }

    async fn settle_authorization(
        &self,
        cobranca_id: &str,
        step: Option<CaptureStep>,
    ) -> Result<CaptureState, GatewayError> {
        self.ledger
            .ledger_settle(cobranca_id, step.map(CaptureStep::target))
            .await?
            .ok_or(GatewayError::NotAnAuthorization)
    }

    async fn find_charge(
        &self,
        downstream_key: &DownstreamKey,
    ) -> Result<Option<GatewayResult>, GatewayError> {
        Ok(self
            .ledger
            .ledger_row(ChargeRef::Key(downstream_key))
            .await?
            .map(|row| GatewayResult::from_ledger(row, false)))
    }

    async fn void(
        &self,
        downstream_key: &DownstreamKey,
        merchant: &MerchantId,
    ) -> Result<Option<GatewayResult>, GatewayError> {
        Ok(self
            .ledger
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
    ) -> Result<GatewayRefund, GatewayError> {
        // A refund executed before is answered as it was, without its card's delay.
        if let Some(row) = self.ledger.refund_ledger_row(&downstream_key).await? {
            return Ok(GatewayRefund::from_ledger(row, false));
        }
        let card = self.ledger.ledger_card(cobranca_id).await?;
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
            .ledger
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
