//! The idempotency key table: claim, fence, complete, release, purge, and the look-ups a client
//! makes while an execution may still be running. Only `crate::idempotency` and the operations'
//! fenced completions use it.

use super::*;

/// A stored response from its two nullable columns: both or neither.
pub(crate) fn stored_response(
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
pub(crate) fn completed_response(
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
pub(crate) fn operation_of(stored: Option<&str>) -> StoreResult<KeyOperation> {
    stored.map_or(Ok(KeyOperation::PAGAMENTO), |op| {
        KeyOperation::parse(op).map_err(|e| corrupt("operation", e))
    })
}

/// A key (`k`) whose operation can still move money, which the reaper keeps past its retention:
/// its Pix charge or its card-machine order still waiting (the QR or the machine can be paid:
/// the key holds the sale's part, and a cancel by key must see it rather than burn the key), or
/// its payment an authorization neither captured, undone nor lapsed. A Pix is closed only after
/// it was removed at the provider; a payment after that is `recebido_apos_cancelamento`, never
/// the sale's. An order is closed only by the provider's word.
pub(crate) const LIVE_KEY: &str = "EXISTS (SELECT 1 FROM pix_charges x
                  WHERE x.merchant = k.merchant AND x.idempotency_key = k.key
                    AND x.status = 'aguardando')
           OR EXISTS (SELECT 1 FROM machine_orders o
                  WHERE o.merchant = k.merchant AND o.idempotency_key = k.key
                    AND o.status = 'aguardando')
           OR EXISTS (SELECT 1 FROM payments p
                  WHERE p.merchant = k.merchant AND p.idempotency_key = k.key
                    AND p.captura = 'pendente')";

/// The columns of an `idempotency_keys` row that the claim decides from, in the order both stores
/// read them. The kept request is not among them: a claim that finds a completed key (every
/// replay on PostgreSQL) must not read up to a request body it never uses.
pub(crate) const HELD_COLUMNS: &str =
    "fingerprint, locked_until, fence, response_status, response_body, \
     completed_at, operation, cancelled_at, payment_id";

/// [`HELD_COLUMNS`] and the kept request: what a cancellation (which may complete the key from
/// it) reads.
pub(crate) const HELD_COLUMNS_AND_REQUEST: &str =
    "fingerprint, locked_until, fence, response_status, \
     response_body, completed_at, operation, cancelled_at, payment_id, request_body";

/// A key row's columns as a driver reads them (see [`HELD_COLUMNS`]; `request` only when the
/// query read it).
#[derive(Debug)]
pub(crate) struct HeldColumns {
    pub(crate) fingerprint: String,
    pub(crate) locked_until: Millis,
    pub(crate) fence: i64,
    pub(crate) status: Option<i64>,
    pub(crate) body: Option<Vec<u8>>,
    pub(crate) completed_at: Option<Millis>,
    pub(crate) operation: Option<String>,
    pub(crate) cancelled_at: Option<Millis>,
    pub(crate) payment_id: Option<String>,
    pub(crate) request: Option<Vec<u8>>,
}

impl HeldColumns {
    pub(super) fn parse(self) -> StoreResult<claim::HeldKey> {
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
pub(crate) fn abandoned_from(
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

/// Whether a completion was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishOutcome {
    /// Payment and response are durable.
    Stored,
    /// Another worker took the key over; nothing was written.
    LeaseLost,
}

/// The answer of a payment or refund that already exists, completing a key under the fence
/// that holds it (the key was purged and the same request came again).
#[derive(Debug, Clone)]
pub struct KeyAnswer {
    /// Owner of the key.
    pub merchant: MerchantId,
    /// The key.
    pub key: IdempotencyKey,
    /// The token that holds the key.
    pub fence: i64,
    /// The existing payment's or refund's id.
    pub resource: String,
    /// The answer to store for replays.
    pub response: StoredResponse,
}

/// The key table.
#[async_trait::async_trait]
pub trait KeyStore: Clocked {
    /// Reads a key without claiming it (what a worker whose lease was lost finds stored).
    async fn lookup_key(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<KeyRecord>>;
    /// Claims a key with an INSERT under `UNIQUE (merchant, key)`; on conflict decides what to do
    /// from the existing row, atomically with the attempt to insert.
    async fn claim(&self, claim: Claim) -> StoreResult<NextAction>;
    /// Ends a lease early (execution failed before anything was charged) so a retry need not wait.
    async fn release(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<()>;
    /// Deletes at most `limit` of the completed keys older than `retention_ms`, the oldest
    /// first, in one short write; never keys in progress, never payments, never a key whose
    /// operation can still move money ([`LIVE_KEY`]). None deleted: none is left. Not durable on
    /// its own: a purge a power cut undoes is done again by the next pass.
    async fn purge_keys(&self, retention_ms: Millis, limit: u32) -> StoreResult<u64>;
    /// Completes a key with the answer of a payment or refund that already exists (`resource`:
    /// its id; the key was purged and the same request came again): stores the response, writes
    /// nothing else.
    async fn finish_existing(&self, answer: KeyAnswer) -> StoreResult<FinishOutcome>;
    /// Deletes a key still in progress under `fence`: nothing was or will be stored for it.
    async fn forget(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool>;
    /// Keys still started whose lease ended more than `stale_ms` ago: first those never
    /// released (one may hold a charge no payment records yet), the oldest lease first; then the
    /// released ones (no charge when last looked at), the fewest take-overs first. Each look at a
    /// released key takes it over, so a pass goes on to the next ones instead of asking about
    /// the same `limit` keys every time while a key behind them waits.
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
    /// The merchant's keys still executing with this `referencia` (`PaymentField::Referencia`)
    /// or this key (`PaymentField::IdempotencyKey`), oldest first: held by a worker, or abandoned
    /// by one and not yet looked at by the recovery worker. A key released (nobody executes it;
    /// the gateway was asked, or never reached) is not listed: a cancellation settles it.
    async fn keys_in_progress(
        &self,
        merchant: &MerchantId,
        by: Lookup<'_>,
    ) -> StoreResult<Vec<InProgressKey>>;
    /// The claim of a cancellation: in one transaction, inserts the key held for cancelling if
    /// nothing had claimed it, or decides from its row (`claim::decide_cancel`) and takes an
    /// abandoned execution over; `rules`: what each operation declared a cancellation does.
    async fn claim_for_cancel(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        lease_ms: Millis,
        rules: &CancelRules,
    ) -> StoreResult<CancelClaim>;
    /// Marks a key held under `fence` cancelled (completed with no answer); false when the fence
    /// no longer holds it.
    async fn mark_cancelled(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool>;
}
