//! SQLite with durable group commit.
//!
//! All writes go through one writer thread. It takes every write waiting in its queue, runs each
//! in its own SAVEPOINT inside one `BEGIN IMMEDIATE` transaction, commits once, and only then
//! answers each caller. Concurrent callers therefore share one fsync instead of paying one each,
//! and no caller hears "done" before its write is durable (WAL, `synchronous=FULL`). A write that
//! fails rolls back to its savepoint and does not disturb the others in its batch; a batch whose
//! `BEGIN` or `COMMIT` fails fails every write in it. Reads run on a small pool of connections.
//!
//! A write may also be *relaxed* ([`Db::write_relaxed`]): for what can be recomputed or asked
//! again after a power cut. A batch of only relaxed writes commits with `synchronous=NORMAL`: it
//! survives a crash of the process but not of the machine until the next durable commit or
//! checkpoint syncs the WAL. The WAL is appended in order, so a durable commit makes every
//! relaxed one before it durable too, and a power cut can only lose a tail of relaxed commits.
//! When the writer finds both kinds waiting, it commits each kind in a commit of its own, in the
//! order [`Options::first`] says: by default the relaxed ones first, so a relaxed write never waits
//! for a sync it did not ask for; or the durable ones first, where a person waits for them and
//! the relaxed writes are background bookkeeping.
//!
//! Checkpoints run on a thread of their own (passive: they never hold the writer up). SQLite
//! starts the log again from its first page only after a checkpoint has copied all of it, which
//! never happens while writes keep coming; so once the log is long, the writer copies the rest
//! itself between two batches and its next commit starts the log again.
//!
//! Used by the payment API's store and by the checkout outbox.

pub mod private;
mod timings;

pub use hdrhistogram::Histogram;
pub use timings::{Phases, Timings, WriteTime, KEEP_WRITES};

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use timings::{BatchClock, Profile, Sched, SchedReader};
use tokio::sync::oneshot;

/// Why a write or read did not happen.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite refused a statement of this write.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The batch this write was in could not begin or commit; nothing of it is durable.
    #[error("{message}")]
    Batch {
        /// SQLite's primary error code, when it gave one (busy, full, I/O…).
        code: Option<rusqlite::ErrorCode>,
        /// SQLite's message.
        message: String,
    },
    /// The writer thread is gone (closed, or the database could not be opened).
    #[error("the database writer is not running")]
    WriterGone,
    /// The database file could not be created or made private.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// SQLite's primary error code, whichever way the error arrived.
    pub fn code(&self) -> Option<rusqlite::ErrorCode> {
        match self {
            Error::Sqlite(e) => e.sqlite_error_code(),
            Error::Batch { code, .. } => *code,
            Error::WriterGone | Error::Io(_) => None,
        }
    }

    fn batch(e: &rusqlite::Error) -> Self {
        Error::Batch {
            code: e.sqlite_error_code(),
            message: e.to_string(),
        }
    }
}

/// How to open the database.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long a statement waits for another process's lock before failing with "busy".
    pub busy_timeout: Duration,
    /// Most writes folded into one transaction.
    pub max_batch: usize,
    /// Upper bound on the file's size in pages (`PRAGMA max_page_count`); `None` for SQLite's default.
    pub max_page_count: Option<u64>,
    /// How often a background thread copies the WAL into the database (a passive checkpoint).
    /// Committing writers then never pay for a checkpoint themselves.
    pub checkpoint_every: Duration,
    /// Most page cache each pooled reader keeps, in KiB (`PRAGMA cache_size`); `None` for
    /// SQLite's default, 2 000 KiB. Every connection fills a cache of its own as the file grows,
    /// so a database read by a few connections is held in memory several times over. The writer
    /// keeps SQLite's default: its cache is what spares a burst of writes (a queue draining) from
    /// reading its pages back.
    pub reader_cache_kib: Option<u32>,
    /// Which kind of write the writer commits first when it finds both waiting.
    pub first: First,
}

/// Which kind of write goes first when the writer finds both waiting; each kind commits in a
/// commit of its own either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum First {
    /// The relaxed writes, whose commit is short (no fsync): no relaxed write waits for a sync it
    /// did not ask for, and the shorter job going first keeps the mean wait least (a server's
    /// claims ahead of its results).
    #[default]
    Relaxed,
    /// The durable writes: someone waits for them (a cashier's `pay` until its write-ahead is
    /// durable), and the relaxed ones are bookkeeping nobody waits on, which can wait a sync.
    Durable,
}

/// A reader cache for a database that holds one machine's own recent work (the app's outbox and
/// its embedded sandbox): what the cache does not hold, the operating system's page cache does.
pub const SMALL_READER_CACHE_KIB: u32 = 512;

impl Default for Options {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            max_batch: 512,
            max_page_count: None,
            checkpoint_every: Duration::from_millis(500),
            reader_cache_kib: None,
            first: First::Relaxed,
        }
    }
}

