//! `make bench` (checkout-core part): how long `pay` takes until the attempt is durable, and how
//! long 10 000 queued attempts take to drain when the server comes back — each against its
//! reference measured in the same run. Prints figures; asserts nothing about speed.

use checkout_core::{CardToken, Centavos, Checkout, Config, SaleId};
use durable_sqlite::reference::{percentile_ms, raw_commit_latencies};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const API_KEY: &str = "sk_bench_checkout";
const PAYS: usize = 2_000;
const QUEUED: usize = 10_000;
const IN_FLIGHT: usize = 32;

async fn start_api(db: std::path::PathBuf, listen: SocketAddr) -> payment_api::RunningServer {
    let mut config = payment_api::Config::sandbox(db, API_KEY, "loja", "bench-admin");
    config.listen = listen;
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

#[tokio::main]
async fn main() {
    let dir =
        tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| ".".into())).unwrap();

    // 1. pay until durable, against SQLite's raw durable commit.
    let raw = raw_commit_latencies(&dir.path().join("raw.db"), PAYS).unwrap();
    let api = start_api(
        dir.path().join("api-pay.db"),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let checkout = Checkout::open(dir.path().join("outbox-pay.db"), engine_config(&api.url()))
        .await
        .unwrap();
    let mut pays = Vec::with_capacity(PAYS);
    for i in 0..PAYS {
        let t = Instant::now();
        pay(&checkout, format!("venda-{i}"), 100).await;
        pays.push(t.elapsed());
    }
    checkout.shutdown().await;
    api.shutdown().await;

    // The same, with no server at all: the attempts queue and nothing else touches the disk.
    let nowhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let nowhere_url = format!("http://{}", nowhere.local_addr().unwrap());
    drop(nowhere);
    let checkout = Checkout::open(
        dir.path().join("outbox-offline.db"),
        engine_config(&nowhere_url),
    )
    .await
    .unwrap();
    let mut offline_pays = Vec::with_capacity(PAYS);
    for i in 0..PAYS {
        let t = Instant::now();
        pay(&checkout, format!("offline-{i}"), 100).await;
        offline_pays.push(t.elapsed());
    }
    checkout.shutdown().await;

    // 2. Drain 10 000 queued attempts when the server comes back, against the server alone
    //    executing 10 000 first requests with the same concurrency.
    let reference_api = start_api(
        dir.path().join("api-ref.db"),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let alone = server_alone(&reference_api.url(), QUEUED).await;
    reference_api.shutdown().await;

    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe); // the address the server will come back on; nothing listens there yet
    let checkout = Checkout::open(
        dir.path().join("outbox-drain.db"),
        engine_config(&format!("http://{addr}")),
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
    let api = start_api(dir.path().join("api-drain.db"), addr).await;
    while checkout.queue().await.unwrap().count > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let drain = back.elapsed();
    let ledger = api.state().store().ledger().await.unwrap().len();
    assert_eq!(ledger, QUEUED, "one charge per queued attempt");
    checkout.shutdown().await;

    println!();
    println!(
        "checkout-core benchmark (SQLite WAL synchronous=FULL, {IN_FLIGHT} requests in flight)"
    );
    println!(
        "{:<52} {:>10} {:>10}",
        "pay until durable", "p50 ms", "p99 ms"
    );
    println!(
        "{:<52} {:>10.3} {:>10.3}",
        "raw SQLite durable commit (reference)",
        percentile_ms(&raw, 0.5),
        percentile_ms(&raw, 0.99)
    );
    println!(
        "{:<52} {:>10.3} {:>10.3}",
        format!("Checkout::pay, {PAYS} sales, server up"),
        percentile_ms(&pays, 0.5),
        percentile_ms(&pays, 0.99)
    );
    println!(
        "{:<52} {:>10.3} {:>10.3}",
        format!("Checkout::pay, {PAYS} sales, server unreachable"),
        percentile_ms(&offline_pays, 0.5),
        percentile_ms(&offline_pays, 0.99)
    );
    println!(
        "pay p50 / raw commit p50: {:.2}x online, {:.2}x offline (target: pay p99 under 5 ms)",
        percentile_ms(&pays, 0.5) / percentile_ms(&raw, 0.5),
        percentile_ms(&offline_pays, 0.5) / percentile_ms(&raw, 0.5)
    );
    println!();
    println!("{:<52} {:>10}", "10 000 payments", "seconds");
    println!(
        "{:<52} {:>10.2}",
        "server alone: 10 000 first requests (reference)",
        alone.as_secs_f64()
    );
    println!(
        "{:<52} {:>10.2}",
        "queue 10 000 while offline (pay x 10 000)",
        fill.as_secs_f64()
    );
    println!(
        "{:<52} {:>10.2}",
        "drain 10 000 after the server comes back",
        drain.as_secs_f64()
    );
    println!(
        "drain / server alone: {:.2}x (target <= 2)",
        drain.as_secs_f64() / alone.as_secs_f64()
    );
    println!("ledger rows after the drain: {ledger}");
}
