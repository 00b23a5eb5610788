//! `make bench`: throughput and latency of the payment API against SQLite's own durable commit
//! rate, measured in the same run. Prints a table; asserts nothing about speed.
//!
//! Load comes from `wrk` (a separate process, so the load generator does not run inside the
//! server under test). Scenarios, each with 32 concurrent connections over loopback:
//! - raw SQLite: one INSERT per durable commit (WAL, synchronous=FULL), one connection — the reference;
//! - bare endpoint: an axum route doing that same INSERT per request, with no idempotency;
//! - first executions: `POST /pagamentos` with a fresh key each time;
//! - replays: the same requests again (every one answered from the stored response), first from
//!   the in-memory replay cache, then through a second server whose cache is off;
//! - the peer: the same load against an in-memory idempotency middleware from crates.io
//!   (`api/peer.rs`), in five interleaved rounds beside Pagar (medians). Every server of the
//!   rounds is a release process of its own, fresh for each run (`api/processes.rs`): Pagar's
//!   first executions on this machine's disk and with every fsync made to wait 2 ms on purpose
//!   (the `slowsync` shim, counting the fsyncs), its replays with request logging on at its default level (INFO, to a
//!   file) and off, the peer's, and the ceiling's; then 50 concurrent requests with one key
//!   against each, counting charges.

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

/// How long each fsync of the slow disk waits.
const SLOW_FSYNC_MS: u64 = 2;
/// Durable commits made alone on the slow disk before its server starts, for its floor.
const RAW_ON_DISK: usize = 300;

/// What one run of Pagar's first executions with slow fsyncs ([`processes::SlowSync`]) measured.
struct DiskRun {
    row: Row,
    /// (fsyncs on the disk, executions charged).
    syncs: (u64, u64),
    /// Each step's mean (ms) from the server's `/metrics`.
    steps: Vec<(String, f64, u64)>,
    /// Wall time of the run per fsync (ms).
    per_sync_ms: f64,
    /// A durable SQLite commit alone on the same disk, before the server started: p50 (ms).
    raw_commit_ms: f64,
    cpu: Cpu,
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
    let secs: u64 = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
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

