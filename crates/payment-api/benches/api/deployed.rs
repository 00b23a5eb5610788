//! Pagar beside the peer as each would be deployed: interleaved rounds in which Pagar (the
//! release binary) and the peer (`peer.rs`) are processes of their own, fresh for each run, and
//! both charge cards at **the same acquirer process** (`adquirente`, release, its ledger durable
//! on a file of its own, fresh each round) over HTTP, each under downstream keys of its own.
//! First executions at 32 connections (a store's tills together) and at 256 (many stores on one
//! server); Pagar's also on a disk whose every fsync waits 2 ms more (the `slowsync` shim on
//! Pagar's process only, never the acquirer's), and its fsyncs counted on both disks; replays
//! with Pagar's logging on and off, the peer's, and the fixed-answer ceiling's; then 50
//! concurrent requests with one key against each, the charges counted in the acquirer's ledger.

use super::measure::*;
use super::processes::{self, Server, SlowSync};
use super::*;
use pagar_testkit::AcquirerProcess;
use std::path::Path;

/// Connections of the first-execution runs: a store's tills together; many stores on one server.
pub(crate) const LOADS: [usize; 2] = [32, 256];
/// The load the slow disk is measured at (its target is there).
const SLOW_LOAD: usize = 256;
const ROUNDS: usize = 5;
/// `BENCH_ROUNDS` sets fewer (or more) rounds, for a quick look.
fn rounds() -> usize {
    env_number("BENCH_ROUNDS", |&n| n > 0, ROUNDS)
}
/// How long each fsync of the slow disk waits.
const SLOW_FSYNC_MS: u64 = 2;
/// Durable commits made alone on the slow disk before its server starts, for its floor.
const RAW_ON_DISK: usize = 300;

/// One run of Pagar's first executions.
struct FirstRun {
    row: Row,
    cpu: Cpu,
    /// Pagar's fsyncs in the run and the charges it made at the acquirer.
    syncs: (u64, u64),
    /// Each step's mean (ms) from the server's `/metrics`.
    steps: Vec<(String, f64, u64)>,
    /// Wall time of the run per fsync (ms).
    per_sync_ms: f64,
    /// On the slow disk: a durable SQLite commit alone on it, before the server started, p50 ms.
    raw_commit_ms: f64,
    /// Pagar's database after the run: its pages in use per payment stored, and the payments.
    bytes_per_payment: (f64, i64),
}

impl FirstRun {
    fn executions_per_sync(&self) -> f64 {
        self.syncs.1 as f64 / self.syncs.0.max(1) as f64
    }
}

/// What the rounds measured.
#[derive(Default)]
pub(crate) struct Deployed {
    /// Pagar's first executions at each of [`LOADS`], on this machine's disk.
    first: [Vec<FirstRun>; 2],
    /// The peer's, at each of [`LOADS`].
    peer_first: [Vec<(Row, Cpu)>; 2],
    /// Pagar's on the slow disk, at [`SLOW_LOAD`].
    slow: Vec<FirstRun>,
    /// Replays: Pagar with logging on, off, the peer, the ceiling.
    replays: [Vec<(Row, Cpu)>; 4],
    /// 50 requests with one key at once, three times: Pagar's charges and the peer's.
    duplicates: (Vec<u64>, Vec<u64>),
}

/// How one run goes: the replay keys made first when it cycles through them, then wrk with the
/// server's CPU measured.
pub(crate) fn run(
    name: &'static str,
    script: &Path,
    secs: u64,
    server: &Server,
    prefix: &str,
    cycle: usize,
    connections: usize,
) -> (Row, Cpu) {
    tokio::task::block_in_place(|| {
        if cycle > 0 {
            warm(&server.url, &server.cookie, prefix);
        }
        with_cpu(server.id(), || {
            wrk_with(
                name,
                script,
                &server.url,
                secs,
                prefix,
                cycle,
                connections,
                &server.cookie,
            )
        })
    })
}

