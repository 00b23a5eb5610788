//! What the outbox stores and answers: attempts, the queue, and how a try ended.

use crate::domain::{
    AttemptId, AttemptKind, AttemptState, Capture, CardPlan, CardToken, Centavos, IdempotencyKey,
    MachineCharge, Means, PaymentId, PixCharge, PixStatus, SaleId, Total, UnixMillis,
};
use crate::error::{CoreError, Result};
use serde::Serialize;

/// One press of Pagar for one sale, or of "Estornar" for one of its approved payments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// Local id (`att_…`); also sent as `referencia`.
    pub id: AttemptId,
    /// A payment or a refund.
    pub kind: AttemptKind,
    /// The sale it pays (a refund: the sale of the payment it pays back).
    pub sale_id: SaleId,
    /// A refund: the payment attempt it pays back.
    pub refund_of: Option<AttemptId>,
    /// A refund: that payment's server id, which its request's path names.
    pub refund_payment: Option<PaymentId>,
    /// The `Idempotency-Key` every try of this attempt carries.
    pub idempotency_key: IdempotencyKey,
    /// Amount.
    pub valor: Centavos,
    /// Card token (`None` for a Pix).
    pub cartao: Option<CardToken>,
    /// Its means: card, Pix or cash.
    pub metodo: Means,
    /// Cash: what the customer handed over (the change is this less `valor`).
    pub recebido: Option<Centavos>,
    /// A card attempt: the method and installments it asked for (`None`: it named none — the
    /// gateway's default, crédito à vista — or a Pix). A refund carries its payment's.
    pub plano: Option<CardPlan>,
    /// A Pix: its charge as the server last reported it (`None` until the server answered).
    pub pix: Option<PixCharge>,
    /// A card at the machine: its order as the server last reported it (`None` until the
    /// server answered).
    pub maquininha: Option<MachineCharge>,
    /// Where it stands.
    pub state: AttemptState,
    /// Requests sent so far (including lookups).
    pub tries: u32,
    /// When the next try is due (epoch ms); meaningful while `pendente`.
    pub next_try_at: UnixMillis,
    /// When the last try was made.
    pub last_tried_at: Option<UnixMillis>,
    /// Why the last try did not end it.
    pub last_error: Option<String>,
    /// HTTP status of the final answer.
    pub response_status: Option<u16>,
    /// The server's id for it: `pay_…` for a payment, `est_…` for a refund.
    pub payment_id: Option<String>,
    /// Decline reason.
    pub motivo: Option<String>,
    /// Created (epoch ms).
    pub created_at: UnixMillis,
    /// Last changed (epoch ms).
    pub updated_at: UnixMillis,
    /// For an attempt in `revisao`: when the server confirmed it has no payment for it (looked
    /// up by `referencia`). `None` while nobody has been able to ask.
    pub review_checked_at: Option<UnixMillis>,
    /// The sale's number that day at this till (`0042`); `None` for sales opened before
    /// numbering existed.
    pub sale_number: Option<u32>,
    /// The store day the sale was opened (`YYYY-MM-DD`, the store's time zone).
    pub sale_day: Option<String>,
    /// A sale paid in parts: its total (each of its payment attempts is one tender). `None`: a
    /// sale paid at once.
    pub sale_total: Option<Centavos>,
    /// A card tender authorized first: where its capture stands (`None`: captured with its
    /// charge, or not a card).
    pub captura: Option<Capture>,
    /// Who decided its capture or undo: the sale confirmed (`confirmacao`), given up
    /// (`cancelamento`), or the till started again with it unfinished (`reinicio`).
    pub captura_por: Option<&'static str>,
}

impl Attempt {
    /// True when it pays its sale: approved, and not an authorization being undone, undone or
    /// lapsed.
    pub fn pays(&self) -> bool {
        self.state == AttemptState::Aprovado && self.captura.is_none_or(Capture::pays)
    }

    /// Where its request goes.
    pub fn target(&self) -> Target {
        Target::of(self.refund_payment.clone())
    }

