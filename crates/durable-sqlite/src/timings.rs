//! Where a write's time goes, from the moment its caller queues it until its batch is committed:
//! what a latency figure is made of (`make bench` prints it for `pay`). A [`Db`](crate::Db) keeps
//! these for its own writes once asked ([`Db::profile`](crate::Db::profile)); the writer thread
//! records them once per batch, under one uncontended lock.

use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Latencies of one kind of write (durable or relaxed), each write counted once, in
/// microseconds.
#[derive(Debug, Clone)]
pub struct Phases {
    /// From the caller's queueing the write until the writer thread took it: the writer was
    /// busy with an earlier batch (or, when it was idle, the time to wake it).
    pub waited: Histogram<u64>,
    /// From the writer's taking it until its own batch began: the relaxed writes taken at the
    /// same time were committed first (zero for a relaxed write).
    pub behind: Histogram<u64>,
    /// Its batch's statements, from `BEGIN IMMEDIATE` to the end of the batch's last write.
    pub ran: Histogram<u64>,
    /// Its batch's `COMMIT`: for a durable batch, the write-ahead log's fsync.
    pub committed: Histogram<u64>,
    /// All of it, queued until committed: what the caller waited, less its task's wake-up.
    pub total: Histogram<u64>,
    /// Pages each batch appended to the write-ahead log (SQLite's WAL hook): what its `COMMIT`
    /// wrote and, for a durable batch, synced. Counted per batch, not per write; a batch that
    /// restarted the log after a checkpoint is counted short when it wrote more than the log held.
    pub frames: Histogram<u64>,
    /// `total` of the writes whose batch ran while a checkpoint did (a subset of `total`).
    pub beside_checkpoint: Histogram<u64>,
    /// Batches of this kind committed (or failed).
    pub batches: u64,
}

impl Phases {
    fn new() -> Self {
        let h = || Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds");
        Self {
            waited: h(),
            behind: h(),
            ran: h(),
            committed: h(),
            total: h(),
            frames: h(),
            beside_checkpoint: h(),
            batches: 0,
        }
    }
}

/// The writer's timings since the database was opened.
#[derive(Debug, Clone)]
pub struct Timings {
    /// Writes whose callers wait for them to be durable ([`Db::write`](crate::Db::write)).
    pub durable: Phases,
    /// Relaxed writes ([`Db::write_relaxed`](crate::Db::write_relaxed)).
    pub relaxed: Phases,
    /// Each passive checkpoint (copying the log into the database file, and its fsyncs), which
    /// runs beside the writer on a connection of its own.
    pub checkpoints: Histogram<u64>,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            durable: Phases::new(),
            relaxed: Phases::new(),
            checkpoints: Histogram::new_with_bounds(1, 60_000_000, 3)
                .expect("valid histogram bounds"),
        }
    }
}

/// When one batch's steps happened.
pub(crate) struct BatchClock {
    pub taken: Instant,
    pub began: Instant,
    pub ran: Instant,
    pub committed: Instant,
    /// Pages the batch appended to the log.
    pub frames: u64,
    /// A checkpoint ran at some moment between `began` and `committed`.
    pub beside_checkpoint: bool,
}

/// A database's profile, shared by its writer and checkpoint threads: off (nothing kept, no
/// clock read) until [`Profile::start`].
#[derive(Debug, Default)]
pub(crate) struct Profile {
    on: AtomicBool,
    timings: Mutex<Option<Timings>>,
    /// Checkpoints begun and ended, for the writer to tell whether one ran beside a batch.
    begun: AtomicU64,
    ended: AtomicU64,
}

impl Profile {
    pub fn start(&self) {
        self.timings
            .lock()
            .expect("timings lock")
            .get_or_insert_with(Timings::default);
        self.on.store(true, Ordering::SeqCst);
    }

    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    pub fn timings(&self) -> Option<Timings> {
        self.timings.lock().expect("timings lock").clone()
    }

    /// Records with the timings, when kept.
    pub fn with(&self, f: impl FnOnce(&mut Timings)) {
        if let Some(t) = self.timings.lock().expect("timings lock").as_mut() {
            f(t);
        }
    }

    /// Runs a checkpoint, counted and timed when profiling.
    pub fn checkpoint<T>(&self, run: impl FnOnce() -> T) -> T {
        if !self.is_on() {
            return run();
        }
        let began = Instant::now();
        self.begun.fetch_add(1, Ordering::SeqCst);
        let result = run();
        self.ended.fetch_add(1, Ordering::SeqCst);
        self.with(|t| t.checkpoint(began.elapsed()));
        result
    }

    /// (begun, ended) now.
    pub fn read(&self) -> (u64, u64) {
        (
            self.begun.load(Ordering::SeqCst),
            self.ended.load(Ordering::SeqCst),
        )
    }

    /// Whether a checkpoint ran at some moment between the reading `before` and now: one was
    /// running then, or one began since.
    pub fn ran_since(&self, before: (u64, u64)) -> bool {
        before.0 != before.1 || self.begun.load(Ordering::SeqCst) != before.0
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Timings {
    /// Records a batch of writes queued at `queued`, of the kind `durable`.
    pub(crate) fn record(&mut self, durable: bool, queued: &[Instant], clock: &BatchClock) {
        let phases = if durable {
            &mut self.durable
        } else {
            &mut self.relaxed
        };
        phases.batches += 1;
        let _ = phases.frames.record(clock.frames);
        let ran = micros(clock.ran - clock.began);
        let committed = micros(clock.committed - clock.ran);
        let behind = micros(clock.began - clock.taken);
        for &at in queued {
            if clock.beside_checkpoint {
                let _ = phases
                    .beside_checkpoint
                    .record(micros(clock.committed.saturating_duration_since(at)));
            }
            let _ = phases
                .waited
                .record(micros(clock.taken.saturating_duration_since(at)));
            let _ = phases.behind.record(behind);
            let _ = phases.ran.record(ran);
            let _ = phases.committed.record(committed);
            let _ = phases
                .total
                .record(micros(clock.committed.saturating_duration_since(at)));
        }
    }

    fn checkpoint(&mut self, took: Duration) {
        let _ = self.checkpoints.record(micros(took));
    }
}
