//! Storage interface: idempotency keys, payments and the gateway simulator's ledger.
//!
//! A store owns its clock: lease and retention times are read where the data lives, so that
//! every process sharing one database agrees on them.

mod claim;
#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;

#[cfg(feature = "postgres")]
pub use postgres::{PgOptions, PgStore};
pub use sqlite::SqliteStore;

use crate::clock::Millis;
use crate::domain::{
    Centavos, DownstreamKey, Fingerprint, IdempotencyKey, KeyOperation, MerchantId, PaymentId,
    PaymentStatus, RefundId, RefundStatus, TerminalId,
};
use crate::error::StoreError;

/// The ledger status of a void: the row that keeps a downstream key from ever charging. Listings
/// of charges leave these rows out.
const VOID_STATUS: &str = "anulado";

/// Result of store operations.
pub type StoreResult<T> = std::result::Result<T, StoreError>;

/// The columns of `payments`, in the order both stores read and write them.
const PAYMENT_COLUMNS: &str =
    "id, merchant, idempotency_key, valor, status, motivo, descricao, referencia, cobranca_id, created_at, terminal";

/// A stored response from its two nullable columns: both or neither.
fn stored_response(
    status: Option<i64>,
    body: Option<Vec<u8>>,
) -> StoreResult<Option<StoredResponse>> {
    match (status, body) {
        (Some(s), Some(body)) => Ok(Some(StoredResponse {
            status: u16::try_from(s).map_err(|_| StoreError::Corrupt(format!("status {s}")))?,
            body,
        })),
        (None, None) => Ok(None),
        _ => Err(StoreError::Corrupt("response status without body".into())),
    }
}

/// A completed key's answer and when it completed, from their nullable columns.
fn completed_response(
    status: Option<i64>,
    body: Option<Vec<u8>>,
    completed_at: Option<Millis>,
) -> StoreResult<Option<(StoredResponse, Millis)>> {
    match (stored_response(status, body)?, completed_at) {
        (Some(r), Some(at)) => Ok(Some((r, at))),
        (None, None) => Ok(None),
        _ => Err(StoreError::Corrupt(
            "response without completion time".into(),
        )),
    }
}

/// The operation a key row records (every row has one since migration V5; a row without one
/// could only come from an older replica still running, which claims charges and refunds alike,
/// and is read as a charge).
fn operation_of(stored: Option<&str>) -> StoreResult<KeyOperation> {
    stored.map_or(Ok(KeyOperation::Pagamento), |op| {
        KeyOperation::parse(op).map_err(|e| corrupt("operation", e))
    })
}

/// The columns of an `idempotency_keys` row that the claim decides from, in the order both stores
/// read them. The kept request is not among them: a claim that finds a completed key (every
/// replay on PostgreSQL) must not read up to a request body it never uses.
const HELD_COLUMNS: &str = "fingerprint, locked_until, fence, response_status, response_body, \
     completed_at, operation, cancelled_at, payment_id";

/// [`HELD_COLUMNS`] and the kept request: what a cancellation (which may complete the key from
/// it) reads.
const HELD_COLUMNS_AND_REQUEST: &str = "fingerprint, locked_until, fence, response_status, \
     response_body, completed_at, operation, cancelled_at, payment_id, request_body";

/// A key row's columns as a driver reads them (see [`HELD_COLUMNS`]; `request` only when the
/// query read it).
#[derive(Debug)]
struct HeldColumns {
    fingerprint: String,
    locked_until: Millis,
    fence: i64,
    status: Option<i64>,
    body: Option<Vec<u8>>,
    completed_at: Option<Millis>,
    operation: Option<String>,
    cancelled_at: Option<Millis>,
    payment_id: Option<String>,
    request: Option<Vec<u8>>,
}

impl HeldColumns {
    fn parse(self) -> StoreResult<claim::HeldKey> {
        let cancelled = self.cancelled_at.is_some();
        Ok(claim::HeldKey {
            operation: operation_of(self.operation.as_deref())?,
            fingerprint: Fingerprint::from_stored(self.fingerprint),
            locked_until: self.locked_until,
            fence: self.fence,
            // A cancelled key is completed without an answer: it has none to replay.
            response: if cancelled {
                None
            } else {
                completed_response(self.status, self.body, self.completed_at)?
            },
            cancelled,
            payment_id: self.payment_id.map(PaymentId::from_stored),
            request: self.request,
        })
    }
}

