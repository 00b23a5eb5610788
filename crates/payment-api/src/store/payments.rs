//! Payments and their listing. A payment is written with its key's answer in one transaction
//! ([`PaymentStore::finish`]) and kept after the key is purged.

use super::*;

macro_rules! payment_columns {
    () => {
        "id, merchant, idempotency_key, valor, status, motivo, descricao, referencia, cobranca_id, created_at, terminal, plano, meio"
    };
}
/// [`PAYMENT_COLUMNS`] as a literal, for statements built with `concat!`.
pub(crate) use payment_columns;

/// The columns of `payments` every payment is written with, in the order both stores write them.
pub(crate) const PAYMENT_COLUMNS: &str = payment_columns!();

/// [`PAYMENT_COLUMNS`] one by one: what a statement that writes a payment column by column is
/// checked against, at compile time ([`RECEIVED_PIX_PAYMENT`]).
pub(crate) const PAYMENT_COLUMN_NAMES: [&str; 13] = [
    "id",
    "merchant",
    "idempotency_key",
    "valor",
    "status",
    "motivo",
    "descricao",
    "referencia",
    "cobranca_id",
    "created_at",
    "terminal",
    "plano",
    "meio",
];
const _: () = assert!(
    lists_columns(PAYMENT_COLUMNS, &PAYMENT_COLUMN_NAMES),
    "PAYMENT_COLUMNS and PAYMENT_COLUMN_NAMES must name the same columns in the same order"
);

/// The payment a received Pix becomes, column by column: `(column, expression)` over its charge
/// (`pix_charges`) and three parameters, `{e2e}` (the Pix's endToEndId), `{valor}` (what was
/// received) and `{now}`. Its length is [`PAYMENT_COLUMN_NAMES`]'s and its names are checked
/// against them at compile time, so a new payment column cannot leave this `INSERT … SELECT`
/// writing values into the wrong columns.
pub(crate) const RECEIVED_PIX_PAYMENT: [(&str, &str); PAYMENT_COLUMN_NAMES.len()] = [
    ("id", "id"),
    ("merchant", "merchant"),
    ("idempotency_key", "idempotency_key"),
    ("valor", "{valor}"),
    ("status", "'aprovado'"),
    ("motivo", "NULL"),
    ("descricao", "descricao"),
    ("referencia", "referencia"),
    ("cobranca_id", "{e2e}"),
    ("created_at", "{now}"),
    ("terminal", "terminal"),
    ("plano", "NULL"),
    ("meio", "'pix'"),
];
const _: () = assert!(
    names_columns(&RECEIVED_PIX_PAYMENT, &PAYMENT_COLUMN_NAMES),
    "RECEIVED_PIX_PAYMENT must write every payment column, in PAYMENT_COLUMN_NAMES's order"
);

