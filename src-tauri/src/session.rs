//! What the running app holds: the checkout engine, the (embedded or external) payment API it
//! talks to, the QA relay in QA mode, and the QA session log.

use crate::admin::AdminClient;
use crate::error::{AppError, Result};
use crate::events::Streams;
use crate::link::QaRelay;
use crate::settings::{ApiTarget, Settings};
use checkout_core::Checkout;
use durable_sqlite::private;
use payment_api::faults::Faults;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod log;

use log::{push_log, spawn_logger, SessionLog};

const SANDBOX_MERCHANT: &str = "loja_sandbox";
/// Completed keys the embedded server keeps in memory.
const EMBEDDED_REPLAY_CACHE: usize = 64;

/// The app's state: a started session, or why it could not start.
pub struct Session(std::result::Result<Running, NotStarted>);

/// Why the session did not start: another window holds the data folder, or anything else (a
/// configuration to correct), with the message.
#[derive(Debug, Clone)]
enum NotStarted {
    OtherWindow(String),
    Failed(String),
}

impl Session {
    /// Starts everything; a failure is kept so the window can say what went wrong.
    pub async fn start(settings: std::result::Result<Settings, String>) -> Self {
        let started = match settings {
            Ok(s) => Running::start(s).await.map_err(|e| match e {
                AppError::Core(checkout_core::CoreError::AlreadyOpen(path)) => {
                    NotStarted::OtherWindow(path.display().to_string())
                }
                other => NotStarted::Failed(other.to_string()),
            }),
            Err(e) => Err(NotStarted::Failed(e)),
        };
        if let Err(e) = &started {
            tracing::error!(error = ?e, "Pagar could not start");
        }
        Self(started)
    }

    /// The running session, or the startup error.
    pub fn get(&self) -> Result<&Running> {
        self.0.as_ref().map_err(|e| match e {
            NotStarted::OtherWindow(path) => AppError::OtherWindow(path.clone()),
            NotStarted::Failed(why) => AppError::Startup(why.clone()),
        })
    }
}

/// Facts the UI shows about the session.
#[derive(Debug, Clone, Serialize)]
pub struct AppInfo {
    /// `embutido` or `externo`.
    pub modo: &'static str,
    /// The API as configured (not the link).
    pub api_url: String,
    /// The app's data folder.
    pub data_dir: PathBuf,
    /// Where exports go.
    pub export_dir: PathBuf,
    /// Test card tokens to offer (the sandbox's; an external API may know others).
    pub cartoes: Vec<&'static str>,
    /// Whether the QA panel can change the server's fault profile.
    pub faults_available: bool,
    /// Whether QA mode is on ("Simular offline" available).
    pub qa: bool,
    /// Whether the Pix provider is the embedded simulator (the QA "customer pays" control).
    pub pix_simulado: bool,
    /// Where the API key was read from (`keyring`, `config.json`, `ambiente`).
    pub secrets_from: &'static str,
    /// What the cashier should know about the setup.
    pub notices: Vec<String>,
    /// Process start to the window's first painted frame, once known.
    pub first_paint_ms: Option<u64>,
    /// Of that, process start to the page's navigation (the window and its web process made;
    /// the rest is the page's own start), once known.
    pub navigation_ms: Option<u64>,
    /// This till's name.
    pub terminal: String,
    /// The store's name.
    pub loja: String,
    /// The store's offset from UTC, in minutes (the history shows times in the store's zone).
    pub utc_offset_minutes: i32,
    /// Whether the store takes vouchers (the "forma" list offers one).
    pub aceita_voucher: bool,
    /// The card machine beside this till, if any (F6 offers "Cartão na maquininha").
    pub maquininha: Option<String>,
    /// The simulated machine's page (embedded sandbox only), where QA plays the customer.
    pub maquininha_pagina: Option<String>,
    /// Whether the till issues NFC-e (the sandbox, to its SEFAZ simulator).
    pub nfce: bool,
}

/// A session that started: what [`Session::get`] gives every command.
pub struct Running {
    checkout: Checkout,
    relay: Option<QaRelay>,
    settings: Settings,
    api_url: String,
    admin: Option<AdminClient>,
    _server: Option<payment_api::RunningServer>,
    pix: Option<PixSandbox>,
    machine: Option<maquininha::RunningMachine>,
    _acquirer: Option<adquirente::RunningAcquirer>,
    sefaz: Option<sefaz::RunningSefaz>,
    log: Arc<Mutex<SessionLog>>,
    streams: Streams,
}

