//! A card acquirer simulator (card not present), in its own process with its own ledger, in the
//! shape of Mercado Pago's **Orders API for online payments** (the wire is
//! `payment_api::gateway::online_orders`, one definition for both sides):
//!
//! - `POST /v1/orders` under a **mandatory** `X-Idempotency-Key` charges a card token once per
//!   key (`capture_mode: "manual"` only authorizes); the same key answers the order it made
//!   (200), never a second charge; a voided key is refused (409 `idempotency_key_voided`).
//! - `GET /v1/orders/{id}`; `POST /v1/orders/{id}/capture` and `/cancel` move an authorization
//!   once (a capture after an undo, or the other way, changes nothing and answers the state);
//!   an authorization not captured in time lapses (`expired`).
//! - `POST /v1/orders/{id}/refund` under its own `X-Idempotency-Key` pays part or all of a
//!   payment back, once per key.
//! - Ours, beside Mercado Pago's: `GET /v1/orders?external_reference=` finds the order a key
//!   made, and `POST /v1/orders/cancel-by-idempotency-key` voids an unused key so it can never
//!   charge (Square's cancel by idempotency key).
//! - `GET /qa/ledger` (same token): every charge and refund, as tests count them.
//!
//! It decides as the server's in-process gateway simulator does (the test card tokens:
//! `tok_aprovado`, `tok_recusado`, `tok_saldo_insuficiente`, `tok_lento`, …) and keeps its
//! ledger in a SQLite file of its own (`synchronous=FULL`), another machine's disk: the server's
//! power cut never takes it.

mod api;

use payment_api::clock::{Clock, SystemClock};
use payment_api::gateway::simulator::SimulatedGateway;
use payment_api::store::SqliteStore;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How to start the simulator.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "adquirente",
    about = "Card acquirer simulator (Mercado Pago Orders API for online payments, in shape)"
)]
pub struct Config {
    /// Address to listen on (port 0: any free port; the chosen address is printed).
    #[arg(long, env = "ADQUIRENTE_LISTEN", default_value = "127.0.0.1:8092")]
    pub listen: SocketAddr,
    /// The simulator's own SQLite file (its ledger of charges, voids and refunds).
    #[arg(long, env = "ADQUIRENTE_DATABASE", default_value = "adquirente.db")]
    pub database: PathBuf,
    /// The access token clients must send as `Authorization: Bearer …`.
    #[arg(
        long,
        env = "ADQUIRENTE_TOKEN",
        default_value = "adquirente_sandbox_token"
    )]
    pub token: String,
    /// How long `tok_lento` (and a refund of `tok_estorno_lento`) takes, in milliseconds.
    #[arg(long, env = "ADQUIRENTE_SLOW_MS", default_value_t = 3_000)]
    pub slow_ms: u64,
    /// How long an authorization holds before it lapses unless captured, in milliseconds
    /// (default seven days, as card schemes allow for a sale).
    #[arg(
        long,
        env = "ADQUIRENTE_AUTHORIZATION_TTL_MS",
        default_value_t = 604_800_000
    )]
    pub authorization_ttl_ms: u64,
}

impl Config {
    /// A configuration for tests and the embedded sandbox: loopback, any port.
    pub fn sandbox(database: PathBuf, token: &str) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            database,
            token: token.to_string(),
            slow_ms: 3_000,
            authorization_ttl_ms: 604_800_000,
        }
    }
}

/// What can stop the simulator from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The ledger's file cannot be opened or migrated.
    #[error("livro do adquirente {0}: {1}")]
    Ledger(PathBuf, String),
    /// The address cannot be bound.
    #[error("não foi possível escutar em {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    /// The configuration cannot work.
    #[error("{0}")]
    Config(String),
}

/// A running simulator.
pub struct RunningAcquirer {
    served: provider_kit::Served,
}

impl RunningAcquirer {
    /// Its base URL (`http://127.0.0.1:port`).
    pub fn url(&self) -> String {
        self.served.url()
    }

    /// Stops serving and waits for it.
    pub async fn shutdown(self) {
        self.served.shutdown().await
    }
}

/// Opens the ledger, binds the address and serves until shut down.
pub async fn start(config: Config) -> Result<RunningAcquirer, StartError> {
    if config.token.trim().is_empty() {
        return Err(StartError::Config("token vazio: use --token".into()));
    }
    if config.authorization_ttl_ms == 0 {
        return Err(StartError::Config(
            "--authorization-ttl-ms: pelo menos 1".into(),
        ));
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::default());
    let ledger = Arc::new(
        SqliteStore::open(&config.database, clock)
            .map_err(|e| StartError::Ledger(config.database.clone(), e.to_string()))?,
    );
    let gateway = SimulatedGateway::new(ledger.clone(), Duration::from_millis(config.slow_ms))
        .with_authorization_ttl(Duration::from_millis(config.authorization_ttl_ms));
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| StartError::Bind(config.listen, e))?;
    let app = api::router(Arc::new(api::Shared {
        gateway,
        ledger,
        token: config.token.clone(),
    }));
    let served = provider_kit::Served::start(listener, app)
        .map_err(|e| StartError::Bind(config.listen, e))?;
    tracing::info!(addr = %served.addr(), "acquirer simulator listening");
    Ok(RunningAcquirer { served })
}
