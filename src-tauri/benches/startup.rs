//! `make bench` (app part): time from process start to the first painted window, and resident
//! memory after 100 payments. References measured in the same run: the idle memory of the same
//! window, and a bare Tauri window on the same stack (the `blank_window` example, built by
//! `make bench`) started the same way. Runs the real app under Xvfb through tauri-driver (the GUI
//! tests' harness). Prints; asserts nothing.

#[path = "../tests/gui/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::{app_pid, GuiApp, PlainWindow};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

const RUNS: usize = 5;
const PAYMENTS: usize = 100;

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// The `blank_window` example next to the bench's own binary (`target/release/examples/`).
fn blank_window() -> PathBuf {
    let exe = Path::new(env!("CARGO_BIN_EXE_pagar"));
    exe.parent()
        .expect("the binary's folder")
        .join("examples/blank_window")
}

/// Resident memory of `binary` idle after its window opened, started without WebDriver.
async fn plain_idle_rss(binary: &Path) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let window = PlainWindow::launch(binary, dir.path(), Duration::from_secs(6)).await;
    let pid = window
        .pid
        .unwrap_or_else(|| panic!("{} is running", binary.display()));
    rss_mib(pid)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let mut paints = Vec::new();
    for _ in 0..RUNS {
        let dir = tempfile::tempdir().unwrap();
        let app = GuiApp::launch(dir.path()).await;
        let mut ms = None;
        for _ in 0..50 {
            ms = app.invoke("app_info", json!({})).await["ok"]["first_paint_ms"].as_f64();
            if ms.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        paints.push(ms.expect("the window reported its first paint"));
        app.close().await;
    }

    let blank = blank_window();
    assert!(
        blank.exists(),
        "{} is missing: cargo build --release -p pagar --example blank_window (make bench does)",
        blank.display()
    );
    let mut bare = Vec::new();
    let mut plain = Vec::new();
    for _ in 0..3 {
        bare.push(plain_idle_rss(&blank).await);
        plain.push(plain_idle_rss(Path::new(env!("CARGO_BIN_EXE_pagar"))).await);
    }

    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    let pid = app_pid(dir.path()).expect("the app is running");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = rss_mib(pid);
    for i in 0..PAYMENTS {
        // Sales of the bench's own numbering: `new_sale` waits for the open sale to settle.
        let sale = format!("venda-bench-{i}");
        let valor = format!("{},{:02}", 1 + i, i % 100);
        let reply = app
            .invoke(
                "pay",
                json!({"saleId": sale, "valor": valor, "cartao": "tok_aprovado"}),
            )
            .await;
        assert!(reply["ok"].is_object(), "{reply}");
    }
    for _ in 0..300 {
        let snap = app.invoke("attempts", json!({})).await;
        if snap["ok"]["queue"]["count"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = rss_mib(pid);
    let charged = app.ledger_rows();
    app.close().await;

    println!();
    println!("pagar app benchmark (optimised bench build, Xvfb, {RUNS} launches)");
    println!(
        "first painted window: median {:.0} ms (runs: {:?}) (target < 1000 ms)",
        median(paints.clone()),
        paints
    );
    let (bare, plain) = (median(bare), median(plain));
    println!("resident memory (VmRSS), target < 150 MB = 143.1 MiB:");
    println!("  bare Tauri window, empty page (reference, median of 3)  {bare:6.1} MiB");
    println!(
        "  Pagar idle, no WebDriver (median of 3)                  {plain:6.1} MiB  (+{:.1} over bare)",
        plain - bare
    );
    println!("  Pagar idle under WebDriver                              {idle:6.1} MiB");
    println!(
        "  Pagar after {PAYMENTS} payments under WebDriver                {after:6.1} MiB  (+{:.1} over idle)",
        after - idle
    );
    println!("ledger charges after the payments: {charged}");
}
