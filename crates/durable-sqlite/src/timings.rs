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
    /// Each write's own breakdown, in the order recorded (the first [`KEEP_WRITES`]): what the
    /// slowest writes spent their time on, which the histograms cannot say together.
    pub writes: Vec<WriteTime>,
}

/// How many writes of each kind a profile keeps one by one.
pub const KEEP_WRITES: usize = 100_000;

/// One write's time, in microseconds, with the writer thread's scheduling in each phase (its
/// CPU clock and Linux's per-thread `schedstat`; zero where the kernel does not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteTime {
    /// Queued until committed ([`Phases::total`]).
    pub total: u64,
    /// [`Phases::waited`].
    pub waited: u64,
    /// Of `waited`, the writer runnable but waiting for a core after the write woke it.
    pub waited_for_core: u64,
    /// [`Phases::behind`].
    pub behind: u64,
    /// [`Phases::ran`].
    pub ran: u64,
    /// Of `ran`, the writer waiting for a core.
    pub ran_waiting_for_core: u64,
    /// [`Phases::committed`].
    pub committed: u64,
    /// Of `committed`, the writer on a core (SQLite writing the log pages, the kernel's side of
    /// `write` and `fdatasync`).
    pub commit_on_core: u64,
    /// Of `committed`, the writer runnable but waiting for a core.
    pub commit_waiting_for_core: u64,
}

impl WriteTime {
    /// Of `committed`, neither on a core nor waiting for one: blocked, in a durable commit on
    /// the disk's flush.
    pub fn commit_blocked(&self) -> u64 {
        self.committed
            .saturating_sub(self.commit_on_core + self.commit_waiting_for_core)
    }
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
            writes: Vec::new(),
        }
    }
}

/// The writer's timings since the database was opened.
#[derive(Debug, Clone)]
pub struct Timings {
    /// Writes whose callers wait for them to be durable ([`Db::write`](crate::Db::write)).
    pub durable: Phases,
    /// Relaxed writes ([`Db::write_relaxed`](crate::Db::write_relaxed)), and background ones
    /// ([`Db::write_background`](crate::Db::write_background)).
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
    /// The writer's scheduling counters before it waited for this batch, and at `taken`,
    /// `began`, `ran` and `committed`.
    pub sched: [Sched; 5],
}

/// A thread's scheduler counters, in nanoseconds: how long it has run on a core (its CPU clock,
/// exact to the call) and how long it has waited, runnable, for one (Linux's
/// `/proc/thread-self/schedstat`, whose own run-time field lags by up to a tick).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sched {
    on_core: u64,
    waiting: u64,
}

/// Reads the scheduler counters of the thread that reads it (one thread only: the CPU clock is
/// the caller's, the `schedstat` file that of the thread that first read); zero where there are
/// none. Opens nothing until its first read.
#[derive(Default)]
pub(crate) struct SchedReader(std::sync::OnceLock<Option<std::fs::File>>);

impl SchedReader {
    pub fn read(&self) -> Sched {
        let mut buf = [0u8; 96];
        let file = self
            .0
            .get_or_init(|| std::fs::File::open("/proc/thread-self/schedstat").ok());
        let n = match file {
            #[cfg(unix)]
            Some(f) => std::os::unix::fs::FileExt::read_at(f, &mut buf, 0).unwrap_or(0),
            _ => 0,
        };
        let waiting = std::str::from_utf8(&buf[..n])
            .unwrap_or("")
            .split_whitespace()
            .nth(1)
            .and_then(|f| f.parse().ok())
            .unwrap_or(0);
        Sched {
            on_core: thread_cpu_nanos(),
            waiting,
        }
    }
}

#[cfg(unix)]
fn thread_cpu_nanos() -> u64 {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| (t.tv_sec() as u64).saturating_mul(1_000_000_000) + t.tv_nsec() as u64)
        .unwrap_or(0)
}

#[cfg(not(unix))]
fn thread_cpu_nanos() -> u64 {
    0
}

/// Microseconds between two readings: (on a core, waiting for one).
fn sched_between(from: Sched, to: Sched) -> (u64, u64) {
    (
        to.on_core.saturating_sub(from.on_core) / 1_000,
        to.waiting.saturating_sub(from.waiting) / 1_000,
    )
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
        let [idle, taken, began, ran_at, committed_at] = clock.sched;
        let (_, waited_for_core) = sched_between(idle, taken);
        let (_, ran_waiting_for_core) = sched_between(began, ran_at);
        let (commit_on_core, commit_waiting_for_core) = sched_between(ran_at, committed_at);
        for &at in queued {
            let total = micros(clock.committed.saturating_duration_since(at));
            let waited = micros(clock.taken.saturating_duration_since(at));
            if phases.writes.len() < KEEP_WRITES {
                phases.writes.push(WriteTime {
                    total,
                    waited,
                    waited_for_core,
                    behind,
                    ran,
                    ran_waiting_for_core,
                    committed,
                    commit_on_core,
                    commit_waiting_for_core,
                });
            }
            if clock.beside_checkpoint {
                let _ = phases.beside_checkpoint.record(total);
            }
            let _ = phases.waited.record(waited);
            let _ = phases.behind.record(behind);
            let _ = phases.ran.record(ran);
            let _ = phases.committed.record(committed);
            let _ = phases.total.record(total);
        }
    }

    fn checkpoint(&mut self, took: Duration) {
        let _ = self.checkpoints.record(micros(took));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_s_counters_see_its_time_on_a_core_and_no_other_thread_s() {
        let sched = SchedReader::default();
        let before = sched.read();
        // Another thread busy for 30 ms is not this one's time...
        std::thread::spawn(|| {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(30) {
                std::hint::black_box(0u64);
            }
        })
        .join()
        .unwrap();
        let (on_core, _) = sched_between(before, sched.read());
        assert!(on_core < 15_000, "{on_core} µs");
        // ...but this one's 30 ms on a core are, or waiting for one (a virtual machine's host
        // may also take some of them, which neither counts: hence the margin).
        let before = sched.read();
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        let (on_core, waiting) = sched_between(before, sched.read());
        assert!(on_core + waiting >= 20_000, "{on_core} + {waiting} µs");
        assert!(on_core > 0);
    }
}
