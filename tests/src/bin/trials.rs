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
//! an hour back or ahead, or past the server's 24 h key retention). Then the faults stop, every till restarts, the queues
//! drain, and the checker reads the databases themselves:
//!
//! - (a) at most one ledger charge per (merchant, Idempotency-Key);
//! - (b) at most one approved charge per sale;
//! - (c) every attempt an outbox accepted is final, or in `revisao` with a reason: none lost;
//! - (d) every outbox `aprovado` has exactly one server payment with its amount, every server
//!   payment its attempt in the same state, and every ledger charge its payment;
//! - (e) no server error but the injected ones;
//! - (f) every outbox passes `PRAGMA integrity_check`.
//!
//! `trials --trials N --seed S [--store sqlite|postgres|mixed] [--jobs J]`; trial `i` runs seed
//! `S + i`, and `--seed S --trials 1` replays it with the same schedule.

use pagar_testkit::{ApiDatabase, ApiOptions, ApiProcess, Fault, FaultProxy, ADMIN_TOKEN};
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

const INVARIANTS: [&str; 6] = [
    "(a) one charge per key",
    "(b) one approved charge per sale",
    "(c) every attempt final or in review",
    "(d) outbox and server reconcile",
    "(e) no server error but injected",
    "(f) outbox integrity",
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
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        trials: 100,
        seed: 1,
        store: StoreChoice::Mixed,
        jobs: std::thread::available_parallelism().map_or(2, |n| n.get()) * 2,
        pg_url: std::env::var("PAGAR_TRIALS_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into()),
        verbose: false,
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
        }
    }
}

fn draw(seed: u64, store: StoreChoice) -> Plan {
    let mut rng = StdRng::seed_from_u64(seed);
    let postgres = match store {
        StoreChoice::Sqlite => false,
        StoreChoice::Postgres => true,
        StoreChoice::Mixed => rng.gen_bool(0.3),
    };
    let replicas = postgres.then(|| rng.gen_range(1..=3));
    let window_ms = rng.gen_range(300..=1_200);
    let slow_gateway_ms = if rng.gen_bool(0.2) { 2_500 } else { 200 };
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
    }
}

/// A running till.
struct Till {
    outbox: PathBuf,
    child: Option<Child>,
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
    let exe = std::env::current_exe().expect("the runner knows its path");
    exe.with_file_name("trial-client")
}

/// libfaketime, which shifts a process's wall clock (not its monotonic clock, so its timers run).
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

fn start_till(outbox: &Path, url: &str, key: &str, plan: &str, drain_secs: u64) -> Child {
    start_till_at(outbox, url, key, plan, drain_secs, 0)
}

