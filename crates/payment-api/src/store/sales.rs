//! Sales paid in parts ("pagamento misto"): each tender holds its amount against its sale before
//! it charges, and the database refuses a hold that would take the sale above its total.
//!
//! What a tender holds is read from what became of its key, in the transaction that decides,
//! under the sale's row lock: its payment approved (the amount less its approved refunds),
//! declined (nothing), an authorization undone or lapsed (nothing), its key cancelled or gone (nothing), a Pix closed unpaid (nothing), or
//! still executing or waiting for the customer (the whole amount). Each of these only ever goes down, except a key sent again after it was refused,
//! which holds again only through this same check; so no race between tills, retries or
//! replicas lets approved tenders pass the total.

use super::*;
use crate::domain::SaleRef;

/// The tables and joins every sale query reads a tender's state from (`h` the tender, `p` its
/// key's payment, `k` its key, `x` its own resource when its means keeps one — a Pix charge —:
/// the view `tender_resources`, one branch per such means, says whether it was closed and
/// whether it was paid after that). No means is named here.
pub(crate) const TENDER_FROM: &str = "FROM venda_tenders h
     LEFT JOIN payments p ON p.merchant = h.merchant AND p.idempotency_key = h.idempotency_key
     LEFT JOIN idempotency_keys k ON k.merchant = h.merchant AND k.key = h.idempotency_key
     LEFT JOIN tender_resources x ON x.merchant = h.merchant AND x.idempotency_key = h.idempotency_key";

/// What a tender's payment came to, less its approved refunds (`p` its payment).
macro_rules! net_of_refunds {
    () => {
        "p.valor - COALESCE((SELECT SUM(r.valor) FROM refunds r
                                WHERE r.payment_id = p.id AND r.status = 'aprovado'), 0)"
    };
}

/// What a tender holds of its sale now, in centavos. A resource paid after it was closed (a Pix
/// `recebido_apos_cancelamento`: the sale may be paid by other means since) holds nothing: that
/// money is the customer's to get back ([`TENDER_TO_GIVE_BACK`]), never the sale's.
pub(crate) const TENDER_HELD: &str = concat!(
    "CASE
         WHEN p.status = 'aprovado' AND COALESCE(p.captura, 'capturada') IN ('pendente', 'capturada')
              AND NOT COALESCE(x.apos_fechamento, FALSE) THEN ",
    net_of_refunds!(),
    "
         WHEN p.status IS NOT NULL OR k.key IS NULL OR k.cancelled_at IS NOT NULL
              OR x.fechado THEN 0
         ELSE h.valor END"
);

/// What a tender received that its sale does not take and is to be given back, in centavos: a
/// resource paid after it was closed (a Pix), less what was already given back (devoluções).
pub(crate) const TENDER_TO_GIVE_BACK: &str = concat!(
    "CASE
         WHEN x.apos_fechamento AND p.status = 'aprovado' THEN ",
    net_of_refunds!(),
    "
         ELSE 0 END"
);

/// Where a tender stands: `aprovado`, `autorizado` (held on the card, not captured yet),
/// `recusado`, `em_andamento`, `liberado` (its key was cancelled or refused before it charged,
/// or its authorization was undone or lapsed), or `recebido_apos_cancelamento` (a Pix paid after
/// it was closed: not the sale's, to be given back).
pub(crate) const TENDER_STATE: &str = "CASE
         WHEN p.captura = 'pendente' THEN 'autorizado'
         WHEN p.captura IN ('desfeita', 'expirada') THEN 'liberado'
         WHEN x.apos_fechamento THEN 'recebido_apos_cancelamento'
         WHEN p.status IS NOT NULL THEN p.status
         WHEN k.key IS NULL OR k.cancelled_at IS NOT NULL
              OR x.fechado THEN 'liberado'
         ELSE 'em_andamento' END";

/// What holding a tender's amount against its sale came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenderHold {
    /// Held (now, or by an earlier try of the same key): the tender may charge.
    Held,
    /// It would take the sale above its total: nothing held, nothing may be charged.
    Exceeds {
        /// The sale's total.
        total: Centavos,
        /// What its other tenders hold now.
        held: i64,
    },
    /// The sale is known with another total.
    TotalMismatch {
        /// The total the sale was opened with.
        total: Centavos,
    },
    /// Another worker took the key over meanwhile: nothing was held by this one.
    LeaseLost,
}

