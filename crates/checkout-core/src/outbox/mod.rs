//! The write-ahead outbox: every attempt, its key and its exact request bytes, durable in SQLite
//! before the first byte goes on the network.

mod caps;
mod captures;
mod closings;
mod drawer;
mod late_pix;
mod lock;
mod notas;
mod open_sale;
mod records;
mod refunds;
mod reviews;
mod sales;
mod schema;
mod wire;

pub use caps::OfflineCaps;
pub use captures::{CaptureJob, CaptureResult};
pub use lock::lock_path;
pub use notas::{Cancelamento, Desfecho, EstadoNota, Fiscal, NotaRegistro};
pub(crate) use records::Paid;
pub use records::{
    paid_of, Attempt, FinalAnswer, PayOutcome, QueueSummary, RefundBalance, SendJob, Target,
    TryResult,
};

use crate::domain::{
    store_day, AttemptId, AttemptKind, AttemptState, Centavos, IdempotencyKey, PayMethod,
    PaymentId, PixCharge, RefundReason, SaleId, Total, UnixMillis,
};
use crate::error::{CoreError, Result};
use caps::PageLimit;
use durable_sqlite::{exec, Db, Options};
use rusqlite::{params, OptionalExtension};
use schema::{
    after_change, attempt_from_row, get_attempt, migrations, queue, refund_payment,
    select_attempts, set_till, upsert_machine, upsert_pix, ATTEMPT_COLUMNS, BLOCKS_SALE,
    LIVE_REFUND,
};
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wire::{PaymentBody, RefundBody};

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
    /// Every card payment is authorized only (`"captura": false`), not just a divided sale's.
    authorize_cards: bool,
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
            // A cashier waits for the durable writes (a sale's write-ahead); the relaxed ones
            // record how a try ended, and the screen can show that one sync later.
            first: durable_sqlite::First::Durable,
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
            authorize_cards: false,
            _lock: Arc::new(lock),
        })
    }

    /// Numbers sales by the day at `offset` from UTC (UTC until said).
    pub fn with_utc_offset(mut self, offset: time::UtcOffset) -> Self {
        self.utc_offset = offset;
        self
    }

    /// Authorizes every new card payment (captured when its sale is confirmed), not only the
    /// card parts of a divided sale.
    pub fn with_authorize_cards(mut self, on: bool) -> Self {
        self.authorize_cards = on;
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

    /// One `UPDATE` of the attempt `id` (`?1` in `sql`; `rest` are `?2`…), in the write that
    /// returns it as it is now and the queue.
    async fn update(
        &self,
        id: &AttemptId,
        sql: &'static str,
        rest: Vec<rusqlite::types::Value>,
    ) -> Result<(Attempt, QueueSummary)> {
        self.change(id, move |c, id| {
            let all =
                std::iter::once(rusqlite::types::Value::from(id.as_ref().to_string())).chain(rest);
            durable_sqlite::exec(c, sql, rusqlite::params_from_iter(all))?;
            Ok(())
        })
        .await
    }

    /// Starts keeping where the outbox's writes spend their time (a profile: `make bench`).
    pub fn profile_writes(&self) {
        self.db.profile();
    }

    /// Where the outbox's writes spent their time since [`Outbox::profile_writes`].
    pub fn write_timings(&self) -> Option<durable_sqlite::Timings> {
        self.db.timings()
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
