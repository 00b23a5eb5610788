//! Flat as the store grows: Pagar's first executions and replays on a database that already
//! holds [`GROWN_KEYS`] keys with their payments, against an empty database, in interleaved
//! rounds. Pagar is the release binary, a process of its own, fresh for each run, charging at
//! an acquirer process of its own, as in `deployed.rs`.
//!
//! The grown database is made once: a few seconds of real first executions through the API
//! (every row as the server writes it: the key, its fingerprint and stored answer, the payment
//! and each of their indexes), then those rows copied in SQL under keys, payment ids and
//! charge ids of their own, their times spread over the 23 hours before the run, so that the
//! database is what a server keeping a day of keys holds. Before each of its runs a slice of
//! its keys is moved past the retention, so that the reaper (every second here) purges them
//! beside the load, as a server's reaper does all day. Replays are read from the database (the
//! replay cache off), since what is measured is the store: with the cache they never reach it.

use super::deployed;
use super::measure::*;
use super::processes;
use super::*;
use pagar_testkit::AcquirerProcess;
use std::path::Path;

/// Keys (and payments) in the grown database; `BENCH_GROWN_KEYS` sets another count.
const GROWN_KEYS: u64 = 10_000_000;
const ROUNDS: usize = 5;
/// `BENCH_GROWN_ROUNDS` sets more (or fewer) rounds: a tail's ratio wants several.
fn rounds() -> usize {
    env_number("BENCH_GROWN_ROUNDS", |&n| n > 0, ROUNDS)
}
/// Keys moved past the retention before a run on the grown database, for its reaper: a minute of
/// a store that keeps ten million keys a day (what its reaper, every minute by default, finds
/// at each pass), or a backlog (a reaper that was stopped, a retention made shorter).
const EXPIRED_A_MINUTE: i64 = 10_000_000 / 1_440;
const EXPIRED_BACKLOG: i64 = 100_000;
/// What the grown database's times span before the run (inside the retention of a day).
const SPAN_MS: i64 = 23 * 3_600_000;
const DAY_MS: i64 = 86_400_000;
/// How long the seed's first executions run.
const SEED_SECS: u64 = 3;

/// One run: what wrk measured, the server's CPU and I/O, its steps' means, and the keys its
/// reaper purged.
struct Run {
    row: Row,
    cpu: Cpu,
    io: Io,
    steps: Vec<(String, f64, u64)>,
    purged: u64,
    /// What its log says of the reaper and the recovery worker (their lines, at most 6).
    reaper_lines: Vec<String>,
}

/// What the server's process asked of the kernel during a run (its `/proc/<pid>/io` and the
/// user and system halves of its CPU), per request: what a store larger than any cache costs.
#[derive(Clone, Copy, Default)]
struct Io {
    /// read-like system calls (SQLite's page reads, and the sockets').
    reads: f64,
    /// Those made by SQLite's writer threads (the store's writes, the reaper's purge among
    /// them); the rest are the readers' and the sockets'.
    writer_reads: f64,
    /// Bytes they read.
    read_bytes: f64,
    /// Bytes written (the WAL's frames, and the sockets').
    written_bytes: f64,
    /// CPU in user space and in the kernel, µs.
    user_us: f64,
    system_us: f64,
}

