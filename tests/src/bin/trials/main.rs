//! Randomized end-to-end fault trials with a checker, in the manner of Jepsen.
//!
//! Each trial draws from its seed: a store (SQLite, or PostgreSQL with 1–3 replicas behind a
//! round-robin balancer) whose card charges go to an acquirer simulator (`adquirente`) in a
//! process of its own with its ledger on its own file, 1–3 tills (`trial-client` processes, each with its own outbox, some
//! pressing Pagar twice at once, and paying a sale in review with another card, which cancels the
//! old key first), their sales (approve, decline, slow cards — in some trials slower than the
//! tills' request timeout; amounts near the offline caps), and a schedule of faults: the server's fault profile, the TCP fault proxy
//! between tills and servers (including a middlebox answering 403 to the next POST),
//! `SIGKILL` of a till, `SIGKILL` and restart of a server or replica, of the acquirer (a quarter
//! of the trials, from a stream of the seed's own),
//! PostgreSQL connections terminated, a till restarted with its wall clock jumped (libfaketime:
//! an hour back or ahead, or past the server's 24 h key retention). Some trials sell by Pix too:
//! a `pix-provider` process of their own, the servers' webhooks registered there, tills that
//! cancel a QR left unpaid and then take a card, and a customer that pays each QR now, later,
//! never, or after it was cancelled (a bank that ignores removal), with the callback lost, sent
//! two or three times, or late. Then the faults stop, every till restarts, the queues drain, the
//! customer is done, every Pix paid reaches a server, the tills ask once more about the Pix they
//! closed, and the checker reads the databases themselves:
//!
//! - (a) at most one charge in the acquirer's ledger per (merchant, Idempotency-Key);
//! - (b) at most one approved charge per sale;
//! - (c) every attempt an outbox accepted is final, or in `revisao` with a reason: none lost;
//! - (d) every outbox `aprovado` has exactly one server payment with its amount, every server
//!   payment its attempt in the same state, and every ledger charge its payment; every refund at
//!   a till (a third of the sales paid by an approving card are given back once paid) agrees
//!   with the server's, and back;
//! - (e) no server error but the injected ones;
//! - (f) every outbox passes `PRAGMA integrity_check`;
//! - (g) Pix: every charge at the provider is the server's (same txid and amount) and every
//!   server charge is at the provider; every Pix received at the provider is recorded once, as a
//!   payment with its amount; each charge's state agrees with the provider's; every Pix attempt
//!   agrees with its charge, and a Pix paid after its till cancelled it is known to that till as
//!   money to give back (and is not counted by (b) and (d) as a second charge: it is shown) —
//!   or, paid after the server closed it while the till still waited for it (a cancel whose
//!   answer was lost), kept as the sale's payment;
//! - (h) a divided sale (paid in parts: a débito tender, then the rest by crédito, each with its
//!   own key) never has approved tenders above its total, on the server or at the till, and one
//!   the till shows paid is paid on the server (its tenders are exempt from (b)); its card
//!   tenders are authorizations, and only those holding money (held or captured, not undone or
//!   lapsed) count;
//! - (i) nothing is left authorized: after the queue drains, every authorization was captured
//!   (its sale paid and confirmed) or undone (its sale abandoned, or its till restarted before
//!   the sale was finished), on the server and at the till;
//! - (j) every answer a till received (a card payment's or a refund's 201 or 402, read from its
//!   outbox at the end and from a copy taken before each power cut of it) is still the server's:
//!   a replay of its key with its bytes answers the same status and the same bytes (the same
//!   payment and amount where the till learnt it by a look-up instead);
//! - (k) every attempt a till reported stored (it prints each) is still in its outbox;
//! - (m) every order paid at a card machine (a third of the trials give each till a terminal
//!   of the trial's `maquininha` process, and send half their approving sales there; the
//!   customer at the machine approves, is declined or walks away) is exactly one server payment
//!   of its amount, and every machine payment an order a card paid;
//! - (n) NFC-e (two in five trials give the tills a SEFAZ simulator process of the trial's own,
//!   each till issuing its sales' notes in a série of its own; SEFAZ goes down, slows, loses
//!   answers after authorizing — while the tills sell, and in half of them past the other
//!   faults —, or is killed and started again): every sale a till holds as paid
//!   in full has exactly one authorized note and none two (a note the till set aside for one in
//!   contingência that SEFAZ authorized after all is marked to cancel and counted apart), every
//!   number of every série is a note SEFAZ authorized or a number it declared unused, SEFAZ
//!   refused nothing (no 539, no 225 or 297: a note sent again gets 204, which is not a
//!   refusal), no till was blocked (656), and every note a till holds as authorized SEFAZ has;
//! - (l) every divided sale (its first part by débito or by Pix) shows on the server
//!   (`GET /vendas`) as paid exactly what its card parts hold and its Pix paid while their charge
//!   was open, never more than its total, and as to give back exactly the Pix paid after their
//!   charge was removed (the cashier gave up on the QR and the rest was paid by crédito).
//!
//! Three in ten Pix trials run their server with keys kept one second (`--key-retention-secs
//! 1`): its reaper purges completed keys while Pix charges wait and authorizations are open.
//!
//! **Power cuts.** Some trials (`--power P`, drawn from a stream of the seed of its own, so the
//! rest of a seed's plan does not change) run on [`powercut`] filesystems: the SQLite server's
//! database on one, the acquirer's ledger on one of its own (cut in three in ten of them), each
//! till's outbox on one of its own; a cut kills the processes
//! on it (`SIGKILL`), drops every write they had not synced, mounts it again and starts them
//! again. PostgreSQL's data folder is not on one (see `docs/testes.md`).
//!
//! `trials --trials N --seed S [--store sqlite|postgres|mixed] [--jobs J] [--power P]
//! [--client PATH] [--expect-violations] [--keep]` (`--keep`: a failing trial's folder is
//! kept); trial `i` runs seed `S + i`, and `--seed S --trials 1` replays it with the same schedule.

