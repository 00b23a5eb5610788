//! Crash tests with real processes: the program that owns the outbox is `kill -9`'d right after
//! the write-ahead commit, while a request is in flight, and at random points. On restart every
//! attempt completes with its stored key, and the gateway ledger has exactly one charge for each.

use payment_api::domain::MerchantId;
use payment_api::store::{Lookup, PaymentField};
use payment_api::RunningServer;
use rand::Rng;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const API_KEY: &str = "sk_test_crash_tests";
const ADMIN: &str = "admin-crash-tests";

async fn start_api(dir: &Path) -> RunningServer {
    let db = dir.join("api.db");
    let mut config = payment_api::Config::sandbox(db, API_KEY, "loja", ADMIN);
    config.slow_gateway_ms = 400;
    payment_api::start(config).await.unwrap()
}

/// Holds every request `ms` before execution (0: no fault).
fn set_latency(api: &RunningServer, ms: u64) {
    let mut faults = api.state().faults();
    faults.latency_ms = ms;
    api.state().set_faults(faults);
}

fn driver(
    outbox: &Path,
    api: &RunningServer,
    sales: u32,
    prefix: &str,
) -> (Child, BufReader<ChildStdout>) {
    driver_paying(outbox, api, sales, prefix, "tok_aprovado")
}