type Completer = Box<dyn FnOnce(Result<(), &rusqlite::Error>) + Send>;
type Job = Box<dyn FnOnce(Result<&Connection, &rusqlite::Error>) -> Completer + Send>;

/// A job in the writer's queue, and whether its caller waits for it to survive a power cut.
struct Queued {
    job: Job,
    durable: bool,
    at: Instant,
}

/// A database file with a group-commit writer and a read pool. Cheap to clone.
#[derive(Clone)]
pub struct Db {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    options: Options,
    writer: Mutex<Option<mpsc::Sender<Queued>>>,
    readers: Mutex<Vec<Connection>>,
    /// Off until [`Db::profile`]: a database keeps no timings unless asked.
    profile: Arc<Profile>,
    /// Set by the checkpoint thread for the writer: copy the rest of a long log.
    tail: Arc<LogTail>,
}

/// Log pages past which the checkpoint thread, after its passive checkpoint, leaves the writer
/// the rest of the log to copy (what the writer appended while it ran), between two batches, so
/// that its next commit starts the log again from its first page: SQLite restarts a WAL only
/// after a checkpoint has copied all of it, and a log that only grows makes every commit extend
/// the file, whose durable commits then also wait for the file system's journal (a 12-page
/// commit, one after another: p50 1.5x and p99 1.4 to 2.5x with the log at 148 MB than at 4 MB).
/// The number is SQLite's own automatic checkpoint threshold.
const RESTART_LOG_PAGES: i64 = 1000;

/// When the checkpoint thread last left the writer a tail of a long log to copy (`None`: none
/// left).
#[derive(Default)]
struct LogTail(Mutex<Option<Instant>>);

impl LogTail {
    fn leave(&self) {
        if let Ok(mut t) = self.0.lock() {
            t.get_or_insert_with(Instant::now);
        }
    }

    fn left_since(&self) -> Option<Instant> {
        self.0.lock().ok().and_then(|t| *t)
    }

    fn take(&self) {
        if let Ok(mut t) = self.0.lock() {
            *t = None;
        }
    }
}

/// On the writer's connection, between two batches: copies what is left of the log and, once no
/// reader is still reading an older snapshot of it, has the next commit start the log again
/// (`RESTART`). It waits for such readers at most a few milliseconds (Pagar's reads are short);
/// a reader that takes longer leaves the log as it is until the next time.
fn restart_log(conn: &Connection, busy_timeout: Duration) -> rusqlite::Result<(i64, i64)> {
    conn.busy_timeout(RESTART_WAITS_AT_MOST)?;
    let done = checkpoint_as(conn, "RESTART");
    conn.busy_timeout(busy_timeout)?;
    done
}

/// The longest the writer waits for readers of an older snapshot when it restarts the log.
const RESTART_WAITS_AT_MOST: Duration = Duration::from_millis(5);

/// A passive checkpoint on `conn`: (pages in the log, pages of it now in the database).
fn checkpoint(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    checkpoint_as(conn, "PASSIVE")
}

/// A checkpoint of `mode` (`PASSIVE`, `RESTART`) on `conn`: (pages in the log, pages of it now
/// in the database).
fn checkpoint_as(conn: &Connection, mode: &str) -> rusqlite::Result<(i64, i64)> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
        Ok((r.get(1)?, r.get(2)?))
    })
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.inner.path)
            .finish()
    }
}

/// Opens one connection with the durability pragmas.
pub fn connect(path: &Path, options: &Options) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    if let Some(pages) = options.max_page_count {
        conn.pragma_update(None, "max_page_count", pages)?;
    }
    Ok(conn)
}

/// A pooled reader's connection: [`connect`] with its page cache bounded.
fn reader(path: &Path, options: &Options) -> rusqlite::Result<Connection> {
    let conn = connect(path, options)?;
    if let Some(kib) = options.reader_cache_kib {
        // A negative cache size is in KiB, a positive one in pages.
        conn.pragma_update(None, "cache_size", -i64::from(kib))?;
    }
    Ok(conn)
}