/// A counter of a `/proc/…/io` file.
fn io_field(io: &str, name: &str) -> f64 {
    io.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The counters [`Io`] is made of: syscr, rchar, wchar, utime ticks, stime ticks, and the
/// syscr of the SQLite writer threads.
fn io_counters(pid: u32) -> [f64; 6] {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    let field = |name: &str| io_field(&io, name);
    let writer_reads: f64 = super::postgres::threads_named(pid, "sqlite-writer")
        .into_iter()
        .map(|tid| {
            let io = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/io"));
            io_field(&io.unwrap_or_default(), "syscr:")
        })
        .sum();
    let (user, system) = super::postgres::process_user_system_ticks(pid);
    [
        field("syscr:"),
        field("rchar:"),
        field("wchar:"),
        user as f64,
        system as f64,
        writer_reads,
    ]
}

impl Io {
    /// Per request of `requests`, from the counters before and after.
    fn per_request(before: [f64; 6], after: [f64; 6], requests: usize) -> Self {
        let d = |i: usize| (after[i] - before[i]) / requests.max(1) as f64;
        // USER_HZ is 100: a tick is 10 ms.
        Self {
            reads: d(0),
            writer_reads: d(5),
            read_bytes: d(1),
            written_bytes: d(2),
            user_us: d(3) * 10_000.0,
            system_us: d(4) * 10_000.0,
        }
    }

    /// The median of each field over the runs.
    fn median_of(runs: &[Run]) -> Self {
        let m = |f: fn(&Io) -> f64| mid(runs.iter().map(|r| f(&r.io)).collect());
        Self {
            reads: m(|i| i.reads),
            writer_reads: m(|i| i.writer_reads),
            read_bytes: m(|i| i.read_bytes),
            written_bytes: m(|i| i.written_bytes),
            user_us: m(|i| i.user_us),
            system_us: m(|i| i.system_us),
        }
    }
}

/// The runs of each kind, over the rounds.
#[derive(Default)]
pub(crate) struct Grown {
    /// First executions: empty; grown, a minute's expiry; grown, a backlog purged 100 keys a
    /// write; grown, a backlog purged 100 000 a write.
    first: [Vec<Run>; 4],
    /// Replays read from the database: empty, grown.
    replay: [Vec<Run>; 2],
    /// The grown database: keys and payments when made, its size in bytes, how long it took.
    made: (i64, i64, u64, Duration),
    /// Expired keys an earlier run's reaper left, deleted before each grown run.
    left_over: Vec<usize>,
}

/// The reaper's batch of the runs that purge as a server does (the server's default, 100):
/// `BENCH_REAPER_BATCH` sets another, to see what the batch does to the runs' tails.
fn reaper_batch() -> u32 {
    env_number("BENCH_REAPER_BATCH", |b| (1..=100_000).contains(b), 100)
}

/// The server's flags for these runs: the reaper every second, in batches of `batch`; the
/// replay cache off when `uncached`.
fn flags(batch: u32, uncached: bool) -> Vec<String> {
    let mut f = vec![
        "--reaper-interval-secs".into(),
        "1".into(),
        "--reaper-batch".into(),
        batch.to_string(),
    ];
    if uncached {
        f.extend(["--replay-cache-entries".into(), "1".into()]);
    }
    f
}

/// Keys purged by the server's reaper so far, from its `/metrics` page.
fn purged_in(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("pagar_purged_keys_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Makes `<dir>/grown.db`: seeds it through the API, then copies the seed up to `keys`.
fn make_grown(dir: &Path, acquirer: &AcquirerProcess, script: &Path, keys: u64) -> Grown {
    let started = Instant::now();
    {
        let seed = processes::pagar_with(dir, "grown", false, acquirer, None, &[]);
        tokio::task::block_in_place(|| {
            wrk("seed", script, &seed.url, SEED_SECS, "seed", 0);
        });
        // wrk stops with requests in flight: let them end before the server does.
        std::thread::sleep(Duration::from_millis(500));
    }
    let database = dir.join("grown.db");
    let (k, p) = grow(&database, keys).expect("the grown database is made");
    Grown {
        made: (
            k,
            p,
            std::fs::metadata(&database).map_or(0, |m| m.len()),
            started.elapsed(),
        ),
        ..Grown::default()
    }
}

/// Copies the seed's keys and payments until the database holds `keys` of each; returns the
/// keys and payments it holds.
fn grow(database: &Path, keys: u64) -> rusqlite::Result<(i64, i64)> {
    let mut c = Connection::open(database)?;
    // Made once, before any server opens it: no journal, no fsync, a page cache as large as
    // the indexes being filled.
    c.execute_batch(
        "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
         PRAGMA cache_size = -4000000; PRAGMA temp_store = MEMORY;",
    )?;
    let seeds: i64 = c.query_row("SELECT count(*) FROM payments", [], |r| r.get(0))?;
    let copies = (keys as i64 / seeds.max(1)).max(1) - 1;
    let step = SPAN_MS / copies.max(1);
    let columns = |table: &str| -> rusqlite::Result<Vec<String>> {
        c.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?
            .query_map([], |r| r.get(0))?
            .collect()
    };
    // Each copy under ids of its own (`.g<i>` on the key, `_g<i>` on the payment and charge
    // ids, its stored answer naming its own payment), its times `i` steps earlier.
    let key_columns = columns("idempotency_keys")?;
    let key_values: Vec<String> = key_columns
        .iter()
        .map(|col| match col.as_str() {
            "key" => "s.key || '.g' || c.i".into(),
            "payment_id" => "s.payment_id || '_g' || c.i".into(),
            "response_body" => "CAST(replace(CAST(s.response_body AS TEXT), s.payment_id, \
                                s.payment_id || '_g' || c.i) AS BLOB)"
                .into(),
            "created_at" | "completed_at" | "locked_until" => format!("s.{col} - c.i * {step}"),
            other => format!("s.{other}"),
        })
        .collect();
    let payment_columns = columns("payments")?;
    let payment_values: Vec<String> = payment_columns
        .iter()
        .map(|col| match col.as_str() {
            "id" | "cobranca_id" => format!("s.{col} || '_g' || c.i"),
            "idempotency_key" => "s.idempotency_key || '.g' || c.i".into(),
            "created_at" => format!("s.created_at - c.i * {step}"),
            other => format!("s.{other}"),
        })
        .collect();
    let tx = c.transaction()?;
    // Only completed keys are copied: the seed's server stopped with executions in flight, and
    // their keys, copied, would be thousands of abandoned executions for the recovery worker.
    for (table, columns, values, which) in [
        (
            "idempotency_keys",
            &key_columns,
            &key_values,
            "completed_at IS NOT NULL",
        ),
        ("payments", &payment_columns, &payment_values, "true"),
    ] {
        tx.execute_batch(&format!(
            "CREATE TEMP TABLE seed AS SELECT * FROM {table} WHERE {which};
             WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {copies})
             INSERT INTO {table} ({}) SELECT {} FROM c, temp.seed AS s;
             DROP TABLE temp.seed;",
            columns.join(", "),
            values.join(", ")
        ))?;
    }
    tx.commit()?;
    c.execute_batch("PRAGMA journal_mode = WAL;")?;
    let count = |table: &str| -> rusqlite::Result<i64> {
        c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
    };
    Ok((count("idempotency_keys")?, count("payments")?))
}

/// Moves the next `n` keys (by row id, from `from`) past the retention: the reaper's work for
/// the run that follows. What an earlier run's reaper left of its own slice (a backlog purged
/// 100 a write is not done in one run) is deleted first, outside any run, so that each run
/// purges what its label says; returns how many were left.
fn expire(database: &Path, from: i64, n: i64) -> rusqlite::Result<usize> {
    let c = Connection::open(database)?;
    c.busy_timeout(Duration::from_secs(30))?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let left = c.execute(
        "DELETE FROM idempotency_keys WHERE completed_at < ?1",
        [now_ms - DAY_MS],
    )?;
    c.execute(
        "UPDATE idempotency_keys SET completed_at = completed_at - ?3
          WHERE rowid > ?1 AND rowid <= ?1 + ?2 AND completed_at IS NOT NULL",
        rusqlite::params![from, n, 2 * DAY_MS],
    )?;
    Ok(left)
}

/// What one run is: the server's database (`<dir>/<db>.db`), the prefix of its keys (every
/// run's keys are its own: the acquirer serves every run of the rounds), the reaper's batch,
/// and the keys a replay run cycles through (none: first executions).
struct Setup {
    db: String,
    prefix: String,
    batch: u32,
    cycle: usize,
    label: &'static str,
}

/// One run, its server started fresh on its database.
async fn one(
    dir: &Path,
    setup: &Setup,
    acquirer: &AcquirerProcess,
    script: &Path,
    secs: u64,
) -> Run {
    let args = flags(setup.batch, setup.cycle > 0);
    let server = processes::pagar_with(dir, &setup.db, true, acquirer, None, &args);
    let before = io_counters(server.id());
    let (row, cpu) = deployed::run(
        setup.label,
        script,
        secs,
        &server,
        &setup.prefix,
        setup.cycle,
        CONCURRENCY,
    );
    let io = Io::per_request(before, io_counters(server.id()), row.count);
    // wrk stops with requests in flight: let them end before reading the server's figures.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let metrics = tokio::task::block_in_place(|| super::postgres::metrics_text(&server.base()));
    let (steps, purged) = (super::postgres::steps_in(&metrics), purged_in(&metrics));
    let log = std::fs::read_to_string(dir.join(format!("{}.log", setup.db))).unwrap_or_default();
    let reaper_lines = log
        .lines()
        .filter(|l| l.contains("reaper") || l.contains("recovery"))
        .take(6)
        .map(String::from)
        .collect();
    Run {
        row,
        cpu,
        io,
        steps,
        purged,
        reaper_lines,
    }
}

/// The runs of a round, by index: first executions on the empty store, the grown store (a
/// minute's expiry for its reaper), the grown store with a backlog of expired keys purged 100 a
/// write, the same 100 000 a write; replays on the empty and the grown store.
const LABELS: [&str; 6] = [
    "Pagar first, empty store",
    "Pagar first, grown store",
    "Pagar first, grown, 100 000 expired",
    "  the same, reaper 100 000 a write",
    "Pagar replay from the database, empty",
    "Pagar replay from the database, grown",
];

/// Makes the grown database, then runs the rounds.
pub(crate) async fn run_rounds(script: &Path, secs: u64, dir: &Path) -> Grown {
    let keys = env_number("BENCH_GROWN_KEYS", |&k| k > 0, GROWN_KEYS);
    let acquirer = processes::acquirer(dir, "acquirer-grown");
    let mut g = tokio::task::block_in_place(|| make_grown(dir, &acquirer, script, keys));
    let database = dir.join("grown.db");
    // The copies' row ids come after the seed's: the slices moved past the retention are copies.
    let mut next_expired: i64 = Connection::open(&database)
        .and_then(|c| {
            c.query_row(
                "SELECT max(rowid) FROM idempotency_keys WHERE instr(key, '.g') = 0",
                [],
                |r| r.get(0),
            )
        })
        .expect("the grown database");
    for round in 0..rounds() {
        for which in (0..6).map(|i| (i + round) % 6) {
            let grown = !matches!(which, 0 | 4);
            let setup = Setup {
                db: if grown {
                    "grown".into()
                } else {
                    format!("empty-{which}-{round}")
                },
                prefix: format!("r{which}-{round}"),
                batch: if which == 3 { 100_000 } else { reaper_batch() },
                cycle: if which >= 4 { REPLAY_KEYS } else { 0 },
                label: LABELS[which],
            };
            if grown {
                let n = if matches!(which, 2 | 3) {
                    EXPIRED_BACKLOG
                } else {
                    EXPIRED_A_MINUTE
                };
                let left = tokio::task::block_in_place(|| expire(&database, next_expired, n))
                    .expect("keys moved past the retention");
                g.left_over.push(left);
                next_expired += n;
            }
            let run = one(dir, &setup, &acquirer, script, secs).await;
            if which < 4 {
                g.first[which].push(run);
            } else {
                g.replay[which - 4].push(run);
            }
        }
    }
    g
}

/// Over the rounds: the median of each round's `f(a) / f(b)`.
fn per_round(a: &[Run], b: &[Run], f: impl Fn(&Row) -> f64) -> f64 {
    mid(a
        .iter()
        .zip(b)
        .map(|(a, b)| f(&a.row) / f(&b.row))
        .collect())
}

fn rows_of(runs: &[Run]) -> Vec<Row> {
    runs.iter().map(|r| r.row.clone()).collect()
}

impl Grown {
    pub(crate) fn print(&self) {
        let (keys, payments, bytes, took) = self.made;
        println!();
        println!(
            "flat as the store grows ({} interleaved rounds; Pagar a release process of its own per run, charging at an acquirer process, {CONCURRENCY} connections, logging on; medians): \
             the grown store holds {keys} keys and {payments} payments ({:.1} GB; made in {:.0} s: {SEED_SECS} s of first executions through the API, their rows copied under ids of their own, times spread over the 23 hours before), \
             each of its runs with {EXPIRED_A_MINUTE} of its keys (a minute's expiry of ten million a day) or {EXPIRED_BACKLOG} (a backlog) moved past the retention first for the reaper (every second); replays read from the database (cache off)",
            self.replay[0].len(),
            bytes as f64 / 1e9,
            took.as_secs_f64()
        );
        let mut table: Vec<Row> = Vec::new();
        for (i, runs) in self.first.iter().chain(&self.replay).enumerate() {
            table.push(median(LABELS[i], &rows_of(runs)));
        }
        print_table(&table.iter().collect::<Vec<_>>());
        let purged = |runs: &[Run]| runs.iter().map(|r| r.purged).collect::<Vec<_>>();
        println!(
            "keys the reaper purged in each grown run: {:?} (first executions), {:?} and {:?} (a backlog, 100 and 100 000 a write), {:?} (replays)",
            purged(&self.first[1]),
            purged(&self.first[2]),
            purged(&self.first[3]),
            purged(&self.replay[1])
        );
        println!(
            "expired keys an earlier run's reaper left, deleted outside the runs before each grown run (in the order the runs ran): {:?}",
            self.left_over
        );
        for (i, runs) in self.first.iter().chain(&self.replay).enumerate() {
            for (round, run) in runs.iter().enumerate() {
                if run.purged == 0 && i != 0 && i != 4 {
                    println!(
                        "  {} (round {round}): its reaper purged nothing in the run; its log's reaper and recovery lines: {:?}",
                        LABELS[i], run.reaper_lines
                    );
                }
            }
            let cpu = median_cpu(&runs.iter().map(|r| r.cpu).collect::<Vec<_>>());
            // A replay run's steps are its warming's first executions: not its own.
            let steps = if i < 4 {
                let steps: Vec<_> = runs.iter().map(|r| r.steps.clone()).collect();
                format!("; mean per step: {}", steps_median(&steps))
            } else {
                String::new()
            };
            let io = Io::median_of(runs);
            println!(
                "  {:<44} server CPU {:.0} us a request (user {:.0}, kernel {:.0}), read calls {:.1} (the writer's {:.1}; {:.0} B), written {:.0} B, cores idle {:.0} %{steps}",
                LABELS[i],
                cpu.per_request_us,
                io.user_us,
                io.system_us,
                io.reads,
                io.writer_reads,
                io.read_bytes,
                io.written_bytes,
                cpu.idle * 100.0,
            );
        }
        let first = per_round(&self.first[1], &self.first[0], Row::rate);
        target("first executions, grown store / empty store", first, 0.9);
        if first < 0.9 {
            let step = |runs: &[Run], op: &str| {
                step_median(
                    &runs.iter().map(|r| r.steps.clone()).collect::<Vec<_>>(),
                    op,
                )
            };
            let cpu = |runs: &[Run]| median_cpu(&runs.iter().map(|r| r.cpu).collect::<Vec<_>>());
            let (empty, grown) = (&self.first[0], &self.first[1]);
            let (io_empty, io_grown) = (Io::median_of(empty), Io::median_of(grown));
            println!(
                "limit, grown store (empty -> grown): the store's steps claim {:.2} -> {:.2} ms, finish {:.2} -> {:.2} ms (the acquirer's round trip {:.2} -> {:.2} ms); server CPU {:.0} -> {:.0} us a request (in the kernel {:.0} -> {:.0}; read calls {:.1} -> {:.1} a request, of them the SQLite writer's {:.1} -> {:.1}, bytes written {:.0} -> {:.0}); its busiest SQLite writer thread {:.0} -> {:.0} % of a core; cores idle {:.0} -> {:.0} %",
                step(empty, "claim"),
                step(grown, "claim"),
                step(empty, "finish"),
                step(grown, "finish"),
                step(empty, "gateway_charge"),
                step(grown, "gateway_charge"),
                cpu(empty).per_request_us,
                cpu(grown).per_request_us,
                io_empty.system_us,
                io_grown.system_us,
                io_empty.reads,
                io_grown.reads,
                io_empty.writer_reads,
                io_grown.writer_reads,
                io_empty.written_bytes,
                io_grown.written_bytes,
                cpu(empty).writer.0 * 100.0,
                cpu(grown).writer.0 * 100.0,
                cpu(empty).idle * 100.0,
                cpu(grown).idle * 100.0,
            );
        }
        let p99 = per_round(&self.replay[1], &self.replay[0], |r| r.p99_ms);
        at_most("replay p99, grown store / empty store", p99, 1.2);
        let p99s = |runs: &[Run]| {
            runs.iter()
                .map(|r| format!("{:.2}", r.row.p99_ms))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "replay p99 ms round by round: empty store [{}], grown store [{}] (the ratio is the median of the rounds' ratios)",
            p99s(&self.replay[0]),
            p99s(&self.replay[1])
        );
        println!(
            "first executions p99, grown store with a backlog of expired keys: {:.2} ms with the reaper deleting 100 keys a write, paced, {:.2} ms with 100 000 a write (empty store {:.2} ms, grown with a minute's expiry {:.2} ms)",
            median("", &rows_of(&self.first[2])).p99_ms,
            median("", &rows_of(&self.first[3])).p99_ms,
            median("", &rows_of(&self.first[0])).p99_ms,
            median("", &rows_of(&self.first[1])).p99_ms,
        );
    }
}
