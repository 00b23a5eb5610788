//! `make bench`: throughput and latency of the payment API against SQLite's own durable commit
//! rate, measured in the same run. Prints a table; asserts nothing about speed.
//!
//! Load comes from `wrk` (a separate process, so the load generator does not run inside the
//! server under test). Scenarios, each with 32 concurrent connections over loopback:
//! - raw SQLite: one INSERT per durable commit (WAL, synchronous=FULL), one connection — the reference;
//! - bare endpoint: an axum route doing that same INSERT per request, with no idempotency;
//! - first executions: `POST /pagamentos` with a fresh key each time;
//! - replays: the same requests again (every one answered from the stored response), first from
//!   the in-memory replay cache, then through a second server whose cache is off.

#[path = "api/postgres.rs"]
mod postgres;

use payment_api::Config;
use rusqlite::{params, Connection};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) const CONCURRENCY: usize = 32;
const RAW_COMMITS: usize = 2_000;
pub(crate) const API_KEY: &str = "sk_bench_loja_000";

pub(crate) struct Row {
    name: &'static str,
    count: usize,
    elapsed: Duration,
    p50_ms: f64,
    p99_ms: f64,
}

impl Row {
    pub(crate) fn rate(&self) -> f64 {
        self.count as f64 / self.elapsed.as_secs_f64()
    }
}

fn open_raw(path: &std::path::Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "synchronous", "FULL").unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, merchant TEXT NOT NULL, valor INTEGER NOT NULL,
                                      cartao TEXT NOT NULL, created_at INTEGER NOT NULL)",
    )
    .unwrap();
    c
}

fn insert(c: &Connection, valor: i64) {
    c.execute(
        "INSERT INTO t VALUES (?1, 'loja', ?2, 'tok_aprovado', ?3)",
        params![uuid::Uuid::new_v4().to_string(), valor, valor],
    )
    .unwrap();
}

fn raw_commits(dir: &std::path::Path) -> Row {
    use durable_sqlite::reference::{percentile_ms, raw_commit_latencies};
    let start = Instant::now();
    let latencies = raw_commit_latencies(&dir.join("raw.db"), RAW_COMMITS).unwrap();
    Row {
        name: "raw SQLite durable commit (1 row/commit)",
        count: RAW_COMMITS,
        elapsed: start.elapsed(),
        p50_ms: percentile_ms(&latencies, 0.50),
        p99_ms: percentile_ms(&latencies, 0.99),
    }
}

