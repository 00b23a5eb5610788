//! `TestApp`: one real server per test, on port 0, on its own database: a SQLite file, or a
//! PostgreSQL database created for the test and dropped after it. Every conformance test runs
//! on both stores (`#[apply(stores)]`, defined in `main.rs`).

use payment_api::clock::{Clock, ManualClock, SystemClock};
use payment_api::store::{PgOptions, PgStore, SqliteStore};
use payment_api::{Config, RunningServer};
use reqwest::{Response, StatusCode};
use serde_json::{json, Value};
use std::future::Future;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const API_KEY: &str = "sk_test_loja_a_123";
pub const OTHER_API_KEY: &str = "sk_test_loja_b_456";
pub const ADMIN: &str = "admin-token-for-tests";

/// Which store a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The PostgreSQL server the tests create their databases on (`.ci/run` starts it).
pub fn postgres_admin_url() -> String {
    std::env::var("PAGAR_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// One test's database, removed when dropped.
pub enum TestDb {
    Sqlite {
        path: PathBuf,
        _dir: tempfile::TempDir,
    },
    Postgres {
        name: String,
        url: String,
    },
}

impl TestDb {
    pub async fn new(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                Self::Sqlite {
                    path: dir.path().join("api.db"),
                    _dir: dir,
                }
            }
            Backend::Postgres => {
                let name = format!("pagar_t_{}", uuid::Uuid::new_v4().simple());
                admin(&format!("CREATE DATABASE {name}")).await;
                let admin_url = postgres_admin_url();
                let base = admin_url
                    .rsplit_once('/')
                    .map(|(b, _)| b)
                    .expect("a postgres:// URL");
                let url = format!("{base}/{name}");
                Self::Postgres { name, url }
            }
        }
    }

    /// Points a configuration at this database.
    pub fn configure(&self, c: &mut Config) {
        match self {
            Self::Sqlite { path, .. } => {
                c.database = path.clone();
                c.database_url = None;
            }
            Self::Postgres { url, .. } => c.database_url = Some(url.clone()),
        }
    }

    /// The flags that point the `payment-api` binary at this database.
    pub fn args(&self) -> Vec<String> {
        match self {
            Self::Sqlite { path, .. } => vec!["--database".into(), path.display().to_string()],
            // Three replicas per test, two tests at a time: 8 connections each keeps a run far
            // below PostgreSQL's default max_connections (100).
            Self::Postgres { url, .. } => vec![
                "--database-url".into(),
                url.clone(),
                "--pg-max-connections".into(),
                "8".into(),
            ],
        }
    }

    /// Rows in `table`, read from the database itself (not through the server).
    pub async fn count(&self, table: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM {table}");
        match self {
            Self::Sqlite { path, .. } => {
                let c = rusqlite::Connection::open(path).unwrap();
                c.busy_timeout(Duration::from_secs(5)).unwrap();
                c.query_row(&sql, [], |r| r.get(0)).unwrap()
            }
            Self::Postgres { url, .. } => {
                let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                let driver = tokio::spawn(conn);
                let n: i64 = client.query_one(&sql, &[]).await.unwrap().get(0);
                drop(client);
                let _ = driver.await;
                n
            }
        }
    }
}

impl TestDb {
    /// Runs `sqlite` or `postgres` (whichever store this is) on the database itself.
    pub async fn execute(&self, sqlite: &str, postgres: &str) {
        match self {
            Self::Sqlite { path, .. } => {
                let c = rusqlite::Connection::open(path).unwrap();
                c.busy_timeout(Duration::from_secs(5)).unwrap();
                c.execute_batch(sqlite).unwrap();
            }
            Self::Postgres { url, .. } => {
                let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                let driver = tokio::spawn(conn);
                client.batch_execute(postgres).await.unwrap();
                drop(client);
                let _ = driver.await;
            }
        }
    }