/// An abandoned key from its stored columns.
fn abandoned_from(
    merchant: String,
    key: String,
    fence: i64,
    fingerprint: String,
    request: Option<Vec<u8>>,
    operation: Option<String>,
    created_at: Millis,
) -> StoreResult<Abandoned> {
    Ok(Abandoned {
        created_at,
        operation: operation_of(operation.as_deref())?,
        merchant: MerchantId::parse(&merchant)
            .map_err(|e| StoreError::Corrupt(format!("merchant {merchant:?}: {e}")))?,
        key: IdempotencyKey::parse(key.as_bytes())
            .map_err(|e| StoreError::Corrupt(format!("key {key:?}: {e}")))?,
        fence,
        fingerprint: Fingerprint::from_stored(fingerprint),
        request,
    })
}

/// What a client can look its payments up by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentField {
    /// The client's own reference (`referencia`).
    Referencia,
    /// The idempotency key that created the payment.
    IdempotencyKey,
}

impl PaymentField {
    /// Its column in `payments`.
    fn column(self) -> &'static str {
        match self {
            PaymentField::Referencia => "referencia",
            PaymentField::IdempotencyKey => "idempotency_key",
        }
    }
}

/// A response as it was first sent; replays send these exact bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status code.
    pub status: u16,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// What the server holds for one (merchant, key).
#[derive(Debug, Clone)]
pub struct KeyRecord {
    /// Fingerprint of the request that first claimed the key.
    pub fingerprint: Fingerprint,
    /// The key was cancelled: it answers no request and never charges.
    pub cancelled: bool,
    /// Completed response, if any.
    pub response: Option<StoredResponse>,
    /// When it completed (store clock), if it did.
    pub completed_at: Option<Millis>,
}

/// Everything the claim of a key needs.
#[derive(Debug, Clone)]
pub struct Claim {
    /// Owner of the key.
    pub merchant: MerchantId,
    /// The key.
    pub key: IdempotencyKey,
    /// Request fingerprint.
    pub fingerprint: Fingerprint,
    /// The request body as JSON, kept with the key so the recovery worker can finish an
    /// execution whose worker died after the charge.
    pub request: Vec<u8>,
    /// What the key executes.
    pub operation: KeyOperation,
    /// A payment's `referencia`, kept with the key so a look-up by reference sees the execution
    /// while it is still in progress.
    pub referencia: Option<String>,
    /// How long this worker holds the key before another request may take over.
    pub lease_ms: Millis,
}

/// What the caller of [`Store::claim`] must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextAction {
    /// The key is ours (new, or taken over after the previous lease expired): execute, then finish
    /// with this fencing token.
    StartProcessing {
        /// Fencing token; only a finish carrying the current token is written.
        fence: i64,
        /// True when a previous worker held the key and its lease ran out.
        takeover: bool,
    },
    /// The key completed earlier (at `completed_at`, store clock): send this response again.
    ReturnSavedResponse {
        /// The stored answer.
        response: StoredResponse,
        /// When the key completed.
        completed_at: Millis,
    },
    /// Another worker holds a live lease.
    InProgress {
        /// Milliseconds until that lease ends.
        retry_after_ms: Millis,
    },
    /// The key was used with a different request.
    FingerprintMismatch,
    /// The key was cancelled: it can never execute.
    Cancelled,
}

/// A key still executing (or abandoned mid-execution and not yet recovered), as a look-up
/// reports it: whatever it will become, it is not "no payment".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InProgressKey {
    /// The key.
    pub key: IdempotencyKey,
    /// When it was first claimed (store clock).
    pub since: Millis,
}

/// What [`Store::claim_for_cancel`] found, and what it did about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelClaim {
    /// The key is now held for cancelling under `fence`: nothing had claimed it, or its
    /// execution was abandoned (its lease ended) and is taken over. The gateway decides next.
    Hold {
        /// The new fencing token; the worker it replaced can no longer write.
        fence: i64,
        /// What the key was claimed for (`Cancelamento` when nothing had claimed it).
        operation: KeyOperation,
        /// The fingerprint of the request that claimed it, if one did.
        fingerprint: Fingerprint,
        /// That request's kept body, if one did.
        request: Option<Vec<u8>>,
    },
    /// The key was cancelled before.
    Cancelled,
    /// The key completed: with this payment (or refund) id.
    Completed {
        /// The id its answer was stored with.
        payment_id: Option<PaymentId>,
    },
    /// A live worker holds the key.
    InProgress {
        /// Milliseconds until its lease ends.
        retry_after_ms: Millis,
    },
    /// The key executes a refund: only a payment's key is cancelled.
    NotAPayment,
}

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
    /// The gateway's charge id.
    pub cobranca_id: String,
    /// Creation time (store clock).
    pub created_at: Millis,
    /// The till that sent it, when it said.
    pub terminal: Option<TerminalId>,
}

