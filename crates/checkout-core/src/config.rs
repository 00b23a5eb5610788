//! Engine configuration, with defaults a store can run on.

use crate::domain::{Centavos, Total};
use crate::error::{CoreError, Result};
use crate::outbox::OfflineCaps;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// How the engine reaches the payment API and how patient it is. Its `Debug` never shows the
/// API key.
#[derive(Clone)]
pub struct Config {
    /// Base URL of the payment API, e.g. `http://127.0.0.1:8080`.
    pub api_url: String,
    /// Bearer API key of this store's merchant.
    pub api_key: String,
    /// Allow plain `http://` to a host that is not loopback. Off: the merchant's key and the card
    /// tokens would cross the shop's network in clear text, so such a URL is refused.
    pub allow_insecure_http: bool,
    /// A PEM file of certificate authorities to trust besides the system's (a private CA).
    pub ca_cert: Option<PathBuf>,
    /// Route every connection through this SOCKS5 relay. Only the app's QA mode sets it (its
    /// "simulate offline" cuts the relay); production talks to `api_url` directly.
    pub socks_relay: Option<SocketAddr>,
    /// Time to establish a TCP connection before the try counts as offline. Default 3 s.
    pub connect_timeout: Duration,
    /// Time for a whole request before it is abandoned and retried with the same key. Default 15 s.
    pub request_timeout: Duration,
    /// First retry delay ceiling; doubles per try (full jitter). Default 500 ms.
    pub backoff_base: Duration,
    /// Largest retry delay ceiling. Default 30 s.
    pub backoff_cap: Duration,
    /// How often `/health` is probed while offline. Default 2 s.
    pub probe_interval: Duration,
    /// How long one `/health` probe may take before it counts as offline. Default 2 s.
    pub probe_timeout: Duration,
    /// Requests in flight at once across attempts (one per key, always). Default 8.
    pub max_in_flight: usize,
    /// While offline (or not yet known online), refuse a payment above `per_payment` (default
    /// R$ 1.000,00) or one that would make the waiting total pass `total` (default R$ 5.000,00).
    pub offline_caps: OfflineCaps,
    /// How long the server keeps idempotency keys, until the server says (its `GET /health`
    /// advertises `key_retention_secs`; the smaller of the two is used). Default 24 h.
    pub server_key_retention: Duration,
    /// Safety margin: attempts older than retention minus this are looked up by `referencia` before
    /// being sent again. Default 1 h.
    pub retention_margin: Duration,
    /// How long a write waits for another process's lock before `pay` fails. Default 2 s.
    pub busy_timeout: Duration,
    /// Cap on the outbox's size in bytes: past it new payments are refused as "disk full", while
    /// up to as much again stays free to record the outcomes of stored attempts. `None`: no cap.
    pub max_outbox_bytes: Option<u64>,
    /// This till's name, sent with every payment (`terminal`), so one store's tills can be told
    /// apart on the server and each closes only its own payments. 1–64 of `A-Z a-z 0-9 _ . -`.
    pub terminal: Option<String>,
    /// The store's offset from UTC: sale numbers restart and the till closes by this day.
    /// Default −03:00 (Brasília).
    pub utc_offset: time::UtcOffset,
    /// How often the Pix this till closed unpaid in the last hour are asked about, in case the
    /// customer paid one anyway. Default 10 s.
    pub late_pix_recheck: Duration,
    /// "Confirmar após o comprovante": every card payment is authorized only, and captured once
    /// its sale is confirmed with the receipt shown (an unconfirmed one is undone). Off: only the
    /// card parts of a divided sale are. Default off.
    pub confirm_after_receipt: bool,
    /// The card machine beside this till (its id at the machine's provider, e.g.
    /// `PAGAR_SIM__POS-1`); `None`: this till takes no card at a machine.
    pub maquininha: Option<String>,
    /// The store's NFC-e: every sale paid at this till gets its note, issued, signed and sent to
    /// SEFAZ by the engine. `None`: this till issues no notes.
    pub fiscal: Option<crate::fiscal::Emissor>,
}

/// The smallest outbox cap a till accepts: its schema with room for a few hundred attempts
/// (`outbox::schema`'s tests keep the schema under two thirds of it).
pub const MIN_OUTBOX_BYTES: u64 = 320 * 1024;

impl Config {
    /// Defaults for an API at `api_url` with `api_key`.
    pub fn new(api_url: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self {
            api_url: api_url.into().trim_end_matches('/').to_string(),
            api_key: api_key.into(),
            allow_insecure_http: false,
            ca_cert: None,
            socks_relay: None,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(15),
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(30),
            probe_interval: Duration::from_secs(2),
            probe_timeout: Duration::from_secs(2),
            max_in_flight: 8,
            offline_caps: OfflineCaps {
                per_payment: Centavos::new(100_000).ok(),
                total: Total::new(500_000).ok(),
            },
            server_key_retention: Duration::from_secs(24 * 3600),
            retention_margin: Duration::from_secs(3600),
            busy_timeout: Duration::from_secs(2),
            max_outbox_bytes: None,
            terminal: None,
            utc_offset: time::macros::offset!(-3),
            late_pix_recheck: Duration::from_secs(10),
            confirm_after_receipt: false,
            maquininha: None,
            fiscal: None,
        }
    }

