use checkout_core::{
    Attempt, CardToken, Centavos, Checkout, Config, Connectivity, Event, PayOutcome, SaleId,
};
use payment_api::RunningServer;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::broadcast;

pub const API_KEY: &str = "sk_test_checkout_core";
pub const ADMIN: &str = "admin-checkout-core";

/// The real payment API, in this process, on a port that survives restarts.
pub struct Api {
    pub addr: SocketAddr,
    pub db: PathBuf,
    pub server: Option<RunningServer>,
    tweak: Box<dyn Fn(&mut payment_api::Config) + Send + Sync>,
    _dir: tempfile::TempDir,
}

impl Api {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(
        tweak: impl Fn(&mut payment_api::Config) + Send + Sync + 'static,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("api.db");
        let mut api = Self {
            addr: "127.0.0.1:0".parse().unwrap(),
            db,
            server: None,
            tweak: Box::new(tweak),
            _dir: dir,
        };
        api.up().await;
        api
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Starts (again) on the same address and database.
    pub async fn up(&mut self) {
        let mut config = payment_api::Config::sandbox(self.db.clone(), API_KEY, "loja", ADMIN);
        config.listen = self.addr;
        config.slow_gateway_ms = 1_500;
        (self.tweak)(&mut config);
        let server = payment_api::start(config).await.unwrap();
        self.addr = server.addr();
        self.server = Some(server);
    }

    pub async fn down(&mut self) {
        if let Some(s) = self.server.take() {
            s.state().store().health().await.unwrap();
            s.shutdown().await;
        }
    }

    pub async fn ledger(&self) -> Vec<payment_api::gateway::simulator::LedgerRow> {
        self.server
            .as_ref()
            .expect("server up")
            .simulator_ledger()
            .ledger()
            .await
            .unwrap()
    }

    /// The gateway's refunds, oldest first: `(payment's charge, valor, status)`.
    pub async fn refund_ledger(&self) -> Vec<payment_api::gateway::simulator::RefundLedgerRow> {
        self.server
            .as_ref()
            .expect("server up")
            .simulator_ledger()
            .refund_ledger()
            .await
            .unwrap()
    }

    /// `GET {path}` with the merchant's key, its JSON.
    pub async fn get_json(&self, path: &str) -> Value {
        reqwest::Client::new()
            .get(format!("{}{path}", self.url()))
            .bearer_auth(API_KEY)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn set_faults(&self, faults: Value) {
        let res = reqwest::Client::new()
            .put(format!("{}/admin/faults", self.url()))
            .bearer_auth(ADMIN)
            .json(&faults)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success());
    }

    /// `POST /pagamentos` requests the server has seen, by outcome label, from its metrics.
    pub async fn requests(&self, outcome: &str) -> u64 {
        let text = reqwest::get(format!("{}/metrics", self.url()))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let needle = format!("pagar_payment_requests_total{{outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&needle))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0)
    }

    pub async fn all_requests(&self) -> u64 {
        let mut n = 0;
        for o in [
            "first",
            "replay",
            "in_progress",
            "mismatch",
            "rejected",
            "failed",
        ] {
            n += self.requests(o).await;
        }
        n
    }
}

/// Engine settings for tests: short backoff and probes so the tests are quick.
pub fn fast_config(api_url: &str) -> Config {
    let mut c = Config::new(api_url, API_KEY);
    c.backoff_base = Duration::from_millis(50);
    c.backoff_cap = Duration::from_millis(400);
    c.probe_interval = Duration::from_millis(100);
    c.connect_timeout = Duration::from_millis(500);
    c.request_timeout = Duration::from_secs(5);
    c
}

pub struct Engine {
    pub checkout: Checkout,
    pub db: PathBuf,
    pub _dir: tempfile::TempDir,
}

impl Engine {
    /// Opens an engine and waits for its first health probe, so the offline caps (which apply
    /// until the engine knows it is online) do not depend on how fast the probe is.
    pub async fn open(config: Config) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("outbox.db");
        let checkout = Checkout::open(&db, config).await.unwrap();
        settled_connectivity(&checkout).await;
        Self {
            checkout,
            db,
            _dir: dir,
        }
    }

    pub async fn pay(&self, sale: &str, valor: i64, cartao: &str) -> Attempt {
        match self.pay_outcome(sale, valor, cartao).await {
            PayOutcome::Created(a) | PayOutcome::Existing(a) => a,
        }
    }

    pub async fn pay_outcome(&self, sale: &str, valor: i64, cartao: &str) -> PayOutcome {
        self.checkout
            .pay(
                SaleId::parse(sale).unwrap(),
                Centavos::new(valor).unwrap(),
                CardToken::parse(cartao).unwrap(),
            )
            .await
            .unwrap()
    }

    /// Refunds `valor` (all that is left when `None`) of the payment attempt `payment`.
    pub async fn refund(&self, payment: &Attempt, valor: Option<i64>) -> PayOutcome {
        self.checkout
            .refund(
                &payment.id,
                valor.map(|v| Centavos::new(v).unwrap()),
                checkout_core::RefundReason::parse("devolução").unwrap(),
            )
            .await
            .unwrap()
    }

    pub async fn final_state(&self, attempt: &Attempt) -> Attempt {
        self.checkout
            .wait_final(&attempt.id, Duration::from_secs(20))
            .await
            .unwrap()
    }
}

/// Waits (at most 10 s) until the engine's first probe has said online or offline.
pub async fn settled_connectivity(checkout: &Checkout) -> Connectivity {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match checkout.connectivity() {
                Connectivity::Unknown => tokio::time::sleep(Duration::from_millis(10)).await,
                known => return known,
            }
        }
    })
    .await
    .expect("the first probe ended")
}

/// Receives events until `pred` matches one, for at most 20 s.
pub async fn wait_event(
    rx: &mut broadcast::Receiver<Event>,
    pred: impl Fn(&Event) -> bool,
) -> Event {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let e = rx.recv().await.unwrap();
            if pred(&e) {
                return e;
            }
        }
    })
    .await
    .expect("the event arrived")
}

/// The attempt a pay or refund call answered with, new or existing.
pub fn attempt_of(outcome: PayOutcome) -> Attempt {
    match outcome {
        PayOutcome::Created(a) | PayOutcome::Existing(a) => a,
    }
}

/// The tender once the server has said where its authorization stands (at most 20 s).
pub async fn settled_capture(engine: &Engine, tender: &Attempt) -> Attempt {
    for _ in 0..400 {
        let a = engine.checkout.attempt(&tender.id).await.unwrap();
        if a.captura.is_some_and(checkout_core::Capture::is_final) {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the authorization of {} never settled", tender.id);
}

/// The attempt once `done` holds for it, read every 20 ms for at most `limit`; as it stands
/// then if it never does.
pub async fn attempt_until(
    engine: &Engine,
    attempt: &Attempt,
    limit: Duration,
    done: impl Fn(&Attempt) -> bool,
) -> Result<Attempt, Attempt> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let now = engine.checkout.attempt(&attempt.id).await.unwrap();
        if done(&now) {
            return Ok(now);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(now);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
