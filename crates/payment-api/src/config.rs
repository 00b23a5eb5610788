//! Server configuration: flags, environment variables, and the API-key file.

use crate::domain::MerchantId;
use crate::faults::Faults;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Everything the server needs to start. Every flag also reads an environment variable. Its
/// `Debug` never shows the API keys, the admin token or the database password.
#[derive(Clone, clap::Parser)]
#[command(
    name = "payment-api",
    version,
    about = "Pagar's payment API: honours Idempotency-Key, charges each key at most once, replays the stored answer.",
    after_help = "API keys: --api-key sk_test_loja1=loja1 (repeatable), PAGAR_API_KEYS=\"k1=m1,k2=m2\", or \
                  --api-keys-file with one `key=merchant` per line (# starts a comment).\n\
                  Admin routes (/admin/ledger, /admin/faults) exist only when --admin-token is set."
)]
pub struct Config {
    /// Address to listen on (port 0 picks a free port and prints it).
    #[arg(long, env = "PAGAR_API_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// SQLite database file (created and migrated on start); the default store.
    #[arg(long, env = "PAGAR_API_DATABASE", default_value = "pagar-api.db")]
    pub database: PathBuf,
    /// PostgreSQL instead of SQLite, as postgres://user[:password]@host[:port]/database: every
    /// replica started with the same URL shares one set of keys, payments and ledger.
    #[arg(long, env = "DATABASE_URL", conflicts_with = "database")]
    pub database_url: Option<String>,
    /// The gateway simulator's ledger in a SQLite file of its own instead of the store's
    /// database, as a real gateway keeps its charges apart from the server: the power-cut
    /// trials lose the server's unsynced writes and not the gateway's. SQLite store only.
    #[arg(long, env = "PAGAR_GATEWAY_DATABASE", conflicts_with = "database_url")]
    pub gateway_database: Option<PathBuf>,
    /// Base URL of the card acquirer the card-not-present charges go to (Mercado Pago's Orders
    /// API for online payments, or the bundled `adquirente` simulator in its own process).
    /// Unset: the gateway simulator runs inside this process (tests, and the QA ledger route).
    #[arg(long, env = "PAGAR_GATEWAY_URL", conflicts_with = "gateway_database")]
    pub gateway_url: Option<String>,
    /// The acquirer's access token (`Authorization: Bearer …`).
    #[arg(
        long,
        env = "PAGAR_GATEWAY_TOKEN",
        default_value = "adquirente_sandbox_token"
    )]
    pub gateway_token: String,
    /// Most PostgreSQL connections this replica opens.
    #[arg(long, env = "PAGAR_PG_MAX_CONNECTIONS", default_value_t = 16)]
    pub pg_max_connections: usize,
    /// An API key and the merchant it belongs to, as KEY=MERCHANT. Repeatable; comma-separated in the env var.
    #[arg(long = "api-key", env = "PAGAR_API_KEYS", value_delimiter = ',', value_parser = parse_key_pair)]
    pub api_keys: Vec<(String, MerchantId)>,
    /// A file of API keys, one KEY=MERCHANT per line.
    #[arg(long, env = "PAGAR_API_KEYS_FILE")]
    pub api_keys_file: Option<PathBuf>,
    /// Token for the QA admin routes; without it they do not exist.
    #[arg(long, env = "PAGAR_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
    /// How long completed idempotency keys are kept, in seconds (payments are kept forever).
    #[arg(long, env = "PAGAR_KEY_RETENTION_SECS", default_value_t = 86_400)]
    pub key_retention_secs: u64,
    /// How often the reaper purges expired keys, in seconds.
    #[arg(long, env = "PAGAR_REAPER_INTERVAL_SECS", default_value_t = 60)]
    pub reaper_interval_secs: u64,
    /// Expired keys the reaper deletes in one write (short writes let payments take turns with a
    /// day's keys expiring).
    #[arg(long, env = "PAGAR_REAPER_BATCH", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub reaper_batch: u32,
    /// How long one execution holds its key before a retry may take it over, in milliseconds.
    #[arg(long, env = "PAGAR_LEASE_MS", default_value_t = 10_000)]
    pub lease_ms: u64,
    /// How long after its lease ended an execution nobody retried is finished by the recovery
    /// worker (from the gateway's ledger) or released, in milliseconds. It runs with the reaper.
    #[arg(long, env = "PAGAR_RECOVERY_AFTER_MS", default_value_t = 60_000)]
    pub recovery_after_ms: u64,
    /// How long the gateway simulator takes for `tok_lento`, in milliseconds.
    #[arg(long, env = "PAGAR_SLOW_GATEWAY_MS", default_value_t = 3_000)]
    pub slow_gateway_ms: u64,
    /// How long the gateway simulator holds an authorization (`"captura": false`) before it
    /// lapses unless captured, in milliseconds (default seven days).
    #[arg(
        long,
        env = "PAGAR_AUTHORIZATION_TTL_MS",
        default_value_t = 604_800_000
    )]
    pub authorization_ttl_ms: u64,
    /// How many completed keys are kept in memory so replays skip the database.
    #[arg(long, env = "PAGAR_REPLAY_CACHE_ENTRIES", default_value_t = 100_000)]
    pub replay_cache_entries: usize,
    /// Largest request body, in bytes (larger: 413).
    #[arg(long, env = "PAGAR_MAX_BODY_BYTES", default_value_t = 16 * 1024)]
    pub max_body_bytes: usize,
    /// Largest total size of request headers, in bytes (larger: 431).
    #[arg(long, env = "PAGAR_MAX_HEADER_BYTES", default_value_t = 8 * 1024)]
    pub max_header_bytes: usize,
    /// Longest time to receive a whole request body, in milliseconds (longer: 408). A client
    /// trickling its body cannot hold a connection for longer than this.
    #[arg(long, env = "PAGAR_BODY_TIMEOUT_MS", default_value_t = 10_000)]
    pub body_timeout_ms: u64,
    /// Web origins allowed to call the API from a browser (CORS): `*` for any, a comma-separated
    /// list, or empty for none.
    #[arg(long, env = "PAGAR_CORS_ORIGINS", default_value = "*")]
    pub cors_origins: String,
    /// Shift the server's clock by this many milliseconds (tests of clock skew).
    #[arg(
        long,
        env = "PAGAR_CLOCK_OFFSET_MS",
        default_value_t = 0,
        allow_hyphen_values = true
    )]
    pub clock_offset_ms: i64,
    /// Log as JSON lines instead of text.
    #[arg(long, env = "PAGAR_LOG_JSON")]
    pub log_json: bool,
    /// Fault injection at start (changeable at run time through PUT /admin/faults).
    #[command(flatten)]
    pub faults: Faults,
    /// The Pix provider (off unless `--pix-provider-url` is given).
    #[command(flatten)]
    pub pix: PixConfig,
    /// The card machine's provider (off unless `--maquininha-url` is given).
    #[command(flatten)]
    pub maquininha: MachineConfig,
    /// Running inside another process (the desktop app's sandbox): faults that would take the
    /// host process down with it (`crash_after_charge`) are refused.
    #[arg(skip)]
    pub embedded: bool,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let merchants: Vec<&MerchantId> = self.api_keys.iter().map(|(_, m)| m).collect();
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("database", &self.database)
            .field(
                "database_url",
                &self.database_url.as_deref().map(crate::redact::redact_url),
            )
            .field("gateway_database", &self.gateway_database)
            .field("gateway_url", &self.gateway_url)
            .field("gateway_token", &"***")
            .field("pg_max_connections", &self.pg_max_connections)
            .field("api_keys", &format_args!("*** for {merchants:?}"))
            .field("api_keys_file", &self.api_keys_file)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "***"))
            .field("key_retention_secs", &self.key_retention_secs)
            .field("reaper_interval_secs", &self.reaper_interval_secs)
            .field("reaper_batch", &self.reaper_batch)
            .field("lease_ms", &self.lease_ms)
            .field("recovery_after_ms", &self.recovery_after_ms)
            .field("slow_gateway_ms", &self.slow_gateway_ms)
            .field("authorization_ttl_ms", &self.authorization_ttl_ms)
            .field("replay_cache_entries", &self.replay_cache_entries)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_header_bytes", &self.max_header_bytes)
            .field("body_timeout_ms", &self.body_timeout_ms)
            .field("cors_origins", &self.cors_origins)
            .field("clock_offset_ms", &self.clock_offset_ms)
            .field("log_json", &self.log_json)
            .field("faults", &self.faults)
            .field("pix", &self.pix)
            .field("maquininha", &self.maquininha)
            .field("embedded", &self.embedded)
            .finish()
    }
}

