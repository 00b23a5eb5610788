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
//! A write may also be *background* ([`Db::write_background`]): relaxed, and yielding. The
//! writer commits background writes in a commit of their own, and only once no other write
//! waits (or once they have waited [`Options::checkpoint_every`], so a writer that is never
//! idle still gets to them). A background write is for upkeep whose cost must not land on a
//! caller waiting for its own write: a purge of expired rows, each deleted row dirtying a page
//! of its own, holds the writer for milliseconds, and whoever queued behind it waited them.
//!
//! Checkpoints run on a thread of their own (passive: they never hold the writer up). SQLite
//! starts the log again from its first page only after a checkpoint has copied all of it, which
//! never happens while writes keep coming; so once the log is long, the writer copies the rest
//! itself between two batches and its next commit starts the log again.
//!
//! Used by the payment API's store and by the checkout outbox.

mod checkpoints;
pub mod private;
mod timings;
mod writer;

use checkpoints::*;
use writer::*;

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

/// What a write or a read runs on its connection, on another thread: `T` out, or an `E`.
pub trait OnConnection<T, E>: FnOnce(&Connection) -> Result<T, E> + Send + 'static {}

impl<F, T, E> OnConnection<T, E> for F where F: FnOnce(&Connection) -> Result<T, E> + Send + 'static {}

/// A caller's error type: what it hears from another thread, into which every [`Error`] turns.
pub trait CallerError: From<Error> + Send + 'static {}

impl<E: From<Error> + Send + 'static> CallerError for E {}

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

/// A job in the writer's queue, and what its caller waits for.
struct Queued {
    job: Job,
    kind: Kind,
    at: Instant,
}

/// What a write's caller waits for: its commit to survive a power cut, or only a crash of the
/// process; and whether it yields to the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Durable,
    Relaxed,
    Background,
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

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.inner.path)
            .finish()
    }
}

/// Statements each connection keeps prepared ([`exec`], `prepare_cached`): more than every
/// distinct statement a store runs on its hot paths, so none of them is parsed again.
const STATEMENT_CACHE: usize = 128;

/// Opens one connection with the durability pragmas.
pub fn connect(path: &Path, options: &Options) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
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

impl Inner {
    /// Runs `f` on a read connection taken from the pool (a new one when none is free) and
    /// given back after, whatever `f` answered.
    fn with_reader<T, E>(&self, f: impl FnOnce(&Connection) -> Result<T, E>) -> Result<T, E>
    where
        E: From<Error>,
    {
        let pooled = self.readers.lock().expect("reader lock").pop();
        let conn = match pooled {
            Some(c) => c,
            None => reader(&self.path, &self.options).map_err(|e| E::from(e.into()))?,
        };
        let result = f(&conn);
        self.readers.lock().expect("reader lock").push(conn);
        result
    }
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
        // Each job's savepoint journals the pages it changes: in memory, never spilled to a
        // temporary file (a batch touches a bounded number of pages; readers keep SQLite's
        // default for their sorts).
        conn.pragma_update(None, "temp_store", "MEMORY")
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
    pub async fn write<T: Send + 'static, E: CallerError>(
        &self,
        f: impl OnConnection<T, E>,
    ) -> Result<T, E> {
        self.queue(f, Kind::Durable).await
    }

    /// Runs `f` inside the next group-committed transaction; resolves once it is committed, which
    /// a crash of the process cannot undo but a power cut can, until the next durable write or
    /// checkpoint. For records that are safe to lose that way (see the crate's documentation).
    pub async fn write_relaxed<T: Send + 'static, E: CallerError>(
        &self,
        f: impl OnConnection<T, E>,
    ) -> Result<T, E> {
        self.queue(f, Kind::Relaxed).await
    }

    /// Runs `f` in a relaxed commit of its own once no other write waits (see the crate's
    /// documentation), or once it has waited [`Options::checkpoint_every`]: upkeep that may be
    /// done again after a power cut, and may be committed after writes queued after it.
    pub async fn write_background<T: Send + 'static, E: CallerError>(
        &self,
        f: impl OnConnection<T, E>,
    ) -> Result<T, E> {
        self.queue(f, Kind::Background).await
    }

    async fn queue<T: Send + 'static, E: CallerError>(
        &self,
        f: impl OnConnection<T, E>,
        kind: Kind,
    ) -> Result<T, E> {
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
                kind,
                at: Instant::now(),
            })
            .map_err(|_| Error::WriterGone)
        })?;
        rx.await.map_err(|_| E::from(Error::WriterGone))?
    }

    /// Runs `f` on a pooled read connection (on tokio's blocking pool).
    pub async fn read<T: Send + 'static, E: CallerError>(
        &self,
        f: impl OnConnection<T, E>,
    ) -> Result<T, E> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.with_reader(f))
            .await
            .map_err(|_| E::from(Error::WriterGone))?
    }

    /// Runs `f` on a pooled read connection on the calling thread, for a look-up by a unique
    /// index (a few pages, in the page cache). A WAL reader never waits for the writer, and
    /// moving so short a read to the blocking pool costs more CPU than the read: two thread
    /// hand-offs and their wake-ups. Anything that scans belongs in [`Db::read`].
    pub fn read_indexed<T, E>(&self, f: impl FnOnce(&Connection) -> Result<T, E>) -> Result<T, E>
    where
        E: From<Error>,
    {
        self.inner.with_reader(f)
    }

    /// Stops the writer after the writes already queued; later writes fail with `WriterGone`.
    pub fn close(&self) {
        self.inner.writer.lock().expect("writer lock").take();
    }
}

/// Executes one statement through the connection's statement cache.
pub fn exec(c: &Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(p)
}

#[cfg(test)]
mod tests;

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