    /// True for a refund.
    pub fn is_refund(&self) -> bool {
        self.kind == AttemptKind::Estorno
    }

    /// True for a Pix.
    pub fn is_pix(&self) -> bool {
        self.metodo == Means::Pix
    }

    /// True for a card at the card machine.
    pub fn is_machine(&self) -> bool {
        self.metodo == Means::Maquininha
    }

    /// True for cash: local, approved when made, never sent.
    pub fn is_cash(&self) -> bool {
        self.metodo == Means::Dinheiro
    }

    /// Cash: the change given back.
    pub fn troco(&self) -> Option<Total> {
        self.recebido
            .map(|r| Total::new(r.get() - self.valor.get()).unwrap_or(Total::ZERO))
    }

    /// True for a Pix the customer paid after the till closed it (`recusado`, its charge
    /// `recebido_apos_cancelamento`): money that must be given back.
    pub fn is_late_pix(&self) -> bool {
        self.state == AttemptState::Recusado
            && self
                .pix
                .as_ref()
                .is_some_and(|p| p.status == PixStatus::RecebidoAposCancelamento)
    }

    /// Still being decided: `pendente`, or in `revisao` until the server said it has nothing for
    /// it. The one rule (the outbox's `LIVE_REFUND` and `BLOCKS_SALE` say it in SQL, and
    /// `ui/state.js` `refundsOf` in the window): an undecided refund holds its amount, an
    /// undecided payment its sale.
    pub fn is_undecided(&self) -> bool {
        self.state == AttemptState::Pendente
            || (self.state == AttemptState::Revisao && self.review_checked_at.is_none())
    }
}

/// What a sale's attempts have paid: its payments that pay (approved, and not an authorization
/// undone or lapsed) less its approved refunds, in centavos.
pub fn paid_of<'a>(attempts: impl IntoIterator<Item = &'a Attempt>) -> i64 {
    attempts
        .into_iter()
        .filter(|a| a.pays())
        .map(|a| {
            if a.is_refund() {
                -a.valor.get()
            } else {
                a.valor.get()
            }
        })
        .sum()
}

/// Where an attempt's request goes and where its outcome is looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `POST /pagamentos`; looked up by `GET /pagamentos?referencia=`.
    Payment,
    /// `POST /pagamentos/{id}/estornos`; looked up in `GET /pagamentos/{id}`'s refunds.
    Refund(PaymentId),
}

impl Target {
    /// The target of an attempt whose refunded payment is `refund_payment` (none: a payment).
    pub fn of(refund_payment: Option<PaymentId>) -> Self {
        refund_payment.map_or(Target::Payment, Target::Refund)
    }

    /// The request's path.
    pub fn path(&self) -> String {
        match self {
            Target::Payment => "/pagamentos".to_string(),
            Target::Refund(p) => format!("/pagamentos/{p}/estornos"),
        }
    }
}

/// What an approved payment attempt has had paid back and has on its way back, as the till
/// knows it (the server's guarded hold decides for good).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RefundBalance {
    /// The payment's amount.
    pub valor: Centavos,
    /// Paid back: approved refunds.
    pub estornado: Total,
    /// On its way back: undecided refunds (`pendente`, and `revisao` until the server said it
    /// has none).
    pub em_andamento: Total,
}

impl RefundBalance {
    /// What may still be refunded.
    pub fn left(&self) -> Total {
        Total::from(self.valor).saturating_sub(self.estornado + self.em_andamento)
    }

    /// The amount a new refund asks for: `asked`, or all that is left when `None`. Refused when
    /// nothing is left or `asked` is more than is left.
    pub fn check(&self, asked: Option<Centavos>) -> Result<Centavos> {
        let left = self.left();
        if left.is_zero() {
            return Err(CoreError::NothingToRefund);
        }
        let valor = match asked {
            Some(v) => v,
            None => Centavos::new(left.get()).map_err(|_| CoreError::NothingToRefund)?,
        };
        self.fits(valor)?;
        Ok(valor)
    }