/// Pagar's first executions at `connections`, its fsyncs delayed by `delay_ms` and counted.
async fn pagar_first(
    acquirer: &AcquirerProcess,
    dir: &Path,
    name: &str,
    delay_ms: u64,
    connections: usize,
    script: &Path,
    secs: u64,
) -> FirstRun {
    let disk = SlowSync::new(dir, name, delay_ms);
    let raw_commit_ms = if delay_ms > 0 {
        // The floor: one durable commit alone on this disk, nothing else running.
        tokio::task::block_in_place(|| {
            disk.raw_commit_p50_ms(&dir.join(format!("{name}-raw.db")), RAW_ON_DISK)
        })
    } else {
        0.0
    };
    let pagar = processes::pagar_on(dir, name, true, acquirer, Some(&disk));
    let (syncs_before, charges_before) = (disk.syncs(), pagar.charges());
    let (row, cpu) = run("Pagar first", script, secs, &pagar, name, 0, connections);
    let syncs_in_run = disk.syncs() - syncs_before;
    // wrk stops with requests in flight: let them end before counting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let syncs = (
        disk.syncs() - syncs_before,
        pagar.charges() - charges_before,
    );
    let steps = tokio::task::block_in_place(|| super::postgres::store_steps(&pagar.base()));
    let bytes_per_payment = bytes_per_payment(&dir.join(format!("{name}.db")));
    FirstRun {
        bytes_per_payment,
        per_sync_ms: row.elapsed.as_secs_f64() * 1e3 / syncs_in_run.max(1) as f64,
        row,
        cpu,
        syncs,
        steps,
        raw_commit_ms,
    }
}

/// The pages a database uses (its page count less its free pages, with what its WAL holds still
/// to be copied in: read through SQLite, as the server's readers see it) per payment stored, and
/// the payments: what a payment costs on disk with its key, its indexes and the key's answer.
fn bytes_per_payment(database: &Path) -> (f64, i64) {
    let read = || -> rusqlite::Result<(f64, i64)> {
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
        let c = rusqlite::Connection::open_with_flags(database, flags)?;
        let one = |sql: &str| -> rusqlite::Result<i64> { c.query_row(sql, [], |r| r.get(0)) };
        let pages = one("PRAGMA page_count")? - one("PRAGMA freelist_count")?;
        let payments = one("SELECT count(*) FROM payments")?;
        Ok((
            (pages * one("PRAGMA page_size")?) as f64 / payments.max(1) as f64,
            payments,
        ))
    };
    // A figure to print, not a reason to lose the run's others.
    read().unwrap_or_else(|e| {
        eprintln!("{}: not read ({e})", database.display());
        (f64::NAN, 0)
    })
}

