//! `make bench` (app part): time from process start to the first painted window, and the app's
//! memory idle and after 100 and 1 000 payments (three sessions, the one with the median growth
//! reported), then every 1 000 more up to 3 000. References
//! measured in the same run: a bare Tauri window on the same stack (the `blank_window` example,
//! built by `make bench`) started the same way, and the app's own figure after 100 payments; for
//! the growth, the same bare window making the IPC traffic the app's page made in its first 100
//! sales (counted in the page), 1 000 sales' worth, with no page work. Runs
//! the real app under Xvfb through tauri-driver (the GUI tests' harness); the sales are made as a
//! cashier makes them, by the amount field, the Pagar button and Nova venda. Prints a line per
//! target; asserts nothing.
//!
//! Memory is the proportional set size (PSS) of the process *and its children*: WebKitGTK runs
//! the page in a WebKitWebProcess and the network in a WebKitNetworkProcess, where a growing
//! page would show, and PSS shares the libraries they all map instead of counting them thrice.
//! The figures after 100 and 1 000 payments (and each later thousand) are read after WebKit's own
//! memory-pressure signal ([`Pressure`]), the median of three samples: what the app holds, not
//! what its garbage collector has not yet got round to collecting.

#[path = "../tests/gui/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "startup/memory.rs"]
mod memory;

use harness::{app_pid, GuiApp, PlainWindow};
use memory::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Starts of the app on one data folder, for the first painted frame.
const RUNS: usize = 10;
const WARM: usize = 100;
const PAYMENTS: usize = 1_000;
/// Sales per WebDriver script (a divisor of `WARM`): each script is a few seconds of selling.
/// `APP_BENCH_BATCH` sets another divisor (up to `WARM`: a script must end within WebDriver's
/// 30 s), to see whether the harness's scripts are what grows.
const BATCH: usize = 25;