/// The embedded sandbox's Pix provider simulator, and the QA client of its "customer pays"
/// control.
struct PixSandbox {
    provider: pix_provider::RunningProvider,
    token: String,
    http: reqwest::Client,
}

impl Running {
    async fn start(settings: Settings) -> Result<Self> {
        // The data folder holds payments and may hold the merchant's key: the owner's alone.
        private::create_dir(&settings.data_dir)
            .and_then(|()| private::tighten(&settings.config_path(), 0o600))
            .map_err(|e| AppError::Startup(format!("{}: {e}", settings.data_dir.display())))?;
        settings.remember_terminal().map_err(AppError::Startup)?;
        let (api_url, api_key, admin_token, server, pix, machine, acquirer) = match &settings.api {
            ApiTarget::Embedded => {
                let admin = admin_token();
                // The Pix provider simulator, on loopback like the API, signing its webhooks
                // with a secret made for this run.
                let pix_token = format!("pix_{}", uuid::Uuid::new_v4().simple());
                let secret = format!("whsec_{}", uuid::Uuid::new_v4().simple());
                private::create_dir(&settings.data_dir.join("sandbox"))
                    .map_err(|e| AppError::Startup(e.to_string()))?;
                // As PSPs ask it: the API Pix over mutual TLS with the merchant's certificate
                // (made once in the sandbox folder) and OAuth2 client credentials.
                let mut pix_config = pix_provider::Config::sandbox(
                    settings.data_dir.join("sandbox").join("pix-provider.db"),
                    &pix_token,
                    &secret,
                );
                pix_config.tls_dir = Some(settings.data_dir.join("sandbox").join("pix-tls"));
                let provider = pix_provider::start(pix_config)
                    .await
                    .map_err(|e| AppError::Startup(format!("simulador Pix embutido: {e}")))?;
                let pix_tls = provider
                    .tls()
                    .map(|files| payment_api::provider_http::ClientTls {
                        client_pem: Some(files.client.clone()),
                        ca_pem: Some(files.ca.clone()),
                    })
                    .unwrap_or_default();
                // The card machine's simulator, its notifications signed with a secret made for
                // this run, playing the machine this till names.
                let machine_token = format!("mq_{}", uuid::Uuid::new_v4().simple());
                let machine_secret = format!("mqs_{}", uuid::Uuid::new_v4().simple());
                let mut machine_config = maquininha::Config::sandbox(
                    settings.data_dir.join("sandbox").join("maquininha.db"),
                    &machine_token,
                    &machine_secret,
                );
                if let Some(m) = &settings.maquininha {
                    machine_config.terminals = m.clone();
                }
                let machine = maquininha::start(machine_config).await.map_err(|e| {
                    AppError::Startup(format!("simulador de maquininha embutido: {e}"))
                })?;
                // The card acquirer (card not present), its ledger a file of its own beside the
                // API's, reached over loopback HTTP as a real acquirer is.
                let acquirer_token = format!("aq_{}", uuid::Uuid::new_v4().simple());
                let acquirer = adquirente::start(adquirente::Config::sandbox(
                    settings.data_dir.join("sandbox").join("adquirente.db"),
                    &acquirer_token,
                ))
                .await
                .map_err(|e| AppError::Startup(format!("simulador do adquirente embutido: {e}")))?;
                // A fresh key each run: nothing outside this process can pay on the sandbox.
                let sandbox_key = format!("sk_sandbox_{}", uuid::Uuid::new_v4().simple());
                let mut config = payment_api::Config::sandbox(
                    settings.sandbox_db(),
                    &sandbox_key,
                    SANDBOX_MERCHANT,
                    &admin,
                );
                // One till is the sandbox's only client and retries only its few unsettled
                // keys: a server's 100 000 cached answers would only grow with every sale (a
                // miss reads the database, as after a restart).
                config.replay_cache_entries = EMBEDDED_REPLAY_CACHE;
                config.pix.pix_provider_url = Some(provider.url());
                config.pix.pix_client_secret = pix_token.clone();
                config.pix.pix_client_cert = pix_tls.client_pem.clone();
                config.pix.pix_ca_cert = pix_tls.ca_pem.clone();
                config.pix.pix_webhook_secrets = secret;
                config.pix.pix_webhook_url = Some("auto".into());
                config.pix.pix_poll_ms = 2_000;
                config.maquininha.maquininha_url = Some(machine.url());
                config.maquininha.maquininha_token = machine_token;
                config.maquininha.maquininha_secret = machine_secret;
                config.maquininha.maquininha_poll_ms = 1_000;
                config.gateway_url = Some(acquirer.url());
                config.gateway_token = acquirer_token;
                let server = payment_api::start(config)
                    .await
                    .map_err(|e| AppError::Startup(format!("API embutida: {e}")))?;
                tell_machine_where(&machine, &server.url()).await?;
                // Its QA controls sit behind the same mutual TLS: the window's "customer pays"
                // presents the merchant's certificate too.
                let pix = PixSandbox {
                    provider,
                    token: pix_token,
                    http: pix_tls.client().map_err(AppError::Startup)?,
                };
                (
                    server.url(),
                    sandbox_key,
                    Some(admin),
                    Some(server),
                    Some(pix),
                    Some(machine),
                    Some(acquirer),
                )
            }
            ApiTarget::External {
                url,
                key,
                admin_token,
            } => (
                url.trim_end_matches('/').to_string(),
                key.clone(),
                admin_token.clone(),
                None,
                None,
                None,
                None,
            ),
        };
        let relay = if settings.qa {
            let url = reqwest::Url::parse(&api_url)
                .map_err(|e| AppError::Startup(format!("endereço da API {api_url:?}: {e}")))?;
            let (host, port) =
                url.host_str()
                    .zip(url.port_or_known_default())
                    .ok_or_else(|| {
                        AppError::Startup(format!("endereço da API {api_url:?} sem host"))
                    })?;
            Some(
                QaRelay::open(host, port)
                    .await
                    .map_err(|e| AppError::Startup(format!("relé de QA: {e}")))?,
            )
        } else {
            None
        };
        let mut config = checkout_core::Config::new(&api_url, api_key);
        config.allow_insecure_http = settings.allow_insecure_http;
        config.ca_cert = settings.ca_cert.clone();
        config.socks_relay = relay.as_ref().map(QaRelay::local_addr);
        config.terminal = Some(settings.terminal.clone());
        config.utc_offset = settings.utc_offset;
        config.confirm_after_receipt = settings.confirm_after_receipt;
        config.maquininha = settings.maquininha.clone();
        config.probe_interval = Duration::from_secs(1);
        config.probe_timeout = Duration::from_millis(1500);
        config.connect_timeout = Duration::from_secs(2);
        // A customer waits at the counter: a request with no answer after 10 s counts as offline.
        config.request_timeout = Duration::from_secs(10);
        config.backoff_cap = Duration::from_secs(10);
        let sefaz = Self::start_sefaz(&settings).await?;
        config.fiscal = match &sefaz {
            // Its certificate made on the first start and kept in the sandbox folder.
            Some(s) => Some(
                checkout_core::fiscal::Emissor::sandbox_kept(
                    &s.url(),
                    &settings
                        .data_dir
                        .join("sandbox")
                        .join("nfce-certificado.p12"),
                )
                .map_err(|e| AppError::Startup(format!("NFC-e do sandbox: {e}")))?,
            ),
            None => None,
        };
        let checkout = Checkout::open(settings.outbox_path(), config).await?;
        let admin = admin_token
            .map(|token| AdminClient::new(&api_url, token, settings.ca_cert.as_deref()))
            .transpose()?;
        let log = Arc::new(Mutex::new(SessionLog::default()));
        spawn_logger(&checkout, log.clone());
        tracing::info!(api = %api_url, data = %settings.data_dir.display(), "Pagar started");
        Ok(Self {
            checkout,
            relay,
            settings,
            api_url,
            admin,
            _server: server,
            pix,
            machine,
            _acquirer: acquirer,
            sefaz,
            log,
            streams: Streams::default(),
        })
    }