use pagar_testkit::{
    AcquirerProcess, ApiDatabase, ApiOptions, ApiProcess, Fault, FaultProxy, MachineProcess,
    PixProcess, SefazProcess, ADMIN_TOKEN,
};
use powercut::{CutReport, Daemon};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod answers;
mod check;
mod check_machine;
mod check_nfce;
mod check_pix;
mod plan;
mod procs;
mod rows;
mod sales;
mod trial;

use answers::*;
use check::*;
use check_machine::*;
use check_nfce::*;
use check_pix::*;
use plan::*;
use procs::*;
use rows::*;
use sales::*;
use trial::*;

/// This run's id (milliseconds at start), which scopes its merchants.
static RUN_ID: std::sync::LazyLock<u128> = std::sync::LazyLock::new(|| {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
});

/// This run's PostgreSQL database, made at start and dropped at the end: a run migrates its own
/// schema, whatever an earlier run (of an earlier build) left, and runs at the same time (the
/// smoke test and `make trials`) never share one.
/// A PostgreSQL trial's own database: one deployment is one database and one acquirer, as its
/// replicas share both (a replica's recovery worker voids at its acquirer every key of its
/// database it finds abandoned, so two trials' servers on one database would void each other's
/// keys at the wrong acquirer).
fn pg_database(seed: u64) -> String {
    format!("pagar_trials_{}_{seed}", *RUN_ID)
}

