//! Where the app keeps its data and which payment API it talks to.
//!
//! - `PAGAR_DATA_DIR` overrides the app data folder (`~/.local/share/dev.pagar.caixa` on Linux).
//! - `PAGAR_API_URL` and `PAGAR_API_KEY` (or `api_url` and `api_key` in `<data>/config.json`)
//!   point the app at a real payment API; `PAGAR_ADMIN_TOKEN` (or `admin_token`) lets the QA
//!   panel change its fault profile. With none of them, the app runs the payment API in-process
//!   on loopback with a sandbox database: the embedded default.
//! - `PAGAR_CA_CERT` (`ca_cert`): a PEM file of a private CA to trust for an `https://` API.
//! - `PAGAR_ALLOW_INSECURE_HTTP=1` (`allow_insecure_http: true`): allow plain `http://` to a host
//!   that is not loopback (a test network only).
//! - `PAGAR_QA=1` (`qa: true`): QA mode with an external API: the network path goes through a
//!   relay that "Simular offline" can cut. The embedded sandbox is always in QA mode.
//! - `PAGAR_SECRET_STORE=keyring` (`secret_store: "keyring"`): the API key and admin token live in
//!   the desktop's secret store; a key found in `config.json` is moved there and removed from the
//!   file. Where no secret store runs, the app says so and keeps using the file (`0600`).
//! - `terminal`: this till's name (`caixa-…`), generated once and written to `config.json`, where
//!   it can be edited; `PAGAR_TERMINAL` overrides it. Sent with every payment.
//! - `loja`: the store's name on receipts (`PAGAR_LOJA`).
//! - `fuso_horario`: the store's offset from UTC, `-03:00` by default (`PAGAR_FUSO_HORARIO`):
//!   receipts' times, sale numbers and the till's closing go by its day.
//! - How the store takes cards: `juros` (`"loja"`, parcelado sem juros, the default; or
//!   `"emissor"`, com juros do emissor; `PAGAR_JUROS`), `parcelas_max` (1–12, default 12;
//!   `PAGAR_PARCELAS_MAX`), `parcela_minima` (the least installment, `"5,00"` by default;
//!   `PAGAR_PARCELA_MINIMA`) and `aceita_voucher` (default `true`; `PAGAR_ACEITA_VOUCHER`).
//! - `confirmar_apos_comprovante` (default `false`; `PAGAR_CONFIRMAR_APOS_COMPROVANTE`): every
//!   card payment is authorized only and captured once its receipt is on screen; one left
//!   unconfirmed (the till stopped first) is undone. Off, only the card parts of a divided sale
//!   are.
//! - `maquininha` (`PAGAR_MAQUININHA`): the id of the card machine beside this till at its
//!   provider (e.g. `PAGAR_SIM__POS-1`); F6 then offers "Cartão na maquininha". The embedded
//!   sandbox runs a simulated machine, `PAGAR_SIM__POS-1`, unless this says another.
//! - `PAGAR_NFCE_XSD_DIR`: the official NFC-e schemas the embedded sandbox's SEFAZ simulator
//!   checks every note against (`make deps-nfce` puts them in `target/nfce-xsd`, which a build
//!   from the workspace finds by itself; the package installs them in `/usr/share/pagar/nfce-xsd`).
//!   Without them the sandbox issues no notes and says so.

use checkout_core::domain::MAX_PARCELAS;
use checkout_core::{Centavos, Financing, PlanRules};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The simulated card machine of the embedded sandbox.
pub const SANDBOX_MACHINE: &str = "PAGAR_SIM__POS-1";

/// The API the app pays against. Its `Debug` never shows the key or the token.
#[derive(Clone, PartialEq, Eq)]
pub enum ApiTarget {
    /// Start the payment API in this process, on loopback, with a sandbox database.
    Embedded,
    /// A payment API somewhere else.
    External {
        /// Base URL.
        url: String,
        /// Merchant API key.
        key: String,
        /// Admin token for the QA fault profile, if any.
        admin_token: Option<String>,
    },
}