    /// The embedded sandbox's SEFAZ simulator (São Paulo, homologação), when the schemas it
    /// checks notes against are there; with an external API the till issues no notes yet.
    async fn start_sefaz(settings: &Settings) -> Result<Option<sefaz::RunningSefaz>> {
        let (ApiTarget::Embedded, Some(xsd)) = (&settings.api, &settings.nfce_xsd_dir) else {
            if settings.api == ApiTarget::Embedded {
                tracing::warn!(
                    "NFC-e desligada: esquemas ausentes (make deps-nfce ou PAGAR_NFCE_XSD_DIR)"
                );
            }
            return Ok(None);
        };
        let config = sefaz::Config::sandbox(
            settings.data_dir.join("sandbox").join("sefaz.db"),
            xsd.clone(),
        );
        let running = sefaz::start(config)
            .await
            .map_err(|e| AppError::Startup(format!("simulador da SEFAZ embutido: {e}")))?;
        Ok(Some(running))
    }

    /// Plays SEFAZ (`normal`, `fora`, `lenta`, `perde-resposta`) at the sandbox's simulator.
    pub async fn qa_sefaz(&self, modo: &str) -> Result<()> {
        let sefaz = self
            .sefaz
            .as_ref()
            .ok_or_else(|| AppError::Qa("a SEFAZ simulada só existe no sandbox embutido".into()))?;
        let body = match modo {
            "normal" | "fora" => serde_json::json!({ "modo": modo }),
            "lenta" => serde_json::json!({ "modo": "lento", "segundos": 10 }),
            "perde-resposta" => serde_json::json!({ "modo": "perde-resposta", "segundos": 10 }),
            other => return Err(AppError::Qa(format!("modo da SEFAZ desconhecido: {other}"))),
        };
        self.note(&format!("QA: SEFAZ {modo}"));
        let r = reqwest::Client::new()
            .put(format!("{}/qa/modo", sefaz.url()))
            .json(&body)
            .send()
            .await
            .map_err(|e| AppError::Qa(format!("SEFAZ simulada: {e}")))?;
        if !r.status().is_success() {
            return Err(AppError::Qa(format!("SEFAZ simulada: {}", r.status())));
        }
        Ok(())
    }

