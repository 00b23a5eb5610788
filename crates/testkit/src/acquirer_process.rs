//! The `adquirente` binary (the card acquirer simulator) as its own process: what a payment
//! API's card-not-present charges go to in end-to-end tests, with its own ledger on its own file.

use crate::api_process::workspace_binary;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The access token every [`AcquirerProcess`] accepts.
pub const ACQUIRER_TOKEN: &str = "adquirente_token_testkit";

/// The simulator on a loopback port, its ledger in a folder that outlives the process (a kill
/// and a start again on the same folder and port is the acquirer restarting). Killed when
/// dropped.
pub struct AcquirerProcess {
    child: Child,
    url: String,
    dir: PathBuf,
    slow_ms: u64,
    http: reqwest::Client,
}

impl AcquirerProcess {
    /// Starts the simulator on a free port with its ledger in `dir`; `tok_lento` takes 1.5 s.
    pub fn start(dir: &Path) -> Self {
        Self::start_on(dir, "127.0.0.1:0", 1_500)
    }

    /// Starts the simulator on a free port with its ledger in `dir`; `tok_lento` takes `slow_ms`.
    pub fn start_slow(dir: &Path, slow_ms: u64) -> Self {
        Self::start_on(dir, "127.0.0.1:0", slow_ms)
    }

    /// The ledger's file (SQLite; tables `gateway_ledger` and `gateway_refunds`).
    pub fn ledger_file(&self) -> PathBuf {
        self.dir.join("adquirente.db")
    }

    fn start_on(dir: &Path, listen: &str, slow_ms: u64) -> Self {
        let mut child = Command::new(workspace_binary("adquirente", "PAGAR_ADQUIRENTE_BIN"))
            .args(["--listen", listen, "--token", ACQUIRER_TOKEN])
            .args(["--slow-ms", &slow_ms.to_string()])
            .arg("--database")
            .arg(dir.join("adquirente.db"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("adquirente starts");
        let url = crate::listening_url(&mut child, "adquirente");
        Self {
            child,
            url,
            dir: dir.to_path_buf(),
            slow_ms,
            http: reqwest::Client::new(),
        }
    }

    /// Its base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The `payment-api` flags that send card charges here.
    pub fn api_flags(&self) -> Vec<String> {
        [
            "--gateway-url",
            &self.url,
            "--gateway-token",
            ACQUIRER_TOKEN,
        ]
        .map(String::from)
        .to_vec()
    }

    /// Kills it (SIGKILL) if it runs, and starts it again on the same port and ledger: what its
    /// ledger holds is what it had made durable.
    pub fn restart(&mut self) {
        self.kill();
        let listen = self.url.trim_start_matches("http://").to_string();
        let again = Self::start_on(&self.dir, &listen, self.slow_ms);
        *self = again;
    }

    /// True while its process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills it (SIGKILL): the API finds no acquirer until it is started again.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its ledger as tests count it: `cobrancas` and `estornos` (`GET /qa/ledger`).
    pub async fn ledger(&self) -> Value {
        self.http
            .get(format!("{}/qa/ledger", self.url))
            .bearer_auth(ACQUIRER_TOKEN)
            .send()
            .await
            .expect("the acquirer answers")
            .json()
            .await
            .expect("JSON")
    }

    /// Its charges, oldest first.
    pub async fn charges(&self) -> Vec<Value> {
        self.ledger().await["cobrancas"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for AcquirerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