/// Runs the rounds. `ceiling_body` is the answer the ceiling gives (a replay of Pagar's). Every
/// run sends keys of its own (its name is their prefix): the acquirer of a round serves all of
/// its runs, and a key sent again would be a replay there, not a charge.
pub(crate) async fn run_rounds(
    script: &Path,
    secs: u64,
    dir: &Path,
    ceiling_body: &[u8],
) -> Deployed {
    let mut d = Deployed::default();
    for round in 0..rounds() {
        // One acquirer for the round: every server of the round charges there.
        let acquirer = processes::acquirer(dir, &format!("acquirer-{round}"));
        // Each kind of run in an order that turns each round, so that none of them is always
        // the first or the last.
        for which in (0..5).map(|i| (i + round) % 5) {
            match which {
                0 | 1 => {
                    let load = LOADS[which];
                    let name = format!("first-{load}-{round}");
                    let measured = pagar_first(&acquirer, dir, &name, 0, load, script, secs).await;
                    d.first[which].push(measured);
                }
                2 => {
                    let name = format!("slow-{round}");
                    let measured = pagar_first(
                        &acquirer,
                        dir,
                        &name,
                        SLOW_FSYNC_MS,
                        SLOW_LOAD,
                        script,
                        secs,
                    )
                    .await;
                    d.slow.push(measured);
                }
                _ => {
                    let i = which - 3;
                    let peer = processes::peer(&acquirer).await;
                    let prefix = format!("peer-{}-{round}", LOADS[i]);
                    let measured = run("peer first", script, secs, &peer, &prefix, 0, LOADS[i]);
                    d.peer_first[i].push(measured);
                }
            }
        }
        for which in (0..4).map(|i| (i + round) % 4) {
            let measured = match which {
                0 | 1 => {
                    let logging = which == 0;
                    let name = format!("replay-{}-{round}", ["on", "off"][which]);
                    let pagar = processes::pagar(dir, &name, logging, &acquirer);
                    run(
                        "Pagar replay",
                        script,
                        secs,
                        &pagar,
                        &name,
                        REPLAY_KEYS,
                        CONCURRENCY,
                    )
                }
                2 => {
                    let peer = processes::peer(&acquirer).await;
                    let prefix = format!("peer-replay-{round}");
                    run(
                        "peer replay",
                        script,
                        secs,
                        &peer,
                        &prefix,
                        REPLAY_KEYS,
                        CONCURRENCY,
                    )
                }
                _ => {
                    let ceiling = processes::ceiling(ceiling_body);
                    run(
                        "ceiling",
                        script,
                        secs,
                        &ceiling,
                        "r",
                        REPLAY_KEYS,
                        CONCURRENCY,
                    )
                }
            };
            d.replays[which].push(measured);
        }
    }
    // 50 concurrent requests with one key, three times each: how many charges?
    let acquirer = processes::acquirer(dir, "acquirer-duplicates");
    let pagar = processes::pagar(dir, "duplicates", true, &acquirer);
    let peer = processes::peer(&acquirer).await;
    for round in 0..3 {
        for (server, counted) in [(&pagar, &mut d.duplicates.0), (&peer, &mut d.duplicates.1)] {
            let before = server.charges();
            burst(&server.url, &server.cookie, &format!("dup-{round}"), 50).await;
            counted.push(server.charges() - before);
        }
    }
    d
}

/// The median of the rounds' own ratios: runs a minute apart share the machine's mood, and this
/// machine's throughput wanders by a fifth over a few minutes.
fn ratio<'a>(a: impl IntoIterator<Item = &'a Row>, b: impl IntoIterator<Item = &'a Row>) -> f64 {
    mid(a
        .into_iter()
        .zip(b)
        .map(|(a, b)| a.rate() / b.rate())
        .collect())
}

fn rows(runs: &[FirstRun]) -> Vec<Row> {
    runs.iter().map(|r| r.row.clone()).collect()
}

fn only_rows(runs: &[(Row, Cpu)]) -> Vec<Row> {
    runs.iter().map(|r| r.0.clone()).collect()
}

fn cpus(runs: &[(Row, Cpu)]) -> Vec<Cpu> {
    runs.iter().map(|r| r.1).collect()
}

impl Deployed {
    pub(crate) fn print(&self) {
        println!();
        println!("beside the peer, as deployed ({} interleaved rounds; Pagar, the peer and the ceiling release processes of their own, fresh per run; both charge at one acquirer process per round, its ledger durable on a file of its own: medians; each ratio the median of the rounds' ratios):", rounds());
        let names = [
            ("Pagar first, 32 connections", "peer first, 32 connections"),
            (
                "Pagar first, 256 connections",
                "peer first, 256 connections",
            ),
        ];
        let mut table = Vec::new();
        for (i, (ours, peer)) in names.iter().enumerate() {
            table.push(median(ours, &rows(&self.first[i])));
            table.push(median(peer, &only_rows(&self.peer_first[i])));
        }
        table.push(median(
            "Pagar first, 256 conns, fsync +2 ms",
            &rows(&self.slow),
        ));
        let replay_names = [
            "Pagar replay (logging INFO), 32 conns",
            "Pagar replay (logging off), 32 conns",
            "peer replay, 32 conns",
            "ceiling: one fixed answer, no work",
        ];
        for (name, runs) in replay_names.iter().zip(&self.replays) {
            table.push(median(name, &only_rows(runs)));
        }
        print_table(&table.iter().collect::<Vec<_>>());
        println!(
            "50 concurrent requests, one key, charges in the acquirer's ledger: Pagar {:?}, axum-idempotent {:?} (the acquirer charges once per downstream key whatever either does)",
            self.duplicates.0, self.duplicates.1
        );
        for (i, load) in LOADS.iter().enumerate() {
            let ours = ratio(
                rows(&self.first[i]).iter(),
                only_rows(&self.peer_first[i]).iter(),
            );
            target(
                if *load == 32 {
                    "Pagar first / peer first, 32 connections"
                } else {
                    "Pagar first / peer first, 256 connections"
                },
                ours,
                1.2,
            );
            self.print_first_limits(i, *load);
        }
        let slow = ratio(
            rows(&self.slow).iter(),
            only_rows(&self.peer_first[1]).iter(),
        );
        target(
            "Pagar first on a slow disk (fsync +2 ms) / peer first, 256",
            slow,
            1.0,
        );
        self.print_slow_limits();
        self.print_replays();
    }

