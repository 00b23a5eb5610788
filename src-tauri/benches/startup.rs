//! `make bench` (app part): time from process start to the first painted window, and resident
//! memory after 100 payments, with the idle memory of the same window as the reference. Runs the
//! real app under Xvfb through tauri-driver (the GUI tests' harness). Prints; asserts nothing.

#[path = "../tests/gui/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::{app_pid, GuiApp};
use serde_json::json;
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

    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    let pid = app_pid(dir.path()).expect("the app is running");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = rss_mib(pid);
    for i in 0..PAYMENTS {
        let sale = app.invoke("new_sale", json!({})).await["ok"].clone();
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
    println!("resident memory: idle window {idle:.1} MiB (reference), after {PAYMENTS} payments {after:.1} MiB (target < 150 MB)");
    println!("ledger charges after the payments: {charged}");
}