    /// Age after which an attempt is looked up before it is sent again, given what the server
    /// said of its retention (if it said).
    pub fn lookup_after(&self, advertised: Option<Duration>) -> Duration {
        advertised
            .map_or(self.server_key_retention, |a| {
                a.min(self.server_key_retention)
            })
            .saturating_sub(self.retention_margin)
    }

    /// Checks the API address: `https://` anywhere, plain `http://` only to a loopback host
    /// unless [`Config::allow_insecure_http`] says otherwise.
    pub fn validate(&self) -> Result<reqwest::Url> {
        if let Some(max) = self.max_outbox_bytes.filter(|&m| m < MIN_OUTBOX_BYTES) {
            return Err(CoreError::Config(format!(
                "limite do banco de pagamentos de {} KiB: o mínimo é {} KiB (a estrutura do banco \
                 sozinha ocupa cerca de 180 KiB, e nenhum pagamento caberia)",
                max / 1024,
                MIN_OUTBOX_BYTES / 1024
            )));
        }
        if let Some(t) = &self.terminal {
            let ok = !t.is_empty()
                && t.len() <= 64
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
            if !ok {
                return Err(CoreError::Config(format!(
                    "terminal {t:?}: use de 1 a 64 caracteres de A-Z, a-z, 0-9, _, . ou -"
                )));
            }
        }
        let url = reqwest::Url::parse(&self.api_url).map_err(|e| {
            CoreError::Config(format!("endereço da API inválido ({}): {e}", self.api_url))
        })?;
        let host = url.host_str().unwrap_or_default();
        match url.scheme() {
            "https" => {}
            "http" if is_loopback(host) || self.allow_insecure_http => {}
            "http" => {
                return Err(CoreError::Config(format!(
                    "a API em {} usa http:// sem criptografia: a chave da loja e os cartões \
                     passariam abertos pela rede. Use https:// ou, só em rede de testes, \
                     \"allow_insecure_http\": true na configuração",
                    self.api_url
                )))
            }
            other => {
                return Err(CoreError::Config(format!(
                    "endereço da API com esquema {other}:// (use https://)"
                )))
            }
        }
        if host.is_empty() {
            return Err(CoreError::Config(format!(
                "endereço da API sem servidor: {}",
                self.api_url
            )));
        }
        Ok(url)
    }
}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("api_url", &self.api_url)
            .field("api_key", &"***")
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("ca_cert", &self.ca_cert)
            .field("socks_relay", &self.socks_relay)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_cap", &self.backoff_cap)
            .field("probe_interval", &self.probe_interval)
            .field("probe_timeout", &self.probe_timeout)
            .field("max_in_flight", &self.max_in_flight)
            .field("offline_caps", &self.offline_caps)
            .field("server_key_retention", &self.server_key_retention)
            .field("retention_margin", &self.retention_margin)
            .field("busy_timeout", &self.busy_timeout)
            .field("max_outbox_bytes", &self.max_outbox_bytes)
            .field("terminal", &self.terminal)
            .field("utc_offset", &self.utc_offset)
            .field("fiscal", &self.fiscal)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_api_key() {
        let c = Config::new("https://api.loja.example", "sk_live_segredo_loja");
        let client = crate::client::PaymentClient::new(&c).unwrap();
        let shown = format!("{c:?} {c:#?} {client:?}");
        assert!(!shown.contains("sk_live_segredo_loja"), "{shown}");
        assert!(shown.contains("api.loja.example"), "{shown}");
    }

    fn check(url: &str, insecure: bool) -> Result<reqwest::Url> {
        let mut c = Config::new(url, "k");
        c.allow_insecure_http = insecure;
        c.validate()
    }

    #[test]
    fn an_outbox_cap_the_schema_alone_would_fill_is_refused_with_the_minimum() {
        let mut c = Config::new("https://api.loja.example", "k");
        c.max_outbox_bytes = Some(64 * 1024);
        let err = c.validate().unwrap_err();
        assert!(err.to_string().contains("o mínimo é 320 KiB"), "{err}");
        c.max_outbox_bytes = Some(MIN_OUTBOX_BYTES);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn plain_http_is_refused_for_a_host_that_is_not_loopback() {
        let err = check("http://pagamentos.loja.example:8080", false).unwrap_err();
        assert!(err.to_string().contains("sem criptografia"), "{err}");
        assert!(check("http://10.0.0.5", false).is_err());
    }

    #[test]
    fn plain_http_to_loopback_https_anywhere_and_an_explicit_opt_in_are_accepted() {
        for ok in [
            "http://127.0.0.1:8080",
            "http://localhost:1",
            "http://[::1]:9",
            "https://pagamentos.loja.example",
        ] {
            assert!(check(ok, false).is_ok(), "{ok}");
        }
        assert!(check("http://10.0.0.5", true).is_ok());
    }

    #[test]
    fn nonsense_and_other_schemes_are_refused() {
        assert!(check("pagamentos", false).is_err());
        assert!(check("ftp://127.0.0.1", false).is_err());
    }

    #[test]
    fn the_smaller_retention_wins() {
        let c = Config::new("http://127.0.0.1", "k");
        let hour = Duration::from_secs(3600);
        assert_eq!(c.lookup_after(None), 23 * hour);
        assert_eq!(c.lookup_after(Some(2 * hour)), hour);
        assert_eq!(c.lookup_after(Some(48 * hour)), 23 * hour);
    }
}