/// The columns of a `payments` row as a driver reads them; [`PaymentColumns::parse`] is the one
/// place both stores turn them into a [`Payment`], so a row no domain type accepts is reported as
/// corrupt the same way on each.
#[derive(Debug)]
struct PaymentColumns {
    id: String,
    merchant: String,
    idempotency_key: String,
    valor: i64,
    status: String,
    motivo: Option<String>,
    descricao: Option<String>,
    referencia: Option<String>,
    cobranca_id: String,
    created_at: Millis,
    terminal: Option<String>,
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

impl PaymentColumns {
    fn parse(self) -> StoreResult<Payment> {
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

/// A started execution whose lease ended long ago: its worker died or hung.
#[derive(Debug, Clone)]
pub struct Abandoned {
    /// What the key executes.
    pub operation: KeyOperation,
    /// When the key was first claimed (store clock).
    pub created_at: Millis,
    /// Owner of the key.
    pub merchant: MerchantId,
    /// The key.
    pub key: IdempotencyKey,
    /// The fence it was left with.
    pub fence: i64,
    /// Its request fingerprint.
    pub fingerprint: Fingerprint,
    /// The request body, when the key was claimed by a server that keeps it.
    pub request: Option<Vec<u8>>,
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

/// Whether a completion was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishOutcome {
    /// Payment and response are durable.
    Stored,
    /// Another worker took the key over; nothing was written.
    LeaseLost,
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
}

/// The columns of a `gateway_ledger` row as a driver reads them (see [`PaymentColumns`]).
#[derive(Debug)]
struct LedgerColumns {
    cobranca_id: String,
    downstream_key: String,
    merchant: String,
    valor: i64,
    status: String,
    motivo: Option<String>,
    created_at: Millis,
}

impl LedgerColumns {
    fn parse(self) -> StoreResult<LedgerRow> {
        Ok(LedgerRow {
            merchant: MerchantId::parse(&self.merchant).map_err(|e| corrupt("merchant", e))?,
            valor: Centavos::new(self.valor).map_err(|e| corrupt("valor", e))?,
            status: PaymentStatus::parse(&self.status).map_err(|e| corrupt("status", e))?,
            cobranca_id: self.cobranca_id,
            downstream_key: self.downstream_key,
            motivo: self.motivo,
            created_at: self.created_at,
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
}

/// The columns of `refunds`, in the order both stores read them.
const REFUND_COLUMNS: &str =
    "id, payment_id, merchant, idempotency_key, valor, status, motivo, referencia, recusa, estorno_gateway, created_at";

/// A refund as it is stored. Its amount is held against its payment from the moment it is
/// created (`pendente`) until the gateway declines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    /// `est_…`
    pub id: RefundId,
    /// The payment it pays back.
    pub payment_id: PaymentId,
    /// Owner.
    pub merchant: MerchantId,
    /// The idempotency key that asked for it.
    pub idempotency_key: IdempotencyKey,
    /// Amount.
    pub valor: Centavos,
    /// Held, paid back, or declined.
    pub status: RefundStatus,
    /// The merchant's reason, from the request.
    pub motivo: Option<String>,
    /// The client's reference, from the request.
    pub referencia: Option<String>,
    /// The gateway's decline code, for a declined refund.
    pub recusa: Option<String>,
    /// The gateway's refund id, once it answered.
    pub estorno_gateway: Option<String>,
    /// Creation time (store clock).
    pub created_at: Millis,
}

/// The columns of a `refunds` row as a driver reads them (see [`PaymentColumns`]).
#[derive(Debug)]
struct RefundColumns {
    id: String,
    payment_id: String,
    merchant: String,
    idempotency_key: String,
    valor: i64,
    status: String,
    motivo: Option<String>,
    referencia: Option<String>,
    recusa: Option<String>,
    estorno_gateway: Option<String>,
    created_at: Millis,
}

impl RefundColumns {
    fn parse(self) -> StoreResult<Refund> {
        Ok(Refund {
            id: RefundId::from_stored(self.id),
            payment_id: PaymentId::from_stored(self.payment_id),
            merchant: MerchantId::parse(&self.merchant).map_err(|e| corrupt("merchant", e))?,
            idempotency_key: IdempotencyKey::parse(self.idempotency_key.as_bytes())
                .map_err(|e| corrupt("idempotency_key", e))?,
            valor: Centavos::new(self.valor).map_err(|e| corrupt("valor", e))?,
            status: RefundStatus::parse(&self.status).map_err(|e| corrupt("status", e))?,
            motivo: self.motivo,
            referencia: self.referencia,
            recusa: self.recusa,
            estorno_gateway: self.estorno_gateway,
            created_at: self.created_at,
        })
    }
}

/// What holding a refund's amount came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// The amount is held: this refund (new, or the one this key held before a takeover).
    Held(Box<Refund>),
    /// The merchant has no such payment.
    NoPayment,
    /// The payment was declined: there is nothing to pay back.
    NotApproved,
    /// The amount is more than what is left to refund (`left` centavos, refunds in progress
    /// counted as taken).
    Exceeds {
        /// What could still be refunded.
        left: i64,
    },
    /// The fence no longer holds the key (a takeover): nothing was held.
    LeaseLost,
}

/// The write that completes a refund key: the refund's outcome and the response, in one
/// transaction; a declined refund gives its amount back to the payment in the same one.
#[derive(Debug, Clone)]
pub struct RefundCompletion {
    /// Owner of the key.
    pub merchant: MerchantId,
    /// The key.
    pub key: IdempotencyKey,
    /// The token [`NextAction::StartProcessing`] gave this worker.
    pub fence: i64,
    /// The refund with its final status.
    pub refund: Refund,
    /// The response to store for replays.
    pub response: StoredResponse,
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
struct RefundLedgerColumns {
    estorno_id: String,
    downstream_key: String,
    cobranca_id: String,
    merchant: String,
    valor: i64,
    status: String,
    motivo: Option<String>,
    created_at: Millis,
}

impl RefundLedgerColumns {
    fn parse(self) -> StoreResult<RefundLedgerRow> {
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

/// The storage interface the server runs on.
#[async_trait::async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// Reads a key without claiming it (the replay fast path).
    async fn lookup_key(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<KeyRecord>>;
    /// Claims a key with an INSERT under `UNIQUE (merchant, key)`; on conflict decides what to do
    /// from the existing row, atomically with the attempt to insert.
    async fn claim(&self, claim: Claim) -> StoreResult<NextAction>;
    /// Stores the payment and the response if `fence` still holds the key.
    async fn finish(&self, completion: Completion) -> StoreResult<FinishOutcome>;
    /// Ends a lease early (execution failed before anything was charged) so a retry need not wait.
    async fn release(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<()>;
    /// A payment by id, for its merchant.
    async fn payment(&self, merchant: &MerchantId, id: &PaymentId) -> StoreResult<Option<Payment>>;
    /// Payments whose `field` is `value`, for its merchant, oldest first.
    async fn payments_by(
        &self,
        merchant: &MerchantId,
        field: PaymentField,
        value: &str,
    ) -> StoreResult<Vec<Payment>>;
    /// One page of the merchant's payments in a time range (keyset pagination: stable while
    /// payments are added, each existing payment on exactly one page).
    async fn payments_page(
        &self,
        merchant: &MerchantId,
        query: &PageQuery,
    ) -> StoreResult<Vec<Payment>>;
    /// Deletes completed keys older than `retention_ms`; never keys in progress, never payments.
    async fn purge_keys(&self, retention_ms: Millis) -> StoreResult<u64>;
    /// Records a charge once per downstream key; returns the row that holds it (new or earlier),
    /// or `None` when the key was voided (it can never charge).
    async fn ledger_charge(&self, charge: LedgerCharge) -> StoreResult<Option<Charged>>;
    /// The ledger row of a downstream key, if it was ever charged (a void is not a charge).
    async fn ledger_row(&self, downstream_key: &DownstreamKey) -> StoreResult<Option<LedgerRow>>;
    /// The payment stored for a gateway charge (`UNIQUE (cobranca_id)`), with the fingerprint of
    /// the request that made it (absent for payments stored before fingerprints were kept).
    async fn payment_by_charge(
        &self,
        cobranca_id: &str,
    ) -> StoreResult<Option<(Payment, Option<Fingerprint>)>>;
    /// Completes a key with the answer of a payment or refund that already exists (`resource`:
    /// its id; the key was purged and the same request came again): stores the response, writes
    /// nothing else.
    async fn finish_existing(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
        resource: &str,
        response: StoredResponse,
    ) -> StoreResult<FinishOutcome>;
    /// Deletes a key still in progress under `fence`: nothing was or will be stored for it.
    async fn forget(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool>;
    /// Keys still started whose lease ended more than `stale_ms` ago, oldest first.
    async fn abandoned(&self, stale_ms: Millis, limit: usize) -> StoreResult<Vec<Abandoned>>;
    /// Takes over an abandoned key if it is still as found (same fence, lease ended); returns
    /// the new fence.
    async fn take_over(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
        lease_ms: Millis,
    ) -> StoreResult<Option<i64>>;
    /// Every ledger row, oldest first (charges only: a void is not a charge).
    async fn ledger(&self) -> StoreResult<Vec<LedgerRow>>;
    /// The merchant's keys still executing with this `referencia` (`PaymentField::Referencia`)
    /// or this key (`PaymentField::IdempotencyKey`), oldest first: held by a worker, or abandoned
    /// by one and not yet looked at by the recovery worker. A key released (nobody executes it;
    /// the gateway was asked, or never reached) is not listed: a cancellation settles it.
    async fn keys_in_progress(
        &self,
        merchant: &MerchantId,
        field: PaymentField,
        value: &str,
    ) -> StoreResult<Vec<InProgressKey>>;
    /// The claim of a cancellation: in one transaction, inserts the key held for cancelling if
    /// nothing had claimed it, or decides from its row (`claim::decide_cancel`) and takes an
    /// abandoned execution over.
    async fn claim_for_cancel(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        lease_ms: Millis,
    ) -> StoreResult<CancelClaim>;
    /// Marks a key held under `fence` cancelled (completed with no answer); false when the fence
    /// no longer holds it.
    async fn mark_cancelled(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool>;
    /// Voids a downstream key at the simulator: a row under the ledger's `UNIQUE (downstream_key)`
    /// that is no charge, so no later charge of that key can be made. `Some(row)` when the key
    /// had charged already (nothing is written); `None` when it is void (now or before).
    async fn ledger_void(
        &self,
        downstream_key: &DownstreamKey,
        merchant: &MerchantId,
    ) -> StoreResult<Option<LedgerRow>>;
    /// Holds a refund's amount against its payment, if `fence` still holds the key and this key
    /// did not hold one before: the refund row is created `pendente` and `payments.estornado`
    /// grows by its amount in one transaction, by an `UPDATE … WHERE estornado + valor <=
    /// payments.valor` the database decides (with a `CHECK` behind it). A key that held a refund
    /// before gets that refund back as `Held`, in whatever status it is (a takeover finds it
    /// `pendente`; a key purged and sent again finds it decided). Nothing is written when the
    /// answer is not a new `Held`. `refund` is as it is created (`pendente`); the store sets
    /// `created_at`.
    async fn hold_refund(&self, refund: Refund, fence: i64) -> StoreResult<Hold>;
    /// Decides a `pendente` refund and stores the response, if `fence` still holds the key; a
    /// declined refund gives its amount back to the payment in the same transaction. Nothing is
    /// written (`LeaseLost`) unless the refund was still `pendente`, so an amount is never given
    /// back twice.
    async fn finish_refund(&self, done: RefundCompletion) -> StoreResult<FinishOutcome>;
    /// The refund a key asked for, if it got as far as holding its amount.
    async fn refund_by_key(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<Refund>>;
    /// A payment's refunds, oldest first.
    async fn refunds_of(
        &self,
        merchant: &MerchantId,
        payment: &PaymentId,
    ) -> StoreResult<Vec<Refund>>;
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
    /// Answers when the store can serve.
    async fn health(&self) -> StoreResult<()>;
    /// Answers when the store can take writes as well (readiness): by default, [`Store::health`].
    async fn ready(&self) -> StoreResult<()> {
        self.health().await
    }
    /// The store's current time.
    fn now_ms(&self) -> Millis;
    /// Whether a request whose key is not in the replay cache should read the key before
    /// claiming it. A local read is cheaper than a claim, so SQLite says yes (a replay then never
    /// queues a write); over a network each read is a round trip every first execution pays
    /// for nothing, so PostgreSQL says no and lets the claim find completed keys.
    fn lookup_before_claim(&self) -> bool {
        true
    }
}
