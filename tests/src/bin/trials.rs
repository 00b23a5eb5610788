//! Randomized end-to-end fault trials with a checker, in the manner of Jepsen.
//!
//! Each trial draws from its seed: a store (SQLite, or PostgreSQL with 1–3 replicas behind a
//! round-robin balancer), 1–3 tills (`trial-client` processes, each with its own outbox, some
//! pressing Pagar twice at once, and paying a sale in review with another card, which cancels the
//! old key first), their sales (approve, decline, slow cards — in some trials slower than the
//! tills' request timeout; amounts near the offline caps), and a schedule of faults: the server's fault profile, the TCP fault proxy
//! between tills and servers (including a middlebox answering 403 to the next POST),
//! `SIGKILL` of a till, `SIGKILL` and restart of a server or replica,
//! PostgreSQL connections terminated, a till restarted with its wall clock jumped (libfaketime:
//! an hour back or ahead, or past the server's 24 h key retention). Some trials sell by Pix too:
//! a `pix-provider` process of their own, the servers' webhooks registered there, tills that
//! cancel a QR left unpaid and then take a card, and a customer that pays each QR now, later,
//! never, or after it was cancelled (a bank that ignores removal), with the callback lost, sent
//! two or three times, or late. Then the faults stop, every till restarts, the queues drain, the
//! customer is done, every Pix paid reaches a server, the tills ask once more about the Pix they
//! closed, and the checker reads the databases themselves:
//!
//! - (a) at most one ledger charge per (merchant, Idempotency-Key);
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
//!   money to give back (and is not counted by (b) and (d) as a second charge: it is shown);
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
//! database on one (the gateway simulator's ledger in a file of its own beside it, as a real
//! gateway keeps its charges), each till's outbox on one of its own; a cut kills the processes
//! on it (`SIGKILL`), drops every write they had not synced, mounts it again and starts them
//! again. PostgreSQL's data folder is not on one (see `docs/testes.md`).
//!
//! `trials --trials N --seed S [--store sqlite|postgres|mixed] [--jobs J] [--power P]
//! [--client PATH] [--expect-violations] [--keep]` (`--keep`: a failing trial's folder is
//! kept); trial `i` runs seed `S + i`, and `--seed S --trials 1` replays it with the same schedule.

