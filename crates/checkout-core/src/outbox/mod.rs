//! The write-ahead outbox: every attempt, its key and its exact request bytes, durable in SQLite
//! before the first byte goes on the network.

mod caps;
mod lock;
mod records;
mod schema;
mod wire;

pub use caps::OfflineCaps;
pub use lock::lock_path;
pub(crate) use records::Paid;
pub use records::{
    Attempt, FinalAnswer, PayOutcome, QueueSummary, RefundBalance, SendJob, Target, TryResult,
};

use crate::domain::{
    store_day, AttemptId, AttemptKind, AttemptState, CardToken, Centavos, IdempotencyKey,
    PaymentId, RefundReason, SaleId, UnixMillis,
};
use crate::error::{CoreError, Result};
use caps::PageLimit;
use durable_sqlite::{exec, Db, Options};
use rusqlite::{params, OptionalExtension};
use schema::{
    after_change, attempt_from_row, get_attempt, migrations, queue, refund_payment,
    select_attempts, set_till, ATTEMPT_COLUMNS, BLOCKS_SALE, LIVE_REFUND,
};
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wire::{RefundBody, RequestBody};

/// The `motivo` of a payment attempt whose key the server cancelled: nothing was charged under
/// it, and nothing ever will be.
pub const KEY_CANCELLED: &str = "chave_cancelada";

/// The outbox database, owned by exactly one process.
#[derive(Debug, Clone)]
pub struct Outbox {
    db: Db,
    /// Reads the dispatcher made (`due` and `upcoming`): how a test sees that it does not spin.
    dispatch_reads: Arc<AtomicU64>,
    /// New attempts are refused past this size; the rest of the file (as much again) stays
    /// free for recording the outcomes of the attempts already stored.
    page_limit: Option<PageLimit>,
    /// The store's offset from UTC: the day sale numbers restart.
    utc_offset: time::UtcOffset,
    /// The till's name, sent with each new attempt.
    terminal: Option<Arc<str>>,
    _lock: Arc<File>,
}