    /// Ends every server connection to this PostgreSQL database (a failover, a restart).
    pub async fn terminate_connections(&self) -> i64 {
        let Self::Postgres { name, .. } = self else {
            panic!("only a PostgreSQL database has server connections")
        };
        let url = postgres_admin_url();
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let driver = tokio::spawn(conn);
        let rows = client
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[name],
            )
            .await
            .unwrap();
        drop(client);
        let _ = driver.await;
        rows.len() as i64
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Self::Postgres { name, .. } = self {
            let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
            // Drop runs inside the test's runtime; the statement gets its own thread and runtime.
            let _ = std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(admin(&sql))
            })
            .join();
        }
    }
}

/// Runs one statement on the PostgreSQL server's maintenance database.
async fn admin(sql: &str) {
    let url = postgres_admin_url();
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "PostgreSQL at {url} (make deps-pg starts it): {}",
                payment_api::error::describe_postgres(&e)
            )
        });
    let driver = tokio::spawn(conn);
    client.batch_execute(sql).await.unwrap();
    drop(client);
    let _ = driver.await;
}

/// A test's way to move the store's clock.
enum TimeTravel {
    None,
    Manual(Arc<ManualClock>),
    Postgres(PgStore),
}

pub struct TestApp {
    pub url: String,
    pub client: reqwest::Client,
    pub db: TestDb,
    time: TimeTravel,
    _server: RunningServer,
}