async fn bare_server(dir: &std::path::Path) -> String {
    use axum::routing::post;
    let conn = Arc::new(Mutex::new(open_raw(&dir.join("bare.db"))));
    let app = axum::Router::new().route(
        "/bare",
        post(move |body: axum::Json<serde_json::Value>| {
            let conn = conn.clone();
            async move {
                let valor = body["valor"].as_i64().unwrap_or(1);
                tokio::task::spawn_blocking(move || insert(&conn.lock().unwrap(), valor))
                    .await
                    .unwrap();
                (axum::http::StatusCode::CREATED, "{}")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/bare", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// wrk script: every request gets a key of its own (`prefix-thread-n`), or, with `cycle` > 0, one
/// of the first `cycle` keys of its thread again. `done` prints one parsable line.
const WRK_SCRIPT: &str = r#"
local counter = 0
local threads = {}
function setup(thread) thread:set("id", #threads); table.insert(threads, thread) end
function init(args) prefix = args[1]; cycle = tonumber(args[2]); key = args[3] end
function request()
  counter = counter + 1
  local n = counter
  if cycle > 0 then n = (counter % cycle) + 1 end
  local body = string.format('{"valor":%d,"cartao":"tok_aprovado"}', (n % 9999) + 1)
  return wrk.format("POST", nil, {
    ["Authorization"] = "Bearer " .. key,
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = string.format("%s-%d-%d", prefix, id, n),
  }, body)
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK %d %d %d %d %d %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), e.connect, e.read, e.write, e.status, e.timeout))
end
"#;

/// Runs wrk with 32 connections for `secs` seconds against `url`.
fn wrk(
    name: &'static str,
    script: &std::path::Path,
    url: &str,
    secs: u64,
    prefix: &str,
    cycle: usize,
) -> Row {
    wrk_with(name, script, url, secs, prefix, cycle, CONCURRENCY)
}

pub(crate) fn wrk_with(
    name: &'static str,
    script: &std::path::Path,
    url: &str,
    secs: u64,
    prefix: &str,
    cycle: usize,
    connections: usize,
) -> Row {
    let threads = connections.clamp(1, 2);
    let out = std::process::Command::new("wrk")
        .args([
            &format!("-t{threads}"),
            &format!("-c{connections}"),
            &format!("-d{secs}s"),
            "--timeout",
            "10s",
            "-s",
        ])
        .arg(script)
        .arg(url)
        .args(["--", prefix, &cycle.to_string(), API_KEY])
        .output()
        .expect("wrk is installed (make bench installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("WRK "))
        .unwrap_or_else(|| {
            panic!(
                "wrk printed no summary:\n{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let f: Vec<u64> = line
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let errors: u64 = f[4..9].iter().sum();
    assert_eq!(
        errors, 0,
        "{name}: wrk saw errors: connect {} read {} write {} non-2xx {} timeout {}",
        f[4], f[5], f[6], f[7], f[8]
    );
    Row {
        name,
        count: f[0] as usize,
        elapsed: Duration::from_micros(f[1]),
        p50_ms: f[2] as f64 / 1_000.0,
        p99_ms: f[3] as f64 / 1_000.0,
    }
}

/// The scenario table: count, rate and latency percentiles, one row each.
fn print_table(rows: &[&Row]) {
    println!(
        "{:<46} {:>8} {:>10} {:>9} {:>9}",
        "scenario", "n", "per s", "p50 ms", "p99 ms"
    );
    for r in rows {
        println!(
            "{:<46} {:>8} {:>10.0} {:>9.2} {:>9.2}",
            r.name,
            r.count,
            r.rate(),
            r.p50_ms,
            r.p99_ms
        );
    }
}

#[tokio::main]
async fn main() {
    let secs: u64 = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let dir =
        tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| ".".into())).unwrap();
    let script = dir.path().join("pay.lua");
    std::fs::write(&script, WRK_SCRIPT).unwrap();
    let raw = raw_commits(dir.path());

    let bare_url = bare_server(dir.path()).await;
    let bare = tokio::task::block_in_place(|| {
        wrk(
            "bare endpoint (same INSERT, no idempotency)",
            &script,
            &bare_url,
            secs,
            "b",
            0,
        )
    });

    let db = dir.path().join("api.db");
    let config = Config::sandbox(db.clone(), API_KEY, "loja_bench", "bench-admin");
    let server = payment_api::start(config).await.unwrap();
    let url = format!("{}/pagamentos", server.url());
    let first = tokio::task::block_in_place(|| {
        wrk(
            "POST /pagamentos, first execution",
            &script,
            &url,
            secs,
            "k",
            0,
        )
    });
    let replay = tokio::task::block_in_place(|| {
        wrk("POST /pagamentos, replay", &script, &url, secs, "k", 200)
    });
    // The same replays through a second server on the same database with its cache (nearly) off,
    // so every replay reads SQLite.
    let mut uncached = Config::sandbox(db, API_KEY, "loja_bench", "bench-admin");
    uncached.replay_cache_entries = 1;
    let reader = payment_api::start(uncached).await.unwrap();
    let reader_url = format!("{}/pagamentos", reader.url());
    let replay_db = tokio::task::block_in_place(|| {
        wrk(
            "POST /pagamentos, replay read from SQLite",
            &script,
            &reader_url,
            secs,
            "k",
            200,
        )
    });

    // wrk stops with up to one request per connection in flight; the server still executes those.
    let ledger = server.state().store().ledger().await.unwrap().len();
    assert!(
        (first.count..=first.count + CONCURRENCY).contains(&ledger),
        "one charge per first execution"
    );

    let pg = postgres::run(&script, secs).await;

    println!();
    println!(
        "payment-api benchmark: {CONCURRENCY} connections (wrk, {secs} s each), SQLite WAL synchronous=FULL, {} cores",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    );
    print_table(&[&raw, &bare, &first, &replay, &replay_db]);
    println!();
    println!(
        "first executions / raw durable commits: {:.2}x (target >= 0.5)",
        first.rate() / raw.rate()
    );
    println!(
        "first executions / bare endpoint:       {:.2}x",
        first.rate() / bare.rate()
    );
    println!(
        "replays / first executions:             {:.2}x (target >= 5)",
        replay.rate() / first.rate()
    );
    println!(
        "replays read from SQLite / first:       {:.2}x",
        replay_db.rate() / first.rate()
    );
    println!("ledger rows after the run: {ledger} (first executions answered: {}; wrk cuts off those in flight)", first.count);
    match pg {
        Ok(pg) => pg.print(&first, &replay),
        Err(e) => println!("\nPostgreSQL figures skipped: {e}"),
    }
}
