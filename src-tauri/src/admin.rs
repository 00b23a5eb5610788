//! The QA panel's client of the payment API's admin routes: typed requests and answers, and one
//! reading of the server's problem+json. The only HTTP the app makes outside `checkout-core`.

use crate::error::{AppError, Result};
use payment_api::faults::Faults;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// A client of `/admin/*` on one API, with its admin token (never shown by `Debug`).
#[derive(Clone)]
pub struct AdminClient {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminClient")
            .field("base", &self.base)
            .field("token", &"***")
            .finish_non_exhaustive()
    }
}

/// The parts of a problem+json the panel shows.
#[derive(Debug, Deserialize)]
struct ServerProblem {
    detail: Option<String>,
    #[serde(default)]
    errors: Vec<ServerFieldError>,
}

#[derive(Debug, Deserialize)]
struct ServerFieldError {
    erro: String,
}

impl ServerProblem {
    /// What went wrong, in the server's words: every field error, or the detail.
    fn reason(self) -> String {
        if self.errors.is_empty() {
            self.detail.unwrap_or_else(|| "erro desconhecido".into())
        } else {
            self.errors
                .into_iter()
                .map(|e| e.erro)
                .collect::<Vec<_>>()
                .join("; ")
        }
    }
}

impl AdminClient {
    /// A client for `base` (TLS through rustls with the system roots and `ca_cert`, no proxy).
    pub fn new(base: &str, token: String, ca_cert: Option<&Path>) -> Result<Self> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .no_proxy()
            .timeout(Duration::from_secs(5));
        if let Some(ca) = ca_cert {
            // checkout-core has read and checked this very file already.
            for cert in std::fs::read(ca)
                .ok()
                .and_then(|pem| reqwest::Certificate::from_pem_bundle(&pem).ok())
                .unwrap_or_default()
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(Self {
            http: builder
                .build()
                .map_err(|e| AppError::Startup(format!("cliente HTTP: {e}")))?,
            base: base.trim_end_matches('/').to_string(),
            token,
        })
    }

    /// The fault profile in force.
    pub async fn faults(&self) -> Result<Faults> {
        let res = self
            .http
            .get(format!("{}/admin/faults", self.base))
            .bearer_auth(&self.token)
            .send()
            .await;
        Self::answer(res, "perfil de falhas").await
    }

    /// Replaces the fault profile; the server validates it.
    pub async fn set_faults(&self, faults: &Faults) -> Result<Faults> {
        let res = self
            .http
            .put(format!("{}/admin/faults", self.base))
            .bearer_auth(&self.token)
            .json(faults)
            .send()
            .await;
        Self::answer(res, "perfil recusado").await
    }

    /// The typed body of a success, or the problem's reason after `what`.
    async fn answer<T: serde::de::DeserializeOwned>(
        res: reqwest::Result<reqwest::Response>,
        what: &str,
    ) -> Result<T> {
        let res = res.map_err(|e| AppError::Qa(format!("servidor inacessível: {e}")))?;
        let ok = res.status().is_success();
        let bytes = res
            .bytes()
            .await
            .map_err(|e| AppError::Qa(format!("servidor inacessível: {e}")))?;
        if ok {
            serde_json::from_slice(&bytes)
                .map_err(|e| AppError::Qa(format!("{what}: resposta ilegível ({e})")))
        } else {
            let why = serde_json::from_slice::<ServerProblem>(&bytes)
                .map(ServerProblem::reason)
                .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
            Err(AppError::Qa(format!("{what}: {why}")))
        }
    }
}
