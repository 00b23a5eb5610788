//! A Pix provider (PSP recebedor) simulator, in the shape of the Banco Central's API Pix
//! (`bacen/pix-api`, `openapi.yaml` 2.9.0) for the part Pagar uses:
//!
//! - `PUT /cob/{txid}` creates an immediate charge (`CobGerada`, status `ATIVA`); a `txid` already
//!   used is answered **400** (`CobOperacaoInvalida`), never a second charge: the client reads it
//!   back with `GET /cob/{txid}` (`CobCompleta`, with the `pix` received for it);
//! - `PATCH /cob/{txid}` with `{"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"}` removes it (400 once
//!   it is `CONCLUIDA`);
//! - `PUT /pix/{e2eid}/devolucao/{id}` asks for a devolução under the client's own id (a reused id
//!   is **400**, as PSPs answer it, not a replay); `GET` of the same path reads it;
//! - `PUT /webhook/{chave}` registers where the `{"pix": [...]}` callback goes (`{webhookUrl}/pix`);
//!   `GET /webhook/{chave}` shows it.
//!
//! Callbacks are signed with Standard Webhooks (`webhook-id`, `webhook-timestamp`,
//! `webhook-signature`: HMAC-SHA256 of `id.timestamp.body`, one signature per configured secret,
//! so a receiver rotating its secret accepts either). The Banco Central protects callbacks with
//! mTLS instead; a real PSP's choice is configuration on the receiving side.
//!
//! QA controls (`/qa/…`) play the customer: pay a charge now or after a delay, even after it
//! expired or was removed (the PSPs of `bacen/pix-api#319`), with the callback delivered, lost,
//! sent two or three times, or late; `GET /qa/cobs[?chave=…]` lists every charge (to a key) with its Pix and devoluções
//! (the ledger the trials' checker reads). Everything is kept in its own SQLite file: the counts a test
//! checks (`GET /qa/contagens`) are this simulator's own, never the API's.

mod oauth;
mod problem;
mod routes;
mod store;
mod webhook;

pub use oauth::SCOPES;
pub use store::Counts;

/// The sandbox's OAuth2 client id.
pub const SANDBOX_CLIENT_ID: &str = "pagar-sandbox";

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// How to start the simulator.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "pix-provider",
    about = "Pix provider simulator (API Pix shape)"
)]
pub struct Config {
    /// Address to listen on (port 0: any free port; the chosen address is printed).
    #[arg(long, env = "PIX_LISTEN", default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    /// The simulator's own SQLite file (charges, Pix received, devoluções, callbacks sent).
    #[arg(long, env = "PIX_DATABASE", default_value = "pix-provider.db")]
    pub database: PathBuf,
    /// The merchant's OAuth2 client id (`POST /oauth/token` with HTTP Basic).
    #[arg(long, env = "PIX_CLIENT_ID", default_value = SANDBOX_CLIENT_ID)]
    pub client_id: String,
    /// The merchant's OAuth2 client secret.
    #[arg(long, env = "PIX_CLIENT_SECRET", default_value = "pix_sandbox_secret")]
    pub client_secret: String,
    /// How long a token lives, in seconds (`expires_in`).
    #[arg(long, env = "PIX_TOKEN_TTL_SECS", default_value_t = 3600)]
    pub token_ttl_secs: u64,
    /// Serve the API Pix over mutual TLS, as PSPs do, with the certificates in this folder
    /// (made there on first start: `ca.pem`, the server's `servidor.pem`/`servidor.key`, and the
    /// merchant's `cliente.pem` with its key, to give the payment API). Unset: plain HTTP.
    #[arg(long, env = "PIX_TLS_DIR")]
    pub tls_dir: Option<PathBuf>,
    /// The bearer token of the QA controls (`/qa/…`: the simulator playing customers and the
    /// bank; not a PSP route).
    #[arg(long, env = "PIX_QA_TOKEN", default_value = "pix_qa_token")]
    pub qa_token: String,
    /// Secrets the callbacks are signed with (`whsec_` + base64), comma separated: each one adds
    /// a signature, so a receiver that rotates its secret accepts the old and the new.
    #[arg(long, env = "PIX_WEBHOOK_SECRETS", default_value = "")]
    pub webhook_secrets: String,
    /// The host and path prefix of the charges' `location` (the QR's payload URL).
    #[arg(
        long,
        env = "PIX_LOCATION_BASE",
        default_value = "pix.sandbox.pagar.dev/qr/v2"
    )]
    pub location_base: String,
}

