//! `make bench`: throughput and latency of the payment API against SQLite's own durable commit
//! rate, measured in the same run. Prints a table; asserts nothing about speed.
//!
//! Load comes from `wrk` (a separate process, so the load generator does not run inside the
//! server under test). Scenarios, with 32 concurrent connections over loopback unless said:
//! - raw SQLite: one INSERT per durable commit (WAL, synchronous=FULL), one connection — the reference;
//! - bare endpoint: an axum route doing that same INSERT per request, with no idempotency;
//! - first executions: `POST /pagamentos` with a fresh key each time, on the embedded default
//!   (the server in this process, its gateway simulator's ledger in its own database);
//! - replays: the same requests again (every one answered from the stored response), first from
//!   the in-memory replay cache, then through a second server whose cache is off;
//! - beside the peer, as deployed (`api/deployed.rs`): Pagar and an in-memory idempotency
//!   middleware from crates.io (`api/peer.rs`), each a release process of its own, both charging
//!   at one acquirer process (`adquirente`), first executions at 32 and 256 connections, on this
//!   machine's disk and with every fsync of Pagar's made to wait 2 ms; replays beside the peer
//!   and the fixed-answer ceiling; 50 concurrent requests with one key against each;
//! - PostgreSQL (`api/postgres.rs`): first executions and replays on one and three replicas
//!   against raw commits;
//! - flat as the store grows (`api/grown.rs`): first executions and replays on a database of
//!   10 million keys and payments, its reaper purging beside them, against an empty one.

#[path = "api/deployed.rs"]
mod deployed;
#[path = "api/grown.rs"]
mod grown;
#[path = "api/measure.rs"]
mod measure;
#[path = "api/peer.rs"]
mod peer;
#[path = "api/postgres.rs"]
mod postgres;
#[path = "api/processes.rs"]
mod processes;
#[path = "api/reference.rs"]
mod reference;

use measure::*;
use payment_api::Config;
use reference::*;
use rusqlite::{params, Connection};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) const CONCURRENCY: usize = 32;
const RAW_COMMITS: usize = 2_000;
/// Keys per wrk thread a replay run cycles through.
pub(crate) const REPLAY_KEYS: usize = 200;
pub(crate) const API_KEY: &str = "sk_bench_loja_000";

#[derive(Clone)]
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

/// wrk script: every request gets a key of its own (`prefix-thread-n`), or, with `cycle` > 0, one
/// of the first `cycle` keys of its thread again. `done` prints one parsable line.
const WRK_SCRIPT: &str = r#"
local counter = 0
local threads = {}
function setup(thread) thread:set("id", #threads); table.insert(threads, thread) end
function init(args) prefix = args[1]; cycle = tonumber(args[2]); key = args[3]; cookie = args[4] or "" end
function request()
  counter = counter + 1
  local n = counter
  if cycle > 0 then n = (counter % cycle) + 1 end
  local body = string.format('{"valor":%d,"cartao":"tok_aprovado"}', (n % 9999) + 1)
  local headers = {
    ["Authorization"] = "Bearer " .. key,
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = string.format("%s-%d-%d", prefix, id, n),
  }
  if cookie ~= "" then headers["Cookie"] = cookie end
  return wrk.format("POST", nil, headers, body)
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK %d %d %d %d %d %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), e.connect, e.read, e.write, e.status, e.timeout))
end
"#;

/// Sends `n` requests with one key at once; returns how many got an answer the client can act on.
async fn burst(url: &str, cookie: &str, key: &str, n: usize) {
    let client = reqwest::Client::new();
    let sends = (0..n).map(|_| {
        let mut req = client
            .post(url)
            .bearer_auth(API_KEY)
            .header("Idempotency-Key", key)
            .json(&serde_json::json!({"valor": 4242, "cartao": "tok_aprovado"}));
        if !cookie.is_empty() {
            req = req.header("Cookie", cookie);
        }
        req.send()
    });
    for res in futures::future::join_all(sends).await {
        res.expect("the server answers");
    }
}

/// Makes sure the keys a replay run cycles through (`prefix-{thread}-{1..=REPLAY_KEYS}`, the
/// bodies the wrk script sends) are completed before it starts. The first-execution run before
/// it usually completed them, but wrk may take a number from its counter and never send it (a
/// connection it sets up again), and a key first executed inside the replay run answers 409 to
/// its concurrent repeats. Returns how many of them it executed for the first time (charges the
/// first-execution run did not answer).
pub(crate) fn warm(url: &str, cookie: &str, prefix: &str) -> usize {
    use futures::StreamExt;
    let sends = (0..2).flat_map(|thread| (1..=REPLAY_KEYS).map(move |n| (thread, n)));
    let client = reqwest::Client::new();
    let work = futures::stream::iter(sends)
        .map(|(thread, n)| {
            let mut req = client
                .post(url)
                .bearer_auth(API_KEY)
                .header("Idempotency-Key", format!("{prefix}-{thread}-{n}"))
                .header("Content-Type", "application/json")
                .body(format!(
                    r#"{{"valor":{},"cartao":"tok_aprovado"}}"#,
                    (n % 9999) + 1
                ));
            if !cookie.is_empty() {
                req = req.header("Cookie", cookie);
            }
            req.send()
        })
        .buffer_unordered(CONCURRENCY)
        .fold(0, |first, res| async move {
            let res = res.expect("the server answers");
            assert!(
                res.status().is_success(),
                "warming a replay key: {}",
                res.status()
            );
            first + usize::from(!res.headers().contains_key("idempotent-replayed"))
        });
    tokio::runtime::Handle::current().block_on(work)
}

