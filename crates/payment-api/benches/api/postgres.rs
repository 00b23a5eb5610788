//! The PostgreSQL figures of `make bench`: the same wrk load against one replica and against three
//! replicas (real `payment-api` processes) sharing one database, all charging cards at one
//! acquirer process (as deployed, and as the SQLite rounds beside the peer do), beside
//! PostgreSQL's own durable commit rate measured in the same run.

use super::processes::Server;
use super::{print_table, warm, wrk_with, Row, API_KEY, CONCURRENCY, REPLAY_KEYS};
use pagar_testkit::AcquirerProcess;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio_postgres::NoTls;

const ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const RAW_COMMITS: usize = 2_000;

pub struct Figures {
    raw_one: Row,
    raw_many: Row,
    first_1: Row,
    replay_1: Row,
    first_3: Row,
    replay_3: Row,
    /// Mean milliseconds of each step of a first execution on one replica, from its `/metrics`.
    steps: Vec<(String, f64, u64)>,
    /// What the raw 32-connection commits and the first executions of one and of three
    /// replicas cost.
    raw_cost: Cost,
    first_cost: Cost,
    first_3_cost: Cost,
}

/// What a scenario cost the machine, between two [`Sample`]s.
#[derive(Clone, Copy, Default)]
struct Cost {
    /// CPU seconds of PostgreSQL's processes (backends, WAL writer, checkpointer…).
    pg_cpu_s: f64,
    /// CPU seconds of the replicas (0 for the raw commits).
    replica_cpu_s: f64,
    /// CPU seconds of the acquirer the replicas charge at.
    acquirer_cpu_s: f64,
    /// CPU seconds of the load generator (`wrk`, a child of this process that has exited).
    load_cpu_s: f64,
    /// Bytes of WAL the database wrote.
    wal_bytes: f64,
    /// The share of the machine's CPU time that was idle.
    idle: f64,
}

/// Counters read at one moment: CPU ticks of PostgreSQL, of one process, the WAL position, and
/// the machine's busy and idle ticks.
struct Sample {
    pg_ticks: u64,
    replica_ticks: u64,
    acquirer_ticks: u64,
    /// What this process reaped from its children: the `wrk` runs that ended.
    load_ticks: u64,
    wal_lsn: u64,
    machine: (u64, u64),
}

/// One process's line of `/proc/<pid>/stat`, what [`Sample`] needs of it.
struct ProcStat {
    comm: String,
    ppid: u32,
    /// Its own user and system ticks.
    ticks: u64,
    /// Of them, in user space and in the kernel.
    user: u64,
    system: u64,
    /// The user and system ticks of the children it reaped.
    reaped: u64,
}

pub(crate) use pagar_testkit::cpu_ticks::machine as machine_ticks;

/// The user and system ticks of each of `pid`'s threads named `name` so far.
pub(crate) fn thread_ticks(pid: u32, name: &str) -> Vec<(String, u64)> {
    threads_named(pid, name)
        .into_iter()
        .filter_map(|tid| Some((tid.clone(), proc_stat(&format!("{pid}/task/{tid}"))?.ticks)))
        .collect()
}

/// The ids of `pid`'s threads named `name`.
pub(crate) fn threads_named(pid: u32, name: &str) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.to_string();
            let stat = proc_stat(&format!("{pid}/task/{tid}"))?;
            (stat.comm == name).then_some(tid)
        })
        .collect()
}

/// The user and system ticks `pid` (all its threads) has spent so far, apart.
pub(crate) fn process_user_system_ticks(pid: u32) -> (u64, u64) {
    proc_stat(&pid.to_string()).map_or((0, 0), |s| (s.user, s.system))
}

/// The user and system ticks `pid` (all its threads) has spent so far.
pub(crate) fn process_ticks(pid: u32) -> u64 {
    proc_stat(&pid.to_string()).map_or(0, |s| s.ticks)
}

fn proc_stat(pid: &str) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0u64);
    Some(ProcStat {
        comm: head.split_once('(')?.1.to_string(),
        ppid: n(1) as u32,
        ticks: n(11) + n(12),
        user: n(11),
        system: n(12),
        reaped: n(13) + n(14),
    })
}

