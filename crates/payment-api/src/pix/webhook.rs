//! The Pix webhook (`POST /webhooks/pix`): the API Pix callback body `{"pix": [...]}`, signed
//! with Standard Webhooks — HMAC-SHA256 over `webhook-id.webhook-timestamp.body` on the raw
//! bytes, checked by the `standardwebhooks` crate (Svix's reference implementation), which also
//! refuses a timestamp more than five minutes from now. Several secrets may be configured at
//! once, so a secret is rotated without a gap: the provider signs with the old and the new, the
//! receiver accepts either.
//!
//! Why HMAC and not the mTLS the Banco Central specifies for callbacks: a signature proves the
//! body itself came from the provider, on any hop (a TLS-terminating proxy, a loopback test),
//! while mTLS proves only the connection and needs the TLS set-up at this process. With no
//! secret configured every webhook is refused, and the poller alone settles charges (slower,
//! never wrong).
//!
//! A verified webhook is still only a hint: each txid it names is read back from the provider
//! (`GET /cob/{txid}`) before anything is recorded.

use super::provider::PixItem;
use crate::domain::Txid;
use crate::error::{ApiError, Result};
use axum::http::HeaderMap;
use serde::Deserialize;
use standardwebhooks::{Webhook, WebhookError};

/// The secrets webhooks are checked against.
pub struct Verifier(Vec<Webhook>);

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Verifier({} secrets: ***)", self.0.len())
    }
}

impl Verifier {
    /// `whsec_…` secrets, comma separated.
    pub fn parse(list: &str) -> std::result::Result<Self, String> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| Webhook::new(s).map_err(|e| format!("segredo de webhook Pix inválido: {e}")))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Checks the signature on the raw body against every secret; the error says why not.
    pub fn verify(&self, body: &[u8], headers: &HeaderMap) -> Result<()> {
        if self.0.is_empty() {
            return Err(ApiError::WebhookRejected(
                "nenhum segredo de webhook configurado".into(),
            ));
        }
        let mut why = String::new();
        for w in &self.0 {
            match w.verify(body, headers) {
                Ok(()) => return Ok(()),
                Err(
                    e @ (WebhookError::TimestampTooOldError | WebhookError::FutureTimestampError),
                ) => {
                    return Err(ApiError::WebhookRejected(format!(
                        "horário fora da janela de 5 minutos: {e}"
                    )));
                }
                Err(e) => why = e.to_string(),
            }
        }
        Err(ApiError::WebhookRejected(why))
    }
}

/// The callback body.
#[derive(Debug, Deserialize)]
pub struct Notification {
    /// The Pix it tells of.
    #[serde(default)]
    pub pix: Vec<PixItem>,
}

impl Notification {
    /// Parses the body.
    pub fn parse(body: &[u8]) -> Result<Self> {
        serde_json::from_slice(body).map_err(|e| ApiError::MalformedJson(e.to_string()))
    }

    /// The charges it names, each once (a Pix with no txid paid the key directly: no charge of
    /// ours to settle).
    pub fn txids(&self) -> Vec<Txid> {
        let mut out: Vec<Txid> = Vec::new();
        for t in self.pix.iter().filter_map(|p| p.txid.as_deref()) {
            if let Some(t) = Txid::parse(t) {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        out
    }
}
