//! `make bench` (checkout-core part): how long `pay` takes until the attempt is durable, and how
//! long 10 000 queued attempts take to drain when the server comes back — each against its
//! reference measured in the same run. Prints figures and one line per target (figure, target,
//! met or not); asserts nothing about speed. `OUTBOX_BENCH=pay` or `=drain` runs one part (for a
//! profiler); `BENCH_ROUNDS` sets the rounds (3).

use checkout_core::{CardToken, Centavos, Checkout, Config, SaleId};
use durable_sqlite::reference::{db_write_latencies, percentile_ms, raw_commit_latencies};
use pagar_testkit::{ApiDatabase, ApiOptions, ApiProcess};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const API_KEY: &str = "sk_bench_checkout";
const PAYS: usize = 2_000;
const QUEUED: usize = 10_000;
const IN_FLIGHT: usize = 32;

/// The payment API as a store deploys it: the release binary, a process of its own, on a fresh
/// SQLite file (`listen`: `None` for a free port).
fn start_api(db: std::path::PathBuf, listen: Option<SocketAddr>) -> ApiProcess {
    ApiProcess::spawn(ApiOptions {
        database: ApiDatabase::Sqlite(db),
        api_key: API_KEY.into(),
        merchant: "loja".into(),
        extra: Vec::new(),
        log: None,
        listen,
    })
}

/// The payment API in this process (the app's embedded sandbox: `make run` with no API set).
async fn start_embedded_api(db: std::path::PathBuf) -> payment_api::RunningServer {
    let config = payment_api::Config::sandbox(db, API_KEY, "loja", "bench-admin");
    payment_api::start(config).await.unwrap()
}

fn engine_config(url: &str) -> Config {
    let mut c = Config::new(url, API_KEY);
    c.max_in_flight = IN_FLIGHT;
    c.offline_caps = checkout_core::outbox::OfflineCaps::default();
    c.probe_interval = Duration::from_millis(100);
    c
}

async fn pay(checkout: &Checkout, sale: String, valor: i64) {
    checkout
        .pay(
            SaleId::parse(&sale).unwrap(),
            Centavos::new(valor).unwrap(),
            CardToken::parse("tok_aprovado").unwrap(),
        )
        .await
        .unwrap();
}