    /// The simulated machine's page, when the sandbox runs one.
    pub fn machine_page(&self) -> Option<String> {
        let machine = self.machine.as_ref()?;
        let id = self.settings.maquininha.as_deref()?;
        Some(format!("{}/terminais/{id}", machine.url()))
    }

    /// QA: the customer pays the Pix `txid` at the embedded sandbox's simulated bank.
    pub async fn qa_pix_pay(&self, txid: &str, webhook: &str, accept_inactive: bool) -> Result<()> {
        let pix = self.pix.as_ref().ok_or_else(|| {
            AppError::invalid("o pagamento simulado do Pix só existe na API embutida (sandbox)")
        })?;
        let res = pix
            .http
            .post(format!("{}/qa/cob/{txid}/pagar", pix.provider.url()))
            .bearer_auth(&pix.token)
            .json(&serde_json::json!({"webhook": webhook, "aceitar_inativa": accept_inactive}))
            .send()
            .await
            .map_err(|e| AppError::invalid(format!("simulador Pix: {e}")))?;
        if res.status().is_success() {
            return Ok(());
        }
        let body: serde_json::Value = res.json().await.unwrap_or_default();
        Err(AppError::invalid(format!(
            "o banco simulado recusou o pagamento: {}",
            body["detail"].as_str().unwrap_or("sem detalhe")
        )))
    }

    /// The checkout engine.
    pub fn checkout(&self) -> &Checkout {
        &self.checkout
    }

    /// Facts for the UI.
    pub fn info(&self) -> AppInfo {
        AppInfo {
            modo: match self.settings.api {
                ApiTarget::Embedded => "embutido",
                ApiTarget::External { .. } => "externo",
            },
            api_url: self.api_url.clone(),
            data_dir: self.settings.data_dir.clone(),
            export_dir: self.settings.export_dir(),
            cartoes: payment_api::payments::sandbox_tokens().collect(),
            faults_available: self.admin.is_some(),
            qa: self.relay.is_some(),
            pix_simulado: self.pix.is_some(),
            secrets_from: self.settings.secrets_from,
            notices: self.settings.notices.clone(),
            first_paint_ms: None,
            navigation_ms: None,
            terminal: self.settings.terminal.clone(),
            loja: self.settings.loja.clone(),
            utc_offset_minutes: self.settings.utc_offset.whole_minutes().into(),
            aceita_voucher: self.settings.plans.voucher,
            maquininha: self.settings.maquininha.clone(),
            maquininha_pagina: self.machine_page(),
            nfce: self.sefaz.is_some(),
        }
    }