    fn print_first_limits(&self, i: usize, load: usize) {
        let runs = &self.first[i];
        let ours = median_cpu(&runs.iter().map(|r| r.cpu).collect::<Vec<_>>());
        let peer = median_cpu(&cpus(&self.peer_first[i]));
        let steps: Vec<_> = runs.iter().map(|r| r.steps.clone()).collect();
        println!(
            "limit, first executions at {load}: cores idle {:.0} % (Pagar's runs), {:.0} % (the peer's); CPU of the server process per request: Pagar {:.0} us, the peer {:.0} us ({:.2}x, target <= 1.2x); Pagar's mean per step (its /metrics; gateway_charge is the acquirer's round trip): {}",
            ours.idle * 100.0,
            peer.idle * 100.0,
            ours.per_request_us,
            peer.per_request_us,
            ours.per_request_us / peer.per_request_us.max(1e-9),
            steps_median(&steps),
        );
        // Where the cores are busy, the machine's CPU one execution costs (the server's, the
        // acquirer's, wrk's and the kernel's for all three) bounds the rate, as it bounds the
        // peer's: what the target asks of that CPU, and of the server's share of it.
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as f64;
        let peer_rate = median("", &only_rows(&self.peer_first[i])).rate().max(1e-9);
        let at_most = cores * 1e6 / ours.machine_us.max(1e-9);
        let needed = cores * 1e6 / (1.2 * peer_rate);
        println!(
            "limit, first executions at {load}, the cores: one execution costs the machine {:.0} us of CPU in Pagar's runs (the server {:.0}, the rest {:.0}: the acquirer, wrk, the kernel's flushes), {:.0} us in the peer's: {cores:.0} cores allow Pagar at most {at_most:.0}/s = {:.2}x the peer; 1.2x needs at most {needed:.0} us an execution, the server's share at most {:.0} us with the rest as measured (the peer's server takes {:.0}; Pagar's SQLite writer thread alone {:.0}: its commits, their WAL writes and fsyncs)",
            ours.machine_us,
            ours.per_request_us,
            ours.machine_us - ours.per_request_us,
            peer.machine_us,
            at_most / peer_rate,
            needed - (ours.machine_us - ours.per_request_us),
            peer.per_request_us,
            ours.writer.1,
        );
        let per_sync = mid(runs.iter().map(FirstRun::executions_per_sync).collect());
        println!(
            "Pagar's own database at {load}: {per_sync:.2} first executions per fsync, {:.2} fsyncs per execution (runs: {:?} as (fsyncs, charges)); its busiest SQLite writer thread busy {:.0} % of a core, {:.0} us per execution",
            1.0 / per_sync.max(1e-9),
            runs.iter().map(|r| r.syncs).collect::<Vec<_>>(),
            ours.writer.0 * 100.0,
            ours.writer.1,
        );
        let bytes = mid(runs.iter().map(|r| r.bytes_per_payment.0).collect());
        println!(
            "Pagar's database at {load}: {bytes:.0} bytes per payment stored (pages in use, the key, its answer and every index included; runs' payments: {:?})",
            runs.iter().map(|r| r.bytes_per_payment.1).collect::<Vec<_>>(),
        );
    }

