//! `TestApp`: one real server per test, on port 0, with its own SQLite file.

use payment_api::clock::{Clock, ManualClock, SystemClock};
use payment_api::store::SqliteStore;
use payment_api::{Config, RunningServer};
use reqwest::{Response, StatusCode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const API_KEY: &str = "sk_test_loja_a_123";
pub const OTHER_API_KEY: &str = "sk_test_loja_b_456";
pub const ADMIN: &str = "admin-token-for-tests";

pub struct TestApp {
    pub url: String,
    pub client: reqwest::Client,
    pub db: PathBuf,
    pub clock: Option<Arc<ManualClock>>,
    _server: RunningServer,
    _dir: tempfile::TempDir,
}

/// Configuration every test starts from: two merchants, admin routes on, a fast slow-gateway.
pub fn test_config(db: PathBuf) -> Config {
    let mut c = Config::sandbox(db, API_KEY, "loja_a", ADMIN);
    c.api_keys.push((
        OTHER_API_KEY.into(),
        payment_api::domain::MerchantId::parse("loja_b").unwrap(),
    ));
    c.slow_gateway_ms = 300;
    c
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    pub async fn spawn_with(tweak: impl FnOnce(&mut Config)) -> Self {
        Self::start(tweak, None).await
    }

    /// A server whose store reads a clock the test moves by hand.
    pub async fn spawn_with_clock(tweak: impl FnOnce(&mut Config)) -> Self {
        Self::start(tweak, Some(ManualClock::new())).await
    }

    async fn start(tweak: impl FnOnce(&mut Config), clock: Option<Arc<ManualClock>>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("api.db");
        let mut config = test_config(db.clone());
        tweak(&mut config);
        let c: Arc<dyn Clock> = match &clock {
            Some(m) => m.clone(),
            None => Arc::new(SystemClock::default()),
        };
        let store = SqliteStore::open(&db, c).unwrap();
        let server = payment_api::start_with_store(config, Arc::new(store))
            .await
            .unwrap();
        Self {
            url: server.url(),
            client: reqwest::Client::new(),
            db,
            clock,
            _server: server,
            _dir: dir,
        }
    }

    /// `POST /pagamentos` as the checkout app sends it.
    pub async fn pay(&self, key: &str, body: &Value) -> Response {
        self.pay_as(API_KEY, key, body).await
    }

    pub async fn pay_as(&self, api_key: &str, key: &str, body: &Value) -> Response {
        post_pay(&self.client, &self.url, api_key, key, body)
            .await
            .expect("request sent")
    }

    /// A POST with exactly these headers and body bytes.
    pub async fn post_raw(
        &self,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> reqwest::Result<Response> {
        let mut req = self
            .client
            .post(format!("{}/pagamentos", self.url))
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().await
    }

    pub async fn get(&self, path: &str) -> Response {
        self.client
            .get(format!("{}{path}", self.url))
            .bearer_auth(API_KEY)
            .send()
            .await
            .unwrap()
    }

    /// The gateway ledger through the admin route.
    pub async fn ledger(&self) -> Vec<Value> {
        let v: Value = self
            .client
            .get(format!("{}/admin/ledger", self.url))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["cobrancas"].as_array().unwrap().clone()
    }

    /// `PUT /admin/faults` as QA sends it.
    pub async fn put_faults(&self, faults: &Value) -> Response {
        self.client
            .put(format!("{}/admin/faults", self.url))
            .bearer_auth(ADMIN)
            .json(faults)
            .send()
            .await
            .unwrap()
    }

    pub async fn set_faults(&self, faults: Value) {
        let res = self.put_faults(&faults).await;
        assert_eq!(
            res.status(),
            StatusCode::OK,
            "{}",
            res.text().await.unwrap()
        );
    }

    /// Rows in the idempotency key table, read from the database file itself.
    pub fn stored_keys(&self) -> i64 {
        count_rows(&self.db, "idempotency_keys")
    }
}

/// `POST {base}/pagamentos` with merchant A's key; the error is kept for tests of lost answers.
pub async fn try_pay(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    body: &Value,
) -> reqwest::Result<Response> {
    post_pay(client, base, API_KEY, key, body).await
}

async fn post_pay(
    client: &reqwest::Client,
    base: &str,
    api_key: &str,
    key: &str,
    body: &Value,
) -> reqwest::Result<Response> {
    client
        .post(format!("{base}/pagamentos"))
        .bearer_auth(api_key)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
}

pub fn count_rows(db: &Path, table: &str) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

pub fn approved(valor: i64) -> Value {
    json!({"valor": valor, "cartao": "tok_aprovado"})
}

pub fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub async fn body_of(res: Response) -> (StatusCode, Option<String>, Vec<u8>) {
    let status = res.status();
    let replayed = res
        .headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().unwrap().to_string());
    (status, replayed, res.bytes().await.unwrap().to_vec())
}

/// Asserts a problem+json answer with this status and type slug; returns the problem.
pub async fn assert_problem(res: Response, status: StatusCode, slug: &str) -> Value {
    assert_eq!(res.status(), status);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let p: Value = res.json().await.unwrap();
    assert_eq!(p["type"], format!("urn:pagar:problem:{slug}"), "{p}");
    assert_eq!(p["status"], status.as_u16());
    assert!(
        p["title"].is_string() && p["detail"].is_string() && p["retryable"].is_boolean(),
        "{p}"
    );
    p
}

/// The `payment-api` binary, started as its own process on port 0.
pub struct ServerProcess {
    pub child: Child,
    pub url: String,
}

impl ServerProcess {
    pub fn start(db: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_payment-api"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin-token",
                ADMIN,
                "--api-key",
            ])
            .arg(format!("{API_KEY}=loja_a"))
            .arg("--database")
            .arg(db)
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .expect("server printed its address")
            .to_string();
        Self { child, url }
    }

    pub fn kill9(&mut self) {
        self.child.kill().unwrap(); // SIGKILL on Unix
        self.child.wait().unwrap();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `cond` every 20 ms for at most `limit`.
pub async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}