/// What one operation cost, from a [`Cost`]: ms of CPU each, bytes of WAL.
struct PerOperation {
    pg: f64,
    replica: f64,
    acquirer: f64,
    load: f64,
    wal: f64,
}

impl PerOperation {
    /// The CPU of every process on the machine's cores that took part.
    fn total(&self) -> f64 {
        self.pg + self.replica + self.acquirer + self.load
    }
}

impl Cost {
    /// The cost of one of `n` operations.
    fn per(&self, n: usize) -> PerOperation {
        let n = n.max(1) as f64;
        PerOperation {
            pg: self.pg_cpu_s * 1e3 / n,
            replica: self.replica_cpu_s * 1e3 / n,
            acquirer: self.acquirer_cpu_s * 1e3 / n,
            load: self.load_cpu_s * 1e3 / n,
            wal: self.wal_bytes / n,
        }
    }
}

impl Sample {
    /// PostgreSQL's CPU is every live `postgres` process's own plus what the postmaster reaped
    /// from backends that exited (the raw commits' connections close before the second sample).
    fn take(replicas: &[u32]) -> Self {
        let procs: Vec<(u32, ProcStat)> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let pid = e.file_name().to_str()?.to_string();
                Some((pid.parse().ok()?, proc_stat(&pid)?))
            })
            .collect();
        let is_pg = |pid: u32| procs.iter().any(|(p, s)| *p == pid && s.comm == "postgres");
        let pg_ticks = procs
            .iter()
            .filter(|(_, s)| s.comm == "postgres")
            .map(|(_, s)| s.ticks + if is_pg(s.ppid) { 0 } else { s.reaped })
            .sum();
        let replica_ticks = procs
            .iter()
            .filter(|(p, _)| replicas.contains(p))
            .map(|(_, s)| s.ticks)
            .sum();
        let acquirer_ticks = procs
            .iter()
            .filter(|(_, s)| s.comm == "adquirente")
            .map(|(_, s)| s.ticks)
            .sum();
        let lsn = Command::new("psql")
            .args([ADMIN_URL, "-tAc", "SELECT pg_current_wal_lsn()"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let wal_lsn = lsn
            .split_once('/')
            .and_then(|(hi, lo)| {
                Some((u64::from_str_radix(hi, 16).ok()? << 32) + u64::from_str_radix(lo, 16).ok()?)
            })
            .unwrap_or(0);
        Self {
            pg_ticks,
            replica_ticks,
            acquirer_ticks,
            load_ticks: proc_stat("self").map_or(0, |s| s.reaped),
            wal_lsn,
            machine: machine_ticks(),
        }
    }

    fn until(&self, later: &Sample) -> Cost {
        // USER_HZ is 100 on every Linux this runs on (`getconf CLK_TCK`).
        let secs = |a: u64, b: u64| b.saturating_sub(a) as f64 / 100.0;
        let busy = later.machine.0.saturating_sub(self.machine.0) as f64;
        let idle = later.machine.1.saturating_sub(self.machine.1) as f64;
        Cost {
            pg_cpu_s: secs(self.pg_ticks, later.pg_ticks),
            replica_cpu_s: secs(self.replica_ticks, later.replica_ticks),
            acquirer_cpu_s: secs(self.acquirer_ticks, later.acquirer_ticks),
            load_cpu_s: secs(self.load_ticks, later.load_ticks),
            wal_bytes: later.wal_lsn.saturating_sub(self.wal_lsn) as f64,
            idle: idle / (busy + idle).max(1.0),
        }
    }
}

/// The server at `base`'s `/metrics` page.
pub(crate) fn metrics_text(base: &str) -> String {
    tokio::runtime::Handle::current().block_on(async {
        reqwest::get(format!("{base}/metrics"))
            .await
            .expect("the server answers /metrics")
            .text()
            .await
            .unwrap()
    })
}

/// The mean of each `pagar_store_seconds` operation the server at `base` measured, in ms.
pub(crate) fn store_steps(base: &str) -> Vec<(String, f64, u64)> {
    steps_in(&metrics_text(base))
}

