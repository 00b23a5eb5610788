//! The write-ahead outbox: every attempt, its key and its exact request bytes, durable in SQLite
//! before the first byte goes on the network.

use crate::domain::{AttemptState, CardToken, Centavos, SaleId};
use crate::error::{CoreError, Result};
use durable_sqlite::{exec, Db, Options};
use rusqlite::{params, Connection, OptionalExtension, Row};
use rusqlite_migration::{Migrations, M};
use serde::Serialize;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(
            r#"
        CREATE TABLE attempts (
            seq             INTEGER PRIMARY KEY, -- rowid: attempts are never deleted, so it only grows
            id              TEXT    NOT NULL UNIQUE,
            sale_id         TEXT    NOT NULL,
            idempotency_key TEXT    NOT NULL UNIQUE,
            valor           INTEGER NOT NULL CHECK (valor > 0),
            cartao          TEXT    NOT NULL,
            request_body    BLOB    NOT NULL,
            state           TEXT    NOT NULL CHECK (state IN ('pendente', 'aprovado', 'recusado', 'revisao')),
            tries           INTEGER NOT NULL DEFAULT 0,
            next_try_at     INTEGER NOT NULL,
            last_tried_at   INTEGER,
            last_error      TEXT,
            response_status INTEGER,
            response_body   BLOB,
            payment_id      TEXT,
            motivo          TEXT,
            created_at      INTEGER NOT NULL,
            updated_at      INTEGER NOT NULL
        );
        -- One live attempt per sale: a second key for a sale can only follow a decline.
        CREATE UNIQUE INDEX attempts_one_live_per_sale ON attempts (sale_id) WHERE state != 'recusado';
        CREATE INDEX attempts_pending_fifo ON attempts (seq) WHERE state = 'pendente';
        CREATE INDEX attempts_pending_next ON attempts (next_try_at) WHERE state = 'pendente';

        -- The queue's count and total, kept by triggers in the same transaction as each change.
        CREATE TABLE queue (id INTEGER PRIMARY KEY CHECK (id = 1), count INTEGER NOT NULL, total INTEGER NOT NULL);
        INSERT INTO queue VALUES (1, 0, 0);
        CREATE TRIGGER queue_on_insert AFTER INSERT ON attempts WHEN NEW.state = 'pendente'
        BEGIN UPDATE queue SET count = count + 1, total = total + NEW.valor WHERE id = 1; END;
        CREATE TRIGGER queue_on_leave AFTER UPDATE OF state ON attempts
            WHEN OLD.state = 'pendente' AND NEW.state != 'pendente'
        BEGIN UPDATE queue SET count = count - 1, total = total - OLD.valor WHERE id = 1; END;
        CREATE TRIGGER queue_on_enter AFTER UPDATE OF state ON attempts
            WHEN OLD.state != 'pendente' AND NEW.state = 'pendente'
        BEGIN UPDATE queue SET count = count + 1, total = total + NEW.valor WHERE id = 1; END;
        "#,
        ),
        // The open sale lives here, not only in the window, so a crash or a reload brings it back.
        // An attempt in `revisao` is checked against the server by `referencia`; only once the
        // server confirmed it has no payment for it may the sale get a new attempt.
        M::up(
            r#"
        CREATE TABLE till (
            id        INTEGER PRIMARY KEY CHECK (id = 1),
            sale_id   TEXT    NOT NULL,
            opened_at INTEGER NOT NULL
        );
        ALTER TABLE attempts ADD COLUMN review_checked_at INTEGER;
        DROP INDEX attempts_one_live_per_sale;
        CREATE UNIQUE INDEX attempts_one_live_per_sale ON attempts (sale_id)
            WHERE state = 'pendente' OR (state = 'revisao' AND review_checked_at IS NULL);
        CREATE INDEX attempts_by_sale ON attempts (sale_id, seq);
        CREATE INDEX attempts_review ON attempts (seq) WHERE state = 'revisao';
        "#,
        ),
    ])
}