/// Where Pix charges are made, and how their confirmations are checked.
#[derive(Clone, clap::Args)]
pub struct PixConfig {
    /// Base URL of the Pix provider's API Pix (the bundled `pix-provider` simulator, or a PSP).
    /// Without it, a Pix is answered 422 `pix-indisponivel`.
    #[arg(long, env = "PAGAR_PIX_PROVIDER_URL")]
    pub pix_provider_url: Option<String>,
    /// The merchant's OAuth2 client id at the PSP (client credentials, as the API Pix asks).
    #[arg(long, env = "PAGAR_PIX_CLIENT_ID", default_value = "pagar-sandbox")]
    pub pix_client_id: String,
    /// The merchant's OAuth2 client secret at the PSP.
    #[arg(
        long,
        env = "PAGAR_PIX_CLIENT_SECRET",
        default_value = "pix_sandbox_secret"
    )]
    pub pix_client_secret: String,
    /// The PSP's token endpoint: a path on the provider's URL, or a URL of its own.
    #[arg(long, env = "PAGAR_PIX_TOKEN_URL", default_value = "/oauth/token")]
    pub pix_token_url: String,
    /// The merchant's client certificate for the PSP's mutual TLS: its chain and private key in
    /// one PEM file.
    #[arg(long, env = "PAGAR_PIX_CLIENT_CERT")]
    pub pix_client_cert: Option<std::path::PathBuf>,
    /// A CA (PEM) to trust for the PSP's server certificate, besides the system's roots.
    #[arg(long, env = "PAGAR_PIX_CA_CERT")]
    pub pix_ca_cert: Option<std::path::PathBuf>,
    /// The merchant's Pix key (`chave`) the charges are made to.
    #[arg(
        long,
        env = "PAGAR_PIX_KEY",
        default_value = "pagar-sandbox@pix.example"
    )]
    pub pix_key: String,
    /// Secrets the provider signs webhooks with (`whsec_` + base64), comma separated: during a
    /// rotation, the old and the new. Empty: every webhook is refused and only the poll settles.
    #[arg(long, env = "PAGAR_PIX_WEBHOOK_SECRETS", default_value = "")]
    pub pix_webhook_secrets: String,
    /// Where the provider should send webhooks (registered at start with `PUT /webhook/{chave}`);
    /// `auto`: this server's own address + `/webhooks`. Unset: nothing is registered.
    #[arg(long, env = "PAGAR_PIX_WEBHOOK_URL")]
    pub pix_webhook_url: Option<String>,
    /// Seconds a Pix charge is shown when the request does not say.
    #[arg(long, env = "PAGAR_PIX_EXPIRY_SECS", default_value_t = 600)]
    pub pix_expiry_secs: u32,
    /// How often waiting Pix charges are read from the provider (a lost webhook is found so,
    /// and an expired charge removed), in milliseconds.
    #[arg(long, env = "PAGAR_PIX_POLL_MS", default_value_t = 5_000)]
    pub pix_poll_ms: u64,
    /// How often the Pix received in the last day are listed at the provider (`GET /pix`) and
    /// any this server had not recorded is settled (also once at start), in seconds.
    #[arg(long, env = "PAGAR_PIX_RECONCILE_SECS", default_value_t = 300)]
    pub pix_reconcile_secs: u64,
    /// The receiver's name printed in the BR Code.
    #[arg(long, env = "PAGAR_MERCHANT_NAME", default_value = "Pagar Sandbox")]
    pub merchant_name: String,
    /// The receiver's city printed in the BR Code.
    #[arg(long, env = "PAGAR_MERCHANT_CITY", default_value = "Sao Paulo")]
    pub merchant_city: String,
}