    /// Refused with [`CoreError::RefundExceeds`] when `valor` is more than is left.
    pub fn fits(&self, valor: Centavos) -> Result<()> {
        if Total::from(valor) > self.left() {
            return Err(CoreError::RefundExceeds {
                asked: valor,
                left: self.left(),
            });
        }
        Ok(())
    }
}

/// The queue of attempts waiting for the server: payments and refunds counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct QueueSummary {
    /// Payments `pendente`.
    pub count: u64,
    /// Their total.
    pub total: Total,
    /// Refunds `pendente`.
    pub refund_count: u64,
    /// Their total.
    pub refund_total: Total,
}

/// What `pay` found or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayOutcome {
    /// A new attempt with a new key, durable now.
    Created(Attempt),
    /// The sale already has a live (or approved) attempt, or the payment a live refund; no
    /// new key was made.
    Existing(Attempt),
}

impl PayOutcome {
    /// The attempt, new or found.
    pub fn attempt(&self) -> &Attempt {
        match self {
            PayOutcome::Created(a) | PayOutcome::Existing(a) => a,
        }
    }
}

/// What [`Outbox::pay_unless`] did.
#[derive(Debug)]
// The large variant is the usual one: boxing it would allocate on every payment.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Paid {
    /// Paid (or found the sale's attempt), as [`Outbox::pay`] does.
    Done(PayOutcome, QueueSummary),
    /// Nothing was stored: the sale's attempts in `revisao` must be asked about first.
    ReviewFirst(Vec<Attempt>),
}

impl Paid {
    /// What a write asked not to stop for reviews gave.
    pub(crate) fn done(self) -> (PayOutcome, QueueSummary) {
        match self {
            Paid::Done(outcome, queue) => (outcome, queue),
            Paid::ReviewFirst(_) => unreachable!("not asked to stop for reviews"),
        }
    }
}

/// The bytes one try sends.
#[derive(Debug, Clone)]
pub struct SendJob {
    /// Attempt id.
    pub id: AttemptId,
    /// Where they go.
    pub target: Target,
    /// Its key.
    pub key: IdempotencyKey,
    /// Its exact request body.
    pub body: Vec<u8>,
    /// When it was created.
    pub created_at: UnixMillis,
    /// Tries so far.
    pub tries: u32,
    /// A Pix or a card-machine order the server has answered: its payment id, read (long poll)
    /// instead of sent again.
    pub waiting_payment: Option<String>,
}

/// The server's final answer to an attempt: `aprovado` (201) or `recusado` (402).
#[derive(Debug, Clone)]
pub struct FinalAnswer {
    /// Final state.
    pub state: AttemptState,
    /// HTTP status.
    pub status: u16,
    /// Body as received.
    pub body: Vec<u8>,
    /// The server's id: `pay_…`, or `est_…` for a refund.
    pub payment_id: Option<String>,
    /// Decline reason.
    pub motivo: Option<String>,
    /// A Pix: its charge as settled.
    pub pix: Option<PixCharge>,
    /// A card at the machine: its order as settled.
    pub maquininha: Option<Box<MachineCharge>>,
    /// Approved as an authorization (`autorizado`): the amount is held, to be captured or
    /// undone.
    pub authorized: bool,
}

/// How a try ended, to be recorded.
#[derive(Debug, Clone)]
pub enum TryResult {
    /// The server answered finally.
    Final(FinalAnswer),
    /// A Pix the server made and the customer has not paid yet: kept `pendente`, its charge
    /// recorded, read again at once.
    PixWaiting(PixCharge),
    /// A card-machine order the server made that no card has paid yet: kept `pendente`, its
    /// order recorded, read again at once.
    MachineWaiting(MachineCharge),
    /// Try again at `next_try_at`.
    Retry {
        /// When.
        next_try_at: UnixMillis,
        /// Why this try did not end it.
        error: String,
    },
    /// A person must look at it.
    Review {
        /// Why.
        reason: String,
        /// HTTP status, if there was an answer.
        status: Option<u16>,
        /// Body, if there was an answer.
        body: Option<Vec<u8>>,
        /// The server was asked by `referencia` and has no payment for it.
        checked: bool,
    },
}