/// The states in which an attempt keeps its sale from getting another one: it may still charge
/// (`pendente`), it did (`aprovado`), or nobody has confirmed yet that it did not (`revisao`
/// before the server was asked by `referencia`).
const BLOCKS_SALE: &str =
    "(state IN ('pendente', 'aprovado') OR (state = 'revisao' AND review_checked_at IS NULL))";

/// One press of Pagar for one sale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// Local id (`att_…`); also sent as `referencia`.
    pub id: String,
    /// The sale it pays.
    pub sale_id: String,
    /// The `Idempotency-Key` every try of this attempt carries.
    pub idempotency_key: String,
    /// Amount in centavos.
    pub valor: i64,
    /// Card token.
    pub cartao: String,
    /// Where it stands.
    pub state: AttemptState,
    /// Requests sent so far (including lookups).
    pub tries: u32,
    /// When the next try is due (epoch ms); meaningful while `pendente`.
    pub next_try_at: Millis,
    /// When the last try was made.
    pub last_tried_at: Option<Millis>,
    /// Why the last try did not end it.
    pub last_error: Option<String>,
    /// HTTP status of the final answer.
    pub response_status: Option<u16>,
    /// Server payment id (`pay_…`).
    pub payment_id: Option<String>,
    /// Decline reason.
    pub motivo: Option<String>,
    /// Created (epoch ms).
    pub created_at: Millis,
    /// Last changed (epoch ms).
    pub updated_at: Millis,
    /// For an attempt in `revisao`: when the server confirmed it has no payment for it (looked
    /// up by `referencia`). `None` while nobody has been able to ask.
    pub review_checked_at: Option<Millis>,
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
    pub id: String,
    /// Its key.
    pub key: String,
    /// Its exact request body.
    pub body: Vec<u8>,
    /// When it was created.
    pub created_at: Millis,
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
        next_try_at: Millis,
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

/// The request body the payment API receives. Field order is fixed, so the bytes are too.
#[derive(Serialize)]
struct RequestBody<'a> {
    valor: i64,
    cartao: &'a str,
    referencia: &'a str,
    descricao: String,
}

/// The outbox database, owned by exactly one process.
#[derive(Debug, Clone)]
pub struct Outbox {
    db: Db,
    /// Reads the dispatcher made (`due` and `upcoming`): how a test sees that it does not spin.
    dispatch_reads: Arc<AtomicU64>,
    /// New attempts are refused past this many pages; the rest of the file (up to twice as
    /// much) stays free for recording the outcomes of the attempts already stored.
    soft_page_limit: Option<u64>,
    _lock: Arc<File>,
}

const ATTEMPT_COLUMNS: &str = "id, sale_id, idempotency_key, valor, cartao, state, tries, next_try_at, last_tried_at, \
                               last_error, response_status, payment_id, motivo, created_at, updated_at, review_checked_at";

fn attempt_from_row(r: &Row<'_>) -> rusqlite::Result<Attempt> {
    let state: String = r.get("state")?;
    Ok(Attempt {
        id: r.get("id")?,
        sale_id: r.get("sale_id")?,
        idempotency_key: r.get("idempotency_key")?,
        valor: r.get("valor")?,
        cartao: r.get("cartao")?,
        state: AttemptState::parse(&state).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                5,
                rusqlite::types::Type::Text,
                format!("state {state}").into(),
            )
        })?,
        tries: r.get("tries")?,
        next_try_at: r.get("next_try_at")?,
        last_tried_at: r.get("last_tried_at")?,
        last_error: r.get("last_error")?,
        response_status: r.get("response_status")?,
        payment_id: r.get("payment_id")?,
        motivo: r.get("motivo")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
        review_checked_at: r.get("review_checked_at")?,
    })
}