    /// The resolved settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Whether QA has cut the network path.
    pub fn offline_simulated(&self) -> bool {
        self.relay.as_ref().is_some_and(QaRelay::is_cut)
    }

    /// Cuts or restores the app's network path to the API (QA mode only).
    pub async fn set_offline(&self, offline: bool) -> Result<()> {
        let relay = self.relay.as_ref().ok_or_else(|| {
            AppError::Qa(
                "simular offline só existe no modo QA (PAGAR_QA=1 ou \"qa\": true na configuração)"
                    .into(),
            )
        })?;
        self.note(if offline {
            "QA: rede cortada (offline simulado)"
        } else {
            "QA: rede restaurada"
        });
        relay
            .set_cut(offline)
            .await
            .map_err(|e| AppError::Qa(format!("relé de QA: {e}")))
    }

    fn admin(&self) -> Result<&AdminClient> {
        self.admin.as_ref().ok_or_else(|| {
            AppError::Qa("perfil de falhas indisponível: configure PAGAR_ADMIN_TOKEN".into())
        })
    }

    /// The server's fault profile.
    pub async fn faults(&self) -> Result<Faults> {
        self.admin()?.faults().await
    }

    /// Replaces the server's fault profile.
    pub async fn set_faults(&self, faults: Faults) -> Result<Faults> {
        self.note(&format!(
            "QA: perfil de falhas {}",
            serde_json::to_string(&faults).unwrap_or_default()
        ));
        self.admin()?.set_faults(&faults).await
    }

    /// Writes `bytes` to the export folder as `<stem>-<timestamp>.<ext>` and returns the path.
    pub fn write_export(&self, stem: &str, ext: &str, bytes: &[u8]) -> Result<PathBuf> {
        let stamp = time::OffsetDateTime::now_utc()
            .format(time::macros::format_description!(
                "[year][month][day]-[hour][minute][second]"
            ))
            .unwrap_or_default();
        self.save(
            &self.settings.export_dir(),
            &format!("{stem}-{stamp}.{ext}"),
            bytes,
        )
    }

    /// Writes `bytes` as `dir/name` (folder 0700, file 0600) and notes it in the session log.
    pub fn save(&self, dir: &std::path::Path, name: &str, bytes: &[u8]) -> Result<PathBuf> {
        private::create_dir(dir).map_err(|e| AppError::Qa(format!("{}: {e}", dir.display())))?;
        let path = dir.join(name);
        private::write_file(&path, bytes)
            .map_err(|e| AppError::Qa(format!("{}: {e}", path.display())))?;
        self.note(&format!("exportado {}", path.display()));
        Ok(path)
    }

    /// The windows' event streams.
    pub fn streams(&self) -> &Streams {
        &self.streams
    }

    /// The session log so far, one line per event.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().expect("log lock").lines()
    }

    fn note(&self, line: &str) {
        push_log(&self.log, line.to_string());
    }
}

/// A random token for the embedded API's admin routes (never leaves this process).
fn admin_token() -> String {
    format!("adm_{}", uuid::Uuid::new_v4().simple())
}

/// Tells the embedded machine simulator where the embedded API takes its notifications.
async fn tell_machine_where(machine: &maquininha::RunningMachine, api: &str) -> Result<()> {
    let res = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| AppError::Startup(e.to_string()))?
        .put(format!("{}/qa/notificacoes", machine.url()))
        .json(&serde_json::json!({"url": format!("{api}/webhooks/maquininha")}))
        .send()
        .await
        .map_err(|e| AppError::Startup(format!("simulador de maquininha embutido: {e}")))?;
    if !res.status().is_success() {
        return Err(AppError::Startup(format!(
            "simulador de maquininha embutido: {}",
            res.status()
        )));
    }
    Ok(())
}