impl Db {
    /// Opens `path`, runs `migrate` on the writer's connection, and starts the writer thread.
    pub fn open<E>(
        path: impl AsRef<Path>,
        options: Options,
        migrate: impl FnOnce(&mut Connection) -> Result<(), E>,
    ) -> Result<Self, E>
    where
        E: From<Error>,
    {
        let path = path.as_ref().to_path_buf();
        // Created 0600 before SQLite opens it: SQLite gives its -wal and -shm files the mode of
        // the database file, so they are private too.
        private::create_file(&path)
            .and_then(|()| private::tighten_database(&path))
            .map_err(|e| E::from(Error::Io(e)))?;
        let mut conn = connect(&path, &options).map_err(|e| E::from(e.into()))?;
        migrate(&mut conn)?;
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(|e| E::from(e.into()))?;
        // After the pragma: SQLite's automatic checkpoints and this hook share one slot.
        conn.wal_hook(Some(log_grew));
        let (tx, rx) = mpsc::channel::<Queued>();
        let profile = Arc::new(Profile::default());
        let tail = Arc::new(LogTail::default());
        let (kept, writer_options, writer_tail) = (profile.clone(), options.clone(), tail.clone());
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx, &writer_options, &kept, &writer_tail))
            .map_err(|_| E::from(Error::WriterGone))?;
        let inner = Arc::new(Inner {
            path,
            options,
            writer: Mutex::new(Some(tx)),
            readers: Mutex::new(Vec::new()),
            profile,
            tail,
        });
        let weak = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || checkpoint_loop(weak))
            .map_err(|_| E::from(Error::WriterGone))?;
        Ok(Self { inner })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Starts keeping [`Timings`] of the writes from now on (a profile: its histograms take
    /// about 2 MiB, so a database keeps none unless asked). Asking again changes nothing.
    pub fn profile(&self) {
        self.inner.profile.start();
    }

    /// Where the writes' time went since [`Db::profile`]; `None` before it. A batch is recorded
    /// just after its callers hear back.
    pub fn timings(&self) -> Option<Timings> {
        self.inner.profile.timings()
    }

    /// Runs `f` inside the next group-committed transaction; resolves once it is durable.
    pub async fn write<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        self.queue(f, true).await
    }

    /// Runs `f` inside the next group-committed transaction; resolves once it is committed, which
    /// a crash of the process cannot undo but a power cut can, until the next durable write or
    /// checkpoint. For records that are safe to lose that way (see the crate's documentation).
    pub async fn write_relaxed<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        self.queue(f, false).await
    }

    async fn queue<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        durable: bool,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<T, E>>();
        let job: Job = Box::new(move |conn| {
            let result = match conn {
                Ok(conn) => in_savepoint(conn, f),
                Err(begin) => Err(E::from(Error::batch(begin))),
            };
            Box::new(move |committed: Result<(), &rusqlite::Error>| {
                let outcome = match (committed, result) {
                    (Ok(()), r) => r,
                    (Err(_), Err(e)) => Err(e),
                    (Err(c), Ok(_)) => Err(E::from(Error::batch(c))),
                };
                let _ = tx.send(outcome);
            })
        });
        let sender = self.inner.writer.lock().expect("writer lock").clone();
        sender.ok_or(Error::WriterGone).and_then(|s| {
            s.send(Queued {
                job,
                durable,
                at: Instant::now(),
            })
            .map_err(|_| Error::WriterGone)
        })?;
        rx.await.map_err(|_| E::from(Error::WriterGone))?
    }

    /// Runs `f` on a pooled read connection (on tokio's blocking pool).
    pub async fn read<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = inner.readers.lock().expect("reader lock").pop();
            let conn = match pooled {
                Some(c) => c,
                None => reader(&inner.path, &inner.options).map_err(|e| E::from(e.into()))?,
            };
            let result = f(&conn);
            inner.readers.lock().expect("reader lock").push(conn);
            result
        })
        .await
        .map_err(|_| E::from(Error::WriterGone))?
    }

    /// Stops the writer after the writes already queued; later writes fail with `WriterGone`.
    pub fn close(&self) {
        self.inner.writer.lock().expect("writer lock").take();
    }
}

/// Passive checkpoints on a connection of its own, until the database is closed or dropped.
fn checkpoint_loop(db: std::sync::Weak<Inner>) {
    let Some((path, options, profile, tail)) = db.upgrade().map(|i| {
        (
            i.path.clone(),
            i.options.clone(),
            i.profile.clone(),
            i.tail.clone(),
        )
    }) else {
        return;
    };
    let conn = match connect(&path, &options) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "sqlite: no checkpoint connection; the WAL will only grow");
            return;
        }
    };
    loop {
        std::thread::sleep(options.checkpoint_every);
        match db.upgrade() {
            Some(inner) if inner.writer.lock().map(|w| w.is_some()).unwrap_or(false) => {}
            _ => break,
        }
        match profile.checkpoint(|| checkpoint(&conn)) {
            // A long log: whatever the writer appended while this ran is the writer's to copy.
            Ok((log, _)) if log >= RESTART_LOG_PAGES => tail.leave(),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sqlite: checkpoint failed; will try again"),
        }
    }
    // One last checkpoint, so the next process starts from a short WAL.
    let _ = checkpoint(&conn);
}

thread_local! {
    /// The pages in the write-ahead log after the writer's last commit (SQLite's WAL hook runs
    /// on the committing thread, the writer).
    static LOG_PAGES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };

    /// Set on the writer thread when a savepoint could not be closed cleanly (its `RELEASE` or
    /// `ROLLBACK TO` failed): the transaction may hold writes of a job that was told it failed,
    /// so the writer rolls the whole batch back instead of committing it.
    static SAVEPOINT_BROKEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn log_grew(_: &rusqlite::hooks::Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
    LOG_PAGES.with(|p| p.set(u64::try_from(pages).unwrap_or(0)));
    Ok(())
}