/// Resolved settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The app's data folder: outbox, sandbox database, exports.
    pub data_dir: PathBuf,
    /// Which API.
    pub api: ApiTarget,
    /// A private CA to trust (PEM).
    pub ca_cert: Option<PathBuf>,
    /// Plain `http://` allowed to a host that is not loopback.
    pub allow_insecure_http: bool,
    /// QA mode: the network path goes through the relay "Simular offline" cuts.
    pub qa: bool,
    /// Where the secrets were read from: `keyring`, `config.json`, or `ambiente`.
    pub secrets_from: &'static str,
    /// What the cashier should know about the setup (e.g. the secret store is unavailable).
    pub notices: Vec<String>,
    /// This till's name.
    pub terminal: String,
    /// Whether `terminal` was made now (and must be written to `config.json`).
    pub terminal_is_new: bool,
    /// The store's name on receipts.
    pub loja: String,
    /// The store's offset from UTC.
    pub utc_offset: time::UtcOffset,
    /// Which card plans the till offers.
    pub plans: PlanRules,
    /// Every card payment authorized first, captured once its receipt is shown.
    pub confirm_after_receipt: bool,
    /// The card machine beside this till (its id at the machine's provider), if any.
    pub maquininha: Option<String>,
    /// The NFC-e schemas for the sandbox's SEFAZ simulator, where they were found.
    pub nfce_xsd_dir: Option<PathBuf>,
}

/// Where the NFC-e schemas are looked for: `PAGAR_NFCE_XSD_DIR`, the package's folder, then the
/// workspace this binary was built in.
fn nfce_xsd_dir(env: Option<String>) -> Option<PathBuf> {
    let candidates = env.map(PathBuf::from).into_iter().chain([
        PathBuf::from("/usr/share/pagar/nfce-xsd"),
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/nfce-xsd"),
    ]);
    candidates
        .into_iter()
        .find(|d| d.join("nfe_v4.00.xsd").is_file())
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    api_url: Option<String>,
    api_key: Option<String>,
    admin_token: Option<String>,
    ca_cert: Option<PathBuf>,
    allow_insecure_http: Option<bool>,
    qa: Option<bool>,
    secret_store: Option<String>,
    terminal: Option<String>,
    loja: Option<String>,
    fuso_horario: Option<String>,
    juros: Option<String>,
    parcelas_max: Option<u8>,
    parcela_minima: Option<String>,
    aceita_voucher: Option<bool>,
    confirmar_apos_comprovante: Option<bool>,
    maquininha: Option<String>,
}

impl std::fmt::Debug for ApiTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiTarget::Embedded => f.write_str("Embedded"),
            ApiTarget::External {
                url, admin_token, ..
            } => f
                .debug_struct("External")
                .field("url", url)
                .field("key", &"***")
                .field("admin_token", &admin_token.as_ref().map(|_| "***"))
                .finish(),
        }
    }
}

/// Reads `-03:00`, `+05:30`, `Z`.
fn parse_offset(s: &str) -> Result<time::UtcOffset, String> {
    if s == "Z" || s == "UTC" {
        return Ok(time::UtcOffset::UTC);
    }
    time::UtcOffset::parse(
        s,
        time::macros::format_description!("[offset_hour sign:mandatory]:[offset_minute]"),
    )
    .map_err(|_| format!("fuso_horario {s:?}: use o deslocamento de UTC, como -03:00"))
}

fn flag(name: &str) -> Result<Option<bool>, String> {
    match std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .as_deref()
    {
        None => Ok(None),
        Some("1" | "true" | "sim") => Ok(Some(true)),
        Some("0" | "false" | "nao" | "não") => Ok(Some(false)),
        Some(other) => Err(format!("{name}={other}: use 1 ou 0")),
    }
}

