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
    workspace_binary("payment-api", "PAGAR_API_BIN")
}

/// A workspace binary `name` next to the running test's own target folder, or the path in the
/// environment variable `env`.
pub(crate) fn workspace_binary(name: &str, env: &str) -> PathBuf {
    if let Some(bin) = std::env::var_os(env) {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("the test knows its own path");
    // A binary lives in <target>/<profile>/, a test binary in <target>/<profile>/deps/.
    let candidates: Vec<PathBuf> = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(name))
        .collect();
    let bin = candidates
        .iter()
        .find(|b| b.exists())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "{name} is missing beside {}: build it with `cargo build -p {name}` (make test does)",
                exe.display()
            )
        });
    bin
}

/// The store a [`ApiProcess`] runs on.
#[derive(Debug, Clone)]
pub enum ApiDatabase {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL URL (several processes may share it).
    Postgres(String),
}

/// How to start a [`ApiProcess`].
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// Its store.
    pub database: ApiDatabase,
    /// Its merchant key and merchant.
    pub api_key: String,
    /// The merchant of `api_key`.
    pub merchant: String,
    /// More flags (`--lease-ms`, faults…).
    pub extra: Vec<String>,
    /// Where its log goes (appended), instead of the test's own stderr.
    pub log: Option<PathBuf>,
    /// Its address (`None`: a free port on 127.0.0.1).
    pub listen: Option<SocketAddr>,
}

/// A `payment-api` process on a loopback port of its own, with [`ADMIN_TOKEN`]. Killed when dropped.
pub struct ApiProcess {
    child: Child,
    addr: SocketAddr,
    options: ApiOptions,
    _dir: Option<tempfile::TempDir>,
}

impl ApiProcess {
    /// Starts the server on a SQLite database in a temporary folder, with [`API_KEY`] for
    /// [`MERCHANT`] and `extra` flags (e.g. `["--key-retention-secs", "60"]`).
    pub fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let options = ApiOptions {
            database: ApiDatabase::Sqlite(dir.path().join("api.db")),
            api_key: API_KEY.into(),
            merchant: MERCHANT.into(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            log: None,
            listen: None,
        };
        let mut api = Self::spawn(options);
        api._dir = Some(dir);
        api
    }

    /// Starts the server as `options` say, on a free port.
    pub fn spawn(options: ApiOptions) -> Self {
        Self::try_spawn(options).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`ApiProcess::spawn`], with a failure to start as an error (its reason is in its log).
    pub fn try_spawn(options: ApiOptions) -> Result<Self, String> {
        let listen = options
            .listen
            .map_or_else(|| "127.0.0.1:0".to_string(), |a| a.to_string());
        let (child, addr) = spawn(&options, &listen)?;
        Ok(Self {
            child,
            addr,
            options,
            _dir: None,
        })
    }

    /// Its SQLite file, when it runs on one.
    pub fn sqlite_path(&self) -> Option<&std::path::Path> {
        match &self.options.database {
            ApiDatabase::Sqlite(path) => Some(path),
            ApiDatabase::Postgres(_) => None,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its process id (what `/proc` reads its CPU by).
    pub fn pid(&self) -> u32 {
        self.child.id()
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
        self.try_restart().unwrap_or_else(|e| panic!("{e}"));
    }

    /// [`ApiProcess::restart`], with a failure to start as an error.
    pub fn try_restart(&mut self) -> Result<(), String> {
        self.kill();
        let (child, _) = spawn(&self.options, &self.addr.to_string())?;
        self.child = child;
        Ok(())
    }

    /// True while the process runs (it may have aborted itself: a crash fault).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Every real charge, from the gateway ledger (`GET /admin/ledger`).
    pub async fn ledger(&self) -> Vec<Value> {
        self.admin_ledger().await["cobrancas"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Every refund the gateway executed, oldest first (`GET /admin/ledger`'s `estornos`).
    pub async fn refund_ledger(&self) -> Vec<Value> {
        self.admin_ledger().await["estornos"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    async fn admin_ledger(&self) -> Value {
        reqwest::Client::new()
            .get(format!("{}/admin/ledger", self.url()))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("the API answers")
            .json()
            .await
            .expect("a ledger")
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

fn spawn(options: &ApiOptions, listen: &str) -> Result<(Child, SocketAddr), String> {
    let mut command = Command::new(payment_api_binary());
    command
        .args([
            "--listen",
            listen,
            "--admin-token",
            ADMIN_TOKEN,
            "--api-key",
        ])
        .arg(format!("{}={}", options.api_key, options.merchant))
        .args(&options.extra)
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .stdout(Stdio::piped());
    match &options.database {
        ApiDatabase::Sqlite(path) => command.arg("--database").arg(path),
        ApiDatabase::Postgres(url) => command.arg("--database-url").arg(url),
    };
    match &options.log {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("the log file opens");
            command.stderr(file).env("RUST_LOG", "error");
        }
        None => {
            command.stderr(Stdio::inherit());
        }
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("payment-api does not start: {e}"))?;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .map_err(|e| format!("payment-api's first line: {e}"))?;
    let Some(url) = line.trim().strip_prefix("listening on http://") else {
        let _ = child.wait();
        return Err(format!(
            "payment-api did not start on {listen} (its log says why): {line:?}"
        ));
    };
    Ok((child, url.parse().expect("an address")))
}