impl TenderHold {
    /// The refusal of a tender of `valor` to a sale of `total` whose tenders hold `held_by_all`
    /// in all, this key's own (`mine`: an earlier try, or a takeover) among them. The key is
    /// held, so its own tender counts whole and only the others' holds weigh against it.
    /// `None`: it fits, and may be held.
    pub(crate) fn exceeding(
        total: Centavos,
        held_by_all: i64,
        mine: Option<i64>,
        valor: Centavos,
    ) -> Option<TenderHold> {
        let others = held_by_all - mine.unwrap_or(0);
        (others + valor.get() > total.get()).then_some(TenderHold::Exceeds {
            total,
            held: others,
        })
    }
}

/// One tender of a sale, as a look-up shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleTender {
    /// The tender's idempotency key.
    pub idempotency_key: String,
    /// Its payment, once it has one.
    pub payment_id: Option<String>,
    /// Its amount.
    pub valor: Centavos,
    /// What it holds of the sale now (an approved tender less its approved refunds).
    pub retido: i64,
    /// What it received that is not the sale's, to be given back (a Pix paid after it was
    /// closed, less its devoluções).
    pub a_devolver: i64,
    /// `aprovado`, `autorizado`, `recusado`, `em_andamento`, `liberado` or
    /// `recebido_apos_cancelamento`.
    pub status: String,
}

/// A sale and its tenders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sale {
    /// `ven_…`
    pub id: String,
    /// The till's reference.
    pub referencia: String,
    /// The till that opened it (empty when it said none).
    pub terminal: String,
    /// Its total.
    pub total: Centavos,
    /// Its tenders, oldest first.
    pub tenders: Vec<SaleTender>,
}

impl Sale {
    /// Approved, less approved refunds.
    pub fn pago(&self) -> i64 {
        self.tenders
            .iter()
            .filter(|t| t.status == "aprovado")
            .map(|t| t.retido)
            .sum()
    }

    /// Held on cards by authorizations not captured yet.
    pub fn autorizado(&self) -> i64 {
        self.tenders
            .iter()
            .filter(|t| t.status == "autorizado")
            .map(|t| t.retido)
            .sum()
    }

    /// Received by tenders after they were closed, not the sale's: to be given back.
    pub fn a_devolver(&self) -> i64 {
        self.tenders.iter().map(|t| t.a_devolver).sum()
    }

    /// Held by tenders still executing.
    pub fn em_andamento(&self) -> i64 {
        self.tenders
            .iter()
            .filter(|t| t.status == "em_andamento")
            .map(|t| t.retido)
            .sum()
    }
}

/// What a part of a divided sale asks to hold: `valor` of the sale `venda` (opened now if the
/// merchant and terminal have none by that reference), for the key `key` a worker holds under
/// `fence`.
#[derive(Debug, Clone)]
pub struct TenderAsk {
    /// Owner.
    pub merchant: MerchantId,
    /// The till the sale is open at.
    pub terminal: Option<TerminalId>,
    /// The part's key.
    pub key: IdempotencyKey,
    /// Its fencing token.
    pub fence: i64,
    /// The sale and its total.
    pub venda: SaleRef,
    /// What the part takes of it.
    pub valor: Centavos,
}

/// Sales and their tenders.
#[async_trait::async_trait]
pub trait SaleStore: Send + Sync + std::fmt::Debug + 'static {
    /// Holds `valor` of the sale `venda` (opened now if the merchant and terminal have none by
    /// that reference) for the key `key`, which this worker holds under `fence`: refused when
    /// the sale's tenders would hold more than its total.
    async fn hold_tender(&self, ask: &TenderAsk) -> StoreResult<TenderHold>;

    /// A sale of the merchant by the till's reference.
    async fn sale(
        &self,
        merchant: &MerchantId,
        terminal: Option<&TerminalId>,
        referencia: &str,
    ) -> StoreResult<Option<Sale>>;
}
