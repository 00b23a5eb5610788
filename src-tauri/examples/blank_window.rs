//! The references of the app's memory figures in `make bench`: a bare Tauri window on the same
//! stack (tauri, wry, WebKitGTK, the same configuration) with none of Pagar's code.
//!
//! - Started plainly, it shows an empty page: the reference of the app's idle memory.
//! - Started with `BLANK_TRAFFIC` (a JSON plan), its page makes the IPC traffic the bench counted
//!   in Pagar's window per sale — the same commands, as many calls, arguments and answers of the
//!   same sizes — and nothing else (no page content changes): the reference of what that
//!   traffic alone costs the web process as sales go by. At each mark of the plan the page
//!   calls `ui_ready` with the sales made so far; this process writes them to
//!   `$PAGAR_DATA_DIR/sold` (and whether Tauri's IPC fell back from its custom protocol to
//!   `postMessage`) and answers once the bench has created `$PAGAR_DATA_DIR/go-<sales>`.
//!
//! The page comes from a custom URI scheme, as Pagar's own pages do, not `about:blank`:
//! WebKitGTK renders `about:blank` without starting a web process, and a reference without one
//! would not be the same stack. The window is labelled `main` so that the app's capability lets
//! its page call the commands Pagar's page calls.

use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

const EMPTY: &str = "<!doctype html><title>blank</title><body></body>";
const TRAFFIC: &str =
    "<!doctype html><title>blank</title><body></body><script src=\"traffic.js\"></script>";

/// The traffic: the plan comes from `open_sale`; each call's answer is as long as it asks.
const TRAFFIC_JS: &str = r#"
const { invoke } = window.__TAURI_INTERNALS__;
let fellBack = false;
const warn = console.warn;
console.warn = (...a) => { if (String(a[0]).includes("IPC custom protocol failed")) fellBack = true; warn(...a); };
(async () => {
  const plan = await invoke("open_sale", {});
  const pads = new Map(plan.calls.map((c) => [c.cmd, "x".repeat(c.args)]));
  const last = plan.marks[plan.marks.length - 1];
  for (let sale = 0; sale < last; sale++) {
    for (const c of plan.calls) {
      const k = Math.floor(((sale + 1) * c.n) / plan.per) - Math.floor((sale * c.n) / plan.per);
      for (let j = 0; j < k; j++) await invoke(c.cmd, { pad: pads.get(c.cmd), reply: c.reply });
    }
    if (plan.marks.includes(sale + 1)) await invoke("ui_ready", { sold: sale + 1, fellBack });
  }
})();
"#;

fn data_dir() -> PathBuf {
    std::env::var_os("PAGAR_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn main() {
    let plan: Option<Value> = std::env::var("BLANK_TRAFFIC")
        .ok()
        .map(|p| serde_json::from_str(&p).expect("BLANK_TRAFFIC is a JSON plan"));
    let page = if plan.is_some() { TRAFFIC } else { EMPTY };
    let mut context = tauri::generate_context!();
    context.config_mut().app.windows.clear();
    tauri::Builder::default()
        .register_uri_scheme_protocol("blank", move |_ctx, request| {
            let (body, kind) = if request.uri().path() == "/traffic.js" {
                (TRAFFIC_JS, "text/javascript")
            } else {
                (page, "text/html")
            };
            tauri::http::Response::builder()
                .header("Content-Type", kind)
                .body(body.as_bytes().to_vec())
                .expect("a valid response")
        })
        .invoke_handler(move |invoke| {
            let args = match invoke.message.payload() {
                tauri::ipc::InvokeBody::Json(v) => v.clone(),
                _ => Value::Null,
            };
            match invoke.message.command() {
                "open_sale" => invoke.resolver.resolve(plan.clone().unwrap_or(Value::Null)),
                "ui_ready" => {
                    let sold = args["sold"].as_u64().unwrap_or(0);
                    let dir = data_dir();
                    let _ =
                        std::fs::write(dir.join("sold"), format!("{sold} {}", args["fellBack"]));
                    tauri::async_runtime::spawn(async move {
                        let go = dir.join(format!("go-{sold}"));
                        for _ in 0..3_000 {
                            if go.exists() {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        invoke.resolver.resolve(json!({}));
                    });
                }
                _ => {
                    let reply = args["reply"].as_u64().unwrap_or(0) as usize;
                    invoke.resolver.resolve(json!({ "pad": "x".repeat(reply) }));
                }
            }
            true
        })
        .setup(|app| {
            let blank = "blank://localhost/".parse().expect("a valid URL");
            tauri::WebviewWindowBuilder::new(app, "main", tauri::WebviewUrl::CustomProtocol(blank))
                .title("blank")
                .inner_size(1180.0, 780.0)
                .build()?;
            Ok(())
        })
        .run(context)
        .expect("a blank Tauri window");
}
