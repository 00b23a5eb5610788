//! What the outbox stores and answers: attempts, the queue, and how a try ended.

use crate::domain::{
    AttemptId, AttemptState, CardToken, Centavos, IdempotencyKey, SaleId, UnixMillis,
};
use serde::Serialize;

/// One press of Pagar for one sale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// Local id (`att_…`); also sent as `referencia`.
    pub id: AttemptId,
    /// The sale it pays.
    pub sale_id: SaleId,
    /// The `Idempotency-Key` every try of this attempt carries.
    pub idempotency_key: IdempotencyKey,
    /// Amount.
    pub valor: Centavos,
    /// Card token.
    pub cartao: CardToken,
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
    /// Server payment id (`pay_…`).
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
}

/// The queue of attempts waiting for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct QueueSummary {
    /// Attempts `pendente`.
    pub count: u64,
    /// Their total, in centavos.
    pub total: i64,
}

/// What `pay` found or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayOutcome {
    /// A new attempt with a new key, durable now.
    Created(Attempt),
    /// The sale already has a live (or approved) attempt; no new key was made.
    Existing(Attempt),
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

/// The bytes one try sends.
#[derive(Debug, Clone)]
pub struct SendJob {
    /// Attempt id.
    pub id: AttemptId,
    /// Its key.
    pub key: IdempotencyKey,
    /// Its exact request body.
    pub body: Vec<u8>,
    /// When it was created.
    pub created_at: UnixMillis,
    /// Tries so far.
    pub tries: u32,
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
    /// Server payment id.
    pub payment_id: Option<String>,
    /// Decline reason.
    pub motivo: Option<String>,
}

/// How a try ended, to be recorded.
#[derive(Debug, Clone)]
pub enum TryResult {
    /// The server answered finally.
    Final(FinalAnswer),
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