impl PixConfig {
    /// The TLS the PSP asks of this server: its client certificate and the PSP's CA.
    pub fn client_tls(&self) -> crate::provider_http::ClientTls {
        crate::provider_http::ClientTls {
            client_pem: self.pix_client_cert.clone(),
            ca_pem: self.pix_ca_cert.clone(),
        }
    }
}

impl std::fmt::Debug for PixConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PixConfig")
            .field("pix_provider_url", &self.pix_provider_url)
            .field("pix_client_id", &self.pix_client_id)
            .field("pix_client_secret", &"***")
            .field("pix_token_url", &self.pix_token_url)
            .field("pix_client_cert", &self.pix_client_cert)
            .field("pix_ca_cert", &self.pix_ca_cert)
            .field("pix_key", &self.pix_key)
            .field("pix_webhook_secrets", &"***")
            .field("pix_webhook_url", &self.pix_webhook_url)
            .field("pix_expiry_secs", &self.pix_expiry_secs)
            .field("pix_poll_ms", &self.pix_poll_ms)
            .field("pix_reconcile_secs", &self.pix_reconcile_secs)
            .field("merchant_name", &self.merchant_name)
            .field("merchant_city", &self.merchant_city)
            .finish()
    }
}

/// Where card-machine orders are made (Mercado Pago's Point Orders API, or the bundled
/// `maquininha` simulator), and how their notifications are checked.
#[derive(Clone, clap::Args)]
pub struct MachineConfig {
    /// Base URL of the card machine's provider. Without it, a payment naming a `maquininha` is
    /// answered 422 `maquininha-indisponivel`.
    #[arg(long, env = "PAGAR_MAQUININHA_URL")]
    pub maquininha_url: Option<String>,
    /// The provider's access token (`Authorization: Bearer …`).
    #[arg(
        long,
        env = "PAGAR_MAQUININHA_TOKEN",
        default_value = "maquininha_sandbox_token"
    )]
    pub maquininha_token: String,
    /// The secret the provider signs notifications with (its application's "assinatura
    /// secreta"). Empty: every notification is refused and only the poll settles.
    #[arg(long, env = "PAGAR_MAQUININHA_SECRET", default_value = "")]
    pub maquininha_secret: String,
    /// How often waiting orders are read from the provider (a lost notification is found so),
    /// in milliseconds.
    #[arg(long, env = "PAGAR_MAQUININHA_POLL_MS", default_value_t = 2_000)]
    pub maquininha_poll_ms: u64,
}