/// A target line: the figure, the target, met or not.
pub(crate) fn target(what: &str, figure: f64, goal: f64) {
    let verdict = if figure >= goal { "met" } else { "NOT met" };
    println!("{what:<58} {figure:>6.2}x  target >= {goal:.2}x  {verdict}");
}

/// A target line for a figure that must stay at most `goal`.
pub(crate) fn at_most(what: &str, figure: f64, goal: f64) {
    let verdict = if figure <= goal { "met" } else { "NOT met" };
    println!("{what:<58} {figure:>6.2}x  target <= {goal:.2}x  {verdict}");
}

/// The number in the environment variable `name` when it parses and is `valid`, else `default`.
pub(crate) fn env_number<T: std::str::FromStr>(
    name: &str,
    valid: impl Fn(&T) -> bool,
    default: T,
) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(valid)
        .unwrap_or(default)
}

fn main() {
    // A server of the rounds (this bench started again by `processes`), or the bench itself.
    if processes::serve_if_asked() {
        return;
    }
    tokio::runtime::Runtime::new()
        .expect("a runtime")
        .block_on(bench());
}

async fn bench() {
    let secs: u64 = env_number("BENCH_SECS", |&s| s > 0, 5);
    let dir =
        tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| ".".into())).unwrap();
    // Pagar's request logging as the binary has it: INFO, one line per request formatted on the
    // request's thread and written in batches by a thread of its own (here to a file). The level
    // can be turned off for one run.
    let (level, _log_level) =
        tracing_subscriber::reload::Layer::new(tracing_subscriber::EnvFilter::new("info"));
    let (log_layer, _flush_logs) = payment_api::logging::text_layer(
        payment_api::logging::batch_writer(
            std::fs::File::create(dir.path().join("server.log")).unwrap(),
        ),
        false,
    );
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        tracing_subscriber::registry()
            .with(level)
            .with(log_layer)
            .init();
    }
    let script = dir.path().join("pay.lua");
    std::fs::write(&script, WRK_SCRIPT).unwrap();
    // `PAGAR_BENCH_ONLY=grown`: only the grown store's rounds (they take minutes of their own).
    if std::env::var("PAGAR_BENCH_ONLY").as_deref() == Ok("grown") {
        grown::run_rounds(&script, secs, dir.path()).await.print();
        return;
    }
    // `PAGAR_BENCH_ONLY=deployed`: only Pagar beside the peer, each as deployed.
    if std::env::var("PAGAR_BENCH_ONLY").as_deref() == Ok("deployed") {
        let db = dir.path().join("api.db");
        let config = Config::sandbox(db, API_KEY, "loja_bench", "bench-admin");
        let server = payment_api::start(config).await.unwrap();
        let url = format!("{}/pagamentos", server.url());
        tokio::task::block_in_place(|| warm(&url, "", "k"));
        let ceiling_body = replay_body(&url).await;
        deployed::run_rounds(&script, secs, dir.path(), &ceiling_body)
            .await
            .print();
        return;
    }
    // `PAGAR_BENCH_ONLY=postgres`: only the PostgreSQL store's runs.
    if std::env::var("PAGAR_BENCH_ONLY").as_deref() == Ok("postgres") {
        match postgres::run(&script, secs, dir.path()).await {
            Ok(pg) => pg.print(None),
            Err(e) => println!("\nPostgreSQL figures skipped: {e}"),
        }
        return;
    }
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
    let mut warmed = 0;
    let replay = tokio::task::block_in_place(|| {
        warmed = warm(&url, "", "k");
        wrk(
            "POST /pagamentos, replay",
            &script,
            &url,
            secs,
            "k",
            REPLAY_KEYS,
        )
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
            REPLAY_KEYS,
        )
    });

    // wrk stops with up to one request per connection in flight; the server still executes those.
    let ledger = server.simulator_ledger().ledger().await.unwrap().len();
    let executed = first.count + warmed;
    assert!(
        (executed..=executed + CONCURRENCY).contains(&ledger),
        "one charge per first execution: {ledger} charges for {} answered ({} by the run, {warmed} by warming the replay keys)",
        executed,
        first.count
    );

    // Beside the peer, as deployed (`api/deployed.rs`).
    let ceiling_body = replay_body(&url).await;
    let deployed = deployed::run_rounds(&script, secs, dir.path(), &ceiling_body).await;

    let pg = postgres::run(&script, secs, dir.path()).await;
    let grown = grown::run_rounds(&script, secs, dir.path()).await;

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
    deployed.print();
    match pg {
        Ok(pg) => pg.print(Some((&first, &replay))),
        Err(e) => println!("\nPostgreSQL figures skipped: {e}"),
    }
    grown.print();
}