    // Beside the peer: interleaved rounds, every server a process of its own, fresh per run.
    let ceiling_body = replay_body(&url).await;
    let (mut ours_first, mut ours_replay, mut peer_first, mut peer_replay, mut ceilings) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    const ROUNDS: usize = 5;
    let (mut slow_first, mut quiet_replay) = (Vec::new(), Vec::new());
    // On the slow disk, each run as measured.
    let mut slow_runs: Vec<DiskRun> = Vec::new();
    // The CPU each kind of run cost: Pagar first, peer first, Pagar replay (logging on, off),
    // peer replay, ceiling.
    let mut cpu: [Vec<Cpu>; 6] = Default::default();
    // Pagar's first executions on this machine's disk: each step's mean (ms), per run.
    let mut disk_steps: Vec<Vec<(String, f64, u64)>> = Vec::new();
    // Pagar's first executions with every fsync slowed by `delay_ms`.
    async fn on_disk(
        logs: &std::path::Path,
        name: &str,
        delay_ms: u64,
        run: impl FnOnce(&processes::Server) -> (Row, Cpu),
    ) -> DiskRun {
        let slow = processes::SlowSync::new(logs, name, delay_ms);
        // The floor: one durable commit alone on this disk, nothing else running.
        let raw_commit_ms = tokio::task::block_in_place(|| {
            slow.raw_commit_p50_ms(&logs.join(format!("{name}-raw.db")), RAW_ON_DISK)
        });
        let pagar = processes::pagar_on(logs, logs, name, true, Some(&slow));
        let before = slow.syncs();
        let (row, cpu) = run(&pagar);
        let syncs_in_run = slow.syncs() - before;
        // wrk stops with requests in flight: let them end before counting.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let syncs = slow.syncs() - before;
        let steps = tokio::task::block_in_place(|| postgres::store_steps(&pagar.base()));
        let per_sync_ms = row.elapsed.as_secs_f64() * 1e3 / syncs_in_run.max(1) as f64;
        DiskRun {
            row,
            syncs: (syncs, pagar.charges()),
            steps,
            per_sync_ms,
            raw_commit_ms,
            cpu,
        }
    }
    let run = |name, server: &processes::Server, prefix: &str, cycle| {
        tokio::task::block_in_place(|| {
            if cycle > 0 {
                warm(&server.url, &server.cookie, prefix);
            }
            with_cpu(server.id(), || {
                wrk_with(
                    name,
                    &script,
                    &server.url,
                    secs,
                    prefix,
                    cycle,
                    CONCURRENCY,
                    &server.cookie,
                )
            })
        })
    };
    let logs = dir.path();
    for round in 0..ROUNDS {
        // Each kind of run in an order that turns each round, so that none of them is always
        // the first or the last.
        for which in (0..3).map(|i| (i + round) % 3) {
            match which {
                0 => {
                    let pagar = processes::pagar(logs, logs, &format!("first-{round}"), true);
                    let (row, used) = run("Pagar first", &pagar, "f", 0);
                    ours_first.push(row);
                    cpu[0].push(used);
                    disk_steps.push(tokio::task::block_in_place(|| {
                        postgres::store_steps(&pagar.base())
                    }));
                }
                1 => {
                    let measured =
                        on_disk(logs, &format!("slow-{round}"), SLOW_FSYNC_MS, |pagar| {
                            run("Pagar first, slow disk", pagar, "s", 0)
                        })
                        .await;
                    slow_first.push(measured.row.clone());
                    slow_runs.push(measured);
                }
                _ => {
                    let peer = processes::peer().await;
                    let (row, used) = run("peer first", &peer, "q", 0);
                    peer_first.push(row);
                    cpu[1].push(used);
                }
            }
        }
        for which in (0..4).map(|i| (i + round) % 4) {
            match which {
                0 => {
                    let pagar = processes::pagar(logs, logs, &format!("replay-{round}"), true);
                    let (row, used) = run("Pagar replay", &pagar, "r", REPLAY_KEYS);
                    ours_replay.push(row);
                    cpu[2].push(used);
                }
                1 => {
                    let pagar = processes::pagar(logs, logs, &format!("quiet-{round}"), false);
                    let (row, used) = run("Pagar replay, quiet", &pagar, "r", REPLAY_KEYS);
                    quiet_replay.push(row);
                    cpu[3].push(used);
                }
                2 => {
                    let peer = processes::peer().await;
                    let (row, used) = run("peer replay", &peer, "r", REPLAY_KEYS);
                    peer_replay.push(row);
                    cpu[4].push(used);
                }
                _ => {
                    let ceiling = processes::ceiling(&ceiling_body);
                    let (row, used) = run("ceiling", &ceiling, "r", REPLAY_KEYS);
                    ceilings.push(row);
                    cpu[5].push(used);
                }
            }
        }
    }
    let slow_syncs: Vec<(u64, u64)> = slow_runs.iter().map(|r| r.syncs).collect();
    // Each ratio is the median of the rounds' own ratios: runs a minute apart share the
    // machine's mood, and this machine's throughput wanders by a fifth over a few minutes.
    let ratio = |a: &[Row], b: &[Row]| {
        let mut r: Vec<f64> = a.iter().zip(b).map(|(a, b)| a.rate() / b.rate()).collect();
        r.sort_by(|x, y| x.total_cmp(y));
        r[r.len() / 2]
    };
    let first_vs_peer = ratio(&ours_first, &peer_first);
    let slow_vs_peer = ratio(&slow_first, &peer_first);
    let replay_vs_peer = ratio(&ours_replay, &peer_replay);
    let logging_on_off = ratio(&ours_replay, &quiet_replay);
    let of_ceiling = [
        ratio(&ours_replay, &ceilings),
        ratio(&quiet_replay, &ceilings),
        ratio(&peer_replay, &ceilings),
    ];
    let per_sync = mid(slow_syncs
        .iter()
        .map(|(syncs, executions)| *executions as f64 / (*syncs).max(1) as f64)
        .collect());
    let ours_first = median("Pagar (SQLite, durable), first execution", &ours_first);
    let slow_first = median("Pagar, first execution, fsync +2 ms", &slow_first);
    let ours_replay = median("Pagar, replay (logging INFO)", &ours_replay);
    let quiet_replay = median("Pagar, replay (logging off)", &quiet_replay);
    let peer_first = median("axum-idempotent 0.6.0 (memory), first", &peer_first);
    let peer_replay = median("axum-idempotent 0.6.0 (memory), replay", &peer_replay);
    let ceiling = median("ceiling: one fixed answer, no work", &ceilings);
    // 50 concurrent requests with one key, three times each: how many charges?
    let mut duplicates = (Vec::new(), Vec::new());
    {
        let pagar = processes::pagar(logs, logs, "duplicates", true);
        let peer = processes::peer().await;
        for round in 0..3 {
            let before = pagar.charges();
            burst(&pagar.url, "", &format!("dup-{round}"), 50).await;
            duplicates.0.push(pagar.charges() - before);
            let before = peer::charges(&peer.url).await;
            burst(&peer.url, &peer.cookie, &format!("dup-{round}"), 50).await;
            duplicates.1.push(peer::charges(&peer.url).await - before);
        }
    }

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
    println!();
    println!("beside the peer ({ROUNDS} interleaved rounds, every server a release process of its own, fresh per run: medians; each ratio the median of the rounds' ratios):");
    print_table(&[
        &ours_first,
        &slow_first,
        &peer_first,
        &ours_replay,
        &peer_replay,
        &quiet_replay,
        &ceiling,
    ]);
    println!(
        "50 concurrent requests, one key, charges: Pagar {:?}, axum-idempotent {:?}",
        duplicates.0, duplicates.1
    );
    target(
        "Pagar first executions / peer first executions",
        first_vs_peer,
        1.0,
    );
    {
        let (ours, peer) = (median_cpu(&cpu[0]), median_cpu(&cpu[1]));
        println!(
            "limit, first executions beside the peer: cores idle {:.0} % (Pagar's runs), {:.0} % (the peer's); CPU of the server process per request: Pagar {:.0} us, the peer {:.0} us ({:.2}x); Pagar's mean per step (its /metrics): {}; a raw durable commit p50 {:.2} ms",
            ours.idle * 100.0,
            peer.idle * 100.0,
            ours.per_request_us,
            peer.per_request_us,
            ours.per_request_us / peer.per_request_us.max(1e-9),
            steps_median(&disk_steps),
            raw.p50_ms,
        );
        println!(
            "limit, first executions, the writer: Pagar's busiest SQLite writer thread (one per database file, every write of it in turn) was busy {:.0} % of a core, {:.0} us per execution: alone it allows at most {:.0}/s = {:.2}x the peer",
            ours.writer.0 * 100.0,
            ours.writer.1,
            1e6 / ours.writer.1.max(1e-9),
            1e6 / ours.writer.1.max(1e-9) / peer_first.rate().max(1e-9),
        );
    }
    target(
        "Pagar first on a slow disk (fsync +2 ms) / peer first",
        slow_vs_peer,
        1.3,
    );
    println!(
        "slow disk: {per_sync:.2} first executions per fsync, {:.2} fsyncs per execution (median of the rounds; runs: {slow_syncs:?} as (fsyncs, executions))",
        1.0 / per_sync
    );
    {
        // Where a first execution's time goes on the slow disk, and the rate the disk allows.
        let slow_steps: Vec<_> = slow_runs.iter().map(|r| r.steps.clone()).collect();
        let cycle = mid(slow_runs.iter().map(|r| r.per_sync_ms).collect());
        let raw_ms = mid(slow_runs.iter().map(|r| r.raw_commit_ms).collect());
        let slow_cpu = median_cpu(&slow_runs.iter().map(|r| r.cpu).collect::<Vec<_>>());
        let peer = peer_first.rate().max(1e-9);
        // The last durable step, the payment and its answer: how many fsync cycles it waits.
        let finish_ms = step_median(&slow_steps, "finish");
        let in_flight = CONCURRENCY as f64 * 1e3;
        println!(
            "slow disk, mean per step (the server's /metrics, median of the rounds): {}; one fsync every {cycle:.2} ms of wall time ({SLOW_FSYNC_MS} ms of it the delay)",
            steps_median(&slow_steps)
        );
        // An execution waits for two durable commits in sequence: the gateway simulator's
        // charge (a gateway's own durable write) and then the payment with its answer, which
        // must be durable before it is sent. Its claim is relaxed and waits for no fsync.
        println!(
            "limit, slow disk: one durable commit alone on it takes {raw_ms:.2} ms (p50 of {RAW_ON_DISK}, one connection, nothing else running); with {CONCURRENCY} in flight, two in sequence per execution allow at most {:.0}/s = {:.2}x the peer, one alone {:.0}/s = {:.2}x (target 1.30x)",
            in_flight / (2.0 * raw_ms.max(1e-9)),
            in_flight / (2.0 * raw_ms.max(1e-9)) / peer,
            in_flight / raw_ms.max(1e-9),
            in_flight / raw_ms.max(1e-9) / peer,
        );
        println!(
            "limit, slow disk, Pagar's share of it: each fsync cycle takes {cycle:.2} ms ({:.2}x a commit alone: the batch's own work, then its fsync; the busiest writer thread on a core {:.0} % of the time, the cores idle {:.0} %) and each durable step waits about {:.1} cycles (the batch in progress, then its own): {:.0}/s at most = {:.2}x the peer",
            cycle / raw_ms.max(1e-9),
            slow_cpu.writer.0 * 100.0,
            slow_cpu.idle * 100.0,
            finish_ms / cycle.max(1e-9),
            in_flight / (2.0 * cycle.max(1e-9)),
            in_flight / (2.0 * cycle.max(1e-9)) / peer,
        );
    }
    target("Pagar replays / peer replays", replay_vs_peer, 1.2);
    target("Pagar replays, logging on / ceiling", of_ceiling[0], 0.9);
    target(
        "Pagar replays, logging on / logging off",
        logging_on_off,
        0.9,
    );
    println!(
        "of the ceiling (one fixed answer, same wrk load): Pagar replays {:.2}x, logging off {:.2}x, peer replays {:.2}x",
        of_ceiling[0], of_ceiling[1], of_ceiling[2]
    );
    {
        let [on, off, peer, ceiling] = [2, 3, 4, 5].map(|i| median_cpu(&cpu[i]));
        println!(
            "limit, replays: cores idle {:.0} % (Pagar, logging on), {:.0} % (the ceiling); CPU of the server process per replay: Pagar {:.0} us with logging on, {:.0} us off, the peer {:.0} us, the ceiling {:.0} us: Pagar's own work per replay beyond the ceiling's (key, authentication, fingerprint, log line) is {:.0} us, {:.2}x the ceiling's whole request",
            on.idle * 100.0,
            ceiling.idle * 100.0,
            on.per_request_us,
            off.per_request_us,
            peer.per_request_us,
            ceiling.per_request_us,
            on.per_request_us - ceiling.per_request_us,
            (on.per_request_us - ceiling.per_request_us) / ceiling.per_request_us.max(1e-9),
        );
        // With the cores busy, the rate goes as the inverse of what a request costs the whole
        // machine (the server, wrk and the kernel between them).
        println!(
            "limit, replays, the cores: a replay costs the machine {:.0} us of CPU with Pagar, {:.0} us with the ceiling ({:.2}x the rate at most); 0.90x needs at most {:.0} us, {:.0} us less of Pagar's own",
            on.machine_us,
            ceiling.machine_us,
            ceiling.machine_us / on.machine_us.max(1e-9),
            ceiling.machine_us / 0.9,
            on.machine_us - ceiling.machine_us / 0.9,
        );
        println!(
            "limit, replays beside the peer: a replay costs the machine {:.0} us of CPU with Pagar (logging on), {:.0} us with the peer (cores idle {:.0} %): Pagar's replays at most {:.2}x the peer's; 1.20x needs at most {:.0} us, {:.0} us less",
            on.machine_us,
            peer.machine_us,
            peer.idle * 100.0,
            peer.machine_us / on.machine_us.max(1e-9),
            peer.machine_us / 1.2,
            on.machine_us - peer.machine_us / 1.2,
        );
    }
    match pg {
        Ok(pg) => pg.print(&first, &replay),
        Err(e) => println!("\nPostgreSQL figures skipped: {e}"),
    }
}