impl std::fmt::Debug for MachineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MachineConfig")
            .field("maquininha_url", &self.maquininha_url)
            .field("maquininha_token", &"***")
            .field("maquininha_secret", &"***")
            .field("maquininha_poll_ms", &self.maquininha_poll_ms)
            .finish()
    }
}

/// Longest lease, retention or timeout the server accepts: ten years, far inside `i64` milliseconds.
const MAX_DURATION_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// The shortest API key or admin token the server takes.
const MIN_SECRET_LEN: usize = 8;

fn parse_key_pair(s: &str) -> Result<(String, MerchantId), String> {
    let (key, merchant) = s
        .trim()
        .split_once('=')
        .ok_or_else(|| format!("esperado CHAVE=MERCHANT, recebido {s:?}"))?;
    let key = key.trim();
    if key.len() < MIN_SECRET_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "chave de API {key:?}: use pelo menos {MIN_SECRET_LEN} caracteres ASCII visíveis"
        ));
    }
    Ok((
        key.to_string(),
        MerchantId::parse(merchant.trim()).map_err(|e| e.to_string())?,
    ))
}

impl Config {
    /// A configuration for an in-process sandbox: one merchant, one key, an admin token, and the
    /// defaults of every flag. The process environment is not read: a `DATABASE_URL`, a key file
    /// or a fault profile meant for a standalone server must not reach an embedded sandbox.
    pub fn sandbox(database: PathBuf, api_key: &str, merchant: &str, admin_token: &str) -> Self {
        use clap::{CommandFactory, FromArgMatches};
        let defaults = Self::command()
            .mut_args(|arg| arg.env(None::<&str>))
            .get_matches_from(["payment-api"]);
        let mut c = Self::from_arg_matches(&defaults).expect("the defaults parse");
        c.listen = "127.0.0.1:0".parse().expect("a valid address");
        c.database = database;
        c.api_keys =
            vec![parse_key_pair(&format!("{api_key}={merchant}")).expect("a valid sandbox key")];
        c.admin_token = Some(admin_token.to_string());
        c.cors_origins = String::new(); // the app's webview never calls the sandbox itself
        c.embedded = true;
        c
    }

