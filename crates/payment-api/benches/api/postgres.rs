//! The PostgreSQL figures of `make bench`: the same wrk load against one replica and against three
//! replicas (real `payment-api` processes) sharing one database, beside PostgreSQL's own durable
//! commit rate measured in the same run.

use super::{print_table, warm, wrk_with, Row, API_KEY, CONCURRENCY, REPLAY_KEYS};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
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
}

/// The mean of each `pagar_store_seconds` operation the server at `base` measured, in ms.
fn store_steps(base: &str) -> Vec<(String, f64, u64)> {
    let text = tokio::runtime::Handle::current().block_on(async {
        reqwest::get(format!("{base}/metrics"))
            .await
            .expect("the replica answers /metrics")
            .text()
            .await
            .unwrap()
    });
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

/// One replica: the release `payment-api` binary on port 0.
struct Replica(Child, String);

impl Replica {
    fn start(db: &BenchDb) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_payment-api"))
            .args(["--listen", "127.0.0.1:0", "--api-key"])
            .arg(format!("{API_KEY}=loja_bench"))
            .args(["--database-url", &db.url(), "--admin-token", "bench-admin"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the payment-api binary");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .expect("the replica printed its address")
            .to_string();
        Self(child, format!("{url}/pagamentos"))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
pub async fn run(script: &Path, secs: u64) -> Result<Figures, String> {
    let db = BenchDb {
        name: format!("pagar_bench_{}", uuid::Uuid::new_v4().simple()),
    };
    admin(&format!("CREATE DATABASE {}", db.name)).await?;
    let figures = measure(&db, script, secs).await;
    admin(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", db.name)).await?;
    Ok(figures)
}

async fn measure(db: &BenchDb, script: &Path, secs: u64) -> Figures {
    let raw_one = raw_commits(&db.url(), 1, RAW_COMMITS).await;
    let raw_many = raw_commits(&db.url(), CONCURRENCY, RAW_COMMITS / 8).await;

    let one = Replica::start(db);
    let (first_1, replay_1, steps) = tokio::task::block_in_place(|| {
        let first = wrk_with(
            "PG 1 replica, first execution",
            script,
            &one.1,
            secs,
            "p1",
            0,
            CONCURRENCY,
            "",
        );
        let steps = store_steps(one.1.trim_end_matches("/pagamentos"));
        warm(&one.1, "", "p1");
        let replay = wrk_with(
            "PG 1 replica, replay",
            script,
            &one.1,
            secs,
            "p1",
            REPLAY_KEYS,
            CONCURRENCY,
            "",
        );
        (first, replay, steps)
    });
    drop(one);

    let three: Vec<Replica> = (0..3).map(|_| Replica::start(db)).collect();
    let urls: Vec<String> = three.iter().map(|r| r.1.clone()).collect();
    let (first_3, replay_3) = tokio::task::block_in_place(|| {
        let first = spread(
            "PG 3 replicas, first execution",
            script,
            &urls,
            secs,
            &["a", "b", "c"],
            0,
        );
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
        (first, replay)
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
    }
}

impl Figures {
    pub fn print(&self, sqlite_first: &Row, sqlite_replay: &Row) {
        println!();
        println!("PostgreSQL store (127.0.0.1:5432, synchronous_commit on), same wrk load; replicas are release processes");
        print_table(&[
            &self.raw_one,
            &self.raw_many,
            &self.first_1,
            &self.replay_1,
            &self.first_3,
            &self.replay_3,
        ]);
        println!();
        println!(
            "PG first executions (1 replica) / raw PG commits (32 conns): {:.2}x",
            self.first_1.rate() / self.raw_many.rate()
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
        println!(
            "PG first executions, 3 replicas / 1 replica:                  {:.2}x",
            self.first_3.rate() / self.first_1.rate()
        );
        println!(
            "PG replays, 3 replicas / 1 replica:                           {:.2}x",
            self.replay_3.rate() / self.replay_1.rate()
        );
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