fn get_attempt(c: &Connection, id: &str) -> rusqlite::Result<Option<Attempt>> {
    c.prepare_cached(&format!(
        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE id = ?1"
    ))?
    .query_row([id], attempt_from_row)
    .optional()
}

fn queue(c: &Connection) -> rusqlite::Result<QueueSummary> {
    c.prepare_cached("SELECT count, total FROM queue WHERE id = 1")?
        .query_row([], |r| {
            Ok(QueueSummary {
                count: r.get::<_, i64>(0)?.max(0) as u64,
                total: r.get(1)?,
            })
        })
}

fn set_till(c: &Connection, sale: &SaleId, now: Millis) -> rusqlite::Result<usize> {
    exec(
        c,
        "INSERT INTO till (id, sale_id, opened_at) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET sale_id = excluded.sale_id,
             opened_at = CASE WHEN till.sale_id = excluded.sale_id THEN till.opened_at ELSE excluded.opened_at END",
        params![sale.as_ref(), now],
    )
}

/// The attempts `tail` (a `WHERE … ORDER BY …`) selects.
fn select_attempts(
    c: &Connection,
    tail: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<Attempt>> {
    c.prepare_cached(&format!("SELECT {ATTEMPT_COLUMNS} FROM attempts {tail}"))?
        .query_map(params, attempt_from_row)?
        .collect()
}

/// An attempt as a write left it, with the queue: what every change announces.
fn after_change(c: &Connection, id: &str) -> Result<(Attempt, QueueSummary)> {
    let attempt = get_attempt(c, id)?.ok_or_else(|| CoreError::NotFound(id.to_string()))?;
    Ok((attempt, queue(c)?))
}

/// The path of the lock file that marks an outbox as owned.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

impl Outbox {
    /// Opens (creating and migrating) the outbox at `path`. Fails with `AlreadyOpen` when another
    /// process holds it.
    pub fn open(path: &Path, busy_timeout: Duration, max_bytes: Option<u64>) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            durable_sqlite::private::create_dir(dir)
                .map_err(|e| CoreError::Storage(format!("{}: {e}", dir.display())))?;
        }
        let lock_file = lock_path(path);
        durable_sqlite::private::create_file(&lock_file)
            .map_err(|e| CoreError::Storage(format!("{}: {e}", lock_file.display())))?;
        let lock = File::options()
            .write(true)
            .open(&lock_file)
            .map_err(|e| CoreError::Storage(format!("{}: {e}", lock_file.display())))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(CoreError::AlreadyOpen(path.to_path_buf()))
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(CoreError::Storage(format!("{}: {e}", lock_file.display())))
            }
        }
        let soft_page_limit = max_bytes.map(|b| (b / 4096).max(8));
        let options = Options {
            busy_timeout,
            max_page_count: soft_page_limit.map(|p| p * 2),
            ..Options::default()
        };
        let db = Db::open(path, options, |c| {
            migrations().to_latest(c).map_err(CoreError::from)
        })?;
        Ok(Self {
            db,
            dispatch_reads: Arc::default(),
            soft_page_limit,
            _lock: Arc::new(lock),
        })
    }

    /// Returns the sale's live or approved attempt, or durably creates a new one. `caps` is
    /// `Some((per_payment, total))` while offline.
    pub async fn pay(
        &self,
        sale: SaleId,
        valor: Centavos,
        cartao: CardToken,
        caps: Option<(Option<i64>, Option<i64>)>,
        now: Millis,
    ) -> Result<(PayOutcome, QueueSummary)> {
        match self
            .pay_unless(sale, valor, cartao, caps, now, false)
            .await?
        {
            Paid::Done(outcome, queue) => Ok((outcome, queue)),
            Paid::ReviewFirst(_) => unreachable!("not asked to stop for reviews"),
        }
    }

    /// [`Outbox::pay`], except that with `stop_for_reviews` a sale that would get a new attempt
    /// while it has attempts in `revisao` is left as it is and those attempts are returned: the
    /// engine asks the server about them first. The check runs in the same write, so the usual
    /// payment (a sale with no review) costs no extra read.
    pub(crate) async fn pay_unless(
        &self,
        sale: SaleId,
        valor: Centavos,
        cartao: CardToken,
        caps: Option<(Option<i64>, Option<i64>)>,
        now: Millis,
        stop_for_reviews: bool,
    ) -> Result<Paid> {
        let soft_page_limit = self.soft_page_limit;
        self.db
            .write(move |c| {
                let existing = c
                    .prepare_cached(&format!(
                        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE sale_id = ?1 AND {BLOCKS_SALE}
                         ORDER BY seq DESC LIMIT 1"
                    ))?
                    .query_row([sale.as_ref()], attempt_from_row)
                    .optional()?;
                set_till(c, &sale, now)?;
                if let Some(a) = existing {
                    return Ok(Paid::Done(PayOutcome::Existing(a), queue(c)?));
                }
                if stop_for_reviews {
                    let reviews = select_attempts(
                        c,
                        "WHERE sale_id = ?1 AND state = 'revisao' ORDER BY seq",
                        [sale.as_ref()],
                    )?;
                    if !reviews.is_empty() {
                        return Ok(Paid::ReviewFirst(reviews));
                    }
                }
                if let Some((per_payment, total)) = caps {
                    if let Some(cap) = per_payment.filter(|cap| valor.get() > *cap) {
                        return Err(CoreError::OfflinePaymentTooLarge { cap });
                    }
                    let would_be = queue(c)?.total + valor.get();
                    if let Some(cap) = total.filter(|cap| would_be > *cap) {
                        return Err(CoreError::OfflineQueueFull { would_be, cap });
                    }
                }
                if let Some(limit) = soft_page_limit {
                    let pages: u64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
                    if pages >= limit {
                        return Err(CoreError::StorageFull);
                    }
                }
                let id = format!("att_{}", uuid::Uuid::now_v7().simple());
                let key = uuid::Uuid::new_v4().to_string();
                let body = serde_json::to_vec(&RequestBody {
                    valor: valor.get(),
                    cartao: cartao.as_ref(),
                    referencia: &id,
                    descricao: format!("venda {}", sale.as_ref()),
                })
                .expect("a request body always serialises");
                exec(
                    c,
                    "INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, request_body, state,
                                           next_try_at, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pendente', ?7, ?7, ?7)",
                    params![id, sale.as_ref(), key, valor.get(), cartao.as_ref(), body, now],
                )?;
                let created = get_attempt(c, &id)?.expect("just inserted");
                Ok(Paid::Done(PayOutcome::Created(created), queue(c)?))
            })
            .await
    }

    /// Attempts due now, oldest first, at most `limit`.
    pub async fn due(&self, now: Millis, limit: usize) -> Result<Vec<SendJob>> {
        self.dispatch_reads.fetch_add(1, Ordering::Relaxed);
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT id, idempotency_key, request_body, created_at, tries FROM attempts
                     WHERE state = 'pendente' AND next_try_at <= ?1 ORDER BY seq LIMIT ?2",
                )?;
                let jobs = st
                    .query_map(params![now, limit as i64], |r| {
                        Ok(SendJob {
                            id: r.get(0)?,
                            key: r.get(1)?,
                            body: r.get(2)?,
                            created_at: r.get(3)?,
                            tries: r.get(4)?,
                        })
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(jobs)
            })
            .await
    }

    /// The earliest `limit` (id, next_try_at) of pending attempts.
    pub async fn upcoming(&self, limit: usize) -> Result<Vec<(String, Millis)>> {
        self.dispatch_reads.fetch_add(1, Ordering::Relaxed);
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT id, next_try_at FROM attempts WHERE state = 'pendente' ORDER BY next_try_at LIMIT ?1",
                )?;
                let rows = st
                    .query_map([limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(rows)
            })
            .await
    }

    /// Records how a try ended. Only a `pendente` attempt changes; returns it as it is now.
    pub async fn record(
        &self,
        id: &str,
        result: TryResult,
        now: Millis,
    ) -> Result<(Attempt, QueueSummary)> {
        let id = id.to_string();
        self.db
            .write(move |c| {
                match result {
                    TryResult::Final(FinalAnswer {
                        state,
                        status,
                        body,
                        payment_id,
                        motivo,
                    }) => exec(
                        c,
                        "UPDATE attempts SET state = ?2, response_status = ?3, response_body = ?4, payment_id = ?5,
                                motivo = ?6, last_error = NULL, tries = tries + 1, last_tried_at = ?7, updated_at = ?7
                         WHERE id = ?1 AND state = 'pendente'",
                        params![id, state.as_str(), status, body, payment_id, motivo, now],
                    )?,
                    TryResult::Retry { next_try_at, error } => exec(
                        c,
                        "UPDATE attempts SET next_try_at = ?2, last_error = ?3, tries = tries + 1,
                                last_tried_at = ?4, updated_at = ?4
                         WHERE id = ?1 AND state = 'pendente'",
                        params![id, next_try_at, error, now],
                    )?,
                    TryResult::Review { reason, status, body, checked } => exec(
                        c,
                        "UPDATE attempts SET state = 'revisao', last_error = ?2, response_status = ?3,
                                response_body = ?4, tries = tries + 1, last_tried_at = ?5, updated_at = ?5,
                                review_checked_at = CASE WHEN ?6 THEN ?5 END
                         WHERE id = ?1 AND state = 'pendente'",
                        params![id, reason, status, body, now, checked],
                    )?,
                };
                after_change(c, &id)
            })
            .await
    }

    /// Makes every pending attempt due at `now` (the server is reachable again).
    pub async fn make_all_due(&self, now: Millis) -> Result<usize> {
        self.db
            .write(move |c| {
                Ok(exec(
                    c,
                    "UPDATE attempts SET next_try_at = ?1 WHERE state = 'pendente' AND next_try_at > ?1",
                    [now],
                )?)
            })
            .await
    }

    /// Puts an attempt in `revisao` back in the queue with its same key and bytes, unless its
    /// sale has moved on to another attempt that is live or approved.
    pub async fn retry_review(&self, id: &str, now: Millis) -> Result<(Attempt, QueueSummary)> {
        let id = id.to_string();
        self.db
            .write(move |c| {
                let other: Option<String> = c
                    .prepare_cached(&format!(
                        "SELECT id FROM attempts
                         WHERE sale_id = (SELECT sale_id FROM attempts WHERE id = ?1 AND state = 'revisao')
                           AND id != ?1 AND {BLOCKS_SALE} LIMIT 1"
                    ))?
                    .query_row([&id], |r| r.get(0))
                    .optional()?;
                if let Some(other) = other {
                    return Err(CoreError::Invalid(format!(
                        "esta venda já tem outro pagamento ({other}); não dá para reenviar este"
                    )));
                }
                exec(
                    c,
                    "UPDATE attempts SET state = 'pendente', next_try_at = ?2, updated_at = ?2,
                            review_checked_at = NULL
                     WHERE id = ?1 AND state = 'revisao'",
                    params![id, now],
                )?;
                after_change(c, &id)
            })
            .await
    }

    /// Settles an attempt in `revisao` with what the server has for its `referencia`: a payment
    /// found means the attempt did reach the gateway.
    pub async fn settle_review(
        &self,
        id: &str,
        answer: FinalAnswer,
        now: Millis,
    ) -> Result<(Attempt, QueueSummary)> {
        let id = id.to_string();
        self.db
            .write(move |c| {
                exec(
                    c,
                    "UPDATE attempts SET state = ?2, response_status = ?3, response_body = ?4, payment_id = ?5,
                            motivo = ?6, review_checked_at = ?7, updated_at = ?7
                     WHERE id = ?1 AND state = 'revisao'",
                    params![id, answer.state.as_str(), answer.status, answer.body, answer.payment_id, answer.motivo, now],
                )?;
                after_change(c, &id)
            })
            .await
    }

    /// Records that the server has no payment for an attempt in `revisao`.
    pub async fn mark_review_checked(
        &self,
        id: &str,
        now: Millis,
    ) -> Result<(Attempt, QueueSummary)> {
        let id = id.to_string();
        self.db
            .write(move |c| {
                exec(
                    c,
                    "UPDATE attempts SET review_checked_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'revisao'",
                    params![id, now],
                )?;
                after_change(c, &id)
            })
            .await
    }

    /// Attempts in `revisao`, oldest first; only those not yet checked with `unchecked_only`.
    pub async fn reviews(&self, unchecked_only: bool) -> Result<Vec<Attempt>> {
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    "WHERE state = 'revisao' AND (?1 = 0 OR review_checked_at IS NULL) ORDER BY seq",
                    [unchecked_only],
                )?)
            })
            .await
    }

    /// The attempts of one sale, oldest first.
    pub async fn attempts_of(&self, sale: &SaleId) -> Result<Vec<Attempt>> {
        let sale = sale.clone();
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    "WHERE sale_id = ?1 ORDER BY seq",
                    [sale.as_ref()],
                )?)
            })
            .await
    }

    /// The sale open at the till, if one was opened.
    pub async fn current_sale(&self) -> Result<Option<SaleId>> {
        self.db
            .read(|c| {
                let id: Option<String> = c
                    .prepare_cached("SELECT sale_id FROM till WHERE id = 1")?
                    .query_row([], |r| r.get(0))
                    .optional()?;
                id.map(|s| SaleId::parse(&s).map_err(CoreError::Storage))
                    .transpose()
            })
            .await
    }

    /// Opens `sale` at the till.
    pub async fn open_sale(&self, sale: SaleId, now: Millis) -> Result<()> {
        self.db
            .write(move |c| {
                set_till(c, &sale, now)?;
                Ok(())
            })
            .await
    }

    /// The latest attempt of every sale that is not settled: `pendente`, or `revisao`.
    pub async fn unfinished(&self) -> Result<Vec<Attempt>> {
        self.db
            .read(|c| {
                Ok(select_attempts(
                    c,
                    "WHERE state IN ('pendente', 'revisao')
                     AND seq = (SELECT max(seq) FROM attempts b WHERE b.sale_id = attempts.sale_id)
                     ORDER BY seq",
                    [],
                )?)
            })
            .await
    }

    /// How many times the dispatcher has read the outbox.
    pub fn dispatch_reads(&self) -> u64 {
        self.dispatch_reads.load(Ordering::Relaxed)
    }

    /// One attempt.
    pub async fn get(&self, id: &str) -> Result<Option<Attempt>> {
        let id = id.to_string();
        self.db.read(move |c| Ok(get_attempt(c, &id)?)).await
    }

    /// Every attempt, oldest first.
    pub async fn list(&self) -> Result<Vec<Attempt>> {
        self.db
            .read(|c| Ok(select_attempts(c, "ORDER BY seq", [])?))
            .await
    }

    /// The queue now.
    pub async fn queue(&self) -> Result<QueueSummary> {
        self.db.read(|c| Ok(queue(c)?)).await
    }

    /// The exact bytes stored for an attempt's request.
    pub async fn request_body(&self, id: &str) -> Result<Option<Vec<u8>>> {
        let id = id.to_string();
        self.db
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT request_body FROM attempts WHERE id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .optional()?)
            })
            .await
    }

    /// Stops the writer; the lock is released when the last clone is dropped.
    pub fn close(&self) {
        self.db.close();
    }
}
