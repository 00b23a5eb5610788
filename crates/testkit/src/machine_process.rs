//! The `maquininha` binary (the card machine simulator) as its own process, with the machine's
//! page played by the test as the customer at the machine would.

use crate::api_process::workspace_binary;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The access token every [`MachineProcess`] accepts.
pub const MACHINE_TOKEN: &str = "maquininha_token_testkit";
/// The secret every [`MachineProcess`] signs notifications with.
pub const MACHINE_SECRET: &str = "maquininha_secret_testkit";

/// The simulator on a free loopback port with its ledger in a folder of the caller's, playing
/// the terminals it was given; no notifications (the API's poll finds how orders end). Killed
/// when dropped.
pub struct MachineProcess {
    child: Child,
    url: String,
    http: reqwest::Client,
}

impl MachineProcess {
    /// Starts it with its ledger in `dir`, playing `terminals`; an order no card pays expires
    /// after `expiration_secs`.
    pub fn start(dir: &Path, terminals: &[String], expiration_secs: u64) -> Self {
        let mut child = Command::new(workspace_binary("maquininha", "PAGAR_MAQUININHA_BIN"))
            .args(["--listen", "127.0.0.1:0", "--token", MACHINE_TOKEN])
            .args([
                "--secret",
                MACHINE_SECRET,
                "--terminals",
                &terminals.join(","),
            ])
            .args(["--expiration-secs", &expiration_secs.to_string()])
            .arg("--database")
            .arg(dir.join("maquininha.db"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("maquininha starts");
        let url = crate::listening_url(&mut child, "maquininha");
        Self {
            child,
            url,
            http: reqwest::Client::new(),
        }
    }

    /// Its base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The `payment-api` flags that send card-machine orders here, read back every `poll_ms`.
    pub fn api_flags(&self, poll_ms: u64) -> Vec<String> {
        [
            "--maquininha-url",
            &self.url,
            "--maquininha-token",
            MACHINE_TOKEN,
            "--maquininha-secret",
            MACHINE_SECRET,
            "--maquininha-poll-ms",
            &poll_ms.to_string(),
        ]
        .map(String::from)
        .to_vec()
    }

    /// The machine `terminal` looks for its order, as its page does (it takes a `created` one):
    /// the open order's view (`id`, `centavos`, …), if any.
    pub async fn looks(&self, terminal: &str) -> Option<Value> {
        let res = self
            .http
            .get(format!("{}/terminais/{terminal}/pedido", self.url))
            .send()
            .await
            .ok()?;
        let body: Value = res.json().await.ok()?;
        Some(body["pedido"].clone()).filter(|p| !p.is_null())
    }

    /// The customer at `terminal` does `acao` (`aprovar`, `saldo_insuficiente`, `desistir`, …);
    /// true when the machine took it.
    pub async fn customer(&self, terminal: &str, acao: &str) -> bool {
        self.http
            .post(format!("{}/terminais/{terminal}/acao", self.url))
            .json(&json!({ "acao": acao }))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    }

    /// Every order as the provider has it (Mercado Pago's order body), oldest first.
    pub async fn orders(&self) -> Result<Vec<Value>, String> {
        self.http
            .get(format!("{}/qa/orders", self.url))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())
    }
}

impl Drop for MachineProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