/// Runs `sql` on the PostgreSQL server's `postgres` database (creating and dropping a trial's).
fn psql(pg_url: &str, sql: &str) {
    let _ = Command::new("psql")
        .arg(format!("{pg_url}/postgres"))
        .args(["-qtAc", sql])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// How long a trial's Pix QR stays payable.
const PIX_EXPIRY_SECS: u64 = 30;

/// How long each till has, once the customer is done, to settle and ask about the Pix it closed.
const LAST_CHECK_SECS: u64 = 45;

const INVARIANTS: [&str; 14] = [
    "(a) one charge per key",
    "(b) one approved charge per sale",
    "(c) every attempt final or in review",
    "(d) outbox and server reconcile",
    "(e) no server error but injected",
    "(f) outbox integrity",
    "(g) Pix: provider, server, tills agree",
    "(h) a divided sale within its total",
    "(i) no authorization left open",
    "(j) every answer found again, replayed the same",
    "(k) every attempt reported stored is kept",
    "(l) a divided sale's money: paid + to give back",
    "(m) card machine: each paid order one payment",
    "(n) NFC-e: one note a paid sale, no number lost",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreChoice {
    Sqlite,
    Postgres,
    Mixed,
}

struct Args {
    trials: u64,
    seed: u64,
    store: StoreChoice,
    jobs: usize,
    pg_url: String,
    verbose: bool,
    /// The share of trials on power-cut filesystems.
    power: f64,
    /// The mutation check: the run must find violations (a mutant `--client`), and fails if not.
    expect_violations: bool,
}

/// The trial client to run (`--client`: a mutant build, for the mutation check); by default the
/// one beside this runner.
static CLIENT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// `--keep`: a failing trial's folder (servers' log, tills' outboxes and logs, the server's
/// database) is kept, and its path printed with the trial's notes.
static KEEP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        trials: 100,
        seed: 1,
        store: StoreChoice::Mixed,
        jobs: std::thread::available_parallelism().map_or(2, |n| n.get()) * 2,
        pg_url: std::env::var("PAGAR_TRIALS_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into()),
        verbose: false,
        power: 0.5,
        expect_violations: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--trials" => args.trials = value()?.parse().map_err(|e| format!("--trials: {e}"))?,
            "--seed" => args.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--jobs" => args.jobs = value()?.parse().map_err(|e| format!("--jobs: {e}"))?,
            "--store" => {
                args.store = match value()?.as_str() {
                    "sqlite" => StoreChoice::Sqlite,
                    "postgres" => StoreChoice::Postgres,
                    "mixed" => StoreChoice::Mixed,
                    other => return Err(format!("--store {other}: use sqlite, postgres or mixed")),
                }
            }
            "--verbose" => args.verbose = true,
            "--power" => {
                args.power = value()?.parse().map_err(|e| format!("--power: {e}"))?;
                if !(0.0..=1.0).contains(&args.power) {
                    return Err("--power: a share from 0 to 1".into());
                }
            }
            "--client" => {
                let client = PathBuf::from(value()?);
                if !client.is_file() {
                    return Err(format!("--client {}: no such file", client.display()));
                }
                let _ = CLIENT.set(client);
            }
            "--expect-violations" => args.expect_violations = true,
            "--keep" => {
                let _ = KEEP.set(true);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(args)
}

fn main() -> std::process::ExitCode {
    // A power-cut filesystem's daemon: this runner, in a process of its own (see `Disk`).
    let argv: Vec<String> = std::env::args().collect();
    if let [_, flag, folder, mountpoint] = argv.as_slice() {
        if flag == "--serve-powercut" {
            let served = powercut::serve(
                Path::new(folder),
                Path::new(mountpoint),
                Duration::ZERO,
                std::io::stdin().lock(),
                std::io::stdout().lock(),
            );
            return match served {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("trials --serve-powercut: {e}");
                    std::process::ExitCode::FAILURE
                }
            };
        }
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("trials: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    // Threads for many more tasks than cores: a trial waits in blocking calls here and there
    // (a process's first line, `psql`, a kill's wait, a SQLite read), and on a runtime with a
    // thread per core one such wait stalls every other trial's tasks on that thread — their
    // fault proxies included, which would then delay the tills' traffic, and tills would miss
    // the drain for want of a thread, not of a server.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.jobs.max(1) * 4 + 4)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let root = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        println!(
            "pagar trials: {} trials from seed {}, store {:?}, {} at a time",
            args.trials, args.seed, args.store, args.jobs
        );
        // One Pix provider for the run, as a PSP serves many merchants: each trial has its own
        // key (its charges, callbacks and ledger).
        let psp_log = tempfile::tempdir_in(&root).expect("a folder for the provider's log");
        let psp = Arc::new(PixProcess::start_logging_to(Some(
            &psp_log.path().join("pix-provider.log"),
        )));
        let started = Instant::now();
        let jobs = Arc::new(tokio::sync::Semaphore::new(args.jobs.max(1)));
        let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let total = args.trials;
        let mut handles = Vec::new();
        for i in 0..args.trials {
            let plan = draw(args.seed + i, args.store, args.power);
            if args.verbose {
                println!("seed {}: {plan:?}", plan.seed);
            }
            let permit = jobs.clone().acquire_owned().await.expect("semaphore");
            let (pg, root, psp) = (args.pg_url.clone(), root.clone(), psp.clone());
            let done = done.clone();
            handles.push(tokio::spawn(async move {
                let out = run_trial(plan, pg, root, psp).await;
                drop(permit);
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if n.is_multiple_of(1_000) && n < total {
                    eprintln!("… {n} of {total} trials done");
                }
                out
            }));
        }
        let mut results = Vec::new();
        for h in handles {
            results.push(h.await.expect("a trial task"));
        }
        let code = report(&results, started.elapsed(), args.verbose);
        if !args.expect_violations {
            return code;
        }
        // The mutation check: the mutant must be caught.
        let caught: u32 = results.iter().flat_map(|r| r.violations).sum();
        if caught > 0 {
            println!("mutation check: the mutant was caught ({caught} violations)");
            std::process::ExitCode::SUCCESS
        } else {
            println!(
                "mutation check: the mutant went unnoticed: the trials prove nothing about it"
            );
            std::process::ExitCode::FAILURE
        }
    })
}

fn report(results: &[Outcome], took: Duration, verbose: bool) -> std::process::ExitCode {
    let mut by_kind: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    let mut by_store: BTreeMap<&str, u32> = BTreeMap::new();
    let mut totals = [0u32; INVARIANTS.len()];
    let mut failing = Vec::new();
    for r in results {
        *by_store.entry(r.store.as_str()).or_default() += 1;
        let bad = r.failed();
        for k in &r.kinds {
            let e = by_kind.entry(k).or_default();
            e.0 += 1;
            e.1 += u32::from(bad);
        }
        for (t, v) in totals.iter_mut().zip(r.violations) {
            *t += v;
        }
        if bad {
            failing.push(r);
        }
    }
    println!(
        "\n{:<34} {:>8} {:>10}",
        "fault in the trial", "trials", "failing"
    );
    for (k, (n, bad)) in &by_kind {
        println!("{k:<34} {n:>8} {bad:>10}");
    }
    let pix = results.iter().fold([0u32; 3], |mut t, r| {
        for (t, n) in t.iter_mut().zip(r.pix) {
            *t += n;
        }
        t
    });
    println!(
        "\nPix: {} charges at the provider, {} paid, {} of them after their till closed them",
        pix[0], pix[1], pix[2]
    );
    let divided = results.iter().fold([0u32; 3], |t, r| {
        [
            t[0] + r.divided[0],
            t[1] + r.divided[1],
            t[2] + r.divided[2],
        ]
    });
    println!(
        "Divided sales: {}, {} of them paid in full (a débito or Pix part, then the rest by crédito), {} with a Pix paid after its removal (to give back)",
        divided[0], divided[1], divided[2]
    );
    let auth = results.iter().fold([0u32; 3], |t, r| {
        [
            t[0] + r.authorizations[0],
            t[1] + r.authorizations[1],
            t[2] + r.authorizations[2],
        ]
    });
    println!(
        "Card authorizations: {}, {} captured (sale paid and confirmed), {} undone (sale abandoned or till restarted before it was finished)",
        auth[0], auth[1], auth[2]
    );
    let power = results.iter().fold(PowerCuts::default(), |mut t, r| {
        t.add(&r.power);
        t
    });
    let on_disks = results
        .iter()
        .filter(|r| r.kinds.iter().any(|k| k.starts_with("power")))
        .count();
    println!(
        "Power cuts: {} ({} of a server, {} of a till, {} of the acquirer) in {on_disks} trials: {} files put back, {} pages ({} bytes) of unsynced writes dropped; {} outcomes went back to pendente at a till, {} claims lost at a server",
        power.server + power.tills + power.acquirer,
        power.server,
        power.tills,
        power.acquirer,
        power.files,
        power.pages,
        power.bytes,
        power.back_to_pending,
        power.claims_lost
    );
    let answers = results.iter().fold([0u32; 3], |t, r| {
        [
            t[0] + r.answers[0],
            t[1] + r.answers[1],
            t[2] + r.answers[2],
        ]
    });
    println!(
        "Refunds paid back: {} (sales given back once paid); answers replayed: {} ({} of refunds), {} of them byte for byte (the rest learnt by a look-up: same payment and amount)",
        results.iter().map(|r| r.refunds).sum::<u32>(),
        answers[0],
        answers[2],
        answers[1]
    );
    let machine = results
        .iter()
        .fold([0u32; 2], |t, r| [t[0] + r.machine[0], t[1] + r.machine[1]]);
    println!(
        "Card machine: {} orders at the terminals, {} of them paid by a card",
        machine[0], machine[1]
    );
    let nfce = results
        .iter()
        .fold([0u32; 5], |t, r| std::array::from_fn(|i| t[i] + r.nfce[i]));
    println!(
        "NFC-e: {} notes authorized at SEFAZ, {} issued in contingência, {} numbers declared unused, {} set aside, authorized after all and cancelled by substitution, {} cancelled with their sale paid back",
        nfce[0], nfce[1], nfce[2], nfce[3], nfce[4]
    );
    println!("\n{:<34} {:>8}", "store", "trials");
    for (s, n) in &by_store {
        println!("{s:<34} {n:>8}");
    }
    println!("\n{:<48} {:>10}", "invariant", "violations");
    for (name, n) in INVARIANTS.iter().zip(totals) {
        println!("{name:<48} {n:>10}");
    }
    println!(
        "\n{} trials in {:.1} s ({:.0} ms a trial of wall time); {} failing",
        results.len(),
        took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / results.len().max(1) as f64,
        failing.len()
    );
    for r in &failing {
        println!(
            "FAILING seed {} ({}): replay with --seed {} --trials 1",
            r.seed, r.store, r.seed
        );
        for n in r.notes.iter().take(if verbose { 100 } else { 5 }) {
            println!("    {n}");
        }
    }
    if failing.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
