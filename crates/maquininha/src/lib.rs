//! A card machine ("maquininha") simulator, in the shape of Mercado Pago's Point **Orders** API
//! (`POST /v1/orders` with `type: "point"`), for the part a till uses:
//!
//! - `POST /v1/orders` creates an order for one terminal and one amount
//!   (`transactions.payments[0].amount` as `"12.34"`, `config.point.terminal_id`,
//!   `config.payment_method.default_type` — `debit_card`, `credit_card`, `voucher_card` — and
//!   `default_installments`), under a **mandatory** `X-Idempotency-Key`: the same key and body
//!   answer the same order as it now stands, never a second one; the same key with another
//!   body is refused (409). A terminal holds one open order at a time (409 while another is
//!   `created` or `at_terminal`).
//! - `GET /v1/orders/{id}` reads it: `created` → `at_terminal` (the machine took it) →
//!   `processed` / `failed` (declined) / `canceled` (on the machine) / `expired`, and
//!   `processed` → `refunded`.
//! - `POST /v1/orders/{id}/cancel` cancels only a `created` order, as the real API: once the
//!   order is at the terminal only the machine can cancel it (409 `cannot_cancel_order`), so a
//!   till never shows "cancelado" while a card can still pay.
//! - `POST /v1/orders/{id}/refund` pays a `processed` order back in full (idempotent by key).
//! - Notifications: `POST {notification_url}?data.id=…&type=order` with `{"action": "order.processed",
//!   "type": "order", "data": {"id", "status", "status_detail", …}}`, signed as Mercado Pago signs
//!   them: `x-signature: ts=…,v1=<HMAC-SHA256 of "id:<data.id>;request-id:<x-request-id>;ts:<ts>;">`;
//!   tried again while not answered 2xx. `GET` by id is the fallback.
//!
//! **The machine itself** is a web page per terminal (`GET /terminais/{terminal_id}`): it shows
//! the amount and "aproxime, insira ou passe o cartão", and lets the person at the till (or QA)
//! play the customer: approve (débito, crédito, voucher), decline (saldo insuficiente, senha
//! incorreta), remove the card, give up on the machine, or stop answering. The page taking an
//! order is what moves it to `at_terminal`, as a real machine fetching it; with no page open an
//! order stays `created` and the till may cancel it.
//!
//! Everything is kept in its own SQLite file (`synchronous=FULL`): its ledger is another
//! machine's disk, never the payment API's. `GET /qa/contagens` counts orders, payments and
//! refunds from it, for tests.

mod api;
mod notify;
mod store;
mod terminal;

pub use notify::signature;
pub use store::Counts;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How to start the simulator.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "maquininha",
    about = "Card machine simulator (Mercado Pago Point Orders API shape)"
)]
pub struct Config {
    /// Address to listen on (port 0: any free port; the chosen address is printed).
    #[arg(long, env = "MAQUININHA_LISTEN", default_value = "127.0.0.1:8091")]
    pub listen: SocketAddr,
    /// The simulator's own SQLite file (orders, refunds, notifications sent).
    #[arg(long, env = "MAQUININHA_DATABASE", default_value = "maquininha.db")]
    pub database: PathBuf,
    /// The access token clients must send as `Authorization: Bearer …`.
    #[arg(
        long,
        env = "MAQUININHA_TOKEN",
        default_value = "maquininha_sandbox_token"
    )]
    pub token: String,
    /// The terminals it plays, comma separated (Mercado Pago's ids look like
    /// `NEWLAND_N950__N950NCB801293324`).
    #[arg(long, env = "MAQUININHA_TERMINAIS", default_value = "PAGAR_SIM__POS-1")]
    pub terminals: String,
    /// Where notifications go (the application's notification URL); unset: none are sent, and
    /// clients find the state with `GET /v1/orders/{id}`. `PUT /qa/notificacoes` changes it.
    #[arg(long, env = "MAQUININHA_NOTIFICATION_URL")]
    pub notification_url: Option<String>,
    /// The secret notifications are signed with (the application's "assinatura secreta").
    #[arg(
        long,
        env = "MAQUININHA_SECRET",
        default_value = "maquininha_sandbox_secret"
    )]
    pub secret: String,
    /// How long an order waits for a card before it expires, in seconds (Mercado Pago: 15 min).
    #[arg(long, env = "MAQUININHA_EXPIRATION_SECS", default_value_t = 900)]
    pub expiration_secs: u64,
}

impl Config {
    /// A configuration for tests and the embedded sandbox: loopback, any port, one terminal.
    pub fn sandbox(database: PathBuf, token: &str, secret: &str) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            database,
            token: token.to_string(),
            terminals: "PAGAR_SIM__POS-1".to_string(),
            notification_url: None,
            secret: secret.to_string(),
            expiration_secs: 900,
        }
    }

    fn terminal_ids(&self) -> Vec<String> {
        self.terminals
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// What can stop the simulator from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database file cannot be opened or migrated.
    #[error("banco do simulador da maquininha: {0}")]
    Database(#[from] rusqlite::Error),
    /// The address cannot be bound.
    #[error("não foi possível escutar em {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    /// The configuration cannot work.
    #[error("{0}")]
    Config(String),
}

/// A running simulator.
pub struct RunningMachine {
    served: provider_kit::Served,
    expiry: JoinHandle<()>,
    state: Arc<api::Shared>,
}

impl RunningMachine {
    /// Its base URL (`http://127.0.0.1:port`).
    pub fn url(&self) -> String {
        self.served.url()
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.served.addr()
    }

    /// Its own counts: orders, payments approved, refunds, notifications.
    pub fn counts(&self) -> Counts {
        self.state.store.counts().expect("simulator counts")
    }

    /// Stops serving and waits for it.
    pub async fn shutdown(self) {
        self.expiry.abort();
        self.served.shutdown().await
    }
}

/// Opens the database, binds the address and serves until shut down.
pub async fn start(config: Config) -> Result<RunningMachine, StartError> {
    let terminals = config.terminal_ids();
    if terminals.is_empty() {
        return Err(StartError::Config(
            "nenhuma maquininha configurada: use --terminals".into(),
        ));
    }
    if config.secret.trim().is_empty() {
        return Err(StartError::Config(
            "assinatura secreta vazia: use --secret".into(),
        ));
    }
    let store = Arc::new(store::Ledger::open(&config.database)?);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| StartError::Bind(config.listen, e))?;
    let notifier = Arc::new(notify::Notifier::new(
        store.clone(),
        config.secret.clone(),
        config.notification_url.clone(),
    ));
    let state = Arc::new(api::Shared {
        store: store.clone(),
        token: config.token.clone(),
        terminals,
        notifier: notifier.clone(),
        expiration: Duration::from_secs(config.expiration_secs.max(1)),
        silent: std::sync::Mutex::new(Vec::new()),
    });
    let app = api::router(state.clone()).merge(terminal::router(state.clone()));
    let served = provider_kit::Served::start(listener, app)
        .map_err(|e| StartError::Bind(config.listen, e))?;
    let expiry = tokio::spawn(api::expire_every(state.clone(), Duration::from_secs(1)));
    tracing::info!(addr = %served.addr(), "card machine simulator listening");
    Ok(RunningMachine {
        served,
        expiry,
        state,
    })
}