/// A till whose wall clock is `shift_secs` off (0: the real clock).
fn start_till_at(
    outbox: &Path,
    url: &str,
    key: &str,
    plan: &str,
    drain_secs: u64,
    shift_secs: i64,
) -> Child {
    let mut command = Command::new(trial_client());
    if shift_secs != 0 {
        command
            .env("LD_PRELOAD", FAKETIME)
            .env("FAKETIME", format!("{shift_secs:+}s"))
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    }
    command
        .arg(outbox)
        .arg(url)
        .arg(key)
        .arg(if plan.is_empty() { "-" } else { plan })
        .arg(drain_secs.to_string())
        .env("RUST_LOG", "off")
        .stdout(Stdio::null())
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
    violations: [u32; 6],
    notes: Vec<String>,
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

async fn run_trial(plan: Plan, pg_url: String, root: PathBuf) -> Outcome {
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
    let database = match plan.replicas {
        None => ApiDatabase::Sqlite(dir.path().join("api.db")),
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
    let mut tills: Vec<Till> = plan
        .tills
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let outbox = dir.path().join(format!("till{i}.db"));
            let child = start_till(&outbox, &url, &key, p, 10);
            Till {
                outbox,
                child: Some(child),
            }
        })
        .collect();
    let http = reqwest::Client::new();

    // The fault window.
    let started = Instant::now();
    let mut killed: BTreeSet<usize> = BTreeSet::new();
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
                    tills[*i].child =
                        Some(start_till_at(&tills[*i].outbox, &url, &key, "", 10, *shift));
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
        }
        // A crash fault takes a server down by itself: bring it back, as a supervisor would.
        for (i, s) in servers.iter_mut().enumerate() {
            if !killed.contains(&i) && !s.is_running() {
                revive(s, &mut out.notes);
            }
        }
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
    let deadline = Instant::now() + Duration::from_secs(30);
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
                till.child = Some(start_till(&till.outbox, &url, &key, "", 5));
            }
        }
        if all_done || Instant::now() > deadline {
            if !all_done {
                out.notes.push("tills did not drain in 30 s".into());
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
    for s in servers.iter_mut() {
        s.kill();
    }

    check(&mut out, &database, &merchant, &tills, &log).await;
    out
}

/// True when every attempt of the outbox is settled (what the till waits for): a payment in
/// review counts only once its key was cancelled or its payment found.
fn drained(outbox: &Path) -> bool {
    let Ok(c) = rusqlite::Connection::open(outbox) else {
        return false;
    };
    c.query_row(
        "SELECT count(*) FROM attempts WHERE state = 'pendente'
             OR (state = 'revisao' AND (review_checked_at IS NULL OR kind = 'pagamento'))",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n == 0)
    .unwrap_or(false)
}

#[derive(Debug)]
struct AttemptRow {
    id: String,
    sale: String,
    state: String,
    valor: i64,
    payment_id: Option<String>,
    last_error: Option<String>,
}

#[derive(Debug)]
struct PaymentRow {
    id: String,
    status: String,
    valor: i64,
    referencia: Option<String>,
    cobranca_id: String,
}

async fn server_rows(
    database: &ApiDatabase,
    merchant: &str,
) -> Result<(Vec<(String, String)>, Vec<PaymentRow>), String> {
    match database {
        ApiDatabase::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
            let ledger = c
                .prepare(
                    "SELECT downstream_key, cobranca_id FROM gateway_ledger WHERE merchant = ?1 AND status <> 'anulado'",
                )
                .and_then(|mut st| {
                    st.query_map([merchant], |r| Ok((r.get(0)?, r.get(1)?)))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.to_string())?;
            let payments = c
                .prepare("SELECT id, status, valor, referencia, cobranca_id FROM payments WHERE merchant = ?1")
                .and_then(|mut st| {
                    st.query_map([merchant], |r| {
                        Ok(PaymentRow {
                            id: r.get(0)?,
                            status: r.get(1)?,
                            valor: r.get(2)?,
                            referencia: r.get(3)?,
                            cobranca_id: r.get(4)?,
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
                .query("SELECT id, status, valor, referencia, cobranca_id FROM payments WHERE merchant = $1", &[&merchant])
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| PaymentRow {
                    id: r.get(0),
                    status: r.get(1),
                    valor: r.get(2),
                    referencia: r.get(3),
                    cobranca_id: r.get(4),
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
    merchant: &str,
    tills: &[Till],
    log: &Path,
) {
    let (ledger, payments) = match server_rows(database, merchant).await {
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
            .prepare("SELECT id, sale_id, state, valor, payment_id, last_error FROM attempts")
            .and_then(|mut st| {
                st.query_map([], |r| {
                    Ok(AttemptRow {
                        id: r.get(0)?,
                        sale: r.get(1)?,
                        state: r.get(2)?,
                        valor: r.get(3)?,
                        payment_id: r.get(4)?,
                        last_error: r.get(5)?,
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
    // (b): approved charges per sale, counted on the server.
    let mut per_sale: BTreeMap<(usize, &str), u32> = BTreeMap::new();
    for (t, a) in &attempts {
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
    // (d): both ways, and every charge has its payment.
    let ids: HashMap<&str, &AttemptRow> =
        attempts.iter().map(|(_, a)| (a.id.as_str(), a)).collect();
    for (_, a) in &attempts {
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
            "recusado" if found.iter().any(|p| p.status == "aprovado") => {
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
            Some(a) if a.state == p.status => {}
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
    let stored: BTreeSet<&str> = payments.iter().map(|p| p.cobranca_id.as_str()).collect();
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

fn main() -> std::process::ExitCode {
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
        let started = Instant::now();
        let jobs = Arc::new(tokio::sync::Semaphore::new(args.jobs.max(1)));
        let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let total = args.trials;
        let mut handles = Vec::new();
        for i in 0..args.trials {
            let plan = draw(args.seed + i, args.store);
            if args.verbose {
                println!("seed {}: {plan:?}", plan.seed);
            }
            let permit = jobs.clone().acquire_owned().await.expect("semaphore");
            let (pg, root) = (args.pg_url.clone(), root.clone());
            let done = done.clone();
            handles.push(tokio::spawn(async move {
                let out = run_trial(plan, pg, root).await;
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
        report(&results, started.elapsed(), args.verbose)
    })
}

fn report(results: &[Outcome], took: Duration, verbose: bool) -> std::process::ExitCode {
    let mut by_kind: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    let mut by_store: BTreeMap<&str, u32> = BTreeMap::new();
    let mut totals = [0u32; 6];
    let mut failing = Vec::new();
    for r in results {
        *by_store.entry(r.store.as_str()).or_default() += 1;
        let bad = r.violations.iter().sum::<u32>() > 0 || !r.notes.is_empty();
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
    println!("\n{:<34} {:>8}", "store", "trials");
    for (s, n) in &by_store {
        println!("{s:<34} {n:>8}");
    }
    println!("\n{:<40} {:>10}", "invariant", "violations");
    for (name, n) in INVARIANTS.iter().zip(totals) {
        println!("{name:<40} {n:>10}");
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
