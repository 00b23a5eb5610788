//! `make bench` (checkout-core part): how long `pay` takes until the attempt is durable, and how
//! long 10 000 and 100 000 queued attempts take to drain when the server comes back — each against
//! its reference measured in the same run (the server alone; for 100 000, also the 10 000: a
//! drain is linear when a sale costs the same in either). Prints figures and one line per target (figure, target,
//! met or not); asserts nothing about speed. Each part runs in a process of its own;
//! `OUTBOX_BENCH=pay` or `=drain` runs only that part, in this process (for a profiler);
//! `BENCH_ROUNDS` sets the rounds (3), `BENCH_QUEUED_LARGE` the larger queue (100 000).

#[path = "outbox/waits.rs"]
mod waits;

use checkout_core::{AttemptId, CardToken, Centavos, Checkout, Config, SaleId};
use durable_sqlite::reference::{
    db_write_latencies, percentile_ms, raw_commit_latencies, raw_commit_latencies_beside,
    raw_commit_latencies_of, RawPages,
};
use durable_sqlite::{Histogram, Phases, Timings, WriteTime};
use pagar_testkit::{ApiDatabase, ApiOptions, ApiProcess};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use waits::*;

const API_KEY: &str = "sk_bench_checkout";
const PAYS: usize = 2_000;
const QUEUED: usize = 10_000;
/// The larger queue: a store offline for days, or many tills' sales behind one outbox.
const QUEUED_LARGE: usize = 100_000;
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

/// Pays `sale` by card; answers its attempt's id.
async fn pay(checkout: &Checkout, sale: String, valor: i64) -> AttemptId {
    checkout
        .pay(
            SaleId::parse(&sale).unwrap(),
            Centavos::new(valor).unwrap(),
            CardToken::parse("tok_aprovado").unwrap(),
        )
        .await
        .unwrap()
        .attempt()
        .id
        .clone()
}