/// The `INSERT … SELECT` that makes the charge `{charge}` whose Pix is `{e2e}` a payment, with
/// each dialect's parameters (`e2e`, `valor`, `now`, `charge`); a second Pix of the same charge
/// adds nothing.
pub(crate) fn received_pix_insert(e2e: &str, valor: &str, now: &str, charge: &str) -> String {
    let select = RECEIVED_PIX_PAYMENT
        .iter()
        .map(|(_, expr)| {
            expr.replace("{e2e}", e2e)
                .replace("{valor}", valor)
                .replace("{now}", now)
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "INSERT INTO payments ({PAYMENT_COLUMNS}, fingerprint)
         SELECT {select}, fingerprint FROM pix_charges WHERE id = {charge} AND e2eid = {e2e}
         ON CONFLICT DO NOTHING"
    )
}

/// The payment a paid card-machine order becomes, column by column, over its order
/// (`machine_orders`) and two parameters, `{plano}` (how it was paid) and `{now}`; checked
/// against [`PAYMENT_COLUMN_NAMES`] at compile time as [`RECEIVED_PIX_PAYMENT`] is.
pub(crate) const PAID_MACHINE_PAYMENT: [(&str, &str); PAYMENT_COLUMN_NAMES.len()] = [
    ("id", "id"),
    ("merchant", "merchant"),
    ("idempotency_key", "idempotency_key"),
    ("valor", "valor"),
    ("status", "'aprovado'"),
    ("motivo", "NULL"),
    ("descricao", "descricao"),
    ("referencia", "referencia"),
    ("cobranca_id", "order_id"),
    ("created_at", "{now}"),
    ("terminal", "terminal"),
    ("plano", "{plano}"),
    ("meio", "'maquininha'"),
];
const _: () = assert!(
    names_columns(&PAID_MACHINE_PAYMENT, &PAYMENT_COLUMN_NAMES),
    "PAID_MACHINE_PAYMENT must write every payment column, in PAYMENT_COLUMN_NAMES's order"
);

/// The `INSERT … SELECT` that makes the order `{order}` a payment once it is `aprovado`, with
/// each dialect's parameters (`plano`, `now`, `order`); a second time adds nothing.
pub(crate) fn paid_machine_insert(plano: &str, now: &str, order: &str) -> String {
    let select = PAID_MACHINE_PAYMENT
        .iter()
        .map(|(_, expr)| expr.replace("{plano}", plano).replace("{now}", now))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "INSERT INTO payments ({PAYMENT_COLUMNS}, fingerprint)
         SELECT {select}, fingerprint FROM machine_orders
         WHERE order_id = {order} AND status = 'aprovado'
         ON CONFLICT DO NOTHING"
    )
}

/// True when `list` is `names` joined by `", "`.
const fn lists_columns(list: &str, names: &[&str]) -> bool {
    let list = list.as_bytes();
    let (mut at, mut i) = (0, 0);
    while i < names.len() {
        let name = names[i].as_bytes();
        if i > 0 {
            if at + 2 > list.len() || list[at] != b',' || list[at + 1] != b' ' {
                return false;
            }
            at += 2;
        }
        let mut j = 0;
        while j < name.len() {
            if at >= list.len() || list[at] != name[j] {
                return false;
            }
            at += 1;
            j += 1;
        }
        i += 1;
    }
    at == list.len()
}