    fn print_slow_limits(&self) {
        let runs = &self.slow;
        let steps: Vec<_> = runs.iter().map(|r| r.steps.clone()).collect();
        let cycle = mid(runs.iter().map(|r| r.per_sync_ms).collect());
        let raw_ms = mid(runs.iter().map(|r| r.raw_commit_ms).collect());
        let per_sync = mid(runs.iter().map(FirstRun::executions_per_sync).collect());
        let cpu = median_cpu(&runs.iter().map(|r| r.cpu).collect::<Vec<_>>());
        let peer = median("", &only_rows(&self.peer_first[1])).rate().max(1e-9);
        let in_flight = SLOW_LOAD as f64 * 1e3;
        println!(
            "slow disk, mean per step (median of the rounds): {}; one fsync every {cycle:.2} ms of wall time ({SLOW_FSYNC_MS} ms of it the delay); {per_sync:.2} executions per fsync, {:.2} fsyncs per execution (runs: {:?})",
            steps_median(&steps),
            1.0 / per_sync.max(1e-9),
            runs.iter().map(|r| r.syncs).collect::<Vec<_>>(),
        );
        println!(
            "limit, slow disk: one durable commit alone on it takes {raw_ms:.2} ms (p50 of {RAW_ON_DISK}, one connection); with {SLOW_LOAD} in flight and each execution waiting one fsync cycle of {cycle:.2} ms, at most {:.0}/s = {:.2}x the peer (the writer thread busy {:.0} % of a core, cores idle {:.0} %)",
            in_flight / cycle.max(1e-9),
            in_flight / cycle.max(1e-9) / peer,
            cpu.writer.0 * 100.0,
            cpu.idle * 100.0,
        );
    }

    fn print_replays(&self) {
        let [on, off, peer, ceiling] = &self.replays;
        let (on_rows, off_rows, peer_rows, ceiling_rows) = (
            only_rows(on),
            only_rows(off),
            only_rows(peer),
            only_rows(ceiling),
        );
        target(
            "Pagar replays (logging on) / peer replays",
            ratio(&on_rows, &peer_rows),
            1.1,
        );
        target(
            "Pagar replays, logging on / ceiling",
            ratio(&on_rows, &ceiling_rows),
            0.8,
        );
        // The ceiling is the same HTTP stack answering without work: what no server of it beats.
        let peer_of_ceiling = ratio(&peer_rows, &ceiling_rows);
        println!(
            "of the ceiling (one fixed answer, same wrk load): Pagar replays {:.2}x, logging off {:.2}x, peer replays {:.2}x; 1.1x the peer is {:.2}x the ceiling{}",
            ratio(&on_rows, &ceiling_rows),
            ratio(&off_rows, &ceiling_rows),
            peer_of_ceiling,
            1.1 * peer_of_ceiling,
            if 1.1 * peer_of_ceiling > 1.0 {
                " (more than a server with the same HTTP stack that answers one fixed answer and does no work)"
            } else {
                ""
            },
        );
        let [on, off, peer, ceiling] = [on, off, peer, ceiling].map(|r| median_cpu(&cpus(r)));
        println!(
            "limit, replays: CPU of the server process per replay: Pagar {:.1} us with logging on, {:.1} us off, the peer {:.1} us (Pagar {:.2}x, target <= 1.0x), the ceiling {:.1} us; the machine's CPU per replay: Pagar {:.1} us, the peer {:.1} us, the ceiling {:.1} us (cores idle {:.0} %, {:.0} %, {:.0} %)",
            on.per_request_us,
            off.per_request_us,
            peer.per_request_us,
            on.per_request_us / peer.per_request_us.max(1e-9),
            ceiling.per_request_us,
            on.machine_us,
            peer.machine_us,
            ceiling.machine_us,
            on.idle * 100.0,
            peer.idle * 100.0,
            ceiling.idle * 100.0,
        );
    }
}