/// Configuration every test starts from: two merchants, admin routes on, a fast slow-gateway.
pub fn test_config(db: &TestDb) -> Config {
    let mut c = Config::sandbox(PathBuf::from("unused.db"), API_KEY, "loja_a", ADMIN);
    db.configure(&mut c);
    c.api_keys.push((
        OTHER_API_KEY.into(),
        payment_api::domain::MerchantId::parse("loja_b").unwrap(),
    ));
    c.slow_gateway_ms = 300;
    // A standalone server's settings, not the embedded sandbox's.
    c.cors_origins = "*".into();
    c.embedded = false;
    c
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_with(backend, |_| {}).await
    }

    pub async fn spawn_with(backend: Backend, tweak: impl FnOnce(&mut Config)) -> Self {
        Self::start(backend, tweak, false).await
    }

    /// A server whose store's clock the test moves by hand ([`TestApp::advance_clock`]).
    pub async fn spawn_with_clock(backend: Backend, tweak: impl FnOnce(&mut Config)) -> Self {
        Self::start(backend, tweak, true).await
    }

    async fn start(backend: Backend, tweak: impl FnOnce(&mut Config), manual: bool) -> Self {
        let db = TestDb::new(backend).await;
        let mut config = test_config(&db);
        tweak(&mut config);
        let (store, time): (Arc<dyn payment_api::server::Database>, TimeTravel) = match &db {
            TestDb::Sqlite { path, .. } => {
                let manual = manual.then(ManualClock::new);
                let clock: Arc<dyn Clock> = match &manual {
                    Some(m) => m.clone(),
                    None => Arc::new(SystemClock::default()),
                };
                let store = Arc::new(SqliteStore::open(path, clock).unwrap());
                (store, manual.map_or(TimeTravel::None, TimeTravel::Manual))
            }
            TestDb::Postgres { url, .. } => {
                let options = PgOptions {
                    max_connections: 8,
                    ..PgOptions::default()
                };
                let store = PgStore::connect(url, options, Arc::new(SystemClock::default()))
                    .await
                    .unwrap();
                (Arc::new(store.clone()), TimeTravel::Postgres(store))
            }
        };
        let server = payment_api::start_with_store(config, store).await.unwrap();
        Self {
            url: server.url(),
            client: reqwest::Client::new(),
            db,
            time,
            _server: server,
        }
    }

    /// Moves the store's clock forward: leases run out and keys age without waiting.
    pub fn advance_clock(&self, by: Duration) {
        match &self.time {
            TimeTravel::Manual(clock) => clock.advance(by),
            TimeTravel::Postgres(store) => store.advance_clock(by),
            TimeTravel::None => panic!("start the app with TestApp::spawn_with_clock"),
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

    /// `POST /pagamentos` with merchant A's key, this key and `body` as the JSON bytes, verbatim.
    pub async fn post_json_text(&self, key: &str, body: &str) -> Response {
        let auth = format!("Bearer {API_KEY}");
        let headers = [
            ("Authorization", auth.as_str()),
            ("Idempotency-Key", key),
            ("Content-Type", "application/json"),
        ];
        self.post_raw(&headers, body.to_string()).await.unwrap()
    }

    /// `GET {path}` with merchant A's key, as JSON.
    pub async fn get_json(&self, path: &str) -> Value {
        self.get(path).await.json().await.unwrap()
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
        ledger_at(&self.client, &self.url).await
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

    /// `POST /pagamentos/cancelamentos` for `key`, with merchant A's API key.
    pub async fn cancel(&self, key: &str) -> Response {
        cancel_at(&self.client, &self.url, key).await
    }

    /// Rows in the idempotency key table, read from the database itself.
    pub async fn stored_keys(&self) -> i64 {
        self.db.count("idempotency_keys").await
    }

    /// Waits (at most 10 s: the reaper runs every second in the tests that use it) until the key
    /// table holds `n` rows; panics with `why` if it never does.
    pub async fn keys_become(&self, n: i64, why: &str) {
        assert!(
            eventually(Duration::from_secs(10), || async {
                self.stored_keys().await == n
            })
            .await,
            "{why}: {} keys stored, not {n}",
            self.stored_keys().await
        );
    }
}

/// `GET {base}{path}` with the admin token, as JSON.
pub async fn admin_get(client: &reqwest::Client, base: &str, path: &str) -> Value {
    client
        .get(format!("{base}{path}"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The gateway ledger of the server at `base`, through its admin route.
pub async fn ledger_at(client: &reqwest::Client, base: &str) -> Vec<Value> {
    admin_get(client, base, "/admin/ledger").await["cobrancas"]
        .as_array()
        .unwrap()
        .clone()
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

/// `POST {base}/pagamentos/cancelamentos` for `key`, with merchant A's API key.
pub async fn cancel_at(client: &reqwest::Client, base: &str, key: &str) -> Response {
    client
        .post(format!("{base}/pagamentos/cancelamentos"))
        .bearer_auth(API_KEY)
        .json(&json!({ "idempotency_key": key }))
        .send()
        .await
        .expect("request sent")
}

/// Cancels `key` at `base` until the server settles it (an executing key answers 409), for at
/// most 10 s; the settled answer, or `Null`.
pub async fn cancel_until_settled(client: &reqwest::Client, base: &str, key: &str) -> Value {
    for _ in 0..100 {
        let res = cancel_at(client, base, key).await;
        if res.status() == StatusCode::OK {
            return res.json().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Value::Null
}

/// `GET {base}{path}` with merchant A's API key, as JSON.
pub async fn merchant_get(client: &reqwest::Client, base: &str, path: &str) -> Value {
    client
        .get(format!("{base}{path}"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
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

/// The URL a `payment-api` process says it listens on (its first line on stdout).
pub fn listening_url(child: &mut Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the server did not start (its stderr is above): {line:?}"))
        .to_string()
}

/// The `payment-api` binary, started as its own process on port 0.
pub struct ServerProcess {
    pub child: Child,
    pub url: String,
}

impl ServerProcess {
    pub fn start(db: &TestDb, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_payment-api"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin-token",
                ADMIN,
                "--api-key",
            ])
            .arg(format!("{API_KEY}=loja_a"))
            .args(db.args())
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let url = listening_url(&mut child);
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
pub async fn eventually<F: Future<Output = bool>>(
    limit: Duration,
    mut cond: impl FnMut() -> F,
) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond().await
}
