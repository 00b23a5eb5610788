//! Callback delivery: `POST {webhookUrl}/pix` with `{"pix": [...]}`, signed with Standard
//! Webhooks (the `standardwebhooks` crate, Svix's reference implementation) once per configured
//! secret. A delivery that is not answered 2xx is tried again with the same `webhook-id` (at most
//! [`TRIES`] times, backing off); QA modes lose it, send it more than once, or send it late.

use crate::store::PixDb;
use standardwebhooks::Webhook;
use std::sync::Arc;
use std::time::Duration;

/// Most tries of one delivery (the API Pix leaves retries to each PSP: `bacen/pix-api#72`).
pub const TRIES: u32 = 4;

/// The secrets callbacks are signed with.
pub struct Signers(Vec<Webhook>);

impl Signers {
    /// `whsec_…` secrets, comma separated (empty: callbacks go unsigned, which a receiver refuses).
    pub fn parse(list: &str) -> Result<Self, String> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| Webhook::new(s).map_err(|e| format!("{e}")))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// The `webhook-signature` value: one `v1,…` per secret, space separated.
    fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
        let sigs: Vec<String> = self
            .0
            .iter()
            .filter_map(|w| w.sign(id, timestamp, body).ok())
            .collect();
        (!sigs.is_empty()).then(|| sigs.join(" "))
    }
}

/// How a callback goes out (a QA choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Sent once (tried again until answered 2xx).
    #[default]
    Entregue,
    /// Never sent: only a poll of `GET /cob/{txid}` finds the Pix.
    Perdido,
    /// Sent twice (as a PSP retrying after a lost acknowledgement).
    Duplicado,
    /// Sent three times.
    Triplicado,
}

impl Mode {
    fn copies(self) -> u32 {
        match self {
            Mode::Entregue => 1,
            Mode::Perdido => 0,
            Mode::Duplicado => 2,
            Mode::Triplicado => 3,
        }
    }
}

/// Sends callbacks in the background.
pub struct Dispatcher {
    signers: Signers,
    http: reqwest::Client,
}

impl Dispatcher {
    /// A dispatcher signing with these secrets.
    pub fn new(signers: Signers) -> Self {
        Self {
            signers,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .expect("HTTP client"),
        }
    }

    /// Delivers `body` to `{url}/pix` after `delay`, as `mode` says; each try is recorded.
    pub fn send(
        self: &Arc<Self>,
        db: Arc<PixDb>,
        url: String,
        body: serde_json::Value,
        mode: Mode,
        delay: Duration,
    ) {
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
            let bytes = body.to_string();
            for _ in 0..mode.copies() {
                this.deliver(&db, &url, &id, &bytes).await;
            }
        });
    }

    async fn deliver(&self, db: &PixDb, url: &str, id: &str, body: &str) {
        let target = format!("{}/pix", url.trim_end_matches('/'));
        let mut wait = Duration::from_millis(300);
        for _ in 0..TRIES {
            let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
            let mut req = self
                .http
                .post(&target)
                .header("content-type", "application/json")
                .header("webhook-id", id)
                .header("webhook-timestamp", timestamp.to_string())
                .body(body.to_string());
            if let Some(sig) = self.signers.sign(id, timestamp, body.as_bytes()) {
                req = req.header("webhook-signature", sig);
            }
            let (status, erro) = match req.send().await {
                Ok(r) => (Some(r.status().as_u16()), None),
                Err(e) => (None, Some(e.to_string())),
            };
            let _ = db.record_delivery(id, body, status, erro.as_deref());
            if status.is_some_and(|s| (200..300).contains(&s)) {
                return;
            }
            tracing::warn!(%target, ?status, ?erro, "callback not accepted; trying again");
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
    }
}