/// Pages the commit just made appended to the log, given the log's pages before it: the log
/// restarts from its first page once a checkpoint has copied all of it.
fn appended(before: u64) -> u64 {
    let now = LOG_PAGES.with(|p| p.get());
    if now >= before {
        now - before
    } else {
        now
    }
}

fn in_savepoint<T, E: From<Error>>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T, E>,
) -> Result<T, E> {
    conn.execute_batch("SAVEPOINT op")
        .map_err(|e| E::from(e.into()))?;
    match f(conn) {
        Ok(v) => match conn.execute_batch("RELEASE op") {
            Ok(()) => Ok(v),
            Err(e) => {
                SAVEPOINT_BROKEN.with(|b| b.set(true));
                Err(E::from(e.into()))
            }
        },
        Err(e) => {
            // After some errors (SQLITE_FULL, SQLITE_IOERR…) SQLite has already rolled the whole
            // transaction back and the savepoint is gone; the writer loop notices that.
            if !conn.is_autocommit() && conn.execute_batch("ROLLBACK TO op; RELEASE op").is_err() {
                SAVEPOINT_BROKEN.with(|b| b.set(true));
            }
            Err(e)
        }
    }
}

/// The error every job of an aborted batch hears.
fn batch_aborted(why: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
        Some(why.into()),
    )
}

fn writer_loop(
    conn: Connection,
    rx: mpsc::Receiver<Queued>,
    options: &Options,
    profile: &Profile,
    tail: &LogTail,
) {
    let max_batch = options.max_batch.max(1);
    // `connect` set synchronous=FULL.
    let mut synced = true;
    // The writer's scheduling counters, read only while a profile is on.
    let sched = SchedReader::default();
    // A write taken from the queue while looking whether it was empty.
    let mut next = None;
    loop {
        let idle = profile.is_on().then(|| sched.read());
        let first = match next.take() {
            Some(q) => q,
            None => match rx.recv() {
                Ok(q) => q,
                Err(_) => break,
            },
        };
        let taken = Instant::now();
        let taken_sched = if profile.is_on() {
            sched.read()
        } else {
            Sched::default()
        };
        // A profile started while the writer waited counts no wait for a core in this batch.
        let idle = idle.unwrap_or(taken_sched);
        let (mut durable, mut relaxed) = (Vec::new(), Vec::new());
        let mut add = |q: Queued| {
            if q.durable {
                durable.push((q.job, q.at))
            } else {
                relaxed.push((q.job, q.at))
            }
        };
        add(first);
        for _ in 1..max_batch {
            match rx.try_recv() {
                Ok(q) => add(q),
                Err(_) => break,
            }
        }
        // Each kind in a commit of its own, in the order the options say. The writes of one
        // batch come from callers running at the same time (a caller awaits each write), so
        // committing them in two groups orders nothing that was ordered.
        let groups = match options.first {
            First::Relaxed => [(relaxed, false), (durable, true)],
            First::Durable => [(durable, true), (relaxed, false)],
        };
        for (jobs, sync) in groups {
            if jobs.is_empty() {
                continue;
            }
            let (jobs, queued): (Vec<Job>, Vec<Instant>) = jobs.into_iter().unzip();
            if !profile.is_on() {
                commit(&conn, &mut synced, sync, jobs, None);
                continue;
            }
            let began = Instant::now();
            let began_sched = sched.read();
            let log_before = LOG_PAGES.with(|p| p.get());
            let checkpointed = profile.read();
            let (ran, ran_sched) = commit(&conn, &mut synced, sync, jobs, Some(&sched));
            let clock = BatchClock {
                taken,
                began,
                ran,
                committed: Instant::now(),
                frames: appended(log_before),
                beside_checkpoint: profile.ran_since(checkpointed),
                sched: [idle, taken_sched, began_sched, ran_sched, sched.read()],
            };
            profile.with(|t| t.record(sync, &queued, &clock));
        }
        // The rest of a long log, once no write waits (or once it has waited a checkpoint
        // period): the checkpoint thread copied the bulk of it, so what is left is short, and
        // with nothing appended while this runs the copy is complete and the next commit
        // starts the log again.
        if let Some(since) = tail.left_since() {
            next = rx.try_recv().ok();
            if next.is_none() || since.elapsed() >= options.checkpoint_every {
                tail.take();
                let restarted = profile.checkpoint(|| restart_log(&conn, options.busy_timeout));
                if let Err(e) = restarted {
                    tracing::warn!(error = %e, "sqlite: the writer's checkpoint failed");
                }
            }
        }
    }
}