fn driver_paying(
    outbox: &Path,
    api: &RunningServer,
    sales: u32,
    prefix: &str,
    card: &str,
) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_checkout-driver"))
        .arg(outbox)
        .arg(api.url())
        .arg(API_KEY)
        .arg(sales.to_string())
        .arg(prefix)
        .arg(card)
        .env("RUST_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

fn kill9(child: &mut Child) {
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// Restarts the driver on the same outbox with nothing new to pay and waits (at most 60 s) for
/// it to drain and exit.
fn recover(outbox: &Path, api: &RunningServer) {
    let (mut child, out) = driver(outbox, api, 0, "none");
    let reader =
        std::thread::spawn(move || out.lines().map(|l| l.unwrap()).collect::<Vec<String>>());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            kill9(&mut child);
            panic!("the restarted driver did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let lines = reader.join().unwrap();
    assert!(status.success(), "the restarted driver drained: {lines:?}");
    assert_eq!(lines.last().map(String::as_str), Some("drained"));
}

/// Every attempt in the outbox, read from the file: (id, key, state).
fn attempts(outbox: &Path) -> Vec<(String, String, String)> {
    let c = rusqlite::Connection::open(outbox).unwrap();
    let mut st = c
        .prepare("SELECT id, idempotency_key, state FROM attempts ORDER BY seq")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// Each attempt is approved and has exactly one payment and one ledger charge under its own key.
async fn assert_one_charge_each(outbox: &Path, api: &RunningServer) -> usize {
    let merchant = MerchantId::parse("loja").unwrap();
    let store = api.state().store();
    let ledger = api.simulator_ledger().ledger().await.unwrap();
    let all = attempts(outbox);
    for (id, key, state) in &all {
        assert_eq!(state, "aprovado", "attempt {id}");
        let by_ref = store
            .payments_by(
                &merchant,
                Lookup {
                    field: PaymentField::Referencia,
                    value: id,
                },
            )
            .await
            .unwrap();
        assert_eq!(by_ref.len(), 1, "one payment for attempt {id}");
        assert_eq!(
            by_ref[0].idempotency_key.as_ref(),
            key,
            "paid under its stored key"
        );
        let charges = ledger
            .iter()
            .filter(|r| r.cobranca_id == by_ref[0].cobranca_id)
            .count();
        assert_eq!(charges, 1, "one ledger charge for attempt {id}");
    }
    all.len()
}

/// After a kill: clears the faults, lets a fresh driver finish the outbox, checks one charge per
/// attempt, and that the ledger holds `charged_before` plus this outbox's attempts; returns that.
async fn recover_after_kill(
    outbox: &Path,
    api: &RunningServer,
    charged_before: usize,
    context: &str,
) -> usize {
    api.state().set_faults(Default::default());
    recover(outbox, api);
    let total = charged_before + assert_one_charge_each(outbox, api).await;
    assert_eq!(
        api.simulator_ledger().ledger().await.unwrap().len(),
        total,
        "{context}"
    );
    total
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_right_after_the_write_ahead_commit_the_attempt_completes_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let api = start_api(dir.path()).await;
    let outbox = dir.path().join("outbox.db");
    let (mut child, mut out) = driver(&outbox, &api, 1, "commit");
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    kill9(&mut child);
    assert!(line.starts_with("stored att_"), "{line}");
    recover(&outbox, &api);
    assert_eq!(assert_one_charge_each(&outbox, &api).await, 1);
    assert_eq!(api.simulator_ledger().ledger().await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_while_requests_are_in_flight_every_attempt_completes_once() {
    // The server's latency fault holds requests before execution; the slow card holds them at
    // the gateway after the claim. Either way the client dies with requests in flight.
    let dir = tempfile::tempdir().unwrap();
    let api = start_api(dir.path()).await;
    let mut total = 0;
    for (round, card) in ["tok_aprovado", "tok_lento"].into_iter().enumerate() {
        set_latency(&api, if card == "tok_aprovado" { 400 } else { 0 });
        let outbox = dir.path().join(format!("outbox-{round}.db"));
        let (mut child, mut out) = driver_paying(&outbox, &api, 3, &format!("voo{round}"), card);
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        std::thread::sleep(Duration::from_millis(150)); // the request is at the server, waiting
        kill9(&mut child);
        total = recover_after_kill(&outbox, &api, total, &format!("round with {card}")).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_four_random_kill_points_never_double_charge_or_lose_an_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let api = start_api(dir.path()).await;
    let mut rng = rand::thread_rng();
    let mut total = 0;
    for round in 0..24 {
        // Half the rounds with a slow server, so more kills land mid-request.
        set_latency(&api, if round % 2 == 0 { 0 } else { 150 });
        let outbox = dir.path().join(format!("outbox-{round}.db"));
        let (mut child, _out) = driver(&outbox, &api, 4, &format!("r{round}"));
        let delay = rng.gen_range(0..500);
        std::thread::sleep(Duration::from_millis(delay));
        kill9(&mut child);
        let context = format!("round {round}, killed after {delay} ms");
        total = recover_after_kill(&outbox, &api, total, &context).await;
    }
}

/// The attempts of an outbox that are no longer `pendente` (none when it has no schema yet: a
/// till killed before its first commit).
fn settled_ids(outbox: &Path) -> Vec<String> {
    let Ok(c) = rusqlite::Connection::open(outbox) else {
        return Vec::new();
    };
    let Ok(mut st) = c.prepare("SELECT id FROM attempts WHERE state != 'pendente'") else {
        return Vec::new();
    };
    st.query_map([], |r| r.get(0))
        .map(|rows| rows.map_while(Result::ok).collect())
        .unwrap_or_default()
}

/// The power-cut filesystem's daemon for [`power_cut_at_random_points_loses_nothing_the_till_stored`],
/// in a child process of its own (a process never uses a mount it serves).
#[test]
fn powercut_daemon_child() {
    powercut::serve_if_asked("PAGAR_POWERCUT_DAEMON").unwrap();
}

/// The till's outbox on a filesystem that loses every unsynced write: the driver is killed at a
/// random point, then the power is cut. Every attempt it reported stored (its write-ahead is
/// durable before the first byte) is still in the outbox; an outcome recorded relaxed may go
/// back to `pendente`, and its replay under the same key charges nothing more.
#[tokio::test(flavor = "multi_thread")]
async fn power_cut_at_random_points_loses_nothing_the_till_stored() {
    let dir = tempfile::tempdir().unwrap();
    let api = start_api(dir.path()).await;
    let mut rng = rand::thread_rng();
    let (mut total, mut back_to_pending, mut files, mut bytes) = (0, 0, 0, 0);
    let mut cut_mid_run = 0u32;
    for round in 0..12 {
        set_latency(&api, if round % 2 == 0 { 0 } else { 150 });
        let backing = dir.path().join(format!("disk-{round}"));
        let mnt = dir.path().join(format!("mnt-{round}"));
        std::fs::create_dir_all(&backing).unwrap();
        std::fs::create_dir_all(&mnt).unwrap();
        let mut serve = Command::new(std::env::current_exe().unwrap());
        serve
            .args(["--exact", "powercut_daemon_child", "--nocapture"])
            .env(
                "PAGAR_POWERCUT_DAEMON",
                format!("{}|{}", backing.display(), mnt.display()),
            );
        let mut disk = powercut::Daemon::start(serve, &mnt).expect("mounting needs /dev/fuse");
        let outbox = mnt.join("outbox.db");
        // Enough sales that the kill lands while outcomes are being recorded.
        let (mut child, out) = driver(&outbox, &api, 24, &format!("pc{round}"));
        let stored = std::thread::spawn(move || {
            out.lines()
                .map_while(Result::ok)
                .filter_map(|l| {
                    l.strip_prefix("stored ")
                        .map(|s| s.split(' ').next().unwrap_or("").to_string())
                })
                .collect::<Vec<String>>()
        });
        let delay = rng.gen_range(30..400);
        std::thread::sleep(Duration::from_millis(delay));
        let finished_first = child.try_wait().unwrap().is_some();
        kill9(&mut child);
        cut_mid_run += u32::from(!finished_first);
        let stored = stored.join().unwrap();
        // What the outbox held when the power went, read from a copy: opening the outbox itself
        // would checkpoint it on close and make everything durable.
        let seen = dir.path().join(format!("seen-{round}"));
        std::fs::create_dir_all(&seen).unwrap();
        for f in ["outbox.db", "outbox.db-wal", "outbox.db-shm"] {
            let _ = std::fs::copy(backing.join(f), seen.join(f));
        }
        let final_before = settled_ids(&seen.join("outbox.db"));
        let cut = disk.cut().unwrap();
        files += cut.files;
        bytes += cut.bytes_dropped;
        // A till killed before its first commit left no schema: then it had stored nothing.
        let after = if stored.is_empty() && settled_ids(&outbox).is_empty() {
            Vec::new()
        } else {
            attempts(&outbox)
        };
        for id in &stored {
            assert!(
                after.iter().any(|(a, _, _)| a == id),
                "round {round} (killed after {delay} ms): attempt {id} was reported stored and the cut lost it ({cut:?})"
            );
        }
        back_to_pending += final_before
            .iter()
            .filter(|id| after.iter().any(|(a, _, s)| a == *id && s == "pendente"))
            .count();
        let context = format!("round {round}, killed after {delay} ms, then a cut ({cut:?})");
        total = recover_after_kill(&outbox, &api, total, &context).await;
        drop(disk);
    }
    println!(
        "12 power cuts ({cut_mid_run} while the till ran): {total} attempts charged once each; {back_to_pending} outcomes went back to pendente; {files} files and {bytes} bytes dropped"
    );
    assert!(cut_mid_run >= 6, "most cuts must land while the till runs");
}