    /// Refuses values that would overflow or make no sense, with the flag's name.
    pub fn validate(&self) -> Result<(), String> {
        let checks = [
            ("--lease-ms", self.lease_ms, 1),
            (
                "--key-retention-secs",
                self.key_retention_secs.saturating_mul(1000),
                1000,
            ),
            (
                "--reaper-interval-secs",
                self.reaper_interval_secs.saturating_mul(1000),
                1000,
            ),
            ("--body-timeout-ms", self.body_timeout_ms, 1),
            ("--recovery-after-ms", self.recovery_after_ms, 0),
            ("--slow-gateway-ms", self.slow_gateway_ms, 0),
            ("--authorization-ttl-ms", self.authorization_ttl_ms, 1),
            ("--pix-poll-ms", self.pix.pix_poll_ms, 10),
            (
                "--maquininha-poll-ms",
                self.maquininha.maquininha_poll_ms,
                10,
            ),
            (
                "--pix-reconcile-secs",
                self.pix.pix_reconcile_secs.saturating_mul(1000),
                1000,
            ),
        ];
        for (flag, ms, min) in checks {
            if ms < min || ms > MAX_DURATION_MS {
                return Err(format!(
                    "{flag}: fora do intervalo aceito (de {min} ms a 10 anos)"
                ));
            }
        }
        if let Some(token) = self.admin_token.as_deref().filter(|t| !t.is_empty()) {
            if token.len() < MIN_SECRET_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!(
                    "--admin-token: use pelo menos {MIN_SECRET_LEN} caracteres ASCII visíveis, como uma chave de API"
                ));
            }
        }
        if self.clock_offset_ms.unsigned_abs() > MAX_DURATION_MS {
            return Err("--clock-offset-ms: fora do intervalo aceito (até 10 anos)".into());
        }
        if !crate::domain::PIX_EXPIRY_RANGE.contains(&self.pix.pix_expiry_secs) {
            return Err(format!(
                "--pix-expiry-secs: de {} a {} segundos",
                crate::domain::PIX_EXPIRY_RANGE.start(),
                crate::domain::PIX_EXPIRY_RANGE.end()
            ));
        }
        crate::pix::webhook::Verifier::parse(&self.pix.pix_webhook_secrets)?;
        self.pix
            .client_tls()
            .client()
            .map_err(|e| format!("--pix-client-cert/--pix-ca-cert: {e}"))?;
        self.faults.validate()?;
        if self.embedded && self.faults.crash_after_charge_probability > 0.0 {
            return Err("crash_after_charge não existe na API embutida no app".into());
        }
        Ok(())
    }

    /// The key retention in milliseconds (the reaper's cutoff and the replay cache's horizon).
    pub fn key_retention_ms(&self) -> crate::clock::Millis {
        i64::try_from(self.key_retention_secs.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    /// Every API key with its merchant, from flags, env and the key file.
    pub fn load_api_keys(&self) -> Result<HashMap<String, MerchantId>, String> {
        let mut keys: HashMap<String, MerchantId> = self.api_keys.iter().cloned().collect();
        if let Some(path) = &self.api_keys_file {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let (k, m) = parse_key_pair(line)
                    .map_err(|e| format!("{}:{}: {e}", path.display(), n + 1))?;
                keys.insert(k, m);
            }
        }
        if keys.is_empty() {
            return Err("nenhuma chave de API configurada: use --api-key CHAVE=MERCHANT, PAGAR_API_KEYS ou --api-keys-file".into());
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admin_token_shorter_than_an_api_key_is_refused() {
        let mut c = Config::sandbox("x.db".into(), "sk_test_loja", "loja", "curto");
        assert!(c.validate().unwrap_err().contains("--admin-token"));
        c.admin_token = Some("token com espaço".into());
        assert!(c.validate().is_err());
        c.admin_token = Some("qa-admin-local".into());
        assert!(c.validate().is_ok());
    }

    #[test]
    fn debug_never_shows_an_api_key_the_admin_token_or_the_database_password() {
        let mut c = Config::sandbox(
            "x.db".into(),
            "sk_live_segredo_loja",
            "loja",
            "token-admin-segredo",
        );
        c.database_url = Some("postgres://pagar:pg-segredo@db/pagar".into());
        let shown = format!("{c:?} {c:#?}");
        for secret in ["sk_live_segredo_loja", "token-admin-segredo", "pg-segredo"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.contains("loja") && shown.contains("db/pagar"),
            "{shown}"
        );
    }

    #[test]
    fn app_state_debug_never_shows_the_keys_or_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let c = Config::sandbox(
            dir.path().join("s.db"),
            "sk_live_segredo_loja",
            "loja",
            "token-admin-segredo",
        );
        let store = std::sync::Arc::new(
            crate::store::SqliteStore::open(
                c.database.clone(),
                std::sync::Arc::new(crate::clock::SystemClock::default()),
            )
            .unwrap(),
        );
        let gateway = std::sync::Arc::new(crate::gateway::simulator::SimulatedGateway::new(
            store.clone(),
            std::time::Duration::ZERO,
        ));
        let keys = c.api_keys.iter().cloned().collect();
        let state = crate::state::AppState::new(&c, keys, store, gateway, None);
        let shown = format!("{state:?}");
        for secret in ["sk_live_segredo_loja", "token-admin-segredo"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
    }

    #[test]
    fn a_key_pair_needs_an_equals_sign_and_a_valid_merchant() {
        assert!(parse_key_pair("sk_test_123456=loja1").is_ok());
        assert!(parse_key_pair("sk_test_123456").is_err());
        assert!(parse_key_pair("sk_test_123456=loja 1").is_err());
        assert!(parse_key_pair("short=loja").is_err());
    }

    #[test]
    fn the_sandbox_ignores_the_environment() {
        // Set for this process only; no other test reads these variables.
        std::env::set_var("DATABASE_URL", "postgres://elsewhere/db");
        std::env::set_var("PAGAR_FAULT_5XX", "1");
        std::env::set_var("PAGAR_LEASE_MS", "1");
        let c = Config::sandbox("x.db".into(), "sk_test_cccccccc", "loja_c", "admin");
        for var in ["DATABASE_URL", "PAGAR_FAULT_5XX", "PAGAR_LEASE_MS"] {
            std::env::remove_var(var);
        }
        assert_eq!(c.database_url, None);
        assert_eq!(c.faults.error_5xx_probability, 0.0);
        assert_eq!(c.lease_ms, 10_000);
    }

    #[test]
    fn values_that_would_overflow_are_refused_with_the_flag_name() {
        let mut c = Config::sandbox("x.db".into(), "sk_test_cccccccc", "loja_c", "admin-token");
        assert!(c.validate().is_ok());
        c.lease_ms = u64::MAX;
        assert!(c.validate().unwrap_err().contains("--lease-ms"));
        c.lease_ms = 10_000;
        c.key_retention_secs = u64::MAX / 10;
        assert!(c.validate().unwrap_err().contains("--key-retention-secs"));
        c.key_retention_secs = 60;
        c.lease_ms = 0;
        assert!(c.validate().unwrap_err().contains("--lease-ms"));
        c.lease_ms = 10_000;
        c.faults.crash_after_charge_probability = 0.5;
        assert!(c.validate().unwrap_err().contains("crash_after_charge"));
    }

    #[test]
    fn the_key_file_accepts_comments_and_reports_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        std::fs::write(
            &path,
            "# lojas\nsk_test_aaaaaaaa=loja_a\n\nsk_test_bbbbbbbb = loja_b\nruim\n",
        )
        .unwrap();
        let mut c = Config::sandbox("x.db".into(), "sk_test_cccccccc", "loja_c", "admin");
        c.api_keys_file = Some(path.clone());
        let err = c.load_api_keys().unwrap_err();
        assert!(err.contains(":5:"), "{err}");
        std::fs::write(
            &path,
            "# lojas\nsk_test_aaaaaaaa=loja_a\nsk_test_bbbbbbbb = loja_b\n",
        )
        .unwrap();
        let keys = c.load_api_keys().unwrap();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys["sk_test_bbbbbbbb"].as_ref(), "loja_b");
    }
}