/// Runs `batch` in one transaction, each job in its own savepoint, and commits it with
/// `synchronous=FULL` when `durable` (`NORMAL` otherwise); then tells every job how it ended.
/// Returns when its statements had run (the `COMMIT` began), with the writer's scheduling
/// counters then when `sched` is given.
fn commit(
    conn: &Connection,
    synced: &mut bool,
    durable: bool,
    batch: Vec<Job>,
    sched: Option<&SchedReader>,
) -> (Instant, Sched) {
    let now = || (Instant::now(), sched.map(|s| s.read()).unwrap_or_default());
    if durable != *synced {
        let level = if durable { "FULL" } else { "NORMAL" };
        match conn.pragma_update(None, "synchronous", level) {
            Ok(()) => *synced = durable,
            // Still FULL: stricter than a relaxed batch asked, which is fine.
            Err(e) if !durable => {
                tracing::warn!(error = %e, "sqlite: cannot set synchronous=NORMAL")
            }
            // Still NORMAL: a durable write must not be committed so.
            Err(e) => {
                tracing::warn!(error = %e, "sqlite: cannot set synchronous=FULL");
                for job in batch {
                    job(Err(&e))(Err(&e));
                }
                return now();
            }
        }
    }
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        tracing::warn!(error = %e, "sqlite: cannot begin a write transaction");
        for job in batch {
            job(Err(&e))(Err(&e));
        }
        return now();
    }
    let mut completers: Vec<Completer> = Vec::with_capacity(batch.len());
    let mut jobs = batch.into_iter();
    SAVEPOINT_BROKEN.with(|b| b.set(false));
    for job in jobs.by_ref() {
        completers.push(job(Ok(conn)));
        if conn.is_autocommit() || SAVEPOINT_BROKEN.with(|b| b.get()) {
            break;
        }
    }
    if SAVEPOINT_BROKEN.with(|b| b.replace(false)) {
        // A job was told it failed but its writes could not be undone alone: undo the batch.
        let broken =
            batch_aborted("a savepoint could not be closed; the whole batch was rolled back");
        tracing::error!("sqlite: a savepoint could not be closed; failing its batch");
        let _ = conn.execute_batch("ROLLBACK");
        completers.extend(jobs.map(|job| job(Err(&broken))));
        completers.into_iter().for_each(|done| done(Err(&broken)));
        return now();
    }
    if conn.is_autocommit() {
        // SQLite rolled the transaction back on its own: nothing of this batch is durable.
        let lost =
            batch_aborted("the transaction was rolled back by SQLite after an error in its batch");
        tracing::error!("sqlite: transaction rolled back by SQLite; failing its batch");
        completers.extend(jobs.map(|job| job(Err(&lost))));
        completers.into_iter().for_each(|done| done(Err(&lost)));
        return now();
    }
    let ran = now();
    match conn.execute_batch("COMMIT") {
        Ok(()) => completers.into_iter().for_each(|done| done(Ok(()))),
        Err(e) => {
            tracing::error!(error = %e, "sqlite: commit failed; the batch is rolled back");
            let _ = conn.execute_batch("ROLLBACK");
            completers.into_iter().for_each(|done| done(Err(&e)));
        }
    }
    ran
}