/// The mean of each `pagar_store_seconds` operation in a `/metrics` page, in ms.
pub(crate) fn steps_in(text: &str) -> Vec<(String, f64, u64)> {
    let value = |name: &str, op: &str| -> f64 {
        let prefix = format!("pagar_store_seconds_{name}{{op=\"{op}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    ["claim", "gateway_charge", "finish"]
        .into_iter()
        .map(|op| {
            let count = value("count", op);
            let mean_ms = if count > 0.0 {
                value("sum", op) / count * 1e3
            } else {
                0.0
            };
            (op.to_string(), mean_ms, count as u64)
        })
        .collect()
}

/// A database for this run, dropped at the end.
struct BenchDb {
    name: String,
}

impl BenchDb {
    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:5432/{}", self.name)
    }
}

async fn admin(sql: &str) -> Result<(), String> {
    let (client, conn) = tokio_postgres::connect(ADMIN_URL, NoTls)
        .await
        .map_err(|e| format!("PostgreSQL at {ADMIN_URL}: {e}"))?;
    let driver = tokio::spawn(conn);
    client.batch_execute(sql).await.map_err(|e| e.to_string())?;
    drop(client);
    let _ = driver.await;
    Ok(())
}

/// One replica: the release `payment-api` binary on port 0, charging cards at `acquirer` (a
/// process of its own, as deployed: its ledger is not written into the replicas' database).
fn replica(db: &BenchDb, acquirer: &AcquirerProcess) -> Server {
    let mut command = Command::new(env!("CARGO_BIN_EXE_payment-api"));
    command
        .args(["--listen", "127.0.0.1:0", "--api-key"])
        .arg(format!("{API_KEY}=loja_bench"))
        .args(["--database-url", &db.url(), "--admin-token", "bench-admin"])
        .args(acquirer.api_flags())
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit());
    Server::spawn(command)
}