fn batch() -> usize {
    std::env::var("APP_BENCH_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&b: &usize| b > 0 && WARM.is_multiple_of(b))
        .unwrap_or(BATCH)
}

/// Sells `n` sales at the till as a cashier does, in the page: types the amount, presses Pagar,
/// waits for "Pagamento aprovado", presses Nova venda, waits for the next sale. One WebDriver
/// script per `BATCH` sales, so that the harness's own scripts (a WebDriver command per sale
/// would be 1 000 compiled scripts in the web process) are not what the growth measures.
const CASHIER: &str = r#"
const [n, first, done] = arguments;
const $ = (id) => document.getElementById(id);
// Waits for the screen, not a timer: woken by the status and the button changing.
const until = (ok, what) => new Promise((resolve, reject) => {
  if (ok()) return resolve();
  const seen = new MutationObserver(() => {
    if (ok()) { seen.disconnect(); clearTimeout(late); resolve(); }
  });
  const late = setTimeout(() => {
    seen.disconnect();
    reject(new Error(`${what}: ${$("status-label").textContent}`));
  }, 10000);
  for (const id of ["status", "pagar"]) seen.observe($(id), { attributes: true });
});
(async () => {
  for (let i = first; i < first + n; i++) {
    $("valor").value = `${1 + i},${String(i % 100).padStart(2, "0")}`;
    $("pagar").click();
    await until(() => $("status").dataset.state === "aprovado", `sale ${i} approved`);
    $("nova-venda").click();
    await until(() => $("status").dataset.state === "idle" && !$("pagar").disabled, `sale ${i + 1} open`);
  }
})().then(() => done({ ok: n }), (e) => done({ err: String(e) }));
"#;

/// Counts the page's IPC calls from here on, per command, with the bytes of their arguments and
/// answers: Tauri's `invoke` posts each call to `ipc://localhost/<command>` by `fetch` (its
/// custom-protocol IPC), which is the one place a page script can see them all.
const COUNT_IPC: &str = r#"
const [done] = arguments;
const original = window.fetch;
const counts = {};
window.fetch = function (url, init) {
  const u = String(url);
  if (!u.startsWith("ipc:") && !u.includes("ipc.localhost")) return original.apply(this, arguments);
  const cmd = decodeURIComponent(new URL(u).pathname.slice(1));
  const c = (counts[cmd] ||= { n: 0, args: 0, reply: 0 });
  c.n += 1;
  const body = init && init.body;
  c.args += typeof body === "string" ? body.length : (body && body.byteLength) || 0;
  return original.apply(this, arguments).then((r) => {
    r.clone().arrayBuffer().then((b) => { c.reply += b.byteLength; });
    return r;
  });
};
window.__benchIpc = { counts, restore: () => { window.fetch = original; } };
done(true);
"#;

/// Stops counting and answers the counts.
const TAKE_IPC: &str = r#"
const [done] = arguments;
window.__benchIpc.restore();
done(window.__benchIpc.counts);
"#;

/// Prints the figure beside its target.
fn target(what: &str, figure: f64, unit: &str, goal: f64) {
    let verdict = if figure <= goal { "met" } else { "NOT met" };
    println!("{what:<56} {figure:>7.1} {unit:<4} target <= {goal:.1} {unit}  {verdict}");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Starts the app on `dir`, and its milliseconds from process start to its first painted frame.
/// Process start to the first painted frame, and of that, process start to the page's navigation
/// (the window and its web process made; the rest is the page's own start), as the app measured.
async fn first_paint(dir: &Path) -> (f64, f64) {
    let app = GuiApp::launch(dir).await;
    let mut ms = None;
    for _ in 0..50 {
        let info = app.invoke("app_info", json!({})).await;
        let ok = &info["ok"];
        ms = ok["first_paint_ms"]
            .as_f64()
            .map(|p| (p, ok["navigation_ms"].as_f64().unwrap_or(f64::NAN)));
        if ms.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.close().await;
    ms.expect("the window reported its first paint")
}

#[tokio::main]
async fn main() {
    // A till opens on its data folder every day: the first start in a new folder (which makes
    // the sandbox's databases and certificates) is reported apart, then `RUNS` starts on it.
    let till = tempfile::tempdir().unwrap();
    let (first_start, _) = first_paint(till.path()).await;
    let mut paints = Vec::new();
    for _ in 0..RUNS {
        paints.push(first_paint(till.path()).await);
    }

    let blank = blank_window();
    assert!(
        blank.exists(),
        "{} is missing: cargo build --release -p pagar --example blank_window (make bench does)",
        blank.display()
    );
    let (mut bare, mut plain) = (Vec::new(), Vec::new());
    let (mut bare_by, mut plain_by) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let (m, by) = plain_idle(&blank).await;
        bare.push(m);
        bare_by = by;
        let (m, by) = plain_idle(Path::new(env!("CARGO_BIN_EXE_pagar"))).await;
        plain.push(m);
        plain_by = by;
    }

    // The app whose memory grows with its sales: started inside the memory cgroup the
    // pressure signal works through, `SESSIONS` times (one session's growth swings by a few MiB
    // from run to run): the session with the median growth is reported, the others' growth
    // beside it. Sales past the measured ones only in the first session.
    let pressure = Pressure::join();
    // More sales after the measured ones (`APP_BENCH_MORE`, 2 000 unless set), printed per
    // thousand: whether memory keeps growing or levels off. A diagnosis, not a target.
    let more: usize = std::env::var("APP_BENCH_MORE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let mut sessions = Vec::new();
    for i in 0..SESSIONS {
        sessions.push(memory_session(pressure.as_ref(), if i == 0 { more } else { 0 }).await);
    }
    let later = std::mem::take(&mut sessions[0].later);
    let charged: i64 = sessions.iter().map(|s| s.charged).sum();
    let growths: Vec<f64> = sessions.iter().map(Session::growth).collect();
    sessions.sort_by(|a, b| a.growth().total_cmp(&b.growth()));
    let Session {
        idle,
        warm,
        warm_js,
        warm_elements,
        ipc,
        after,
        after_js,
        after_elements,
        ..
    } = sessions.swap_remove(SESSIONS / 2);
    let signalled = pressure.is_some();
    let traffic = bare_traffic(pressure.as_ref(), &blank, &ipc).await;
    drop(pressure);

    let navigation: Vec<f64> = paints.iter().map(|p| p.1).collect();
    let paints: Vec<f64> = paints.iter().map(|p| p.0).collect();
    let paint = median(paints.clone());
    let pick = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| median(v.iter().map(f).collect());
    let (bare_rss, bare_pss) = (pick(&bare, |m| m.0), pick(&bare, |m| m.1));
    let (plain_rss, plain_pss) = (pick(&plain, |m| m.0), pick(&plain, |m| m.1));

    println!();
    println!("pagar app benchmark (optimised bench build, Xvfb, {RUNS} launches)");
    println!("first painted window: median {paint:.0} ms (runs: {paints:?}); the first start in a new data folder {first_start:.0} ms");
    println!("  of which process start to the page's navigation (the window and its web process made; the rest is the page's own start): {navigation:?}");
    println!("memory, MiB: PSS of the process and its WebKit children (RSS of the process alone)");
    println!("  bare Tauri window, empty page (reference, median of 3)   {bare_pss:6.1}  ({bare_rss:6.1})");
    println!("  Pagar idle, no WebDriver (median of 3)                   {plain_pss:6.1}  ({plain_rss:6.1})");
    println!(
        "  Pagar idle under WebDriver                               {:6.1}  ({:6.1})",
        idle.1, idle.0
    );
    if signalled {
        println!("  after a memory-pressure signal, median of {PRESSURE_SAMPLES} samples (before the first signal):");
    } else {
        println!("  no memory-pressure signal (no writable cgroup v1 memory controller): one look each, median of {PRESSURE_SAMPLES}");
    }
    println!(
        "  Pagar after {WARM} payments under WebDriver (reference)     {:6.1}  ({:6.1})  (before: {:.1})",
        warm.0 .1, warm.0 .0, warm.2
    );
    println!(
        "  Pagar after {PAYMENTS} payments under WebDriver                {:6.1}  ({:6.1})  (before: {:.1})",
        after.0 .1, after.0 .0, after.2
    );
    println!("where it is (PSS MiB: total, anonymous, file-backed), idle: the bare window's third run -> Pagar's:");
    compare(&bare_by, &plain_by);
    println!("where it is (PSS MiB: total, anonymous, file-backed), after {WARM} -> after {PAYMENTS} payments:");
    compare(&warm.1, &after.1);
    println!("the page's elements: {warm_elements} after {WARM} payments, {after_elements} after {PAYMENTS}; sales per WebDriver script: {}", batch());
    println!(
        "the page's JavaScript heap, live after JavaScriptCore's last full collection (its own log, JSC_logGC): {} after {WARM} payments, {} after {PAYMENTS}",
        mib(warm_js),
        mib(after_js)
    );
    println!(
        "the page's IPC calls in the first {WARM} sales, per sale (calls; argument and answer bytes per call):"
    );
    for c in traffic.calls.as_array().into_iter().flatten() {
        println!(
            "  {:<14} {:6.2} calls {:6} {:6}",
            c["cmd"].as_str().unwrap_or("?"),
            c["n"].as_f64().unwrap_or(0.0) / WARM as f64,
            c["args"],
            c["reply"]
        );
    }
    match &traffic.memory {
        Some((warm_bare, after_bare, fell_back)) => {
            println!(
                "  a bare Tauri window making that traffic alone (IPC by {}): after {WARM} sales {:.1}, after {PAYMENTS} {:.1} MiB (+{:.1}); where it is:",
                if *fell_back { "postMessage: its custom protocol failed" } else { "custom protocol, as Pagar's" },
                warm_bare.0 .1,
                after_bare.0 .1,
                after_bare.0 .1 - warm_bare.0 .1
            );
            compare(&warm_bare.1, &after_bare.1);
        }
        None => {
            println!("  a bare Tauri window making that traffic alone: it did not report its sales")
        }
    }
    let mut before = &after.1;
    for (n, pss, by, js) in &later {
        println!(
            "after {n} payments (APP_BENCH_MORE): {pss:.1} MiB (the page's JavaScript heap {}); from the previous figure:",
            mib(*js)
        );
        compare(before, by);
        before = by;
    }
    println!(
        "ledger charges after the payments: {charged} ({SESSIONS} sessions of {PAYMENTS}, {more} more in the first); growth from {WARM} to {PAYMENTS} payments in each session: {}",
        growths
            .iter()
            .map(|g| format!("{g:+.1} MiB"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    target(
        "startup to the first painted frame (median)",
        paint,
        "ms",
        500.0,
    );
    target(
        "idle, against the bare window + 20 MiB",
        plain_pss,
        "MiB",
        bare_pss + 20.0,
    );
    target(
        &format!("after {PAYMENTS} payments, against {WARM} payments + 5 MiB"),
        after.0 .1,
        "MiB",
        warm.0 .1 + 5.0,
    );
    let web_growth = web_anonymous(&after.1) - web_anonymous(&warm.1);
    if let Some((warm_bare, after_bare, _)) = &traffic.memory {
        let calls: f64 = traffic
            .calls
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["n"].as_f64().unwrap_or(0.0))
            .sum();
        println!(
            "limit, memory after {PAYMENTS} payments: Pagar's page makes {:.1} IPC calls a sale; those calls alone, made by a bare Tauri window with no page work, grow it {:.1} MiB from {WARM} to {PAYMENTS} sales (its web process {:+.1} MiB anonymous); Pagar grows {:.1} MiB (its web process {:+.1} MiB anonymous, the app's own process {:+.1})",
            calls / WARM as f64,
            after_bare.0 .1 - warm_bare.0 .1,
            web_anonymous(&after_bare.1) - web_anonymous(&warm_bare.1),
            after.0 .1 - warm.0 .1,
            web_growth,
            after.1.first().map_or(0.0, |p| p.1[1]) - warm.1.first().map_or(0.0, |p| p.1[1]),
        );
    }
    // The page's own share of the web process's growth does not depend on the bare window.
    if let (Some(from), Some(to)) = (warm_js, after_js) {
        println!(
            "limit, memory after {PAYMENTS} payments, the web process: the page's JavaScript heap (live after a full collection) went {from:.1} -> {to:.1} MiB ({:+.1}); the other {:+.1} MiB of its anonymous growth is WebKit's own memory outside the JavaScript heap",
            to - from,
            web_growth - (to - from),
        );
    }
}

/// A later thousand's figures ([`Session::later`]).
type Later = (usize, f64, Vec<(String, [f64; 3])>, Option<f64>);

/// App sessions the memory figures are the median of.
const SESSIONS: usize = 3;

/// One session of the app on a fresh data folder: idle, after `WARM` and `PAYMENTS` sales (and
/// each thousand of `more` sales after), as [`after_pressure`] reads it.
struct Session {
    idle: (f64, f64),
    warm: Memory,
    warm_js: Option<f64>,
    warm_elements: u64,
    /// The page's IPC calls over its first `WARM` sales ([`COUNT_IPC`]).
    ipc: serde_json::Value,
    after: Memory,
    after_js: Option<f64>,
    after_elements: u64,
    /// Each later thousand: sales, PSS, where it is, the page's JavaScript heap.
    later: Vec<Later>,
    charged: i64,
}

impl Session {
    /// PSS from `WARM` to `PAYMENTS` sales, MiB.
    fn growth(&self) -> f64 {
        self.after.0 .1 - self.warm.0 .1
    }
}

async fn memory_session(pressure: Option<&Pressure>, more: usize) -> Session {
    let dir = tempfile::tempdir().unwrap();
    // JavaScriptCore logs each collection of the page's heap to the session's log (the web
    // process inherits the app's environment and stderr): the live JavaScript heap after a
    // full collection, read at each mark, beside the process's memory.
    let gc_log = dir.path().join("session.log");
    let app = GuiApp::launch_with(
        dir.path(),
        &[
            ("JSC_logGC", "1"),
            ("STDERR_FILE", &gc_log.to_string_lossy()),
        ],
    )
    .await;
    let pid = app_pid(dir.path()).expect("the app is running");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = (rss_mib(pid), tree_pss_mib(pid));
    let mut warm = ((0.0, 0.0), Vec::new(), 0.0);
    let mut warm_elements = 0;
    let mut warm_js = None;
    let mut sold = 0;
    let mut ipc = json!({});
    assert_eq!(app.execute_async(COUNT_IPC, json!([])).await, true);
    while sold < PAYMENTS {
        if sold == WARM {
            ipc = app.execute_async(TAKE_IPC, json!([])).await;
            settle(&app).await;
            warm = after_pressure(pressure, pid).await;
            warm_js = js_heap_mib(&gc_log);
            warm_elements = elements(&app).await;
        }
        sold = sell(&app, sold).await;
    }
    settle(&app).await;
    let after = after_pressure(pressure, pid).await;
    let after_js = js_heap_mib(&gc_log);
    let after_elements = elements(&app).await;
    let mut later = Vec::new();
    while sold < PAYMENTS + more {
        sold = sell(&app, sold).await;
        if (sold - PAYMENTS).is_multiple_of(1_000) {
            settle(&app).await;
            let ((_, pss), by, _) = after_pressure(pressure, pid).await;
            later.push((sold, pss, by, js_heap_mib(&gc_log)));
        }
    }
    let charged = app.ledger_rows();
    app.close().await;
    Session {
        idle,
        warm,
        warm_js,
        warm_elements,
        ipc,
        after,
        after_js,
        after_elements,
        later,
        charged,
    }
}

/// The IPC traffic of Pagar's page, made by a bare window (`blank_window`'s `BLANK_TRAFFIC`): the
/// plan's calls, and the window's memory after `WARM` and `PAYMENTS` sales' worth of it, with
/// whether its IPC fell back to `postMessage`; `None` when it did not get there.
struct Traffic {
    calls: serde_json::Value,
    memory: Option<(Memory, Memory, bool)>,
}

/// What [`after_pressure`] answers.
type Memory = ((f64, f64), Vec<(String, [f64; 3])>, f64);

/// Makes `counted` (the page's IPC calls per command over `WARM` sales, from [`COUNT_IPC`]) in
/// a bare window, and measures that window as the app is measured.
async fn bare_traffic(
    pressure: Option<&Pressure>,
    blank: &Path,
    counted: &serde_json::Value,
) -> Traffic {
    let mut calls: Vec<serde_json::Value> = counted
        .as_object()
        .into_iter()
        .flatten()
        .map(|(cmd, c)| {
            let n = c["n"].as_u64().unwrap_or(0).max(1);
            // The bare page's calls wrap the padding: {"pad":"…","reply":N} and {"pad":"…"}.
            json!({
                "cmd": cmd,
                "n": c["n"],
                "args": (c["args"].as_u64().unwrap_or(0) / n).saturating_sub(20),
                "reply": (c["reply"].as_u64().unwrap_or(0) / n).saturating_sub(10),
            })
        })
        .collect();
    calls.sort_by_key(|c| std::cmp::Reverse(c["n"].as_u64()));
    let calls = serde_json::Value::Array(calls);
    let plan = json!({ "per": WARM, "marks": [WARM, PAYMENTS], "calls": calls });
    let dir = tempfile::tempdir().unwrap();
    let window = PlainWindow::launch_with(
        blank,
        dir.path(),
        &[("BLANK_TRAFFIC".into(), plan.to_string())],
        Duration::from_secs(2),
    )
    .await;
    let (Some(pid), mut marks, mut fell_back) = (window.pid, Vec::new(), false) else {
        return Traffic {
            calls,
            memory: None,
        };
    };
    for mark in [WARM, PAYMENTS] {
        let mut reached = false;
        for _ in 0..600 {
            let sold = std::fs::read_to_string(dir.path().join("sold")).unwrap_or_default();
            let mut words = sold.split_whitespace();
            if words.next() == Some(mark.to_string().as_str()) {
                fell_back |= words.next() == Some("true");
                reached = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if !reached {
            return Traffic {
                calls,
                memory: None,
            };
        }
        marks.push(after_pressure(pressure, pid).await);
        std::fs::write(dir.path().join(format!("go-{mark}")), "").unwrap();
    }
    let after = marks.pop().expect("two marks");
    let warm = marks.pop().expect("two marks");
    Traffic {
        calls,
        memory: Some((warm, after, fell_back)),
    }
}

/// Sells the next [`batch`] sales after the `sold` already sold; returns how many are sold then.
async fn sell(app: &GuiApp, sold: usize) -> usize {
    let n = batch();
    let reply = app.execute_async(CASHIER, json!([n, sold])).await;
    assert_eq!(reply["ok"], n, "{reply}");
    sold + n
}

/// How many elements the page holds: whether what grows is the page's own content.
async fn elements(app: &GuiApp) -> u64 {
    let reply = app
        .execute_async(
            "arguments[0](document.getElementsByTagName('*').length);",
            json!([]),
        )
        .await;
    reply.as_u64().unwrap_or(0)
}

/// Waits until the queue is empty (every payment answered), at most 30 s.
async fn settle(app: &GuiApp) {
    for _ in 0..300 {
        let snap = app.invoke("attempts", json!({})).await;
        if snap["ok"]["queue"]["count"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