impl Config {
    /// A configuration for tests and the app's embedded sandbox: loopback, any port, the client
    /// [`SANDBOX_CLIENT_ID`] with `secret`, which also opens the QA controls.
    pub fn sandbox(database: PathBuf, secret: &str, webhook_secret: &str) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            database,
            client_id: SANDBOX_CLIENT_ID.to_string(),
            client_secret: secret.to_string(),
            token_ttl_secs: 3600,
            qa_token: secret.to_string(),
            tls_dir: None,
            webhook_secrets: webhook_secret.to_string(),
            location_base: "pix.sandbox.pagar.dev/qr/v2".to_string(),
        }
    }
}

/// What can stop the simulator from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database file cannot be opened or migrated.
    #[error("banco do simulador Pix: {0}")]
    Database(#[from] rusqlite::Error),
    /// The address cannot be bound.
    #[error("não foi possível escutar em {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    /// The mutual TLS's certificates cannot be made or read.
    #[error("certificados TLS do simulador Pix: {0}")]
    Tls(std::io::Error),
    /// A webhook secret is not `whsec_` + base64.
    #[error("segredo de webhook inválido: {0}")]
    Secret(String),
}

/// A running simulator.
pub struct RunningProvider {
    served: provider_kit::Served,
    state: Arc<routes::Shared>,
    tls: Option<provider_kit::TlsFiles>,
}

impl RunningProvider {
    /// Its base URL (`http://127.0.0.1:port`, `https://` over mutual TLS).
    pub fn url(&self) -> String {
        self.served.url()
    }

    /// Its mutual TLS's files (the CA to trust, the merchant's client certificate), when it
    /// serves over TLS.
    pub fn tls(&self) -> Option<&provider_kit::TlsFiles> {
        self.tls.as_ref()
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.served.addr()
    }

    /// Its own counts: charges made, Pix received, devoluções, callbacks.
    pub fn counts(&self) -> Counts {
        self.state.store.counts().expect("simulator counts")
    }

    /// Stops serving and waits for it.
    pub async fn shutdown(self) {
        self.served.shutdown().await
    }
}

/// Opens the database, binds the address and serves until shut down.
pub async fn start(config: Config) -> Result<RunningProvider, StartError> {
    let store = store::PixDb::open(&config.database)?;
    let signers = webhook::Signers::parse(&config.webhook_secrets).map_err(StartError::Secret)?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| StartError::Bind(config.listen, e))?;
    let state = Arc::new(routes::Shared {
        store: Arc::new(store),
        clients: Arc::new(oauth::Clients::new(
            &config.client_id,
            &config.client_secret,
            std::time::Duration::from_secs(config.token_ttl_secs.max(1)),
            &config.qa_token,
        )),
        location_base: config.location_base.clone(),
        webhooks: Arc::new(webhook::Dispatcher::new(signers)),
    });
    let app = routes::router(state.clone());
    let (served, tls) = match &config.tls_dir {
        None => (provider_kit::Served::start(listener, app), None),
        Some(dir) => {
            let files =
                provider_kit::TlsFiles::ensure(dir, &config.client_id).map_err(StartError::Tls)?;
            (
                provider_kit::Served::start_tls(listener, app, &files),
                Some(files),
            )
        }
    };
    let served = served.map_err(|e| StartError::Bind(config.listen, e))?;
    tracing::info!(addr = %served.addr(), tls = tls.is_some(), "Pix provider simulator listening");
    Ok(RunningProvider { served, state, tls })
}