/// One card payment under a fresh key to `url` (`…/pagamentos`): a first execution, approved.
async fn first_execution(client: &reqwest::Client, url: &str) {
    let res = client
        .post(url)
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
        .header("Content-Type", "application/json")
        .body(r#"{"valor":100,"cartao":"tok_aprovado"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
}

/// A raw durable commit of `pages` log pages, `PAYS` times, each while the server (its own
/// process, on this machine's disk and cores) executes a card payment sent just before it from
/// this process: what any till's commit of that size costs beside a server at work, as a pay
/// in the back-to-back loop is made while the last sale's request is executed.
async fn raw_beside_server(dir: &std::path::Path, round: usize, pages: u64) -> Vec<Duration> {
    let api = start_api(dir.join(format!("api-raw-beside-{round}.db")), None);
    let url = format!("{}/pagamentos", api.url());
    let client = reqwest::Client::new();
    first_execution(&client, &url).await; // connected, as the till's engine is
    let raw = RawPages::open(
        &dir.join(format!("raw-beside-server-{round}.db")),
        pages,
        None,
    )
    .unwrap();
    let mut latencies = Vec::with_capacity(PAYS);
    for _ in 0..PAYS {
        let request = tokio::spawn({
            let (client, url) = (client.clone(), url.clone());
            async move { first_execution(&client, &url).await }
        });
        latencies.push(raw.commit().unwrap());
        request.await.unwrap();
    }
    latencies
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
                    first_execution(&client, &url).await;
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    start.elapsed()
}

/// `PAYS` sales paid one after another by a till whose server is at `url`: each `pay` until
/// durable, and where the outbox's writes spent their time. `paced`: each sale only once the
/// last one's answer is recorded (as a cashier sells: the next sale after "aprovado"), instead of
/// at once while the last one is still on its way.
async fn pay_many(
    url: &str,
    outbox_db: std::path::PathBuf,
    paced: bool,
) -> (Vec<Duration>, Timings) {
    let checkout = Checkout::open(outbox_db, engine_config(url)).await.unwrap();
    checkout.outbox().profile_writes();
    let mut latencies = Vec::with_capacity(PAYS);
    for i in 0..PAYS {
        let t = Instant::now();
        let attempt = pay(&checkout, format!("venda-{i}"), 100).await;
        latencies.push(t.elapsed());
        if paced {
            let answered = checkout.wait_final(&attempt, Duration::from_secs(30)).await;
            assert!(answered.unwrap().state.is_final());
        }
    }
    let timings = checkout.outbox().write_timings().expect("profiled");
    checkout.shutdown().await;
    (latencies, timings)
}

/// The scenarios of one pay round, in the order they are printed.
const PAY_SCENARIOS: [&str; 10] = [
    "raw SQLite durable commit (reference)",
    "Checkout::pay, server up",
    "  the same, server in this process (embedded sandbox)",
    "Checkout::pay, server unreachable",
    "one durable write through durable-sqlite (floor)",
    "raw SQLite durable commit of a pay's log pages",
    "  the same, another file's commits beside it",
    "  server up, its database on another disk (tmpfs)",
    "  server up, each sale after the last one's answer",
    "raw commit of a pay's pages, the server executing",
];
const RAW: usize = 0;
const ONLINE: usize = 1;
const IN_PROCESS: usize = 2;
const OFFLINE: usize = 3;
const FLOOR: usize = 4;
const RAW_AS_PAY: usize = 5;
const RAW_AS_PAY_BESIDE: usize = 6;
const SERVER_OTHER_DISK: usize = 7;
const PACED: usize = 8;
const RAW_BESIDE_SERVER: usize = 9;

/// One round of `pay` until durable, per scenario of [`PAY_SCENARIOS`]: the raw commit reference;
/// `pay` with the server up in a process of its own (as a store runs it); the same with the
/// server in this process (the app's embedded sandbox, where its work shares the till's
/// runtime); with no server at all; one durable write through `durable-sqlite` alone; and a raw
/// commit appending as many log pages as a pay's write-ahead, alone and with another file's
/// commits beside it (the disk shared as with a server). Each through `durable-sqlite` with the
/// writer's timings.
async fn pay_round(dir: &std::path::Path, round: usize) -> (Vec<Vec<Duration>>, Vec<Timings>) {
    let raw = raw_commit_latencies(&dir.join(format!("raw-{round}.db")), PAYS).unwrap();
    let floor = db_write_latencies(&dir.join(format!("db-{round}.db")), PAYS)
        .await
        .unwrap();
    let api = start_api(dir.join(format!("api-pay-{round}.db")), None);
    let online = pay_many(
        &api.url(),
        dir.join(format!("outbox-pay-{round}.db")),
        false,
    )
    .await;
    drop(api);
    let embedded = start_embedded_api(dir.join(format!("api-pay-embedded-{round}.db"))).await;
    let in_process = pay_many(
        &embedded.url(),
        dir.join(format!("outbox-pay-embedded-{round}.db")),
        false,
    )
    .await;
    embedded.shutdown().await;
    // The same, with no server at all: the attempts queue and nothing else touches the disk.
    let offline = pay_many(
        &free_address().await,
        dir.join(format!("outbox-offline-{round}.db")),
        false,
    )
    .await;
    // A raw commit appending as many log pages as a pay's write-ahead did (its median, offline).
    let pages = offline.1.durable.frames.value_at_quantile(0.5);
    let raw_as_pay =
        raw_commit_latencies_of(&dir.join(format!("raw-pages-{round}.db")), PAYS, pages).unwrap();
    let raw_as_pay_beside = raw_commit_latencies_beside(
        &dir.join(format!("raw-pages-beside-{round}.db")),
        PAYS,
        pages,
        Some(&dir.join(format!("raw-other-{round}.db"))),
    )
    .unwrap();
    // The server as in a store, on a machine of its own: its fsyncs on another disk than the
    // till's (tmpfs here, the one other file system this machine has), the cores still shared.
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let api = start_api(shm.path().join(format!("api-pay-{round}.db")), None);
    let other_disk = pay_many(
        &api.url(),
        dir.join(format!("outbox-pay-shm-{round}.db")),
        false,
    )
    .await;
    drop(api);
    // Sales as a cashier makes them: the next one after the last one's answer.
    let api = start_api(dir.join(format!("api-pay-paced-{round}.db")), None);
    let paced = pay_many(
        &api.url(),
        dir.join(format!("outbox-pay-paced-{round}.db")),
        true,
    )
    .await;
    drop(api);
    // The floor for a till on this machine beside the server: a raw commit as large as a pay's,
    // each while the server executes a request.
    let raw_beside_server = raw_beside_server(dir, round, pages).await;

    let by_scenario: [(Vec<Duration>, Timings); 10] = [
        (raw, Timings::default()),
        online,
        in_process,
        offline,
        floor,
        (raw_as_pay, Timings::default()),
        (raw_as_pay_beside, Timings::default()),
        other_disk,
        paced,
        (raw_beside_server, Timings::default()),
    ];
    by_scenario.into_iter().unzip()
}

/// A loopback address nothing listens on (yet).
async fn free_address() -> String {
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    format!("http://{}", probe.local_addr().unwrap())
}

/// One round of the drain: the server alone executing `queued` first requests, then `queued`
/// attempts queued while the server is away and drained when it comes back on the same address.
/// Returns (server alone, fill, drain, until the first attempt drained).
async fn drain_round(dir: &std::path::Path, round: usize, queued: usize) -> DrainRound {
    let reference_api = start_api(dir.join(format!("api-ref-{queued}-{round}.db")), None);
    let cpu = Cpu::read(reference_api.pid());
    let alone = server_alone(&reference_api.url(), queued).await;
    let alone_cpu = Cpu::read(reference_api.pid()).since(&cpu);
    drop(reference_api);

    let url = free_address().await; // where the server will come back; nothing listens yet
    let checkout = Checkout::open(
        dir.join(format!("outbox-drain-{queued}-{round}.db")),
        engine_config(&url),
    )
    .await
    .unwrap();
    let fill = Instant::now();
    for i in 0..queued {
        pay(&checkout, format!("fila-{i}"), 100).await;
    }
    let fill = fill.elapsed();
    assert_eq!(checkout.queue().await.unwrap().count, queued as u64);
    let back = Instant::now();
    let addr = url.trim_start_matches("http://").parse().unwrap();
    let api = start_api(
        dir.join(format!("api-drain-{queued}-{round}.db")),
        Some(addr),
    );
    let cpu = Cpu::read(api.pid());
    let mut first = None;
    loop {
        let left = checkout.queue().await.unwrap().count;
        if left < queued as u64 && first.is_none() {
            first = Some(back.elapsed());
        }
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let drain = back.elapsed();
    let drain_cpu = Cpu::read(api.pid()).since(&cpu);
    let ledger = api.ledger().await.len();
    assert_eq!(ledger, queued, "one charge per queued attempt");
    checkout.shutdown().await;
    drop(api);
    DrainRound {
        times: [alone, fill, drain, first.expect("drained")],
        cpu: [alone_cpu, drain_cpu],
    }
}

/// One drain round: its times ([`drain_round`]) and the CPU of its two measured parts (the
/// server alone, the drain).
struct DrainRound {
    times: [Duration; 4],
    cpu: [Cpu; 2],
}

/// CPU clock ticks (`/proc`, 100 a second) of the server process, of this process (the load
/// beside the server alone; the till's engine and outbox in the drain), and the machine's busy
/// and idle ones: read at a part's start and end, subtracted.
#[derive(Clone, Copy, Default)]
struct Cpu {
    server: u64,
    till: u64,
    busy: u64,
    idle: u64,
}

impl Cpu {
    fn read(server: u32) -> Self {
        use pagar_testkit::cpu_ticks;
        let (busy, idle) = cpu_ticks::machine();
        Self {
            server: cpu_ticks::process(&server.to_string()),
            till: cpu_ticks::process("self"),
            busy,
            idle,
        }
    }

    fn since(&self, start: &Cpu) -> Self {
        Self {
            server: self.server.saturating_sub(start.server),
            till: self.till.saturating_sub(start.till),
            busy: self.busy.saturating_sub(start.busy),
            idle: self.idle.saturating_sub(start.idle),
        }
    }

    /// (server, this process, the machine) CPU per sale in µs, and the cores' idle share.
    fn per_sale(&self, sales: usize) -> (f64, f64, f64, f64) {
        let us = |t: u64| t as f64 * 10_000.0 / sales.max(1) as f64;
        (
            us(self.server),
            us(self.till),
            us(self.busy),
            self.idle as f64 / (self.busy + self.idle).max(1) as f64,
        )
    }
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
    let Ok(only) = std::env::var("OUTBOX_BENCH") else {
        // Each part in a process of its own, as an app is one process with one outbox: the
        // drain does not run in a process that has just made the pay rounds' 12 000 pays
        // through six other outboxes and an embedded server.
        for part in ["pay", "drain"] {
            let status = std::process::Command::new(std::env::current_exe().unwrap())
                .args(std::env::args_os().skip(1))
                .env("OUTBOX_BENCH", part)
                .status()
                .unwrap();
            assert!(status.success(), "the {part} part of the bench failed");
        }
        return;
    };
    let only = Some(only);
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let dir =
        tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| ".".into())).unwrap();
    let large: usize = std::env::var("BENCH_QUEUED_LARGE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(QUEUED_LARGE);
    let (mut pays, mut drains, mut large_drains) = (Vec::new(), Vec::new(), Vec::new());
    let mut large_cpu: Vec<[Cpu; 2]> = Vec::new();
    for round in 0..rounds {
        if only.as_deref() != Some("drain") {
            pays.push(pay_round(dir.path(), round).await);
        }
        if only.as_deref() != Some("pay") {
            let small = drain_round(dir.path(), round, QUEUED).await;
            let big = drain_round(dir.path(), round, large).await;
            drains.push(small.times);
            large_drains.push(big.times);
            large_cpu.push(big.cpu);
        }
    }

    println!();
    println!(
        "checkout-core benchmark (SQLite WAL synchronous=FULL, {IN_FLIGHT} requests in flight, {rounds} rounds, medians)"
    );
    if !pays.is_empty() {
        let stat = |which: usize, p: f64| {
            median(pays.iter().map(|r| percentile_ms(&r.0[which], p)).collect())
        };
        println!(
            "{:<52} {:>10} {:>10}",
            "pay until durable", "p50 ms", "p99 ms"
        );
        for (which, name) in PAY_SCENARIOS.iter().enumerate() {
            let name = name.replace("pay,", &format!("pay, {PAYS} sales,"));
            println!(
                "{name:<52} {:>10.3} {:>10.3}",
                stat(which, 0.5),
                stat(which, 0.99)
            );
        }
        println!(
            "pay p99 / raw commit p99: {:.2}x online, {:.2}x offline",
            stat(ONLINE, 0.99) / stat(RAW, 0.99),
            stat(OFFLINE, 0.99) / stat(RAW, 0.99)
        );
        where_pay_waits(&pays);
        where_slowest_pays_wait(&pays);
        target(
            "pay until durable p99, server up",
            stat(ONLINE, 0.99),
            " ms",
            1.0,
            true,
        );
        println!(
            "limit, pay until durable, against its floor: the floor for a till beside this server (a raw SQLite commit of as many pages as a write-ahead, each while the server executes a card payment) has p99 {:.3} ms; pay p99 is {:.2}x it back to back, {:.2}x paced as a cashier sells",
            stat(RAW_BESIDE_SERVER, 0.99),
            stat(ONLINE, 0.99) / stat(RAW_BESIDE_SERVER, 0.99),
            stat(PACED, 0.99) / stat(RAW_BESIDE_SERVER, 0.99),
        );
        // The `q`-quantile of the durable writes' histogram, the median of the rounds.
        let quantile = |which: usize, of: fn(&Phases) -> &Histogram<u64>, q: f64| {
            median(
                pays.iter()
                    .map(|r| of(&r.1[which].durable).value_at_quantile(q) as f64)
                    .collect(),
            )
        };
        let (online_p99, _) = around_p99(&durable_writes(&pays, ONLINE));
        let (other_disk_p99, _) = around_p99(&durable_writes(&pays, SERVER_OTHER_DISK));
        let (offline_p99, _) = around_p99(&durable_writes(&pays, OFFLINE));
        // Indexes in PARTS: 1 waited, 3 behind, 6 COMMIT, 8 waiting for a core in it, 9 blocked.
        println!(
            "limit, pay until durable: a pay is durable once its write-ahead is, one commit of the outbox appending {:.0} log pages (median: the attempt and its indexes, the sale's number, the queue's total; a raw SQLite commit of as many pages has p99 {:.3} ms here alone, {:.3} ms with another file's commits beside it, {:.3} ms each while the server (its own process, this machine's disk and cores) executes a card payment: the floor for any till beside this server); the till alone (server unreachable) has pay p99 {:.3} ms. Online the server's process shares this machine's disk and two cores: its database moved to another disk (tmpfs) takes pay p99 from {:.3} to {:.3} ms; and these pays come at once, each while the last sale's request, its answer and the server's work on it are still under way on the same cores and disk: paid as a cashier sells (each sale after the last one's answer) pay p99 is {:.3} ms. A write-ahead around the p99 spends, online / server on another disk / till alone: {:.3} / {:.3} / {:.3} ms in its COMMIT, of them blocked on the disk's flush {:.3} / {:.3} / {:.3} (the flush also carries the pages of earlier answers, recorded relaxed) and waiting for a core {:.3} / {:.3} / {:.3}; before it, waiting for the writer {:.3} / {:.3} / {:.3} and behind a relaxed commit {:.3} / {:.3} / {:.3}; checkpoints ran beside {:.0} of {PAYS} pays; with the server in this process pay p99 {:.3} ms",
            quantile(OFFLINE, |p| &p.frames, 0.5),
            stat(RAW_AS_PAY, 0.99),
            stat(RAW_AS_PAY_BESIDE, 0.99),
            stat(RAW_BESIDE_SERVER, 0.99),
            stat(OFFLINE, 0.99),
            stat(ONLINE, 0.99),
            stat(SERVER_OTHER_DISK, 0.99),
            stat(PACED, 0.99),
            online_p99[6],
            other_disk_p99[6],
            offline_p99[6],
            online_p99[9],
            other_disk_p99[9],
            offline_p99[9],
            online_p99[8],
            other_disk_p99[8],
            offline_p99[8],
            online_p99[1],
            other_disk_p99[1],
            offline_p99[1],
            online_p99[3],
            other_disk_p99[3],
            offline_p99[3],
            median(pays.iter().map(|r| r.1[ONLINE].durable.beside_checkpoint.len() as f64).collect()),
            stat(IN_PROCESS, 0.99),
        );
    }
    if !drains.is_empty() {
        let secs =
            |d: &[[Duration; 4]], i: usize| median(d.iter().map(|d| d[i].as_secs_f64()).collect());
        // Per round, a large queue's seconds per sale over the small one's: 1.00x is linear.
        let per_sale = |i: usize| {
            median(
                drains
                    .iter()
                    .zip(&large_drains)
                    .map(|(s, l)| {
                        (l[i].as_secs_f64() / large as f64) / (s[i].as_secs_f64() / QUEUED as f64)
                    })
                    .collect(),
            )
        };
        let over_alone = |d: &[[Duration; 4]]| {
            median(
                d.iter()
                    .map(|d| d[2].as_secs_f64() / d[0].as_secs_f64())
                    .collect(),
            )
        };
        println!();
        println!(
            "{:<52} {:>10} {:>10}",
            "queued payments, seconds", QUEUED, large
        );
        let rows = [
            "server alone: as many first requests (reference)",
            "queue them while offline (one pay each)",
            "drain them after the server comes back",
            "  of which until the first answer (start, probe)",
        ];
        for (i, what) in rows.iter().enumerate() {
            println!(
                "{what:<52} {:>10.2} {:>10.2}",
                secs(&drains, i),
                secs(&large_drains, i)
            );
        }
        println!(
            "per sale, {large} / {QUEUED}: server alone {:.2}x, queue {:.2}x, drain {:.2}x",
            per_sale(0),
            per_sale(1),
            per_sale(2)
        );
        target("drain / server alone", over_alone(&drains), "x", 1.3, true);
        target(
            &format!("drain / server alone, {large} queued"),
            over_alone(&large_drains),
            "x",
            1.3,
            true,
        );
        // What the large queue's drain and its reference cost the machine per sale, part by
        // part: the server alone and in the drain, and beside it this process (the reference's
        // load, then the till's engine and outbox), with the cores' idle share.
        let part = |i: usize, f: fn(&(f64, f64, f64, f64)) -> f64| {
            median(large_cpu.iter().map(|c| f(&c[i].per_sale(large))).collect())
        };
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as f64;
        let alone_rate = large as f64 / secs(&large_drains, 0).max(1e-9);
        println!(
            "limit, drain of {large}: CPU per sale, server alone / in the drain: the server {:.0} / {:.0} us, this process (the reference's load / the till's engine and outbox) {:.0} / {:.0} us, the machine {:.0} / {:.0} us (cores idle {:.0} % / {:.0} %); at the drain's machine CPU per sale {cores:.0} cores allow at most {:.0} sales/s: a drain in {:.2}x the server alone's time, were the cores what bounds it",
            part(0, |c| c.0),
            part(1, |c| c.0),
            part(0, |c| c.1),
            part(1, |c| c.1),
            part(0, |c| c.2),
            part(1, |c| c.2),
            part(0, |c| c.3 * 100.0),
            part(1, |c| c.3 * 100.0),
            cores * 1e6 / part(1, |c| c.2).max(1e-9),
            alone_rate / (cores * 1e6 / part(1, |c| c.2).max(1e-9)),
        );
        target(
            &format!("drain per sale, {large} / {QUEUED} queued"),
            per_sale(2),
            "x",
            1.1,
            true,
        );
        target(
            &format!("queue per sale, {large} / {QUEUED} queued"),
            per_sale(1),
            "x",
            1.1,
            true,
        );
    }
}