/// True when `pairs` name the columns `names`, in order.
const fn names_columns(pairs: &[(&str, &str)], names: &[&str]) -> bool {
    if pairs.len() != names.len() {
        return false;
    }
    let mut i = 0;
    while i < names.len() {
        let (a, b) = (pairs[i].0.as_bytes(), names[i].as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut j = 0;
        while j < a.len() {
            if a[j] != b[j] {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// The columns a payment is read with: those, an authorization's (`NULL` for a payment captured
/// with its charge), and whether it is a Pix paid after its charge was closed (the charge has
/// the payment's id).
pub(crate) const PAYMENT_READ: &str = concat!(
    payment_columns!(),
    ", captura, autorizacao_expira_em, EXISTS (SELECT 1 FROM pix_charges x
        WHERE x.id = payments.id AND x.status = 'recebido_apos_cancelamento') AS apos_cancelamento"
);

/// A payment as it is stored: final, typed, and owned by its merchant. The JSON clients see is
/// [`crate::schema::PaymentBody`], made from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    /// `pay_…`
    pub id: PaymentId,
    /// Owner.
    pub merchant: MerchantId,
    /// The idempotency key that created it.
    pub idempotency_key: IdempotencyKey,
    /// Amount charged.
    pub valor: Centavos,
    /// Approved or declined.
    pub status: PaymentStatus,
    /// Decline reason code (`cartao_recusado`, `saldo_insuficiente`), for declines only.
    pub motivo: Option<String>,
    /// Free text from the request.
    pub descricao: Option<String>,
    /// Client reference from the request.
    pub referencia: Option<String>,
    /// The id of the money at whoever took it: the gateway's charge id for a card, the
    /// endToEndId for a Pix (unique per means).
    pub cobranca_id: String,
    /// Who took the money, and so who pays it back.
    pub meio: Means,
    /// Creation time (store clock).
    pub created_at: Millis,
    /// The till that sent it, when it said.
    pub terminal: Option<TerminalId>,
    /// The card method and installments the request named (`None`: not named, or a Pix).
    pub plano: Option<CardPlan>,
    /// An authorization (`"captura": false`): where it stands. `None`: captured with its charge.
    pub captura: Option<CaptureState>,
    /// When the authorization lapses unless captured.
    pub autorizacao_expira_em: Option<Millis>,
    /// A Pix paid after its charge was cancelled or expired: the customer's money to give back,
    /// never a sale's payment (it can still be paid back like any payment).
    pub apos_cancelamento: bool,
}

impl Payment {
    /// The status clients read: `aprovado` or `recusado`, and for an authorization
    /// `autorizado` (waiting for capture or undo), `desfeito` or `expirado` (nothing taken);
    /// captured, it is `aprovado` like a payment captured at once. A Pix paid after its charge
    /// was closed is `recebido_apos_cancelamento`, as its charge reads.
    pub fn public_status(&self) -> &'static str {
        if self.apos_cancelamento {
            return "recebido_apos_cancelamento";
        }
        match (self.status, self.captura) {
            (PaymentStatus::Aprovado, Some(CaptureState::Pendente)) => "autorizado",
            (PaymentStatus::Aprovado, Some(CaptureState::Desfeita)) => "desfeito",
            (PaymentStatus::Aprovado, Some(CaptureState::Expirada)) => "expirado",
            (status, _) => status.as_str(),
        }
    }

    /// True when money was taken and can be paid back: approved, and not an authorization
    /// still pending, undone or lapsed.
    pub fn is_captured(&self) -> bool {
        self.status == PaymentStatus::Aprovado
            && self.captura.is_none_or(|c| c == CaptureState::Capturada)
    }
}

/// The columns of a `payments` row as a driver reads them; [`PaymentColumns::parse`] is the one
/// place both stores turn them into a [`Payment`], so a row no domain type accepts is reported as
/// corrupt the same way on each.
#[derive(Debug)]
pub(crate) struct PaymentColumns {
    pub(crate) id: String,
    pub(crate) merchant: String,
    pub(crate) idempotency_key: String,
    pub(crate) valor: i64,
    pub(crate) status: String,
    pub(crate) motivo: Option<String>,
    pub(crate) descricao: Option<String>,
    pub(crate) referencia: Option<String>,
    pub(crate) cobranca_id: String,
    pub(crate) created_at: Millis,
    pub(crate) terminal: Option<String>,
    pub(crate) plano: Option<String>,
    pub(crate) meio: String,
    pub(crate) captura: Option<String>,
    pub(crate) autorizacao_expira_em: Option<Millis>,
    pub(crate) apos_cancelamento: bool,
}

impl PaymentColumns {
    pub(crate) fn parse(self) -> StoreResult<Payment> {
        Ok(Payment {
            merchant: MerchantId::parse(&self.merchant).map_err(|e| corrupt("merchant", e))?,
            idempotency_key: IdempotencyKey::parse(self.idempotency_key.as_bytes())
                .map_err(|e| corrupt("idempotency_key", e))?,
            valor: Centavos::new(self.valor).map_err(|e| corrupt("valor", e))?,
            status: PaymentStatus::parse(&self.status).map_err(|e| corrupt("status", e))?,
            id: PaymentId::from_stored(self.id),
            motivo: self.motivo,
            descricao: self.descricao,
            referencia: self.referencia,
            cobranca_id: self.cobranca_id,
            created_at: self.created_at,
            terminal: self
                .terminal
                .map(|t| TerminalId::parse(&t).map_err(|e| corrupt("terminal", e)))
                .transpose()?,
            plano: self
                .plano
                .map(|p| CardPlan::parse_stored(&p).map_err(|e| corrupt("plano", e)))
                .transpose()?,
            meio: Means::parse(&self.meio).map_err(|e| corrupt("meio", e))?,
            captura: self
                .captura
                .map(|c| CaptureState::parse(&c).map_err(|e| corrupt("captura", e)))
                .transpose()?,
            autorizacao_expira_em: self.autorizacao_expira_em,
            apos_cancelamento: self.apos_cancelamento,
        })
    }
}

/// One page of a merchant's payments in a time range, in `(created_at, id)` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageQuery {
    /// From this instant, inclusive.
    pub from: Millis,
    /// Up to this instant, exclusive.
    pub to: Millis,
    /// Only after this `(created_at, id)` (the previous page's last payment).
    pub after: Option<(Millis, PaymentId)>,
    /// Only this till's payments.
    pub terminal: Option<TerminalId>,
    /// At most this many.
    pub limit: usize,
}

/// The write that completes a key: the payment row and the response, in one transaction.
#[derive(Debug, Clone)]
pub struct Completion {
    /// Owner of the key.
    pub merchant: MerchantId,
    /// The key.
    pub key: IdempotencyKey,
    /// The token [`NextAction::StartProcessing`] gave this worker.
    pub fence: i64,
    /// The payment to insert.
    pub payment: Payment,
    /// The response to store for replays.
    pub response: StoredResponse,
    /// The request's fingerprint, kept with the payment: after the key is purged, a request sent
    /// again with it is recognised as the same (replayed) or another one (refused).
    pub fingerprint: Fingerprint,
}

/// The write that completes a capture or undo key: the authorization's state as the gateway
/// left it, and the answer, in one transaction under the fence.
#[derive(Debug, Clone)]
pub struct CaptureCompletion {
    /// Owner of the key and of the payment.
    pub merchant: MerchantId,
    /// The capture's or undo's key.
    pub key: IdempotencyKey,
    /// The token that holds the key.
    pub fence: i64,
    /// The authorized payment.
    pub payment: PaymentId,
    /// Where the gateway says the authorization stands now.
    pub captura: CaptureState,
    /// The answer to store for replays.
    pub response: StoredResponse,
}

/// Payments, by id, by field, by page.
#[async_trait::async_trait]
pub trait PaymentStore: Clocked {
    /// Stores the payment and the response if `fence` still holds the key.
    async fn finish(&self, completion: Completion) -> StoreResult<FinishOutcome>;
    /// Completes a capture or undo key with its answer and moves its payment's authorization
    /// from `pendente` to what the gateway said, if `fence` still holds the key. A state that
    /// moved already stays (the gateway moves an authorization once, so they agree).
    async fn finish_capture(&self, done: CaptureCompletion) -> StoreResult<FinishOutcome>;
    /// Moves a payment's authorization from `pendente` to `captura` (what the gateway said of
    /// it, with no key to complete: the lapse of an authorization nobody captured).
    async fn record_capture(
        &self,
        merchant: &MerchantId,
        id: &PaymentId,
        captura: CaptureState,
    ) -> StoreResult<()>;
    /// Authorizations still `pendente` whose time is up (store clock), oldest first: the
    /// reaper asks the gateway about each.
    async fn authorizations_due(&self, limit: usize) -> StoreResult<Vec<Payment>>;
    /// A payment by id, for its merchant.
    async fn payment(&self, merchant: &MerchantId, id: &PaymentId) -> StoreResult<Option<Payment>>;
    /// Payments whose `field` is `value`, for its merchant, oldest first.
    async fn payments_by(&self, merchant: &MerchantId, by: Lookup<'_>)
        -> StoreResult<Vec<Payment>>;
    /// One page of the merchant's payments in a time range (keyset pagination: stable while
    /// payments are added, each existing payment on exactly one page).
    async fn payments_page(
        &self,
        merchant: &MerchantId,
        query: &PageQuery,
    ) -> StoreResult<Vec<Payment>>;
    /// The payment stored for a gateway charge (`UNIQUE (cobranca_id)`), with the fingerprint of
    /// the request that made it (absent for payments stored before fingerprints were kept).
    async fn payment_by_charge(
        &self,
        cobranca_id: &str,
    ) -> StoreResult<Option<(Payment, Option<Fingerprint>)>>;
}