use pagar_testkit::{
    ApiDatabase, ApiOptions, ApiProcess, Fault, FaultProxy, PixProcess, ADMIN_TOKEN,
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

/// This run's id (milliseconds at start), which scopes its merchants.
static RUN_ID: std::sync::LazyLock<u128> = std::sync::LazyLock::new(|| {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
});

/// This run's PostgreSQL database, made at start and dropped at the end: a run migrates its own
/// schema, whatever an earlier run (of an earlier build) left, and runs at the same time (the
/// smoke test and `make trials`) never share one.
fn pg_database() -> String {
    format!("pagar_trials_{}", *RUN_ID)
}

/// How long a trial's Pix QR stays payable.
const PIX_EXPIRY_SECS: u64 = 30;

const INVARIANTS: [&str; 12] = [
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

/// What a trial does, drawn from its seed.
#[derive(Debug, Clone)]
struct Plan {
    seed: u64,
    replicas: Option<usize>, // None: SQLite
    tills: Vec<String>,      // each till's plan string
    schedule: Vec<(u64, Action)>,
    window_ms: u64,
    /// How long `tok_lento` takes at the gateway: usually short, sometimes longer than the
    /// tills' request timeout (1.5 s), so executions are still running when reviews look.
    slow_gateway_ms: u64,
    /// The trial sells by Pix too (its sales with card `pix`), with a provider of its own.
    pix: bool,
    /// The trial runs on power-cut filesystems: `Some(true)` its server's SQLite files too.
    power: Option<bool>,
    /// The server keeps completed keys 1 s instead of 24 h: its reaper purges them while Pix
    /// charges wait and authorizations are open.
    short_retention: bool,
}

/// What a power cut takes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// The SQLite server: its process and the unsynced writes of its database.
    Server,
    /// A till: its process and the unsynced writes of its outbox.
    Till(usize),
}

#[derive(Debug, Clone)]
enum Action {
    ServerFaults(&'static str, Value),
    Proxy(&'static str, Fault),
    KillTill(usize),
    KillServer(usize),
    RestartServer(usize),
    PgTerminate,
    ClockJump(usize, i64),
    PowerCut(Cut),
}

impl Action {
    fn kind(&self) -> &'static str {
        match self {
            Action::ServerFaults(k, _) | Action::Proxy(k, _) => k,
            Action::KillTill(_) => "kill -9 a till",
            Action::KillServer(_) => "kill -9 a server",
            Action::RestartServer(_) => "restart a server",
            Action::PgTerminate => "pg_terminate_backend",
            Action::ClockJump(..) => "a till's clock jumps",
            Action::PowerCut(Cut::Server) => "power cut: the server",
            Action::PowerCut(Cut::Till(_)) => "power cut: a till",
        }
    }
}

fn draw(seed: u64, store: StoreChoice, power: f64) -> Plan {
    let mut plan = draw_faults(seed, store);
    // A third of the sales paid by an approving card are given back (their sale id says so and
    // the till refunds the payment once it is approved), drawn from a stream of their own.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x4553_544f_524e_4f53);
    for till in plan.tills.iter_mut() {
        *till = till
            .split(';')
            .map(|item| {
                let mut parts: Vec<String> = item.split(':').map(String::from).collect();
                if parts.get(2).map(String::as_str) == Some("tok_aprovado") && rng.gen_bool(0.33) {
                    parts[0].push_str("-estorno");
                }
                parts.join(":")
            })
            .collect::<Vec<_>>()
            .join(";");
    }
    // A Pix trial: some divided sales take their first part by Pix, and some servers keep their
    // keys a second only (from a stream of its own, like the refunds).
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5245_5445_4e43_4141);
    if plan.pix {
        plan.short_retention = rng.gen_bool(0.3);
        for till in plan.tills.iter_mut() {
            *till = till
                .split(';')
                .map(|item| {
                    let mut parts: Vec<String> = item.split(':').map(String::from).collect();
                    let divide = match parts.get(2).map(String::as_str) {
                        Some("split") => rng.gen_bool(0.5),
                        Some("pix") => rng.gen_bool(0.3),
                        _ => false,
                    };
                    if divide {
                        parts[2] = "split-pix".into();
                    }
                    parts.join(":")
                })
                .collect::<Vec<_>>()
                .join(";");
        }
    }
    // From a stream of its own: a seed's other draws are the same with power cuts or without.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x504f_5745_525f_4355);
    if rng.gen_bool(power) {
        let server = plan.replicas.is_none();
        plan.power = Some(server);
        for _ in 0..rng.gen_range(1..=3) {
            let at = rng.gen_range(0..plan.window_ms);
            let cut = if server && rng.gen_bool(0.4) {
                Cut::Server
            } else {
                Cut::Till(rng.gen_range(0..plan.tills.len()))
            };
            plan.schedule.push((at, Action::PowerCut(cut)));
        }
        plan.schedule.sort_by_key(|(at, _)| *at);
    }
    plan
}

fn draw_faults(seed: u64, store: StoreChoice) -> Plan {
    let mut rng = StdRng::seed_from_u64(seed);
    let postgres = match store {
        StoreChoice::Sqlite => false,
        StoreChoice::Postgres => true,
        StoreChoice::Mixed => rng.gen_bool(0.3),
    };
    let replicas = postgres.then(|| rng.gen_range(1..=3));
    let window_ms = rng.gen_range(300..=1_200);
    let slow_gateway_ms = if rng.gen_bool(0.2) { 2_500 } else { 200 };
    let pix = rng.gen_bool(0.4);
    let tills = (0..rng.gen_range(1..=3))
        .map(|t| {
            let mut delays: Vec<u64> = (0..rng.gen_range(1..=4))
                .map(|_| rng.gen_range(0..window_ms))
                .collect();
            delays.sort_unstable();
            delays
                .into_iter()
                .enumerate()
                .map(|(s, delay)| {
                    let valor: i64 = match rng.gen_range(0..4) {
                        0 => rng.gen_range(99_900..=100_100), // around the per-payment cap
                        1 => rng.gen_range(1..=500),
                        _ => rng.gen_range(1_000..=99_000),
                    };
                    let card = match rng.gen_range(0..20) {
                        _ if pix && rng.gen_bool(0.4) => "pix",
                        _ if rng.gen_bool(0.15) => "split",
                        0..=11 => "tok_aprovado",
                        12..=14 => "tok_recusado",
                        15..=16 => "tok_saldo_insuficiente",
                        _ => "tok_lento",
                    };
                    let presses = if rng.gen_bool(0.3) { 2 } else { 1 };
                    format!("t{t}-v{s}:{valor}:{card}:{presses}:{delay}")
                })
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect::<Vec<_>>();
    let mut schedule = Vec::new();
    for n in 0..rng.gen_range(1..=5) {
        // Half the trials start with a fault already in place.
        let at = if n == 0 && rng.gen_bool(0.5) {
            0
        } else {
            rng.gen_range(0..window_ms)
        };
        let action = match rng.gen_range(0..18) {
            0 => Action::ServerFaults(
                "server: latency",
                json!({"latency_ms": rng.gen_range(50..400)}),
            ),
            1 => Action::ServerFaults(
                "server: drop after commit",
                json!({"drop_response_probability": rng.gen_range(0.3..1.0)}),
            ),
            2 => Action::ServerFaults(
                "server: 5xx",
                json!({"error_5xx_probability": rng.gen_range(0.3..1.0)}),
            ),
            3 => Action::ServerFaults(
                "server: 429",
                json!({"rate_limit_probability": rng.gen_range(0.3..1.0)}),
            ),
            4 => Action::ServerFaults(
                "server: reset before body",
                json!({"reset_before_body_probability": rng.gen_range(0.3..1.0)}),
            ),
            5 => Action::ServerFaults(
                "server: crash after charge",
                json!({"crash_after_charge_probability": rng.gen_range(0.3..1.0)}),
            ),
            6 => Action::Proxy("proxy: refuse", Fault::Refuse),
            7 => Action::Proxy("proxy: accept and close", Fault::AcceptClose),
            8 => Action::Proxy("proxy: swallow", Fault::Swallow),
            9 => Action::Proxy("proxy: cut after answer", Fault::CutAfterAnswer),
            10 => Action::Proxy("proxy: latency", Fault::Delay(rng.gen_range(20..300))),
            11 => Action::Proxy("proxy: starved", Fault::Starved),
            12 | 13 => Action::KillTill(rng.gen_range(0..tills.len())),
            14 => Action::KillServer(rng.gen_range(0..replicas.unwrap_or(1))),
            15 => Action::ClockJump(
                rng.gen_range(0..tills.len()),
                [-3_600, 3_600, 25 * 3_600][rng.gen_range(0..3)],
            ),
            16 => Action::Proxy(
                "proxy: middlebox 403 on the next POST",
                Fault::RejectNextPost(403),
            ),
            _ if postgres => Action::PgTerminate,
            _ => Action::Proxy("proxy: pass", Fault::Pass),
        };
        if let Action::KillServer(i) = action {
            let back = (at + rng.gen_range(50..400)).min(window_ms);
            schedule.push((back, Action::RestartServer(i)));
        }
        schedule.push((at, action));
    }
    schedule.sort_by_key(|(at, _)| *at);
    Plan {
        seed,
        replicas,
        tills,
        schedule,
        window_ms,
        slow_gateway_ms,
        pix,
        power: None,
        short_retention: false,
    }
}

/// A running till.
struct Till {
    outbox: PathBuf,
    child: Option<Child>,
    /// What it printed, across its restarts (beside the power-cut filesystem, never on it).
    log: PathBuf,
    /// The power-cut filesystem its outbox is on, if the trial has them.
    disk: Option<Disk>,
}

/// A power-cut filesystem: the folder behind it, where it is mounted, and the daemon serving it
/// (this runner, started again with `--serve-powercut`: a process of its own).
struct Disk {
    backing: PathBuf,
    mountpoint: PathBuf,
    daemon: Daemon,
}

impl Disk {
    /// A filesystem over `<dir>/<name>-disk`, mounted at `<dir>/<name>`.
    fn mount(dir: &Path, name: &str) -> Result<Self, String> {
        let backing = dir.join(format!("{name}-disk"));
        let mountpoint = dir.join(name);
        let made = std::fs::create_dir_all(&backing).and(std::fs::create_dir_all(&mountpoint));
        made.map_err(|e| format!("setup: {}: {e}", mountpoint.display()))?;
        let mut serve = Command::new(std::env::current_exe().map_err(|e| format!("setup: {e}"))?);
        serve
            .arg("--serve-powercut")
            .arg(&backing)
            .arg(&mountpoint)
            .stderr(Stdio::null());
        let daemon =
            tokio::task::block_in_place(|| Daemon::start(serve, &mountpoint)).map_err(|e| {
                format!(
                    "setup: power-cut filesystem at {}: {e}",
                    mountpoint.display()
                )
            })?;
        Ok(Self {
            backing,
            mountpoint,
            daemon,
        })
    }

    /// The power goes: what the programs on it did not sync is lost. Kill them first.
    fn cut(&mut self) -> Result<CutReport, String> {
        tokio::task::block_in_place(|| self.daemon.cut())
            .map_err(|e| format!("power cut at {}: {e}", self.mountpoint.display()))
    }

    /// A copy of the database `name` as it stands on the disk right now, WAL included (its
    /// index is rebuilt by the copy), opened in `to`; `None` before the database was made.
    /// Reading the copy leaves the disk as it is: closing the last connection of the original
    /// would checkpoint it and make its unsynced writes durable.
    fn snapshot(&self, name: &str, to: &Path) -> Option<rusqlite::Connection> {
        let _ = std::fs::remove_dir_all(to);
        std::fs::create_dir_all(to).ok()?;
        for file in [name.to_string(), format!("{name}-wal")] {
            let from = self.backing.join(&file);
            if from.exists() {
                std::fs::copy(&from, to.join(&file)).ok()?;
            }
        }
        to.join(name)
            .exists()
            .then(|| rusqlite::Connection::open(to.join(name)).ok())
            .flatten()
    }
}

/// What the power cuts of a trial did.
#[derive(Debug, Default, Clone, Copy)]
struct PowerCuts {
    server: u32,
    tills: u32,
    files: u64,
    bytes: u64,
    pages: u64,
    /// Attempts final at a till before a cut and `pendente` after it (their outcome was
    /// recorded relaxed): each is replayed with its key.
    back_to_pending: u32,
    /// Keys the server had claimed before a cut that the cut lost (claims are relaxed).
    claims_lost: u32,
}

impl PowerCuts {
    fn add(&mut self, other: &PowerCuts) {
        self.server += other.server;
        self.tills += other.tills;
        self.files += other.files;
        self.bytes += other.bytes;
        self.pages += other.pages;
        self.back_to_pending += other.back_to_pending;
        self.claims_lost += other.claims_lost;
    }

    fn dropped(&mut self, r: CutReport) {
        self.files += r.files;
        self.bytes += r.bytes_dropped;
        self.pages += r.pages_dropped;
    }
}

/// Ports for servers and proxies, below the kernel's ephemeral range (32768–60999) so that a
/// port freed by a killed server or a refusing proxy cannot be taken by an outgoing connection
/// before it is bound again; handed out round robin and checked free.
fn next_port() -> std::net::SocketAddr {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 20_000;
        let addr: std::net::SocketAddr = format!("127.0.0.1:{}", 10_000 + n)
            .parse()
            .expect("an address");
        if std::net::TcpListener::bind(addr).is_ok() {
            return addr;
        }
    }
}

/// A server on a port of its own; a few tries, since a start can fail for reasons outside the
/// trial (PostgreSQL out of connections while many trials run at once).
fn start_server(options: &ApiOptions) -> Result<ApiProcess, String> {
    let mut last = String::new();
    for _ in 0..5 {
        match ApiProcess::try_spawn(ApiOptions {
            listen: Some(next_port()),
            ..options.clone()
        }) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(last)
}

/// Brings a server back on its own address (it was killed, or aborted itself).
fn revive(server: &mut ApiProcess, notes: &mut Vec<String>) {
    for _ in 0..5 {
        if server.try_restart().is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    notes.push(format!(
        "setup: a server on {} did not start again",
        server.addr()
    ));
}

fn last_lines(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

fn trial_client() -> PathBuf {
    CLIENT.get().cloned().unwrap_or_else(|| {
        let exe = std::env::current_exe().expect("the runner knows its path");
        exe.with_file_name("trial-client")
    })
}

/// libfaketime, which shifts a process's wall clock (not its monotonic clock, so its timers run).
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

fn start_till(till: &Till, url: &str, key: &str, plan: &str, drain_secs: u64) -> Child {
    start_till_at(till, url, key, plan, drain_secs, 0)
}

/// A till whose wall clock is `shift_secs` off (0: the real clock).
fn start_till_at(
    till: &Till,
    url: &str,
    key: &str,
    plan: &str,
    drain_secs: u64,
    shift_secs: i64,
) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&till.log)
        .expect("the till's log");
    let mut command = Command::new(trial_client());
    if shift_secs != 0 {
        command
            .env("LD_PRELOAD", FAKETIME)
            .env("FAKETIME", format!("{shift_secs:+}s"))
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    }
    command
        .arg(&till.outbox)
        .arg(url)
        .arg(key)
        .arg(if plan.is_empty() { "-" } else { plan })
        .arg(drain_secs.to_string())
        .env("RUST_LOG", "off")
        .stdout(log)
        .stderr(Stdio::null())
        .spawn()
        .expect("trial-client starts")
}

fn kill(child: &mut Child) {
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
}

#[derive(Debug, Default)]
struct Outcome {
    seed: u64,
    store: String,
    kinds: BTreeSet<&'static str>,
    violations: [u32; INVARIANTS.len()],
    notes: Vec<String>,
    /// Pix charges at the provider, Pix received, and those received after their till closed.
    pix: [u32; 3],
    /// Divided sales, those paid in full, and those with a Pix paid after its removal.
    divided: [u32; 3],
    /// Card authorizations on the server, those captured, and those undone or lapsed.
    authorizations: [u32; 3],
    power: PowerCuts,
    /// Refunds paid back on the server.
    refunds: u32,
    /// Answers replayed by the checker, those of them the same byte for byte, and refunds' among
    /// them.
    answers: [u32; 3],
}

impl Outcome {
    /// A violation, or a note (a harness error among them): the trial fails.
    fn failed(&self) -> bool {
        self.violations.iter().sum::<u32>() > 0 || !self.notes.is_empty()
    }
}

async fn put_faults(client: &reqwest::Client, url: &str, faults: &Value) {
    let _ = client
        .put(format!("{url}/admin/faults"))
        .bearer_auth(ADMIN_TOKEN)
        .timeout(Duration::from_secs(2))
        .json(faults)
        .send()
        .await;
}

/// The Pix key of a trial's merchant: its charges, its callbacks and its ledger at the shared
/// provider are its own.
fn pix_key(seed: u64) -> String {
    format!("trial-{seed}-{}@pix.example", *RUN_ID)
}

async fn run_trial(plan: Plan, pg_url: String, root: PathBuf, psp: Arc<PixProcess>) -> Outcome {
    let mut out = Outcome {
        seed: plan.seed,
        store: plan
            .replicas
            .map_or("sqlite".into(), |n| format!("postgres x{n}")),
        ..Outcome::default()
    };
    let dir = tempfile::tempdir_in(&root).expect("a trial folder");
    // Per run, so PostgreSQL trials sharing one database never see an earlier run's rows.
    let run = *RUN_ID;
    let merchant = format!("m{}_{run}", plan.seed);
    let key = format!("sk_trial_{}_{run}", plan.seed);
    let log = dir.path().join("servers.log");
    // A SQLite server on power-cut disks: its database on one, the gateway's ledger beside it.
    let mut server_disk = None;
    if plan.power == Some(true) {
        match Disk::mount(dir.path(), "server") {
            Ok(disk) => server_disk = Some(disk),
            Err(e) => {
                out.notes.push(e);
                return out;
            }
        }
    }
    let gateway_db = server_disk.as_ref().map(|_| dir.path().join("gateway.db"));
    let database = match plan.replicas {
        None => ApiDatabase::Sqlite(
            server_disk
                .as_ref()
                .map_or(dir.path(), |d| d.mountpoint.as_path())
                .join("api.db"),
        ),
        Some(_) => ApiDatabase::Postgres(format!("{pg_url}/{}", pg_database())),
    };
    let options = ApiOptions {
        database: database.clone(),
        api_key: key.clone(),
        merchant: merchant.clone(),
        extra: [
            "--lease-ms",
            "300",
            "--recovery-after-ms",
            "300",
            "--reaper-interval-secs",
            "1",
            "--pg-max-connections",
            "4",
        ]
        .map(String::from)
        .into_iter()
        .chain([
            "--slow-gateway-ms".to_string(),
            plan.slow_gateway_ms.to_string(),
        ])
        .chain(
            plan.short_retention
                .then(|| ["--key-retention-secs".to_string(), "1".to_string()])
                .into_iter()
                .flatten(),
        )
        .chain(if plan.pix {
            let mut flags = psp.api_flags(300);
            flags.extend(["--pix-key".into(), pix_key(plan.seed)]);
            flags.extend(["--pix-expiry-secs".into(), PIX_EXPIRY_SECS.to_string()]);
            flags
        } else {
            Vec::new()
        })
        .chain(
            gateway_db
                .iter()
                .flat_map(|g| ["--gateway-database".to_string(), g.display().to_string()]),
        )
        .collect(),
        log: Some(log.clone()),
        listen: None,
    };
    let mut servers: Vec<ApiProcess> = Vec::new();
    for _ in 0..plan.replicas.unwrap_or(1) {
        match start_server(&options) {
            Ok(s) => servers.push(s),
            Err(e) => {
                out.notes.push(format!("setup: {e}: {}", last_lines(&log)));
                return out;
            }
        }
    }
    let upstreams: Vec<_> = servers.iter().map(ApiProcess::addr).collect();
    let proxy = loop {
        if let Ok(p) = FaultProxy::try_balancing_on(next_port(), upstreams.clone()).await {
            break p;
        }
    };
    let url = proxy.url();
    let mut tills: Vec<Till> = Vec::new();
    for (i, p) in plan.tills.iter().enumerate() {
        let disk = match plan.power {
            Some(_) => match Disk::mount(dir.path(), &format!("till{i}")) {
                Ok(disk) => Some(disk),
                Err(e) => {
                    out.notes.push(e);
                    return out;
                }
            },
            None => None,
        };
        let folder = disk.as_ref().map_or(dir.path(), |d| d.mountpoint.as_path());
        let mut till = Till {
            outbox: folder.join(format!("till{i}.db")),
            child: None,
            log: dir.path().join(format!("till{i}.log")),
            disk,
        };
        till.child = Some(start_till(&till, &url, &key, p, 10));
        tills.push(till);
    }
    // What tills held before a power cut of theirs: the answers they had received.
    let mut answers: Vec<Answer> = Vec::new();
    let mut cuts = 0u32;
    let http = reqwest::Client::new();
    let customer = plan.pix.then(|| {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(customer(
            psp.clone(),
            pix_key(plan.seed),
            plan.seed,
            stopped,
        ));
        (task, stop)
    });

    if plan.short_retention {
        out.kinds.insert("server: keys kept 1 s");
    }
    if plan.tills.iter().any(|t| t.contains(":split-pix:")) {
        out.kinds.insert("sale: divided, a part by Pix");
    }
    // The fault window.
    let started = Instant::now();
    let mut killed: BTreeSet<usize> = BTreeSet::new();
    // A power cut the filesystem could not make (its daemon gone, the mount not back): the
    // trial ends as a harness error, never with a program started on the bare folder.
    let mut broken: Option<String> = None;
    for (at, action) in &plan.schedule {
        let wait = Duration::from_millis(*at).saturating_sub(started.elapsed());
        tokio::time::sleep(wait).await;
        out.kinds.insert(action.kind());
        match action {
            Action::ServerFaults(_, faults) => {
                for s in &servers {
                    put_faults(&http, &s.url(), faults).await;
                }
            }
            Action::Proxy(_, fault) => proxy.set(*fault).await,
            Action::KillTill(i) => {
                if let Some(child) = tills[*i].child.as_mut() {
                    kill(child);
                }
            }
            Action::KillServer(i) => {
                servers[*i].kill();
                killed.insert(*i);
            }
            Action::RestartServer(i) => {
                if killed.remove(i) {
                    revive(&mut servers[*i], &mut out.notes);
                }
            }
            Action::ClockJump(i, shift) => {
                if let Some(child) = tills[*i].child.as_mut() {
                    kill(child);
                }
                if Path::new(FAKETIME).exists() {
                    tills[*i].child = Some(start_till_at(&tills[*i], &url, &key, "", 10, *shift));
                } else {
                    out.notes
                        .push(format!("{FAKETIME} is missing: install faketime"));
                }
            }
            Action::PgTerminate => {
                let _ = Command::new("psql")
                    .arg(format!("{pg_url}/postgres"))
                    .args([
                        "-qtAc",
                        &format!(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '{}' AND application_name = 'payment-api'",
                            pg_database()
                        ),
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            Action::PowerCut(Cut::Server) => {
                for s in servers.iter_mut() {
                    s.kill();
                }
                if let Some(disk) = server_disk.as_mut() {
                    cuts += 1;
                    let seen = dir.path().join(format!("seen-{cuts}"));
                    let keys = |c: Option<rusqlite::Connection>| {
                        c.and_then(|c| {
                            c.query_row("SELECT count(*) FROM idempotency_keys", [], |r| {
                                r.get::<_, i64>(0)
                            })
                            .ok()
                        })
                        .unwrap_or(0)
                    };
                    let before = keys(disk.snapshot("api.db", &seen));
                    match disk.cut() {
                        Ok(r) => {
                            out.power.server += 1;
                            out.power.dropped(r);
                            let after = keys(disk.snapshot("api.db", &seen));
                            out.power.claims_lost += u32::try_from(before - after).unwrap_or(0);
                        }
                        Err(e) => {
                            broken = Some(e);
                            break;
                        }
                    }
                }
                // The loop below brings the server back, on the same address and files.
            }
            Action::PowerCut(Cut::Till(i)) => {
                let till = &mut tills[*i];
                if let Some(child) = till.child.as_mut() {
                    kill(child);
                }
                if let Some(disk) = till.disk.as_mut() {
                    cuts += 1;
                    let seen = dir.path().join(format!("seen-{cuts}"));
                    let name = format!("till{i}.db");
                    let before = disk
                        .snapshot(&name, &seen)
                        .map(|c| (answers_of(&c, *i), attempt_ids(&c, "state <> 'pendente'")));
                    match disk.cut() {
                        Ok(r) => {
                            out.power.tills += 1;
                            out.power.dropped(r);
                            if let Some((held, finals)) = before {
                                let pending = disk
                                    .snapshot(&name, &seen)
                                    .map(|c| attempt_ids(&c, "state = 'pendente'"))
                                    .unwrap_or_default();
                                out.power.back_to_pending +=
                                    finals.intersection(&pending).count() as u32;
                                answers.extend(held);
                            }
                        }
                        Err(e) => {
                            broken = Some(e);
                            break;
                        }
                    }
                }
                till.child = Some(start_till(till, &url, &key, "", 10));
            }
        }
        // A crash fault takes a server down by itself: bring it back, as a supervisor would.
        for (i, s) in servers.iter_mut().enumerate() {
            if !killed.contains(&i) && !s.is_running() {
                revive(s, &mut out.notes);
            }
        }
    }
    if let Some(e) = broken {
        for till in tills.iter_mut() {
            if let Some(child) = till.child.as_mut() {
                kill(child);
            }
        }
        if let Some((task, stop)) = customer {
            let _ = stop.send(true);
            task.abort();
        }
        out.notes.push(format!("setup: {e}"));
        return out;
    }
    tokio::time::sleep(Duration::from_millis(plan.window_ms).saturating_sub(started.elapsed()))
        .await;

    // Heal: faults off, every server up, every till restarted until its queue drained.
    proxy.set(Fault::Pass).await;
    for s in servers.iter_mut() {
        if !s.is_running() {
            revive(s, &mut out.notes);
        }
    }
    for s in &servers {
        put_faults(&http, &s.url(), &json!({})).await;
    }
    // A QR nobody pays keeps its sale open until it expires (`PIX_EXPIRY_SECS` after it was
    // made, then the server's sweep and the till's next read): a Pix trial may take that long.
    let drain = 30 + if plan.pix { PIX_EXPIRY_SECS + 15 } else { 0 };
    let deadline = Instant::now() + Duration::from_secs(drain);
    loop {
        for s in servers.iter_mut() {
            if !s.is_running() {
                revive(s, &mut out.notes); // a crash fault that fired just before it was off
            }
        }
        let mut all_done = true;
        for till in tills.iter_mut() {
            let finished = match till.child.as_mut() {
                Some(child) => match child.try_wait() {
                    Ok(Some(status)) => status.success() && drained(&till.outbox),
                    Ok(None) => {
                        all_done = false;
                        continue;
                    }
                    Err(_) => false,
                },
                None => false,
            };
            if !finished {
                all_done = false;
                if let Some(mut old) = till.child.take() {
                    kill(&mut old);
                }
                till.child = Some(start_till(till, &url, &key, "", 5));
            }
        }
        if all_done || Instant::now() > deadline {
            if !all_done {
                out.notes.push(format!("tills did not drain in {drain} s"));
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for till in tills.iter_mut() {
        if let Some(mut child) = till.child.take() {
            kill(&mut child);
        }
    }
    let mut pix_ledger = None;
    if let Some((task, stop)) = customer {
        // The customer is done; what it scheduled happens; every Pix it paid reaches a server
        // (by callback or poll); then each till asks once more about the Pix it closed.
        let _ = stop.send(true);
        let (kinds, done_by) = task.await.expect("the customer task");
        out.kinds.extend(kinds);
        tokio::time::sleep_until((done_by + Duration::from_millis(300)).into()).await;
        let ledger = psp.ledger(&pix_key(plan.seed)).await;
        if !pix_recorded(&database, &merchant, &ledger, &mut servers, &mut out.notes).await {
            out.notes
                .push("(g) a Pix paid at the provider was not recorded by a server in 15 s".into());
            out.violations[6] += 1;
        }
        for till in tills.iter_mut() {
            let mut child = start_till(till, &url, &key, "", 5);
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            kill(&mut child);
        }
        pix_ledger = Some(ledger);
    }
    // (j) and (k), while the servers still answer.
    for (t, till) in tills.iter().enumerate() {
        if let Ok(c) = rusqlite::Connection::open_with_flags(
            &till.outbox,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        ) {
            answers.extend(answers_of(&c, t));
            check_stored(&mut out, t, &till.log, &attempt_ids(&c, "1"));
        } else {
            check_stored(&mut out, t, &till.log, &BTreeSet::new());
        }
    }
    check_answers(&mut out, &http, &servers, &key, &answers).await;
    check_sales(
        &mut out,
        &http,
        &servers,
        &key,
        &tills,
        &database,
        &merchant,
        pix_ledger.as_ref(),
    )
    .await;
    for s in servers.iter_mut() {
        s.kill();
    }

    check(
        &mut out,
        &database,
        gateway_db.as_deref(),
        &merchant,
        &tills,
        &log,
    )
    .await;
    if let Some(ledger) = pix_ledger {
        check_pix(&mut out, &database, &merchant, &tills, &ledger).await;
    }
    if out.failed() && KEEP.get().is_some() {
        drop(tills); // unmounts the tills' disks (their files stay in `<name>-disk`)
        drop(server_disk);
        out.notes.push(format!("kept: {}", dir.keep().display()));
    }
    out
}

/// The customer of a Pix trial: pays each QR of the trial's key as it appears, now or later,
/// never, or late after it was cancelled (at a bank that ignores removal), with its callback
/// delivered, lost, repeated or late. Returns what it did and when the last of it will have
/// happened.
async fn customer(
    psp: Arc<PixProcess>,
    chave: String,
    seed: u64,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> (BTreeSet<&'static str>, Instant) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5049_5821);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    let mut done_by = Instant::now();
    loop {
        let ledger = psp.ledger(&chave).await;
        for cob in ledger["cobs"].as_array().into_iter().flatten() {
            let Some(txid) = cob["txid"].as_str() else {
                continue;
            };
            if !seen.insert(txid.to_string()) {
                continue;
            }
            let soon: u64 = rng.gen_range(0..1_000);
            let (kind, order) = match rng.gen_range(0..20) {
                0..=5 => ("pix: paid", json!({"atraso_ms": soon})),
                6 | 7 => (
                    "pix: paid, callback lost",
                    json!({"atraso_ms": soon, "webhook": "perdido"}),
                ),
                8 | 9 => (
                    "pix: paid, callback 2-3 times",
                    json!({"atraso_ms": soon, "webhook": (["duplicado", "triplicado"][rng.gen_range(0..2)])}),
                ),
                10 => (
                    "pix: paid, callback late",
                    json!({"atraso_ms": soon, "webhook_atraso_ms": rng.gen_range(300..1_500u64)}),
                ),
                11..=13 => ("pix: never paid", Value::Null),
                _ => (
                    "pix: paid after cancel",
                    json!({
                        "atraso_ms": rng.gen_range(1_200..2_500u64),
                        "aceitar_inativa": true,
                        "webhook": (["entregue", "perdido"][rng.gen_range(0..2)]),
                    }),
                ),
            };
            kinds.insert(kind);
            if order.is_null() {
                continue;
            }
            let after = order["atraso_ms"].as_u64().unwrap_or(0)
                + order["webhook_atraso_ms"].as_u64().unwrap_or(0);
            done_by = done_by.max(Instant::now() + Duration::from_millis(after));
            psp.customer_pays(txid, order).await;
        }
        if *stop.borrow() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = stop.changed() => {}
        }
    }
    (kinds, done_by)
}

/// Waits (at most 15 s, reviving servers a late crash fault took down) until every Pix the
/// provider received for this trial is recorded by the server.
async fn pix_recorded(
    database: &ApiDatabase,
    merchant: &str,
    ledger: &Value,
    servers: &mut [ApiProcess],
    notes: &mut Vec<String>,
) -> bool {
    let paid: BTreeSet<&str> = provider_pix(ledger).map(|(e2e, _, _)| e2e).collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok((_, received)) = pix_rows(database, merchant).await {
            let recorded: BTreeSet<&str> = received.iter().map(|r| r.e2eid.as_str()).collect();
            if paid.is_subset(&recorded) {
                return true;
            }
        }
        if Instant::now() > deadline {
            return false;
        }
        for s in servers.iter_mut() {
            if !s.is_running() {
                revive(s, notes);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every Pix in a provider ledger: (end-to-end id, txid, centavos).
fn provider_pix(ledger: &Value) -> impl Iterator<Item = (&str, &str, i64)> {
    ledger["cobs"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|cob| cob["pix"].as_array().into_iter().flatten())
        .filter_map(|p| {
            Some((
                p["endToEndId"].as_str()?,
                p["txid"].as_str()?,
                pix_provider::valor::parse(p["valor"].as_str()?)?,
            ))
        })
}

/// An answer a till received: a card payment's or a refund's 201 or 402, with the request it
/// answered.
#[derive(Debug, Clone)]
struct Answer {
    till: usize,
    attempt: String,
    key: String,
    path: String,
    request: Vec<u8>,
    status: u16,
    body: Vec<u8>,
}

/// The answers an outbox holds (see [`Answer`]); none before its schema was made.
fn answers_of(c: &rusqlite::Connection, till: usize) -> Vec<Answer> {
    c.prepare(
        "SELECT id, idempotency_key, kind, refund_payment, request_body, response_status, response_body
           FROM attempts
          WHERE state IN ('aprovado', 'recusado') AND metodo = 'cartao'
            AND response_status IN (201, 402) AND response_body IS NOT NULL",
    )
    .and_then(|mut st| {
        st.query_map([], |r| {
            let kind: String = r.get(2)?;
            let refund_of: Option<String> = r.get(3)?;
            Ok(Answer {
                till,
                attempt: r.get(0)?,
                key: r.get(1)?,
                path: match (kind.as_str(), refund_of) {
                    ("estorno", Some(payment)) => format!("/pagamentos/{payment}/estornos"),
                    _ => "/pagamentos".into(),
                },
                request: r.get(4)?,
                status: r.get(5)?,
                body: r.get(6)?,
            })
        })?
        .collect()
    })
    .unwrap_or_default()
}

/// The ids of an outbox's attempts `WHERE <filter>`; none before its schema was made.
fn attempt_ids(c: &rusqlite::Connection, filter: &str) -> BTreeSet<String> {
    c.prepare(&format!("SELECT id FROM attempts WHERE {filter}"))
        .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
        .unwrap_or_default()
}

/// (k): every attempt the till printed as stored (`stored`, `split-rest`, `another-card`,
/// `pix-cancelled … card`) across its runs is in its outbox.
fn check_stored(out: &mut Outcome, t: usize, log: &Path, kept: &BTreeSet<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let reported = text.lines().filter_map(|line| {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["stored" | "split-rest" | "another-card" | "refund", id] => Some(*id),
            ["pix-cancelled", _, "card", id] => Some(*id),
            _ => None,
        }
    });
    for id in reported {
        if !kept.contains(id) {
            out.violations[10] += 1;
            out.notes.push(format!(
                "(k) till {t}: attempt {id} was reported stored and is gone"
            ));
        }
    }
}

/// (j): each answer a till received is replayed with its key and its bytes, straight to a
/// server; the replay must answer what the till was answered.
async fn check_answers(
    out: &mut Outcome,
    http: &reqwest::Client,
    servers: &[ApiProcess],
    api_key: &str,
    answers: &[Answer],
) {
    let mut seen: BTreeSet<(&str, &[u8])> = BTreeSet::new();
    for (n, a) in answers.iter().enumerate() {
        if !seen.insert((a.key.as_str(), a.body.as_slice())) {
            continue; // the same answer, held before a cut and after it
        }
        let url = servers[n % servers.len()].url();
        match replay(http, &url, api_key, a).await {
            Ok((status, body)) => match same_answer(a, status, &body) {
                Ok(identical) => {
                    out.answers[0] += 1;
                    out.answers[1] += u32::from(identical);
                    out.answers[2] += u32::from(a.path.ends_with("/estornos"));
                }
                Err(e) => {
                    out.violations[9] += 1;
                    out.notes.push(format!(
                        "(j) till {} attempt {} key {}: {e}",
                        a.till, a.attempt, a.key
                    ));
                }
            },
            Err(e) => {
                out.violations[9] += 1;
                out.notes.push(format!(
                    "(j) till {} attempt {}: no replay: {e}",
                    a.till, a.attempt
                ));
            }
        }
    }
}

/// One replay of a till's answered request; tried again (a few seconds at most) while the
/// server is busy or starting.
async fn replay(
    http: &reqwest::Client,
    url: &str,
    api_key: &str,
    a: &Answer,
) -> Result<(u16, Vec<u8>), String> {
    let mut last = String::new();
    for _ in 0..25 {
        let sent = http
            .post(format!("{url}{}", a.path))
            .bearer_auth(api_key)
            .header("Idempotency-Key", &a.key)
            .header("Content-Type", "application/json")
            .body(a.request.clone())
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == 409 || r.status().is_server_error() => {
                last = format!("HTTP {}", r.status().as_u16());
            }
            Ok(r) => {
                let status = r.status().as_u16();
                let body = r.bytes().await.map_err(|e| e.to_string())?;
                return Ok((status, body.to_vec()));
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last)
}

/// Whether a replay answered what the till was answered: the same status and the same bytes
/// (`Ok(true)`); or, for an answer the till learnt by a look-up (re-serialised by the till), the
/// same status, payment and amount (`Ok(false)`).
fn same_answer(a: &Answer, status: u16, body: &[u8]) -> Result<bool, String> {
    if status != a.status {
        return Err(format!(
            "replayed HTTP {status}, the till was answered {}: {}",
            a.status,
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ));
    }
    if body == a.body.as_slice() {
        return Ok(true);
    }
    let parse = |b: &[u8]| serde_json::from_slice::<Value>(b).ok();
    match (parse(&a.body), parse(body)) {
        (Some(held), Some(now))
            if held.get("id").is_some()
                && ["id", "valor"].iter().all(|k| held.get(k) == now.get(k)) =>
        {
            Ok(false)
        }
        _ => Err(format!(
            "replayed other bytes: {} — the till holds {}",
            String::from_utf8_lossy(&body[..body.len().min(200)]),
            String::from_utf8_lossy(&a.body[..a.body.len().min(200)])
        )),
    }
}

/// True when every attempt of the outbox is settled (what the till waits for): a payment in
/// review counts only once its key was cancelled or its payment found.
fn drained(outbox: &Path) -> bool {
    let Ok(c) = rusqlite::Connection::open(outbox) else {
        return false;
    };
    c.query_row(
        "SELECT count(*) FROM attempts WHERE state = 'pendente'
             OR (state = 'revisao' AND (review_checked_at IS NULL OR kind = 'pagamento'))
             OR captura IN ('pendente', 'capturar', 'desfazer')",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n == 0)
    .unwrap_or(false)
}

#[derive(Debug)]
struct AttemptRow {
    id: String,
    /// `pagamento` or `estorno`.
    kind: String,
    sale: String,
    state: String,
    valor: i64,
    payment_id: Option<String>,
    last_error: Option<String>,
    /// A Pix: its charge's status as the till last heard it.
    pix_status: Option<String>,
    /// A tender of a divided sale: the sale's total.
    sale_total: Option<i64>,
    /// An authorized tender: where its capture stands at the till.
    captura: Option<String>,
}

impl AttemptRow {
    /// A Pix the till closed and then learnt was paid anyway: money it shows to give back.
    fn knows_late_pix(&self) -> bool {
        self.state == "recusado" && self.pix_status.as_deref() == Some("recebido_apos_cancelamento")
    }
}

/// A Pix charge as the server has it.
#[derive(Debug)]
struct PixChargeRow {
    id: String,
    txid: String,
    status: String,
    valor: i64,
    e2eid: Option<String>,
    referencia: Option<String>,
}

/// A Pix the server recorded as received.
#[derive(Debug)]
struct ReceivedRow {
    e2eid: String,
    txid: String,
    valor: i64,
}

const PIX_CHARGES_SQL: &str =
    "SELECT id, txid, status, valor, e2eid, referencia FROM pix_charges WHERE merchant = $1";
const PIX_RECEIVED_SQL: &str = "SELECT r.end_to_end_id, r.txid, r.valor FROM pix_received r
     JOIN pix_charges c ON c.txid = r.txid WHERE c.merchant = $1";

/// The server's Pix charges and the Pix it recorded, for one merchant.
async fn pix_rows(
    database: &ApiDatabase,
    merchant: &str,
) -> Result<(Vec<PixChargeRow>, Vec<ReceivedRow>), String> {
    match database {
        ApiDatabase::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
            let sqlite = |sql: &str| sql.replace("$1", "?1");
            let charges = c
                .prepare(&sqlite(PIX_CHARGES_SQL))
                .and_then(|mut st| {
                    st.query_map([merchant], |r| {
                        Ok(PixChargeRow {
                            id: r.get(0)?,
                            txid: r.get(1)?,
                            status: r.get(2)?,
                            valor: r.get(3)?,
                            e2eid: r.get(4)?,
                            referencia: r.get(5)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.to_string())?;
            let received = c
                .prepare(&sqlite(PIX_RECEIVED_SQL))
                .and_then(|mut st| {
                    st.query_map([merchant], |r| {
                        Ok(ReceivedRow {
                            e2eid: r.get(0)?,
                            txid: r.get(1)?,
                            valor: r.get(2)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.to_string())?;
            Ok((charges, received))
        }
        ApiDatabase::Postgres(url) => {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let driver = tokio::spawn(conn);
            let charges = client
                .query(PIX_CHARGES_SQL, &[&merchant])
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| PixChargeRow {
                    id: r.get(0),
                    txid: r.get(1),
                    status: r.get(2),
                    valor: r.get(3),
                    e2eid: r.get(4),
                    referencia: r.get(5),
                })
                .collect();
            let received = client
                .query(PIX_RECEIVED_SQL, &[&merchant])
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| ReceivedRow {
                    e2eid: r.get(0),
                    txid: r.get(1),
                    valor: r.get(2),
                })
                .collect();
            drop(client);
            let _ = driver.await;
            Ok((charges, received))
        }
    }
}

#[derive(Debug)]
struct PaymentRow {
    id: String,
    status: String,
    valor: i64,
    referencia: Option<String>,
    cobranca_id: String,
    /// `cartao` or `pix`: who took the money.
    meio: String,
    /// An authorization's state (`None`: captured with its charge).
    captura: Option<String>,
}

impl PaymentRow {
    /// Approved, and not an authorization undone or lapsed: it took or holds money.
    fn holds_money(&self) -> bool {
        self.status == "aprovado"
            && !matches!(self.captura.as_deref(), Some("desfeita" | "expirada"))
    }
}

/// A refund as the server has it.
#[derive(Debug)]
struct RefundRow {
    id: String,
    status: String,
    valor: i64,
    referencia: Option<String>,
}

const REFUNDS_SQL: &str = "SELECT id, status, valor, referencia FROM refunds WHERE merchant = $1";

/// The server's refunds, for one merchant.
async fn server_refunds(database: &ApiDatabase, merchant: &str) -> Result<Vec<RefundRow>, String> {
    match database {
        ApiDatabase::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
            c.prepare(&REFUNDS_SQL.replace("$1", "?1"))
                .and_then(|mut st| {
                    st.query_map([merchant], |r| {
                        Ok(RefundRow {
                            id: r.get(0)?,
                            status: r.get(1)?,
                            valor: r.get(2)?,
                            referencia: r.get(3)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.to_string())
        }
        ApiDatabase::Postgres(url) => {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let driver = tokio::spawn(conn);
            let rows = client
                .query(REFUNDS_SQL, &[&merchant])
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| RefundRow {
                    id: r.get(0),
                    status: r.get(1),
                    valor: r.get(2),
                    referencia: r.get(3),
                })
                .collect();
            drop(client);
            let _ = driver.await;
            Ok(rows)
        }
    }
}

async fn server_rows(
    database: &ApiDatabase,
    gateway_db: Option<&Path>,
    merchant: &str,
) -> Result<(Vec<(String, String)>, Vec<PaymentRow>), String> {
    match database {
        ApiDatabase::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
            let gateway = match gateway_db {
                Some(g) => Some(rusqlite::Connection::open(g).map_err(|e| e.to_string())?),
                None => None,
            };
            let ledger = gateway
                .as_ref()
                .unwrap_or(&c)
                .prepare(
                    "SELECT downstream_key, cobranca_id FROM gateway_ledger WHERE merchant = ?1 AND status <> 'anulado'",
                )
                .and_then(|mut st| {
                    st.query_map([merchant], |r| Ok((r.get(0)?, r.get(1)?)))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.to_string())?;
            let payments = c
                .prepare("SELECT id, status, valor, referencia, cobranca_id, captura, meio FROM payments WHERE merchant = ?1")
                .and_then(|mut st| {
                    st.query_map([merchant], |r| {
                        Ok(PaymentRow {
                            id: r.get(0)?,
                            status: r.get(1)?,
                            valor: r.get(2)?,
                            referencia: r.get(3)?,
                            cobranca_id: r.get(4)?,
                            captura: r.get(5)?,
                            meio: r.get(6)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.to_string())?;
            Ok((ledger, payments))
        }
        ApiDatabase::Postgres(url) => {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let driver = tokio::spawn(conn);
            let ledger = client
                .query(
                    "SELECT downstream_key, cobranca_id FROM gateway_ledger WHERE merchant = $1 AND status <> 'anulado'",
                    &[&merchant],
                )
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let payments = client
                .query("SELECT id, status, valor, referencia, cobranca_id, captura, meio FROM payments WHERE merchant = $1", &[&merchant])
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| PaymentRow {
                    id: r.get(0),
                    status: r.get(1),
                    valor: r.get(2),
                    referencia: r.get(3),
                    cobranca_id: r.get(4),
                    captura: r.get(5),
                    meio: r.get(6),
                })
                .collect();
            drop(client);
            let _ = driver.await;
            Ok((ledger, payments))
        }
    }
}

async fn check(
    out: &mut Outcome,
    database: &ApiDatabase,
    gateway_db: Option<&Path>,
    merchant: &str,
    tills: &[Till],
    log: &Path,
) {
    let (ledger, payments) = match server_rows(database, gateway_db, merchant).await {
        Ok(rows) => rows,
        Err(e) => {
            out.notes.push(format!("server database unreadable: {e}"));
            out.violations[3] += 1;
            return;
        }
    };
    // (a)
    let mut per_key: HashMap<&str, u32> = HashMap::new();
    for (dk, _) in &ledger {
        *per_key.entry(dk).or_default() += 1;
    }
    for (dk, n) in per_key {
        if n > 1 {
            out.violations[0] += 1;
            out.notes
                .push(format!("(a) {n} charges for downstream key {dk}"));
        }
    }
    // Outboxes: (c), (f), and what (b) and (d) compare.
    let mut attempts: Vec<(usize, AttemptRow)> = Vec::new();
    for (t, till) in tills.iter().enumerate() {
        let Ok(c) = rusqlite::Connection::open(&till.outbox) else {
            continue; // a till killed before it created its outbox accepted nothing
        };
        let integrity: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap_or_else(|e| e.to_string());
        if integrity != "ok" {
            out.violations[5] += 1;
            out.notes.push(format!("(f) till {t}: {integrity}"));
        }
        let rows = c
            .prepare(
                "SELECT a.id, a.sale_id, a.state, a.valor, a.payment_id, a.last_error, p.status,
                        CASE WHEN a.kind = 'pagamento'
                             THEN (SELECT total FROM sales s WHERE s.sale_id = a.sale_id) END,
                        a.captura, a.kind
                   FROM attempts a LEFT JOIN pix p ON p.attempt_id = a.id",
            )
            .and_then(|mut st| {
                st.query_map([], |r| {
                    Ok(AttemptRow {
                        id: r.get(0)?,
                        sale: r.get(1)?,
                        state: r.get(2)?,
                        valor: r.get(3)?,
                        payment_id: r.get(4)?,
                        last_error: r.get(5)?,
                        pix_status: r.get(6)?,
                        sale_total: r.get(7)?,
                        captura: r.get(8)?,
                        kind: r.get(9)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()
            });
        match rows {
            Ok(rows) => attempts.extend(rows.into_iter().map(|a| (t, a))),
            Err(e) if e.to_string().contains("no such table") => {}
            Err(e) => {
                out.violations[5] += 1;
                out.notes.push(format!("(f) till {t}: {e}"));
            }
        }
    }
    for (t, a) in &attempts {
        let settled = matches!(a.state.as_str(), "aprovado" | "recusado")
            || (a.state == "revisao" && a.last_error.is_some());
        if !settled {
            out.violations[2] += 1;
            out.notes
                .push(format!("(c) till {t} attempt {} is {}", a.id, a.state));
        }
    }
    let by_ref: HashMap<&str, Vec<&PaymentRow>> =
        payments.iter().fold(HashMap::new(), |mut m, p| {
            if let Some(r) = &p.referencia {
                m.entry(r.as_str()).or_default().push(p);
            }
            m
        });
    // (b): approved charges per sale, counted on the server. A Pix paid after its till closed it
    // is not counted when the till knows it (it shows it to give back); (g) checks it does.
    let mut per_sale: BTreeMap<(usize, &str), u32> = BTreeMap::new();
    for (t, a) in attempts
        .iter()
        .filter(|(_, a)| !a.knows_late_pix() && a.sale_total.is_none())
    {
        let approved = by_ref.get(a.id.as_str()).map_or(0, |ps| {
            ps.iter().filter(|p| p.status == "aprovado").count() as u32
        });
        *per_sale.entry((*t, a.sale.as_str())).or_default() += approved;
    }
    for ((t, sale), n) in per_sale {
        if n > 1 {
            out.violations[1] += 1;
            out.notes
                .push(format!("(b) till {t} sale {sale}: {n} approved charges"));
        }
    }
    // (h): a divided sale's approved tenders, on the server and at the till, within its total;
    // paid at the till means paid on the server. A Pix paid after it was cancelled is no
    // tender's payment: (l) checks it is shown to give back.
    let late: BTreeSet<String> = match pix_rows(database, merchant).await {
        Ok((charges, _)) => charges
            .into_iter()
            .filter(|c| c.status == "recebido_apos_cancelamento")
            .map(|c| c.id)
            .collect(),
        Err(_) => BTreeSet::new(), // no Pix in this trial
    };
    let mut divided: BTreeMap<(usize, &str), (i64, i64, i64)> = BTreeMap::new();
    for (t, a) in attempts.iter().filter(|(_, a)| a.sale_total.is_some()) {
        let e = divided
            .entry((*t, a.sale.as_str()))
            .or_insert((a.sale_total.unwrap_or(0), 0, 0));
        e.1 += by_ref.get(a.id.as_str()).map_or(0, |ps| {
            ps.iter()
                .filter(|p| p.holds_money() && !late.contains(&p.id))
                .map(|p| p.valor)
                .sum::<i64>()
        });
        if a.state == "aprovado"
            && !matches!(
                a.captura.as_deref(),
                Some("desfazer" | "desfeita" | "expirada")
            )
        {
            e.2 += a.valor;
        }
    }
    for ((t, sale), (total, server, till)) in divided {
        out.divided[0] += 1;
        out.divided[1] += u32::from(till == total);
        if server > total || till > total || (till == total && server != total) {
            out.violations[7] += 1;
            out.notes.push(format!(
                "(h) till {t} sale {sale}: total {total}, approved {server} on the server, {till} at the till"
            ));
        }
    }
    // (i): every authorization captured or undone, on the server and at the till.
    for p in payments
        .iter()
        .filter(|p| p.captura.as_deref() == Some("pendente"))
    {
        out.violations[8] += 1;
        out.notes.push(format!(
            "(i) payment {} ({} centavos) still authorized on the server after the drain",
            p.id, p.valor
        ));
    }
    for (t, a) in attempts.iter().filter(|(_, a)| {
        matches!(
            a.captura.as_deref(),
            Some("pendente" | "capturar" | "desfazer")
        )
    }) {
        out.violations[8] += 1;
        out.notes.push(format!(
            "(i) till {t} tender {} left {} after the drain",
            a.id,
            a.captura.as_deref().unwrap_or("")
        ));
    }
    out.authorizations[0] += payments.iter().filter(|p| p.captura.is_some()).count() as u32;
    out.authorizations[1] += payments
        .iter()
        .filter(|p| p.captura.as_deref() == Some("capturada"))
        .count() as u32;
    out.authorizations[2] += payments
        .iter()
        .filter(|p| matches!(p.captura.as_deref(), Some("desfeita" | "expirada")))
        .count() as u32;
    // (d): both ways, and every charge has its payment.
    let ids: HashMap<&str, &AttemptRow> =
        attempts.iter().map(|(_, a)| (a.id.as_str(), a)).collect();
    // (d) for refunds: every outbox refund agrees with the server's, and back.
    match server_refunds(database, merchant).await {
        Ok(refunds) => {
            for (t, a) in attempts.iter().filter(|(_, a)| a.kind == "estorno") {
                let found: Vec<&RefundRow> = refunds
                    .iter()
                    .filter(|r| r.referencia.as_deref() == Some(a.id.as_str()))
                    .collect();
                let ok = match a.state.as_str() {
                    "aprovado" | "recusado" => {
                        found.len() == 1
                            && found[0].status == a.state
                            && found[0].valor == a.valor
                            && a.payment_id.as_deref() == Some(found[0].id.as_str())
                    }
                    _ => found.iter().all(|r| r.status != "aprovado"),
                };
                if !ok {
                    out.violations[3] += 1;
                    out.notes.push(format!(
                        "(d) till {t} refund {} ({}) has server refunds {found:?}",
                        a.id, a.state
                    ));
                }
            }
            for r in &refunds {
                let attempt = r.referencia.as_deref().and_then(|id| {
                    attempts
                        .iter()
                        .find(|(_, a)| a.id == id && a.kind == "estorno")
                });
                if attempt.is_none_or(|(_, a)| a.state != r.status) {
                    out.violations[3] += 1;
                    out.notes.push(format!(
                        "(d) server refund {} ({}) has attempt {:?}",
                        r.id,
                        r.status,
                        attempt.map(|(_, a)| &a.state)
                    ));
                }
            }
            out.refunds += refunds.iter().filter(|r| r.status == "aprovado").count() as u32;
        }
        Err(e) => {
            out.violations[3] += 1;
            out.notes
                .push(format!("(d) server refunds unreadable: {e}"));
        }
    }
    for (_, a) in attempts.iter().filter(|(_, a)| a.kind == "pagamento") {
        let found = by_ref.get(a.id.as_str()).cloned().unwrap_or_default();
        match a.state.as_str() {
            "aprovado" => {
                let ok = found.len() == 1
                    && found[0].status == "aprovado"
                    && found[0].valor == a.valor
                    && a.payment_id.as_deref() == Some(found[0].id.as_str());
                if !ok {
                    out.violations[3] += 1;
                    out.notes.push(format!(
                        "(d) approved attempt {} has server payments {found:?}",
                        a.id
                    ));
                }
            }
            "recusado" if !a.knows_late_pix() && found.iter().any(|p| p.status == "aprovado") => {
                out.violations[3] += 1;
                out.notes.push(format!(
                    "(d) declined attempt {} was approved on the server",
                    a.id
                ));
            }
            _ => {}
        }
    }
    for p in &payments {
        let attempt = p.referencia.as_deref().and_then(|r| ids.get(r));
        match attempt {
            Some(a) if a.state == p.status || a.knows_late_pix() => {}
            // A payment the till never heard of in its final form: a real charge it does not show.
            other => {
                out.violations[3] += 1;
                out.notes.push(format!(
                    "(d) server payment {} ({}) has attempt {:?}",
                    p.id,
                    p.status,
                    other.map(|a| &a.state)
                ));
            }
        }
    }
    let stored: BTreeSet<&str> = payments
        .iter()
        .filter(|p| p.meio == "cartao")
        .map(|p| p.cobranca_id.as_str())
        .collect();
    for (_, cobranca) in &ledger {
        if !stored.contains(cobranca.as_str()) {
            out.violations[3] += 1;
            out.notes
                .push(format!("(d) charge {cobranca} has no payment"));
        }
    }
    // (e)
    let text = std::fs::read_to_string(log).unwrap_or_default();
    // Injected: the crash fault, and PostgreSQL sessions ended by `pg_terminate_backend` (any
    // PostgreSQL trial's: they share one database), which a request then meets as a closed
    // connection and answers 503 retryable.
    let injected = [
        "fault: aborting the process",
        "SQLSTATE 57P01",
        "connection closed",
    ];
    for line in text.lines().filter(|l| l.contains("ERROR")) {
        if !injected.iter().any(|i| line.contains(i)) {
            out.violations[4] += 1;
            out.notes.push(format!("(e) {line}"));
        }
    }
}

/// (g): the provider's ledger, the server's Pix and the tills' Pix attempts agree.
async fn check_pix(
    out: &mut Outcome,
    database: &ApiDatabase,
    merchant: &str,
    tills: &[Till],
    ledger: &Value,
) {
    let found = pix_disagreements(&mut out.pix, database, merchant, tills, ledger).await;
    out.violations[6] += found.len() as u32;
    out.notes
        .extend(found.into_iter().map(|n| format!("(g) {n}")));
}

/// What (g) finds wrong; counts the trial's Pix into `pix`.
async fn pix_disagreements(
    pix: &mut [u32; 3],
    database: &ApiDatabase,
    merchant: &str,
    tills: &[Till],
    ledger: &Value,
) -> Vec<String> {
    let mut found = Vec::new();
    let mut violation = |note: String| found.push(note);
    let (charges, received) = match pix_rows(database, merchant).await {
        Ok(rows) => rows,
        Err(e) => return vec![format!("server Pix unreadable: {e}")],
    };
    let payments = match server_rows(database, None, merchant).await {
        Ok((_, payments)) => payments,
        Err(e) => return vec![format!("server payments unreadable: {e}")],
    };
    let by_txid: HashMap<&str, &PixChargeRow> =
        charges.iter().map(|c| (c.txid.as_str(), c)).collect();
    let cobs: Vec<&Value> = ledger["cobs"].as_array().into_iter().flatten().collect();
    let at_provider: BTreeSet<&str> = cobs.iter().filter_map(|c| c["txid"].as_str()).collect();
    // Charges: the provider's are the server's, and back.
    for cob in &cobs {
        let txid = cob["txid"].as_str().unwrap_or_default();
        let valor = cob["valor"]["original"]
            .as_str()
            .and_then(pix_provider::valor::parse);
        let Some(charge) = by_txid.get(txid) else {
            violation(format!(
                "charge {txid} at the provider is unknown to the server"
            ));
            continue;
        };
        if Some(charge.valor) != valor {
            violation(format!(
                "charge {txid}: {valor:?} at the provider, {} on the server",
                charge.valor
            ));
        }
        let paid: Vec<&str> = cob["pix"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["endToEndId"].as_str())
            .collect();
        let agrees = match paid.first() {
            Some(e2e) => {
                matches!(
                    charge.status.as_str(),
                    "aprovado" | "recebido_apos_cancelamento"
                ) && charge.e2eid.as_deref() == Some(*e2e)
            }
            None => matches!(charge.status.as_str(), "cancelado" | "expirado"),
        };
        if !agrees {
            violation(format!(
                "charge {txid} is {} ({:?}) on the server, {} with Pix {paid:?} at the provider",
                charge.status, charge.e2eid, cob["status"]
            ));
        }
    }
    for c in &charges {
        if !at_provider.contains(c.txid.as_str()) {
            violation(format!(
                "server charge {} ({}) is not at the provider",
                c.id, c.txid
            ));
        }
    }
    pix[0] += cobs.len() as u32;
    pix[1] += provider_pix(ledger).count() as u32;
    pix[2] += charges
        .iter()
        .filter(|c| c.status == "recebido_apos_cancelamento")
        .count() as u32;
    // Money: every Pix received is recorded once, as a payment with its amount.
    let recorded: HashMap<&str, &ReceivedRow> =
        received.iter().map(|r| (r.e2eid.as_str(), r)).collect();
    let as_payment: HashMap<&str, &PaymentRow> = payments
        .iter()
        .filter(|p| p.meio == "pix")
        .map(|p| (p.cobranca_id.as_str(), p))
        .collect();
    for (e2e, txid, valor) in provider_pix(ledger) {
        match (recorded.get(e2e), as_payment.get(e2e)) {
            (Some(r), Some(p)) if r.valor == valor && p.valor == valor && r.txid == txid => {}
            (r, p) => violation(format!(
                "Pix {e2e} of {valor} for {txid} is recorded as {r:?}, payment {p:?}"
            )),
        }
    }
    // Tills: each Pix attempt agrees with its charge; a Pix paid after it was closed is known.
    let by_ref: HashMap<&str, &PixChargeRow> = charges
        .iter()
        .filter_map(|c| Some((c.referencia.as_deref()?, c)))
        .collect();
    let mut referenced = BTreeSet::new();
    for (t, till) in tills.iter().enumerate() {
        let Ok(c) = rusqlite::Connection::open(&till.outbox) else {
            continue;
        };
        let Ok(rows) = c
            .prepare(
                "SELECT a.id, a.state, p.status, a.payment_id FROM attempts a LEFT JOIN pix p ON p.attempt_id = a.id
                  WHERE a.metodo = 'pix' AND a.kind = 'pagamento'",
            )
            .and_then(|mut st| {
                st.query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
        else {
            continue;
        };
        for (id, state, seen, payment_id) in rows {
            let charge = by_ref.get(id.as_str());
            if charge.is_some() {
                referenced.insert(id.clone());
            }
            let server = charge.map(|c| c.status.as_str());
            let agrees = match (state.as_str(), server) {
                ("aprovado", Some("aprovado")) => {
                    payment_id.as_deref() == charge.map(|c| c.id.as_str())
                }
                ("recusado", None | Some("cancelado" | "expirado")) => true,
                ("recusado", Some("recebido_apos_cancelamento")) => {
                    seen.as_deref() == Some("recebido_apos_cancelamento")
                }
                ("revisao", _) => true, // (c) judges it
                _ => false,
            };
            if !agrees {
                violation(format!(
                    "till {t} Pix attempt {id} is {state} (its Pix {seen:?}); the server's charge is {server:?}"
                ));
            }
        }
    }
    for c in &charges {
        if c.referencia
            .as_deref()
            .is_none_or(|r| !referenced.contains(r))
        {
            violation(format!(
                "server charge {} ({}) has no till attempt",
                c.id, c.status
            ));
        }
    }
    found
}

/// (l): every divided sale's money, as the server shows the sale (`GET /vendas/{sale}`), against
/// what was taken: what its card tenders hold (from the gateway's ledger, through the payments)
/// and the Pix received at the provider for its Pix tenders. `pago` is its card tenders' and the
/// Pix paid while their charge was open (`CONCLUIDA` at the provider), never more than its total;
/// `a_devolver` is the Pix paid after their charge was removed; nothing taken is unaccounted for.
#[allow(clippy::too_many_arguments)]
async fn check_sales(
    out: &mut Outcome,
    http: &reqwest::Client,
    servers: &[ApiProcess],
    api_key: &str,
    tills: &[Till],
    database: &ApiDatabase,
    merchant: &str,
    ledger: Option<&Value>,
) {
    let mut violation = |note: String| {
        out.violations[11] += 1;
        out.notes.push(format!("(l) {note}"));
    };
    // Each divided sale's tenders, from the tills' outboxes.
    let mut sales: BTreeMap<String, (i64, BTreeSet<String>)> = BTreeMap::new();
    for till in tills {
        let Ok(c) = rusqlite::Connection::open_with_flags(
            &till.outbox,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        ) else {
            continue;
        };
        let rows = c
            .prepare(
                "SELECT a.sale_id, s.total, a.id FROM attempts a JOIN sales s ON s.sale_id = a.sale_id
                  WHERE a.kind = 'pagamento' AND s.total IS NOT NULL",
            )
            .and_then(|mut st| {
                st.query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .unwrap_or_default();
        for (sale, total, attempt) in rows {
            sales
                .entry(sale)
                .or_insert_with(|| (total, BTreeSet::new()))
                .1
                .insert(attempt);
        }
    }
    if sales.is_empty() {
        return;
    }
    let payments = match server_rows(database, None, merchant).await {
        Ok((_, payments)) => payments,
        Err(e) => return violation(format!("server payments unreadable: {e}")),
    };
    let charges = pix_rows(database, merchant)
        .await
        .map(|(charges, _)| charges)
        .unwrap_or_default();
    // Per Pix charge at the provider: (paid while open, paid after removal), in centavos.
    let mut at_provider: HashMap<&str, (i64, i64)> = HashMap::new();
    for cob in ledger
        .and_then(|l| l["cobs"].as_array())
        .into_iter()
        .flatten()
    {
        let received: i64 = cob["pix"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["valor"].as_str().and_then(pix_provider::valor::parse))
            .sum();
        let removed = cob["status"]
            .as_str()
            .is_some_and(|s| s.starts_with("REMOVIDA"));
        at_provider.insert(
            cob["txid"].as_str().unwrap_or_default(),
            if removed {
                (0, received)
            } else {
                (received, 0)
            },
        );
    }
    for (n, (sale, (total, tenders))) in sales.iter().enumerate() {
        let card: i64 = payments
            .iter()
            .filter(|p| p.referencia.as_ref().is_some_and(|r| tenders.contains(r)))
            .filter(|p| p.meio == "cartao" && p.holds_money())
            .map(|p| p.valor)
            .sum();
        let (pix_paid, pix_late) = charges
            .iter()
            .filter(|c| c.referencia.as_ref().is_some_and(|r| tenders.contains(r)))
            .filter_map(|c| at_provider.get(c.txid.as_str()))
            .fold((0, 0), |t, p| (t.0 + p.0, t.1 + p.1));
        let url = servers[n % servers.len()].url();
        let shown: Value = match http
            .get(format!("{url}/vendas/{sale}"))
            .bearer_auth(api_key)
            .timeout(Duration::from_secs(5))
            .send()
            .await
        {
            Ok(r) if r.status() == reqwest::StatusCode::NOT_FOUND => {
                // No tender reached the server: nothing may have been taken.
                if card + pix_paid + pix_late > 0 {
                    violation(format!(
                        "sale {sale}: {card} by card and {} by Pix taken, the server has no sale",
                        pix_paid + pix_late
                    ));
                }
                continue;
            }
            Ok(r) => match r.json().await {
                Ok(v) => v,
                Err(e) => {
                    violation(format!("sale {sale}: unreadable: {e}"));
                    continue;
                }
            },
            Err(e) => {
                violation(format!("sale {sale}: not read: {e}"));
                continue;
            }
        };
        let (pago, a_devolver) = (
            shown["pago"].as_i64().unwrap_or(-1),
            shown["a_devolver"].as_i64().unwrap_or(-1),
        );
        out.divided[2] += u32::from(pix_late > 0);
        if pago > *total || pago != card + pix_paid || a_devolver != pix_late {
            violation(format!(
                "sale {sale} (total {total}): the server shows paid {pago}, to give back {a_devolver}; taken {card} by card, {pix_paid} by Pix while open, {pix_late} by Pix after its removal"
            ));
        }
    }
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
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async move {
        let needs_pg = args.store != StoreChoice::Sqlite;
        if needs_pg {
            let _ = Command::new("psql")
                .arg(format!("{}/postgres", args.pg_url))
                .args(["-qtAc", &format!("CREATE DATABASE {}", pg_database())])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
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
        // key (its charges, callbacks and ledger), and trials on one PostgreSQL database may
        // poll each other's charges there, as replicas of one deployment would.
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
        if needs_pg {
            let _ = Command::new("psql")
                .arg(format!("{}/postgres", args.pg_url))
                .args([
                    "-qtAc",
                    &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", pg_database()),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
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
        "Power cuts: {} ({} of a server, {} of a till) in {on_disks} trials: {} files put back, {} pages ({} bytes) of unsynced writes dropped; {} outcomes went back to pendente at a till, {} claims lost at a server",
        power.server + power.tills,
        power.server,
        power.tills,
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