/// Executes one statement through the connection's statement cache.
pub fn exec(c: &Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &Path, options: Options) -> Db {
        Db::open(path, options, |c| {
            c.execute_batch("CREATE TABLE IF NOT EXISTS t (v INTEGER UNIQUE)")
                .map_err(Error::from)
        })
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn concurrent_writes_all_commit_and_a_failing_one_does_not_spoil_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir.path().join("t.db"), Options::default());
        let mut tasks = Vec::new();
        for v in 0..200 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                db.write(move |c| {
                    exec(c, "INSERT INTO t VALUES (?1)", [v % 100]).map_err(Error::from)
                })
                .await
            }));
        }
        let mut ok = 0;
        for t in tasks {
            if t.await.unwrap().is_ok() {
                ok += 1;
            }
        }
        assert_eq!(ok, 100, "each value once; the duplicates fail alone");
        let n: i64 = db
            .read(|c| {
                c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                    .map_err(Error::from)
            })
            .await
            .unwrap();
        assert_eq!(n, 100);
    }

    /// The connection's `PRAGMA synchronous`: 2 = FULL (the WAL synced at every commit),
    /// 1 = NORMAL (synced at checkpoints).
    fn synchronous(c: &Connection) -> Result<i64, Error> {
        Ok(c.query_row("PRAGMA synchronous", [], |r| r.get(0))?)
    }

    /// Queues ten durable and ten relaxed writes behind a slow write, so the writer's next batch
    /// holds both kinds, and returns the timings once all 21 have committed (the slow one
    /// durable); checks each write was committed with the sync its kind asked for.
    async fn both_kinds_in_one_batch(first: First) -> Timings {
        let dir = tempfile::tempdir().unwrap();
        let db = open(
            &dir.path().join("t.db"),
            Options {
                first,
                ..Options::default()
            },
        );
        assert!(db.timings().is_none(), "no timings kept unless asked");
        db.profile();
        // The writer busy with a slow write while both kinds queue up behind it: the next
        // batch holds relaxed and durable writes together.
        let (busy_tx, busy_rx) = std::sync::mpsc::channel::<()>();
        let blocker = tokio::spawn({
            let db = db.clone();
            async move {
                db.write(move |_| {
                    let _ = busy_rx.recv_timeout(std::time::Duration::from_secs(5));
                    Ok::<_, Error>(())
                })
                .await
            }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let mut tasks = Vec::new();
        for v in 0..20 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                let insert = move |c: &Connection| -> Result<i64, Error> {
                    exec(c, "INSERT INTO t VALUES (?1)", [v])?;
                    synchronous(c)
                };
                let durable = v % 2 == 0;
                let seen = if durable {
                    db.write(insert).await
                } else {
                    db.write_relaxed(insert).await
                };
                (durable, seen.unwrap())
            }));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        busy_tx.send(()).unwrap();
        blocker.await.unwrap().unwrap();
        for t in tasks {
            let (durable, seen) = t.await.unwrap();
            // 2 = FULL, 1 = NORMAL.
            assert_eq!(seen, if durable { 2 } else { 1 }, "durable: {durable}");
        }

        // The timings say so: every write counted once, by its kind; the 20 waited behind
        // the slow write (50 ms at least); which kind went first is for the caller to check.
        // A batch is recorded just after its callers hear back: wait for the last ones.
        let mut t = db.timings().expect("profiled");
        for _ in 0..100 {
            if (t.durable.total.len(), t.relaxed.total.len()) == (11, 10) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            t = db.timings().expect("profiled");
        }
        assert_eq!((t.durable.total.len(), t.relaxed.total.len()), (11, 10));
        assert_eq!((t.durable.batches, t.relaxed.batches), (2, 1));
        assert_eq!(t.durable.frames.len(), 2);
        assert!(t.durable.frames.max() >= 1 && t.relaxed.frames.min() >= 1);
        assert!(
            t.relaxed.waited.min() >= 50_000,
            "{}",
            t.relaxed.waited.min()
        );
        assert!(t.durable.waited.value_at_quantile(0.5) >= 50_000);
        assert!(t.durable.total.max() >= t.durable.waited.max() + t.durable.committed.min());
        // Each write also one by one, its parts within their phases.
        assert_eq!((t.durable.writes.len(), t.relaxed.writes.len()), (11, 10));
        for w in t.durable.writes.iter().chain(&t.relaxed.writes) {
            assert!(
                w.total >= w.waited + w.behind + w.ran + w.committed,
                "{w:?}"
            );
            assert!(w.waited_for_core <= w.waited + 1 && w.ran_waiting_for_core <= w.ran + 1);
            assert!(w.commit_on_core + w.commit_waiting_for_core <= w.committed + 1);
        }
        let slow = |w: &&WriteTime| w.waited >= 50_000;
        assert_eq!(
            t.durable.writes.iter().filter(slow).count(),
            10,
            "all but the slow one"
        );
        #[cfg(target_os = "linux")]
        assert!(
            t.durable.writes.iter().any(|w| w.commit_on_core > 0),
            "a commit takes some time on a core"
        );
        t
    }

    #[tokio::test]
    async fn a_relaxed_write_queued_with_durable_ones_never_waits_for_their_sync() {
        let t = both_kinds_in_one_batch(First::Relaxed).await;
        // The durable ones of the second batch waited behind the relaxed commit that went
        // first, which waited behind nothing of its batch.
        assert!(t.durable.behind.max() >= t.relaxed.ran.max() + t.relaxed.committed.max());
        assert!(t.relaxed.behind.max() < t.durable.behind.max());
    }

    #[tokio::test]
    async fn durable_first_puts_a_durable_write_ahead_of_the_relaxed_ones_of_its_batch() {
        let t = both_kinds_in_one_batch(First::Durable).await;
        // The relaxed ones waited behind the durable commit (its sync included); the durable
        // ones behind nothing but their own batch's statements.
        let relaxed = &t.relaxed.writes;
        assert!(
            t.relaxed.behind.min() >= t.durable.committed.min(),
            "{relaxed:?}"
        );
        assert!(
            t.durable.behind.max() < t.relaxed.behind.min(),
            "{relaxed:?}"
        );
    }

    #[tokio::test]
    async fn a_log_written_without_a_pause_still_starts_again_from_its_first_page() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            checkpoint_every: Duration::from_millis(50),
            ..Options::default()
        };
        let db = open(&dir.path().join("t.db"), options);
        // One write after another, never a pause for a checkpoint to finish in: each appends
        // at least one page (4 KiB) to the log, 80 MB in all if it never started again.
        for n in 0..20_000 {
            let insert = move |c: &Connection| exec(c, "INSERT INTO t VALUES (?1)", [n]);
            if n % 10 == 0 {
                db.write(move |c| insert(c).map_err(Error::from)).await
            } else {
                db.write_relaxed(move |c| insert(c).map_err(Error::from))
                    .await
            }
            .unwrap();
        }
        let log = std::fs::metadata(dir.path().join("t.db-wal"))
            .unwrap()
            .len();
        assert!(log < 20 << 20, "the log grew to {} MiB", log >> 20);
        let rows: i64 = db
            .read(|c| Ok::<_, Error>(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(rows, 20_000);
    }

    #[tokio::test]
    async fn relaxed_writes_commit_without_a_sync_and_durable_ones_still_sync() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir.path().join("t.db"), Options::default());
        // 2 = FULL (the WAL is synced at every commit), 1 = NORMAL (synced at checkpoints).
        assert_eq!(db.write(synchronous).await.unwrap(), 2);
        for v in 0..3 {
            let seen = db
                .write_relaxed(move |c| {
                    exec(c, "INSERT INTO t VALUES (?1)", [v]).map_err(Error::from)?;
                    synchronous(c)
                })
                .await
                .unwrap();
            assert_eq!(seen, 1, "a batch of relaxed writes only");
            assert_eq!(db.write(synchronous).await.unwrap(), 2, "back to FULL");
        }
        // Relaxed writes are committed: another connection (another process) sees them.
        let other = connect(&dir.path().join("t.db"), &Options::default()).unwrap();
        let n: i64 = other
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 3);
    }

    #[tokio::test]
    async fn a_job_whose_savepoint_cannot_be_rolled_back_fails_its_whole_batch() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir.path().join("t.db"), Options::default());
        // The job writes, closes its own savepoint (so `ROLLBACK TO op` fails) and reports an
        // error: its row must not be committed by the batch it was in.
        let err = db
            .write(|c| {
                exec(c, "INSERT INTO t VALUES (7)", []).map_err(Error::from)?;
                c.execute_batch("RELEASE op").map_err(Error::from)?;
                Err::<(), _>(Error::WriterGone)
            })
            .await
            .unwrap_err();
        assert!(matches!(err, Error::WriterGone), "{err}");
        let n: i64 = db
            .read(|c| {
                c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                    .map_err(Error::from)
            })
            .await
            .unwrap();
        assert_eq!(n, 0, "a job reported failed committed nothing");
        db.write(|c| exec(c, "INSERT INTO t VALUES (8)", []).map_err(Error::from))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_write_blocked_by_another_process_lock_fails_as_busy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let db = open(
            &path,
            Options {
                busy_timeout: Duration::from_millis(100),
                ..Options::default()
            },
        );
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let err = db
            .write(|c| exec(c, "INSERT INTO t VALUES (1)", []).map_err(Error::from))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(rusqlite::ErrorCode::DatabaseBusy), "{err}");
        other.execute_batch("ROLLBACK").unwrap();
        db.write(|c| exec(c, "INSERT INTO t VALUES (1)", []).map_err(Error::from))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_full_database_fails_the_write_with_disk_full() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(
            &dir.path().join("t.db"),
            Options {
                max_page_count: Some(4),
                ..Options::default()
            },
        );
        let mut last = Ok(0);
        for v in 0..2_000 {
            last = db
                .write(move |c| exec(c, "INSERT INTO t VALUES (?1)", [v]).map_err(Error::from))
                .await;
            if last.is_err() {
                break;
            }
        }
        let err = last.unwrap_err();
        assert_eq!(err.code(), Some(rusqlite::ErrorCode::DiskFull), "{err:?}");
    }
}