/// Durable single-row commits on one connection (latency), and on 32 at once (throughput).
async fn raw_commits(url: &str, connections: usize, per_connection: usize) -> Row {
    let (setup, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(conn);
    setup
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS raw (id text PRIMARY KEY, merchant text NOT NULL,
                                             valor bigint NOT NULL, created_at bigint NOT NULL)",
        )
        .await
        .unwrap();
    let started = Instant::now();
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            let url = url.to_string();
            tokio::spawn(async move {
                let (c, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
                tokio::spawn(conn);
                let st = c
                    .prepare("INSERT INTO raw VALUES ($1, 'loja', $2, $2)")
                    .await
                    .unwrap();
                let mut latencies = Vec::with_capacity(per_connection);
                for i in 0..per_connection {
                    let t = Instant::now();
                    c.execute(&st, &[&uuid::Uuid::new_v4().to_string(), &(i as i64)])
                        .await
                        .unwrap();
                    latencies.push(t.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3;
    Row {
        name: if connections == 1 {
            "raw PostgreSQL commit, 1 connection"
        } else {
            "raw PostgreSQL commit, 32 connections"
        },
        count: latencies.len(),
        elapsed,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
    }
}

/// wrk against every replica at once (32 connections split between them); one combined row.
fn spread(
    name: &'static str,
    script: &Path,
    urls: &[String],
    secs: u64,
    prefixes: &[&str],
    cycle: usize,
) -> Row {
    let per = CONCURRENCY / urls.len();
    let rows: Vec<Row> = std::thread::scope(|s| {
        let handles: Vec<_> = urls
            .iter()
            .zip(prefixes)
            .map(|(url, prefix)| {
                s.spawn(move || wrk_with(name, script, url, secs, prefix, cycle, per, ""))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut p50s: Vec<f64> = rows.iter().map(|r| r.p50_ms).collect();
    p50s.sort_by(f64::total_cmp);
    Row {
        name,
        count: rows.iter().map(|r| r.count).sum(),
        elapsed: rows.iter().map(|r| r.elapsed).max().unwrap_or_default(),
        p50_ms: p50s[p50s.len() / 2],
        p99_ms: rows.iter().map(|r| r.p99_ms).fold(0.0, f64::max),
    }
}

/// Runs the PostgreSQL scenarios, or says why it could not.
pub async fn run(script: &Path, secs: u64, dir: &Path) -> Result<Figures, String> {
    let db = BenchDb {
        name: format!("pagar_bench_{}", uuid::Uuid::new_v4().simple()),
    };
    admin(&format!("CREATE DATABASE {}", db.name)).await?;
    let acquirer = super::processes::acquirer(dir, "acquirer-pg");
    let figures = measure(&db, &acquirer, script, secs).await;
    admin(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", db.name)).await?;
    Ok(figures)
}

async fn measure(db: &BenchDb, acquirer: &AcquirerProcess, script: &Path, secs: u64) -> Figures {
    let raw_one = raw_commits(&db.url(), 1, RAW_COMMITS).await;
    let before = Sample::take(&[]);
    let raw_many = raw_commits(&db.url(), CONCURRENCY, RAW_COMMITS / 8).await;
    let raw_cost = before.until(&Sample::take(&[]));

    let one = replica(db, acquirer);
    let pid = [one.id()];
    let (first_1, replay_1, steps, first_cost) = tokio::task::block_in_place(|| {
        let before = Sample::take(&pid);
        let first = wrk_with(
            "PG 1 replica, first execution",
            script,
            &one.url,
            secs,
            "p1",
            0,
            CONCURRENCY,
            "",
        );
        let cost = before.until(&Sample::take(&pid));
        let steps = store_steps(&one.base());
        warm(&one.url, "", "p1");
        let replay = wrk_with(
            "PG 1 replica, replay",
            script,
            &one.url,
            secs,
            "p1",
            REPLAY_KEYS,
            CONCURRENCY,
            "",
        );
        (first, replay, steps, cost)
    });
    drop(one);

    let three: Vec<Server> = (0..3).map(|_| replica(db, acquirer)).collect();
    let urls: Vec<String> = three.iter().map(|r| r.url.clone()).collect();
    let pids: Vec<u32> = three.iter().map(Server::id).collect();
    let (first_3, replay_3, first_3_cost) = tokio::task::block_in_place(|| {
        let before = Sample::take(&pids);
        let first = spread(
            "PG 3 replicas, first execution",
            script,
            &urls,
            secs,
            &["a", "b", "c"],
            0,
        );
        let cost = before.until(&Sample::take(&pids));
        for (url, prefix) in urls.iter().zip(["a", "b", "c"]) {
            warm(url, "", prefix);
        }
        // Each replica replays keys another replica created: the first read goes to the database.
        let replay = spread(
            "PG 3 replicas, replay",
            script,
            &urls,
            secs,
            &["b", "c", "a"],
            REPLAY_KEYS,
        );
        (first, replay, cost)
    });
    drop(three);
    // Let the killed replicas' connections go before the database is dropped.
    tokio::time::sleep(Duration::from_millis(200)).await;
    Figures {
        raw_one,
        raw_many,
        first_1,
        replay_1,
        first_3,
        replay_3,
        steps,
        raw_cost,
        first_cost,
        first_3_cost,
    }
}

impl Figures {
    /// Prints the figures; `sqlite` (its first executions and replays) when the SQLite rounds ran
    /// in the same run.
    pub fn print(&self, sqlite: Option<(&Row, &Row)>) {
        println!();
        println!("PostgreSQL store (127.0.0.1:5432, synchronous_commit on), same wrk load; replicas are release processes charging at one acquirer process");
        print_table(&[
            &self.raw_one,
            &self.raw_many,
            &self.first_1,
            &self.replay_1,
            &self.first_3,
            &self.replay_3,
        ]);
        println!();
        super::target(
            "PG first executions (1 replica) / raw PG commits (32 conns)",
            self.first_1.rate() / self.raw_many.rate(),
            0.35,
        );
        let steps: Vec<String> = self
            .steps
            .iter()
            .map(|(op, ms, n)| format!("{op} {ms:.2} ms (n={n})"))
            .collect();
        println!(
            "PG first execution, mean per step (1 replica's /metrics): {}; raw commit p50 {:.2} ms (1 conn), {:.2} ms (32 conns)",
            steps.join(", "),
            self.raw_one.p50_ms,
            self.raw_many.p50_ms
        );
        let raw = self.raw_cost.per(self.raw_many.count);
        let first = self.first_cost.per(self.first_1.count);
        println!(
            "PG cost per operation (CPU from /proc, WAL from pg_current_wal_lsn): raw commit: PostgreSQL {:.3} ms CPU, {:.0} B WAL (cores idle {:.0} %); first execution: PostgreSQL {:.3} ms CPU, replica {:.3} ms CPU, the acquirer {:.3} ms CPU, wrk {:.3} ms CPU, {:.0} B WAL (cores idle {:.0} %)",
            raw.pg, raw.wal, self.raw_cost.idle * 100.0,
            first.pg, first.replica, first.acquirer, first.load, first.wal,
            self.first_cost.idle * 100.0
        );
        println!(
            "PG first execution / raw commit: PostgreSQL CPU {:.2}x, WAL {:.2}x",
            first.pg / raw.pg,
            first.wal / raw.wal,
        );
        // With the cores busy, the CPU one execution costs bounds the rate: the replica's, the
        // acquirer's and wrk's shares run on the same two cores as PostgreSQL, as the raw
        // commits' do not. PostgreSQL's own floor is two raw commits: the claim and the
        // completion are a round trip and a commit each, on either side of the charge.
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as f64;
        let raw_rate = self.raw_many.rate().max(1e-9);
        let at_most = |ms: f64| cores * 1e3 / ms.max(1e-9);
        let floor = 2.0 * raw.pg + first.replica + first.acquirer + first.load;
        println!(
            "limit, PostgreSQL: cores idle {:.0} %; one first execution costs {:.3} ms of CPU (PostgreSQL {:.3}, the replica {:.3}, the acquirer {:.3}, wrk {:.3}): {cores:.0} cores allow at most {:.0}/s = {:.2}x the raw commits, 0.35x needs at most {:.3} ms; with PostgreSQL at its floor (two raw commits, {:.3} ms) at most {:.0}/s = {:.2}x",
            self.first_cost.idle * 100.0,
            first.total(), first.pg, first.replica, first.acquirer, first.load,
            at_most(first.total()),
            at_most(first.total()) / raw_rate,
            cores * 1e3 / (0.35 * raw_rate),
            2.0 * raw.pg,
            at_most(floor),
            at_most(floor) / raw_rate,
        );
        super::target(
            "PG first executions, 3 replicas / 1 replica",
            self.first_3.rate() / self.first_1.rate(),
            1.0,
        );
        // Three replicas do one replica's work on the same two cores, with more processes and
        // connections: the same PostgreSQL, the same acquirer, the same wrk load.
        let three = self.first_3_cost.per(self.first_3.count);
        println!(
            "limit, 3 replicas: cores idle {:.0} % (one replica: {:.0} %); one first execution costs {:.3} ms of CPU (PostgreSQL {:.3}, the replicas {:.3}, the acquirer {:.3}, wrk {:.3}) against {:.3} ms on one replica ({:.2}x): {cores:.0} cores allow at most {:.0}/s = {:.2}x one replica's rate",
            self.first_3_cost.idle * 100.0,
            self.first_cost.idle * 100.0,
            three.total(), three.pg, three.replica, three.acquirer, three.load,
            first.total(),
            three.total() / first.total().max(1e-9),
            at_most(three.total()),
            at_most(three.total()) / self.first_1.rate().max(1e-9),
        );
        println!(
            "PG replays, 3 replicas / 1 replica:                           {:.2}x",
            self.replay_3.rate() / self.replay_1.rate()
        );
        if let Some((sqlite_first, sqlite_replay)) = sqlite {
            println!(
                "PG / SQLite, first executions (1 replica):                    {:.2}x",
                self.first_1.rate() / sqlite_first.rate()
            );
            println!(
                "PG / SQLite, replays (1 replica):                             {:.2}x",
                self.replay_1.rate() / sqlite_replay.rate()
            );
        }
    }
}
