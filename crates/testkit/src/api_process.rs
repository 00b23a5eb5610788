//! The `payment-api` binary as its own process: what an app pointed at a real API talks to.

use serde_json::Value;
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The merchant key every [`ApiProcess`] accepts.
pub const API_KEY: &str = "sk_test_testkit";
/// Its merchant.
pub const MERCHANT: &str = "loja_testkit";
/// The admin token of every [`ApiProcess`] (ledger and faults).
pub const ADMIN_TOKEN: &str = "adm_testkit";

/// The `payment-api` binary next to the running test's own target folder, or `PAGAR_API_BIN`.
/// `cargo test --workspace` (and so `make test`) builds it with everything else.
pub fn payment_api_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("PAGAR_API_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("the test knows its own path");
    // <target>/<profile>/deps/<test binary> → <target>/<profile>/payment-api
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a test binary lives in <target>/<profile>/deps");
    let bin = profile_dir.join("payment-api");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p payment-api` (make test does)",
        bin.display()
    );
    bin
}

/// A `payment-api` process on a loopback port of its own, with a SQLite database in a temporary
/// folder, [`API_KEY`] and [`ADMIN_TOKEN`]. Killed when dropped.
pub struct ApiProcess {
    child: Child,
    addr: SocketAddr,
    db: PathBuf,
    extra: Vec<String>,
    _dir: tempfile::TempDir,
}

impl ApiProcess {
    /// Starts the server with `extra` flags (e.g. `["--key-retention-secs", "60"]`).
    pub fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let db = dir.path().join("api.db");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let (child, addr) = spawn(&db, "127.0.0.1:0", &extra);
        Self {
            child,
            addr,
            db,
            extra,
            _dir: dir,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Kills the process with `SIGKILL`.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same address and database.
    pub fn restart(&mut self) {
        self.kill();
        let (child, _) = spawn(&self.db, &self.addr.to_string(), &self.extra);
        self.child = child;
    }

    /// Every real charge, from the gateway ledger (`GET /admin/ledger`).
    pub async fn ledger(&self) -> Vec<Value> {
        let res: Value = reqwest::Client::new()
            .get(format!("{}/admin/ledger", self.url()))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("the API answers")
            .json()
            .await
            .expect("a ledger");
        res["cobrancas"].as_array().cloned().unwrap_or_default()
    }

    /// Replaces the server's fault profile.
    pub async fn set_faults(&self, faults: Value) {
        let res = reqwest::Client::new()
            .put(format!("{}/admin/faults", self.url()))
            .bearer_auth(ADMIN_TOKEN)
            .json(&faults)
            .send()
            .await
            .expect("the API answers");
        assert!(res.status().is_success(), "faults refused: {res:?}");
    }
}

impl Drop for ApiProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn(db: &std::path::Path, listen: &str, extra: &[String]) -> (Child, SocketAddr) {
    let mut child = Command::new(payment_api_binary())
        .args([
            "--listen",
            listen,
            "--admin-token",
            ADMIN_TOKEN,
            "--api-key",
        ])
        .arg(format!("{API_KEY}={MERCHANT}"))
        .arg("--database")
        .arg(db)
        .args(extra)
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("payment-api starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("its first line");
    let url = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("payment-api did not start (stderr above): {line:?}"));
    (child, url.parse().expect("an address"))
}