impl Settings {
    /// Reads the environment, then `<data>/config.json`.
    pub fn resolve(default_data_dir: PathBuf) -> Result<Self, String> {
        let data_dir = std::env::var_os("PAGAR_DATA_DIR")
            .map(PathBuf::from)
            .unwrap_or(default_data_dir);
        let mut file = read_file_config(&data_dir)?;
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let keyring = match env("PAGAR_SECRET_STORE")
            .or(file.secret_store.clone())
            .as_deref()
        {
            None | Some("file" | "arquivo") => false,
            Some("keyring" | "cofre") => true,
            Some(other) => {
                return Err(format!(
                    "secret_store {other:?}: use \"keyring\" (cofre do sistema) ou \"file\""
                ))
            }
        };
        let mut notices = Vec::new();
        let mut secrets_from = "config.json";
        if keyring {
            match secrets_in_keyring(&data_dir, &mut file) {
                Ok(()) => secrets_from = "keyring",
                Err(why) => {
                    tracing::warn!(%why, "secret store unavailable; using config.json (0600)");
                    notices.push(format!(
                        "{why}: a chave da API fica em config.json, legível só por este usuário"
                    ));
                }
            }
        }
        if env("PAGAR_API_KEY").is_some() {
            secrets_from = "ambiente";
        }
        let url = env("PAGAR_API_URL").or(file.api_url);
        let key = env("PAGAR_API_KEY").or(file.api_key);
        let admin_token = env("PAGAR_ADMIN_TOKEN").or(file.admin_token);
        let api = match (url, key) {
            (None, None) => ApiTarget::Embedded,
            (Some(url), Some(key)) => ApiTarget::External {
                url,
                key,
                admin_token,
            },
            (Some(_), None) => return Err("PAGAR_API_URL definido sem PAGAR_API_KEY".into()),
            (None, Some(_)) => return Err("PAGAR_API_KEY definido sem PAGAR_API_URL".into()),
        };
        let embedded = api == ApiTarget::Embedded;
        let (terminal, terminal_is_new) = match env("PAGAR_TERMINAL").or(file.terminal) {
            Some(t) => (t, false),
            None => (
                format!("caixa-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]),
                true,
            ),
        };
        let loja = env("PAGAR_LOJA").or(file.loja).unwrap_or_else(|| {
            if embedded {
                "Loja de testes (sandbox)".into()
            } else {
                "Loja".into()
            }
        });
        let utc_offset = match env("PAGAR_FUSO_HORARIO").or(file.fuso_horario) {
            Some(s) => parse_offset(&s)?,
            None => time::macros::offset!(-3),
        };
        let defaults = PlanRules::default();
        let plans = PlanRules {
            financing: match env("PAGAR_JUROS").or(file.juros).as_deref() {
                None => defaults.financing,
                Some(s) => Financing::parse(s).ok_or_else(|| {
                    format!("juros {s:?}: use \"loja\" (sem juros) ou \"emissor\" (com juros)")
                })?,
            },
            max_parcelas: match env("PAGAR_PARCELAS_MAX") {
                Some(s) => Some(
                    s.parse()
                        .map_err(|_| format!("PAGAR_PARCELAS_MAX={s}: use 1 a {MAX_PARCELAS}"))?,
                ),
                None => file.parcelas_max,
            }
            .map(|n: u8| {
                (1..=MAX_PARCELAS)
                    .contains(&n)
                    .then_some(n)
                    .ok_or_else(|| format!("parcelas_max {n}: use 1 a {MAX_PARCELAS}"))
            })
            .transpose()?
            .unwrap_or(defaults.max_parcelas),
            parcela_minima: match env("PAGAR_PARCELA_MINIMA").or(file.parcela_minima) {
                Some(s) => {
                    Centavos::parse_brl(&s).map_err(|e| format!("parcela_minima {s:?}: {e}"))?
                }
                None => defaults.parcela_minima,
            },
            voucher: flag("PAGAR_ACEITA_VOUCHER")?
                .or(file.aceita_voucher)
                .unwrap_or(defaults.voucher),
        };
        let confirm_after_receipt = flag("PAGAR_CONFIRMAR_APOS_COMPROVANTE")?
            .or(file.confirmar_apos_comprovante)
            .unwrap_or(false);
        let maquininha = env("PAGAR_MAQUININHA")
            .or(file.maquininha.clone())
            .or_else(|| embedded.then(|| SANDBOX_MACHINE.to_string()));
        if let Some(m) = &maquininha {
            let ok = (1..=64).contains(&m.len())
                && m.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !ok {
                return Err(format!(
                    "maquininha {m:?}: use o id da maquininha no provedor (1 a 64 letras, dígitos, _ ou -)"
                ));
            }
        }
        Ok(Self {
            plans,
            confirm_after_receipt,
            maquininha,
            nfce_xsd_dir: nfce_xsd_dir(env("PAGAR_NFCE_XSD_DIR")),
            data_dir,
            api,
            ca_cert: env("PAGAR_CA_CERT").map(PathBuf::from).or(file.ca_cert),
            allow_insecure_http: flag("PAGAR_ALLOW_INSECURE_HTTP")?
                .or(file.allow_insecure_http)
                .unwrap_or(false),
            qa: embedded || flag("PAGAR_QA")?.or(file.qa).unwrap_or(false),
            secrets_from,
            notices,
            terminal,
            terminal_is_new,
            loja,
            utc_offset,
        })
    }

    /// Writes a newly made terminal name into `config.json` (0600), keeping what is there, so
    /// the till keeps its name and a person can edit it.
    pub fn remember_terminal(&self) -> Result<(), String> {
        if !self.terminal_is_new {
            return Ok(());
        }
        rewrite_config(&self.data_dir, |obj| {
            obj.insert("terminal".into(), self.terminal.clone().into());
        })
    }

    /// Where receipts are saved.
    pub fn receipt_dir(&self) -> PathBuf {
        self.data_dir.join("comprovantes")
    }

    /// Where closings are saved.
    pub fn closing_dir(&self) -> PathBuf {
        self.data_dir.join("fechamentos")
    }

    /// Where a sale's NFC-e (its signed XML) and its DANFE are saved.
    pub fn nfce_dir(&self) -> PathBuf {
        self.data_dir.join("nfce")
    }

    /// The configuration file.
    pub fn config_path(&self) -> PathBuf {
        self.data_dir.join("config.json")
    }

    /// The outbox database.
    pub fn outbox_path(&self) -> PathBuf {
        self.data_dir.join("outbox.db")
    }

    /// The embedded API's sandbox database.
    pub fn sandbox_db(&self) -> PathBuf {
        self.data_dir.join("sandbox").join("pagar-api.db")
    }

    /// Where exports and session logs go.
    pub fn export_dir(&self) -> PathBuf {
        self.data_dir.join("exports")
    }
}

/// Moves the secrets `config.json` holds into the secret store (and out of the file), then reads
/// them from the store into `file`. Fails when no secret store answers.
fn secrets_in_keyring(dir: &Path, file: &mut FileConfig) -> Result<(), String> {
    use crate::secrets::{self, Secret};
    let in_file = [
        (Secret::ApiKey, file.api_key.clone()),
        (Secret::AdminToken, file.admin_token.clone()),
    ];
    let mut moved = false;
    for (secret, value) in &in_file {
        if let Some(v) = value {
            secrets::set(dir, *secret, v)?;
            moved = true;
        }
    }
    for secret in [Secret::ApiKey, Secret::AdminToken] {
        if secrets::adopt_legacy(dir, secret)? {
            tracing::warn!(dir = %dir.display(), secret = secret.name(), "secret of an earlier version moved to this data folder's entry");
        }
    }
    if moved {
        rewrite_config(dir, |obj| {
            obj.remove("api_key");
            obj.remove("admin_token");
        })?;
        tracing::info!(dir = %dir.display(), "secrets moved from config.json to the secret store");
    }
    let (api_key, admin_token) = (
        secrets::get(dir, Secret::ApiKey)?,
        secrets::get(dir, Secret::AdminToken)?,
    );
    file.api_key = api_key;
    file.admin_token = admin_token;
    Ok(())
}

/// Changes `<dir>/config.json` (an empty object when there is none) and writes it back 0600,
/// keeping every field `change` does not touch.
fn rewrite_config(
    dir: &Path,
    change: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) -> Result<(), String> {
    let path = dir.join("config.json");
    let mut json: serde_json::Value = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let obj = json
        .as_object_mut()
        .ok_or_else(|| format!("{}: não é um objeto JSON", path.display()))?;
    change(obj);
    let pretty = serde_json::to_vec_pretty(&json).expect("JSON serialises");
    durable_sqlite::private::write_file(&path, &pretty)
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn read_file_config(dir: &Path) -> Result<FileConfig, String> {
    let path = dir.join("config.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileConfig::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}