impl Outbox {
    /// Opens (creating and migrating) the outbox at `path`. Fails with `AlreadyOpen` when another
    /// process holds it.
    pub fn open(path: &Path, busy_timeout: Duration, max_bytes: Option<u64>) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            durable_sqlite::private::create_dir(dir)
                .map_err(|e| CoreError::Storage(format!("{}: {e}", dir.display())))?;
        }
        let lock = lock::acquire(path)?;
        let page_limit = max_bytes.map(PageLimit::for_bytes);
        let options = Options {
            busy_timeout,
            max_page_count: page_limit.map(PageLimit::hard),
            reader_cache_kib: Some(durable_sqlite::SMALL_READER_CACHE_KIB),
            ..Options::default()
        };
        let db = Db::open(path, options, |c| {
            migrations().to_latest(c).map_err(CoreError::from)
        })?;
        Ok(Self {
            db,
            dispatch_reads: Arc::default(),
            page_limit,
            utc_offset: time::UtcOffset::UTC,
            terminal: None,
            _lock: Arc::new(lock),
        })
    }

    /// Numbers sales by the day at `offset` from UTC (UTC until said).
    pub fn with_utc_offset(mut self, offset: time::UtcOffset) -> Self {
        self.utc_offset = offset;
        self
    }

    /// Sends `terminal` with every new attempt.
    pub fn with_terminal(mut self, terminal: Option<&str>) -> Self {
        self.terminal = terminal.map(Arc::from);
        self
    }

    /// The store day of `at`.
    pub fn day_of(&self, at: UnixMillis) -> String {
        store_day(at, self.utc_offset)
    }

    /// Returns the sale's live or approved attempt, or durably creates a new one. `caps` are
    /// given while offline.
    pub async fn pay(
        &self,
        sale: SaleId,
        valor: Centavos,
        cartao: CardToken,
        caps: Option<OfflineCaps>,
        now: UnixMillis,
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
    /// engine asks the server about them first. Without it, such a sale is refused
    /// ([`CoreError::KeyNotCancelled`]) until its reviews are settled: no new key while an old one
    /// could still charge. The check runs in the same write (one indexed read by sale).
    pub(crate) async fn pay_unless(
        &self,
        sale: SaleId,
        valor: Centavos,
        cartao: CardToken,
        caps: Option<OfflineCaps>,
        now: UnixMillis,
        stop_for_reviews: bool,
    ) -> Result<Paid> {
        let page_limit = self.page_limit;
        let day = self.day_of(now);
        let terminal = self.terminal.clone();
        self.db
            .write(move |c| {
                let existing = c
                    .prepare_cached(&format!(
                        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE sale_id = ?1 AND {BLOCKS_SALE}
                         ORDER BY seq DESC LIMIT 1"
                    ))?
                    .query_row([sale.as_ref()], attempt_from_row)
                    .optional()?;
                let number = set_till(c, &sale, now, &day)?;
                if let Some(a) = existing {
                    return Ok(Paid::Done(PayOutcome::Existing(a), queue(c)?));
                }
                let reviews = select_attempts(
                    c,
                    "WHERE sale_id = ?1 AND kind = 'pagamento' AND state = 'revisao' ORDER BY seq",
                    [sale.as_ref()],
                )?;
                if let Some(review) = reviews.first() {
                    if !stop_for_reviews {
                        // The trigger `attempts_no_new_key_while_in_review` would refuse it too.
                        return Err(CoreError::KeyNotCancelled(review.id.clone()));
                    }
                    return Ok(Paid::ReviewFirst(reviews));
                }
                if let Some(caps) = caps {
                    caps.check(valor, queue(c)?.total)?;
                }
                if let Some(limit) = page_limit {
                    limit.check(c.query_row("PRAGMA page_count", [], |r| r.get(0))?)?;
                }
                let id = AttemptId::generate();
                let key = IdempotencyKey::generate();
                let body =
                    RequestBody::bytes(valor, &cartao, &id, (&sale, number), terminal.as_deref());
                exec(
                    c,
                    "INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, request_body, state,
                                           next_try_at, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pendente', ?7, ?7, ?7)",
                    params![id.as_ref(), sale.as_ref(), key.as_ref(), valor.get(), cartao.as_ref(), body, now],
                )?;
                let created = get_attempt(c, &id)?.expect("just inserted");
                Ok(Paid::Done(PayOutcome::Created(created), queue(c)?))
            })
            .await
    }

    /// Returns the payment's undecided refund, or durably creates a refund attempt of `valor`
    /// (what is left to refund when `None`) with a fresh key. Refused unless `payment` is an
    /// approved payment attempt and `valor` fits in what is left of it as the till knows it
    /// (the server decides for good: it refuses a refund past the payment's balance).
    pub async fn refund(
        &self,
        payment: &AttemptId,
        valor: Option<Centavos>,
        motivo: Option<RefundReason>,
        now: UnixMillis,
    ) -> Result<(PayOutcome, QueueSummary)> {
        let page_limit = self.page_limit;
        let payment = payment.clone();
        self.db
            .write(move |c| {
                let paid = get_attempt(c, &payment)?
                    .ok_or_else(|| CoreError::NotFound(payment.to_string()))?;
                let server_id = refundable(&paid)?;
                let existing = c
                    .prepare_cached(&format!(
                        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE refund_of = ?1 AND {LIVE_REFUND}"
                    ))?
                    .query_row([payment.as_ref()], attempt_from_row)
                    .optional()?;
                if let Some(a) = existing {
                    return Ok((PayOutcome::Existing(a), queue(c)?));
                }
                let valor = balance(c, &paid, None)?.check(valor)?;
                if let Some(limit) = page_limit {
                    limit.check(c.query_row("PRAGMA page_count", [], |r| r.get(0))?)?;
                }
                let id = AttemptId::generate();
                let key = IdempotencyKey::generate();
                let body = RefundBody::bytes(valor, &id, motivo.as_ref().map(AsRef::as_ref));
                exec(
                    c,
                    "INSERT INTO attempts (id, kind, refund_of, refund_payment, sale_id, idempotency_key, valor,
                                           cartao, request_body, state, next_try_at, created_at, updated_at)
                     VALUES (?1, 'estorno', ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pendente', ?9, ?9, ?9)",
                    params![
                        id.as_ref(), payment.as_ref(), server_id.as_ref(), paid.sale_id.as_ref(),
                        key.as_ref(), valor.get(), paid.cartao.as_ref(), body, now
                    ],
                )?;
                let created = get_attempt(c, &id)?.expect("just inserted");
                Ok((PayOutcome::Created(created), queue(c)?))
            })
            .await
    }

    /// What an approved payment attempt has had paid back and has on its way back. Refused, as
    /// [`Outbox::refund`] refuses, for anything but an approved payment.
    pub async fn refund_balance(&self, payment: &AttemptId) -> Result<RefundBalance> {
        let payment = payment.clone();
        self.db
            .read(move |c| {
                let paid = get_attempt(c, &payment)?
                    .ok_or_else(|| CoreError::NotFound(payment.to_string()))?;
                refundable(&paid)?;
                Ok(balance(c, &paid, None)?)
            })
            .await
    }

    /// The refunds of a payment attempt, oldest first.
    pub async fn refunds_of(&self, payment: &AttemptId) -> Result<Vec<Attempt>> {
        let payment = payment.clone();
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    "WHERE kind = 'estorno' AND refund_of = ?1 ORDER BY seq",
                    [payment.as_ref()],
                )?)
            })
            .await
    }

    /// Runs `f` on one attempt in the writer, then reads the attempt back with the queue, in the
    /// same transaction: what every change announces.
    async fn change<F>(&self, id: &AttemptId, f: F) -> Result<(Attempt, QueueSummary)>
    where
        F: FnOnce(&rusqlite::Connection, &AttemptId) -> Result<()> + Send + 'static,
    {
        let id = id.clone();
        self.db
            .write(move |c| {
                f(c, &id)?;
                after_change(c, &id)
            })
            .await
    }

    /// Attempts due now, oldest first, at most `limit`.
    pub async fn due(&self, now: UnixMillis, limit: usize) -> Result<Vec<SendJob>> {
        self.dispatch_reads.fetch_add(1, Ordering::Relaxed);
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT id, idempotency_key, request_body, created_at, tries, refund_payment FROM attempts
                     WHERE state = 'pendente' AND next_try_at <= ?1 ORDER BY seq LIMIT ?2",
                )?;
                let jobs = st
                    .query_map(params![now, limit as i64], |r| {
                        Ok(SendJob {
                            id: AttemptId::from_stored(r.get::<_, String>(0)?),
                            target: Target::of(refund_payment(r)?),
                            key: IdempotencyKey::from_stored(r.get(1)?),
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
    pub async fn upcoming(&self, limit: usize) -> Result<Vec<(AttemptId, UnixMillis)>> {
        self.dispatch_reads.fetch_add(1, Ordering::Relaxed);
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT id, next_try_at FROM attempts WHERE state = 'pendente' ORDER BY next_try_at LIMIT ?1",
                )?;
                let rows = st
                    .query_map([limit as i64], |r| {
                        Ok((AttemptId::from_stored(r.get::<_, String>(0)?), r.get(1)?))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(rows)
            })
            .await
    }

    /// Records how a try ended. Only a `pendente` attempt changes; returns it as it is now.
    ///
    /// Committed *relaxed* (see `durable_sqlite`): it survives a crash of the app, and a power
    /// cut can only lose it together with the records after it. Losing it is safe by design: the
    /// attempt is `pendente` again and is replayed with its same key and bytes, and the server
    /// answers with the stored outcome (or, past its key retention, is asked by `referencia`).
    /// What must survive a power cut, the attempt itself, was written durably before it was sent.
    pub async fn record(
        &self,
        id: &AttemptId,
        result: TryResult,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        let id = id.clone();
        self.db
            .write_relaxed(move |c| {
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
                    params![id.as_ref(), state.as_str(), status, body, payment_id, motivo, now],
                )?,
                TryResult::Retry { next_try_at, error } => exec(
                    c,
                    "UPDATE attempts SET next_try_at = ?2, last_error = ?3, tries = tries + 1,
                            last_tried_at = ?4, updated_at = ?4
                     WHERE id = ?1 AND state = 'pendente'",
                    params![id.as_ref(), next_try_at, error, now],
                )?,
                TryResult::Review { reason, status, body, checked } => exec(
                    c,
                    "UPDATE attempts SET state = 'revisao', last_error = ?2, response_status = ?3,
                            response_body = ?4, tries = tries + 1, last_tried_at = ?5, updated_at = ?5,
                            review_checked_at = CASE WHEN ?6 THEN ?5 END
                     WHERE id = ?1 AND state = 'pendente'",
                    params![id.as_ref(), reason, status, body, now, checked],
                )?,
            };
            after_change(c, &id)
        })
        .await
    }

    /// Makes every pending attempt due at `now` (the server is reachable again).
    pub async fn make_all_due(&self, now: UnixMillis) -> Result<usize> {
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
    /// sale has moved on to another payment attempt that is live or approved (for a refund:
    /// unless its payment has another undecided refund).
    pub async fn retry_review(
        &self,
        id: &AttemptId,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        self.change(id, move |c, id| {
            let attempt = get_attempt(c, id)?.ok_or_else(|| CoreError::NotFound(id.to_string()))?;
            if attempt.state != AttemptState::Revisao {
                return Err(CoreError::Invalid(format!(
                    "esta tentativa não está em revisão (está {}); não dá para reenviá-la",
                    attempt.state.label()
                )));
            }
            let other: Option<(String, String)> = c
                .prepare_cached(&format!(
                    "SELECT id, kind FROM attempts WHERE id != ?1 AND (
                         (sale_id = (SELECT sale_id FROM attempts
                                     WHERE id = ?1 AND state = 'revisao' AND kind = 'pagamento')
                          AND {BLOCKS_SALE})
                      OR (refund_of = (SELECT refund_of FROM attempts
                                       WHERE id = ?1 AND state = 'revisao' AND kind = 'estorno')
                          AND {LIVE_REFUND}))
                     LIMIT 1"
                ))?
                .query_row([id.as_ref()], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            if let Some((other, kind)) = other {
                return Err(CoreError::Invalid(if kind == "estorno" {
                    format!("este pagamento já tem outro estorno em andamento ({other}); não dá para reenviar este")
                } else {
                    format!("esta venda já tem outro pagamento ({other}); não dá para reenviar este")
                }));
            }
            // A refund sent again must still fit in what is left of its payment.
            if let Some(refund) = get_attempt(c, id)?.filter(Attempt::is_refund) {
                let payment = refund.refund_of.as_ref().expect("a refund names its payment");
                let paid = get_attempt(c, payment)?
                    .ok_or_else(|| CoreError::NotFound(payment.to_string()))?;
                balance(c, &paid, Some(id))?.fits(refund.valor)?;
            }
            exec(
                c,
                "UPDATE attempts SET state = 'pendente', next_try_at = ?2, updated_at = ?2,
                        review_checked_at = NULL
                 WHERE id = ?1 AND state = 'revisao'",
                params![id.as_ref(), now],
            )?;
            Ok(())
        })
        .await
    }

    /// Settles an attempt in `revisao` with what the server has for its `referencia`: a payment
    /// found means the attempt did reach the gateway.
    pub async fn settle_review(
        &self,
        id: &AttemptId,
        answer: FinalAnswer,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        self.change(id, move |c, id| {
            exec(
                c,
                "UPDATE attempts SET state = ?2, response_status = ?3, response_body = ?4, payment_id = ?5,
                        motivo = ?6, review_checked_at = ?7, updated_at = ?7
                 WHERE id = ?1 AND state = 'revisao'",
                params![id.as_ref(), answer.state.as_str(), answer.status, answer.body, answer.payment_id, answer.motivo, now],
            )?;
            Ok(())
        })
        .await
    }

    /// Records that the server cancelled the key of a payment attempt in `revisao`: it never
    /// charged and never will, so the attempt is final as `recusado` (motivo
    /// [`KEY_CANCELLED`]) and the sale may get a new attempt.
    pub async fn record_key_cancelled(
        &self,
        id: &AttemptId,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        self.change(id, move |c, id| {
            exec(
                c,
                "UPDATE attempts SET state = 'recusado', motivo = ?2, review_checked_at = ?3, updated_at = ?3
                 WHERE id = ?1 AND state = 'revisao' AND kind = 'pagamento'",
                params![id.as_ref(), KEY_CANCELLED, now],
            )?;
            Ok(())
        })
        .await
    }

    /// Records that the server has no payment for an attempt in `revisao`.
    pub async fn mark_review_checked(
        &self,
        id: &AttemptId,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        self.change(id, move |c, id| {
            exec(
                c,
                "UPDATE attempts SET review_checked_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'revisao'",
                params![id.as_ref(), now],
            )?;
            Ok(())
        })
        .await
    }

    /// Attempts in `revisao`, oldest first; only those not yet checked with `unchecked_only`.
    /// A checked one stays here until a payment found or a cancelled key settles it.
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

    /// The payment attempts of one sale, oldest first.
    pub async fn attempts_of(&self, sale: &SaleId) -> Result<Vec<Attempt>> {
        let sale = sale.clone();
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    "WHERE sale_id = ?1 AND kind = 'pagamento' ORDER BY seq",
                    [sale.as_ref()],
                )?)
            })
            .await
    }

    /// The sale open at the till, if one was opened.
    /// With its number that day (`None` for a sale opened before numbering existed).
    pub async fn current_sale(&self) -> Result<Option<(SaleId, Option<u32>)>> {
        self.db
            .read(|c| {
                let row: Option<(String, Option<u32>)> = c
                    .prepare_cached(
                        "SELECT till.sale_id, sales.number FROM till
                         LEFT JOIN sales ON sales.sale_id = till.sale_id WHERE till.id = 1",
                    )?
                    .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                row.map(|(s, number)| {
                    SaleId::parse(&s)
                        .map(|sale| (sale, number))
                        .map_err(|e| CoreError::Storage(e.to_string()))
                })
                .transpose()
            })
            .await
    }

    /// Opens `sale` at the till; returns its number that day.
    pub async fn open_sale(&self, sale: SaleId, now: UnixMillis) -> Result<u32> {
        let day = self.day_of(now);
        self.db
            .write(move |c| Ok(set_till(c, &sale, now, &day)?))
            .await
    }

    /// The attempts of a store day, oldest first: the payments of the sales opened that day and
    /// of sales from before numbering existed that were made in `bounds`, and the refunds made
    /// in `bounds` (a refund counts the day the money went back, whatever day the sale was).
    pub async fn attempts_of_day(
        &self,
        day: &str,
        bounds: (UnixMillis, UnixMillis),
    ) -> Result<Vec<Attempt>> {
        let day = day.to_string();
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    "WHERE (kind = 'pagamento' AND (sale_id IN (SELECT sale_id FROM sales WHERE day = ?1)
                                                    OR (sale_id NOT IN (SELECT sale_id FROM sales)
                                                        AND created_at >= ?2 AND created_at < ?3)))
                        OR (kind = 'estorno' AND created_at >= ?2 AND created_at < ?3)
                     ORDER BY seq",
                    params![day, bounds.0, bounds.1],
                )?)
            })
            .await
    }

    /// Keeps the closing of `day` (the last one counts: a till may be closed again).
    pub async fn save_closing(
        &self,
        day: &str,
        closed_at: UnixMillis,
        report: String,
    ) -> Result<()> {
        let day = day.to_string();
        self.db
            .write(move |c| {
                exec(
                    c,
                    "INSERT INTO closings (day, closed_at, report) VALUES (?1, ?2, ?3)
                     ON CONFLICT (day) DO UPDATE SET closed_at = excluded.closed_at, report = excluded.report",
                    params![day, closed_at, report],
                )?;
                Ok(())
            })
            .await
    }

    /// The closing kept for `day`, as `(closed_at, report)`.
    pub async fn closing(&self, day: &str) -> Result<Option<(UnixMillis, String)>> {
        let day = day.to_string();
        self.db
            .read(move |c| {
                Ok(
                    c.prepare_cached("SELECT closed_at, report FROM closings WHERE day = ?1")?
                        .query_row([day], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()?,
                )
            })
            .await
    }

    /// The latest payment attempt of every sale that is not settled (`pendente`, or `revisao`),
    /// and every refund that is not.
    pub async fn unfinished(&self) -> Result<Vec<Attempt>> {
        self.db
            .read(|c| {
                Ok(select_attempts(
                    c,
                    "WHERE state IN ('pendente', 'revisao')
                     AND (kind = 'estorno' OR seq = (SELECT max(seq) FROM attempts b
                                                   WHERE b.sale_id = attempts.sale_id AND b.kind = 'pagamento'))
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
    pub async fn get(&self, id: &AttemptId) -> Result<Option<Attempt>> {
        let id = id.clone();
        self.db.read(move |c| Ok(get_attempt(c, &id)?)).await
    }

    /// Every attempt, oldest first.
    pub async fn list(&self) -> Result<Vec<Attempt>> {
        self.db
            .read(|c| Ok(select_attempts(c, "ORDER BY seq", [])?))
            .await
    }

    /// The newest `limit` attempts and every unsettled one (`pendente`, `revisao`), oldest first:
    /// what a window shows, bounded however long the till has run. Attempts are never deleted,
    /// so `seq` (the rowid) only grows and the newest are those above `max(seq) - limit`.
    pub async fn recent(&self, limit: usize) -> Result<Vec<Attempt>> {
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    "WHERE seq > (SELECT COALESCE(MAX(seq), 0) FROM attempts) - ?1
                        OR state IN ('pendente', 'revisao')
                     ORDER BY seq",
                    [limit as i64],
                )?)
            })
            .await
    }

    /// The queue now.
    pub async fn queue(&self) -> Result<QueueSummary> {
        self.db.read(|c| Ok(queue(c)?)).await
    }

    /// The exact bytes stored for an attempt's request.
    pub async fn request_body(&self, id: &AttemptId) -> Result<Option<Vec<u8>>> {
        let id = id.clone();
        self.db
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT request_body FROM attempts WHERE id = ?1",
                    [id.as_ref()],
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

/// The server id of an approved payment attempt, which a refund of it names; refused for anything
/// else.
fn refundable(paid: &Attempt) -> Result<PaymentId> {
    if paid.kind != AttemptKind::Pagamento {
        return Err(CoreError::Invalid(
            "um estorno não pode ser estornado; escolha o pagamento".into(),
        ));
    }
    if paid.state != AttemptState::Aprovado {
        return Err(CoreError::Invalid(format!(
            "só um pagamento aprovado pode ser estornado; este está {}",
            paid.state.label()
        )));
    }
    let id = paid.payment_id.as_deref().unwrap_or_default();
    PaymentId::parse(id).map_err(|e| CoreError::Invalid(e.to_string()))
}

/// The refund balance of the payment attempt `paid`, leaving out the refund `except`.
fn balance(
    c: &rusqlite::Connection,
    paid: &Attempt,
    except: Option<&AttemptId>,
) -> rusqlite::Result<RefundBalance> {
    let (estornado, em_andamento) = c
        .prepare_cached(&format!(
            "SELECT COALESCE(SUM(valor) FILTER (WHERE state = 'aprovado'), 0),
                    COALESCE(SUM(valor) FILTER (WHERE {LIVE_REFUND}), 0)
             FROM attempts WHERE kind = 'estorno' AND refund_of = ?1 AND id IS NOT ?2"
        ))?
        .query_row(
            params![paid.id.as_ref(), except.map(AsRef::<str>::as_ref)],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
    Ok(RefundBalance {
        valor: paid.valor.get(),
        estornado,
        em_andamento,
    })
}