/// The reference every benchmark of this workspace measures itself against, in the same run:
/// SQLite's own durable commit, one row per transaction, one connection.
pub mod reference {
    use super::{connect, Options};
    use std::path::Path;
    use std::time::{Duration, Instant};

    /// Commits `n` single-row transactions (WAL, `synchronous=FULL`) to a fresh table in `path`
    /// and returns how long each commit took.
    pub fn raw_commit_latencies(path: &Path, n: usize) -> rusqlite::Result<Vec<Duration>> {
        let c = connect(path, &Options::default())?;
        c.execute_batch(
            "CREATE TABLE IF NOT EXISTS raw_commits (id INTEGER PRIMARY KEY, merchant TEXT NOT NULL,
                                                     valor INTEGER NOT NULL, created_at INTEGER NOT NULL)",
        )?;
        let mut latencies = Vec::with_capacity(n);
        for i in 0..n {
            let t = Instant::now();
            c.execute(
                "INSERT INTO raw_commits (merchant, valor, created_at) VALUES ('loja', ?1, ?1)",
                [i as i64 + 1],
            )?;
            latencies.push(t.elapsed());
        }
        Ok(latencies)
    }

    /// Commits `n` transactions (WAL, `synchronous=FULL`) to a fresh table in `path`, each
    /// rewriting the same `pages` pages (one row per page, all updated), as a write to a
    /// database that does not grow rewrites its pages; returns how long each commit took: a
    /// durable commit as large as another's. Passive checkpoints run beside it on a connection
    /// of their own, as often as a [`Db`](super::Db)'s do.
    pub fn raw_commit_latencies_of(
        path: &Path,
        n: usize,
        pages: u64,
    ) -> rusqlite::Result<Vec<Duration>> {
        raw_commit_latencies_beside(path, n, pages, None)
    }

    /// [`raw_commit_latencies_of`] while, when `other` is given, another connection commits
    /// one-row durable transactions to that file in a loop, as another process on the same disk
    /// would (a server beside a till).
    pub fn raw_commit_latencies_beside(
        path: &Path,
        n: usize,
        pages: u64,
        other: Option<&Path>,
    ) -> rusqlite::Result<Vec<Duration>> {
        let raw = RawPages::open(path, pages, other)?;
        (0..n).map(|_| raw.commit()).collect()
    }

    /// A table whose every commit (WAL, `synchronous=FULL`) rewrites the same `pages` pages, as
    /// a write to a database that does not grow rewrites its pages: a durable commit as large as
    /// another's, one at a time, whenever the caller asks ([`RawPages::commit`]). Passive
    /// checkpoints run beside it on a connection of their own, as often as a [`Db`](super::Db)'s
    /// do; and, when `other` is given, another connection commits one-row durable transactions
    /// to that file in a loop. Both stop when it is dropped.
    pub struct RawPages {
        c: rusqlite::Connection,
        done: std::sync::Arc<std::sync::atomic::AtomicBool>,
        beside: Vec<std::thread::JoinHandle<()>>,
    }

    impl RawPages {
        pub fn open(path: &Path, pages: u64, other: Option<&Path>) -> rusqlite::Result<Self> {
            let options = Options::default();
            let c = connect(path, &options)?;
            c.execute_batch(
                "CREATE TABLE IF NOT EXISTS raw_pages (id INTEGER PRIMARY KEY, n INTEGER, b BLOB)",
            )?;
            let page: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            // More than half a page each: no two rows share a leaf page.
            for _ in 0..pages.max(1) {
                c.execute(
                    "INSERT INTO raw_pages (n, b) VALUES (0, zeroblob(?1))",
                    [page * 3 / 5],
                )?;
            }
            let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let mut beside = Vec::new();
            let (stop, checkpointer) = (done.clone(), connect(path, &options)?);
            beside.push(std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(options.checkpoint_every);
                    let _ = super::checkpoint(&checkpointer);
                }
            }));
            if let Some(other) = other {
                let (stop, o) = (done.clone(), connect(other, &options)?);
                o.execute_batch(
                    "CREATE TABLE IF NOT EXISTS beside (id INTEGER PRIMARY KEY, v INTEGER)",
                )?;
                beside.push(std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        if o.execute("INSERT INTO beside (v) VALUES (1)", []).is_err() {
                            break;
                        }
                    }
                }));
            }
            Ok(Self { c, done, beside })
        }

        /// One durable commit of the pages; how long it took.
        pub fn commit(&self) -> rusqlite::Result<Duration> {
            let t = Instant::now();
            self.c.execute("UPDATE raw_pages SET n = n + 1", [])?;
            Ok(t.elapsed())
        }
    }

    impl Drop for RawPages {
        fn drop(&mut self) {
            self.done.store(true, std::sync::atomic::Ordering::Relaxed);
            for thread in self.beside.drain(..) {
                let _ = thread.join();
            }
        }
    }

    /// Makes `n` single-row durable writes in a row through a [`Db`](super::Db) on `path` (its
    /// writer thread and its checkpoints, as Pagar writes) and returns how long each took until
    /// it was durable: what [`raw_commit_latencies`] measures plus what the group commit adds;
    /// with the writer's own [`Timings`](super::Timings) of them.
    pub async fn db_write_latencies(
        path: &Path,
        n: usize,
    ) -> Result<(Vec<Duration>, super::Timings), super::Error> {
        let db = super::Db::open(path, Options::default(), |c| {
            c.execute_batch(
                "CREATE TABLE IF NOT EXISTS db_writes (id INTEGER PRIMARY KEY, merchant TEXT NOT NULL,
                                                       valor INTEGER NOT NULL, created_at INTEGER NOT NULL)",
            )
            .map_err(super::Error::from)
        })?;
        db.profile();
        let mut latencies = Vec::with_capacity(n);
        for i in 0..n as i64 {
            let t = Instant::now();
            db.write(move |c| {
                super::exec(
                    c,
                    "INSERT INTO db_writes (merchant, valor, created_at) VALUES ('loja', ?1, ?1)",
                    [i + 1],
                )
                .map_err(super::Error::from)
            })
            .await?;
            latencies.push(t.elapsed());
        }
        let timings = db.timings().expect("profiled");
        db.close();
        Ok((latencies, timings))
    }

    /// The `p`-quantile (0.0–1.0) of `samples`, in milliseconds.
    pub fn percentile_ms(samples: &[Duration], p: f64) -> f64 {
        let mut s = samples.to_vec();
        s.sort();
        if s.is_empty() {
            return 0.0;
        }
        let i = ((s.len() as f64 * p).ceil() as usize).clamp(1, s.len()) - 1;
        s[i].as_secs_f64() * 1_000.0
    }
}