/// The server alone: `n` first executions over `IN_FLIGHT` concurrent reqwest connections.
async fn server_alone(url: &str, n: usize) -> Duration {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (url, next) = (format!("{url}/pagamentos"), next.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    let res = client
                        .post(&url)
                        .bearer_auth(API_KEY)
                        .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
                        .header("Content-Type", "application/json")
                        .body(r#"{"valor":100,"cartao":"tok_aprovado"}"#)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(res.status(), 201);
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    start.elapsed()
}

/// `PAYS` sales paid one after another against the server at `url`: each `pay` until durable.
async fn pay_online(url: &str, outbox_db: std::path::PathBuf) -> Vec<Duration> {
    let checkout = Checkout::open(outbox_db, engine_config(url)).await.unwrap();
    let mut online = Vec::with_capacity(PAYS);
    for i in 0..PAYS {
        let t = Instant::now();
        pay(&checkout, format!("venda-{i}"), 100).await;
        online.push(t.elapsed());
    }
    checkout.shutdown().await;
    online
}

/// One round of `pay` until durable: the raw commit reference; `pay` with the server up in a
/// process of its own (as a store runs it); the same with the server in this process (the app's
/// embedded sandbox, where its work shares the till's runtime); with no server at all; and one
/// durable write through `durable-sqlite` alone.
async fn pay_round(dir: &std::path::Path, round: usize) -> [Vec<Duration>; 5] {
    let raw = raw_commit_latencies(&dir.join(format!("raw-{round}.db")), PAYS).unwrap();
    let through_db = db_write_latencies(&dir.join(format!("db-{round}.db")), PAYS)
        .await
        .unwrap();
    let api = start_api(dir.join(format!("api-pay-{round}.db")), None);
    let online = pay_online(&api.url(), dir.join(format!("outbox-pay-{round}.db"))).await;
    drop(api);
    let embedded = start_embedded_api(dir.join(format!("api-pay-embedded-{round}.db"))).await;
    let in_process = pay_online(
        &embedded.url(),
        dir.join(format!("outbox-pay-embedded-{round}.db")),
    )
    .await;
    embedded.shutdown().await;

    // The same, with no server at all: the attempts queue and nothing else touches the disk.
    let checkout = Checkout::open(
        dir.join(format!("outbox-offline-{round}.db")),
        engine_config(&free_address().await),
    )
    .await
    .unwrap();
    let mut offline = Vec::with_capacity(PAYS);
    for i in 0..PAYS {
        let t = Instant::now();
        pay(&checkout, format!("offline-{i}"), 100).await;
        offline.push(t.elapsed());
    }
    checkout.shutdown().await;
    [raw, online, in_process, offline, through_db]
}

/// A loopback address nothing listens on (yet).
async fn free_address() -> String {
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    format!("http://{}", probe.local_addr().unwrap())
}

/// One round of the drain: the server alone executing `QUEUED` first requests, then `QUEUED`
/// attempts queued while the server is away and drained when it comes back on the same address.
/// Returns (server alone, fill, drain, until the first attempt drained).
async fn drain_round(dir: &std::path::Path, round: usize) -> [Duration; 4] {
    let reference_api = start_api(dir.join(format!("api-ref-{round}.db")), None);
    let alone = server_alone(&reference_api.url(), QUEUED).await;
    drop(reference_api);

    let url = free_address().await; // where the server will come back; nothing listens yet
    let checkout = Checkout::open(
        dir.join(format!("outbox-drain-{round}.db")),
        engine_config(&url),
    )
    .await
    .unwrap();
    let fill = Instant::now();
    for i in 0..QUEUED {
        pay(&checkout, format!("fila-{i}"), 100).await;
    }
    let fill = fill.elapsed();
    assert_eq!(checkout.queue().await.unwrap().count, QUEUED as u64);
    let back = Instant::now();
    let addr = url.trim_start_matches("http://").parse().unwrap();
    let api = start_api(dir.join(format!("api-drain-{round}.db")), Some(addr));
    let mut first = None;
    loop {
        let left = checkout.queue().await.unwrap().count;
        if left < QUEUED as u64 && first.is_none() {
            first = Some(back.elapsed());
        }
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let drain = back.elapsed();
    let ledger = api.ledger().await.len();
    assert_eq!(ledger, QUEUED, "one charge per queued attempt");
    checkout.shutdown().await;
    drop(api);
    [alone, fill, drain, first.expect("drained")]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Prints the figure beside its target; `at_most` says which side of the target is good.
fn target(what: &str, figure: f64, unit: &str, goal: f64, at_most: bool) {
    let met = if at_most {
        figure <= goal
    } else {
        figure >= goal
    };
    let (cmp, verdict) = (
        if at_most { "<=" } else { ">=" },
        if met { "met" } else { "NOT met" },
    );
    println!("{what:<52} {figure:>7.2}{unit:<3} target {cmp} {goal:.2}{unit}  {verdict}");
}

#[tokio::main]
async fn main() {
    let only = std::env::var("OUTBOX_BENCH").ok();
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let dir =
        tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| ".".into())).unwrap();
    let (mut pays, mut drains) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if only.as_deref() != Some("drain") {
            pays.push(pay_round(dir.path(), round).await);
        }
        if only.as_deref() != Some("pay") {
            drains.push(drain_round(dir.path(), round).await);
        }
    }

    println!();
    println!(
        "checkout-core benchmark (SQLite WAL synchronous=FULL, {IN_FLIGHT} requests in flight, {rounds} rounds, medians)"
    );
    if !pays.is_empty() {
        let stat = |which: usize, p: f64| {
            median(pays.iter().map(|r| percentile_ms(&r[which], p)).collect())
        };
        println!(
            "{:<52} {:>10} {:>10}",
            "pay until durable", "p50 ms", "p99 ms"
        );
        for (which, name) in [
            (0, "raw SQLite durable commit (reference)".to_string()),
            (1, format!("Checkout::pay, {PAYS} sales, server up")),
            (
                2,
                "  the same, server in this process (embedded sandbox)".to_string(),
            ),
            (
                3,
                format!("Checkout::pay, {PAYS} sales, server unreachable"),
            ),
            (
                4,
                "one durable write through durable-sqlite (floor)".to_string(),
            ),
        ] {
            println!(
                "{name:<52} {:>10.3} {:>10.3}",
                stat(which, 0.5),
                stat(which, 0.99)
            );
        }
        println!(
            "pay p99 / raw commit p99: {:.2}x online, {:.2}x offline",
            stat(1, 0.99) / stat(0, 0.99),
            stat(3, 0.99) / stat(0, 0.99)
        );
        target(
            "pay until durable p99, server up",
            stat(1, 0.99),
            " ms",
            1.0,
            true,
        );
        println!(
            "limit, pay until durable: a pay is durable once its write-ahead is, one durable write of the outbox: that write alone through durable-sqlite (its writer thread, its checkpoints) has p99 {:.3} ms here, a bare SQLite commit {:.3} ms; offline, with nothing else writing, pay's p99 is {:.2}x the write alone; online the previous sale's answer, recorded by the same writer, and the server's work and fsyncs on the same two cores and disk come between ({:.2}x; with the server in this process, the embedded sandbox, {:.2}x)",
            stat(4, 0.99),
            stat(0, 0.99),
            stat(3, 0.99) / stat(4, 0.99),
            stat(1, 0.99) / stat(4, 0.99),
            stat(2, 0.99) / stat(4, 0.99),
        );
    }
    if !drains.is_empty() {
        let secs = |i: usize| median(drains.iter().map(|d| d[i].as_secs_f64()).collect());
        println!();
        println!("{:<52} {:>10}", format!("{QUEUED} payments"), "seconds");
        println!(
            "{:<52} {:>10.2}",
            format!("server alone: {QUEUED} first requests (reference)"),
            secs(0)
        );
        println!(
            "{:<52} {:>10.2}",
            format!("queue {QUEUED} while offline (pay x {QUEUED})"),
            secs(1)
        );
        println!(
            "{:<52} {:>10.2}",
            format!("drain {QUEUED} after the server comes back"),
            secs(2)
        );
        println!(
            "{:<52} {:>10.2}",
            "  of which until the first answer (start, probe)",
            secs(3)
        );
        let ratio = median(
            drains
                .iter()
                .map(|d| d[2].as_secs_f64() / d[0].as_secs_f64())
                .collect(),
        );
        target("drain / server alone", ratio, "x", 1.3, true);
    }
}
