//! What the providers' HTTP clients share (the Pix PSP's, the card machine's): one client with
//! the providers' timeouts, the bearer token on every request, and how an answer is read — a
//! 5xx, a 429 or a refused token is no answer at all (nothing known to have changed there: the
//! caller tries again), anything else is the provider's word for its client to read.

use std::time::Duration;

/// A provider's base URL, its token and the HTTP client that reaches it.
#[derive(Debug, Clone)]
pub struct ProviderHttp {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl ProviderHttp {
    /// A client of the provider at `base` with `token`.
    pub fn new(base: &str, token: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .connect_timeout(Duration::from_secs(3))
                .build()
                .expect("HTTP client"),
        }
    }

    /// The provider's URL of `path` (`/cob/…`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request of `method` to `path`, to send with [`ProviderHttp::send`].
    pub fn at(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path))
    }

    /// Sends `req` with the token and reads the answer: its status and body, or why there is no
    /// answer to go by (`Err`: say it is unavailable).
    pub async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, String), String> {
        let res = req
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = res.status();
        let body = res.text().await.map_err(|e| e.to_string())?;
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(format!("{status}: {body}"));
        }
        if status == reqwest::StatusCode::FORBIDDEN || status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(format!(
                "acesso negado pelo provedor ({status}): confira o token"
            ));
        }
        Ok((status, body))
    }

    /// A body the provider answered, read as `T`; one it cannot be is no answer at all (`Err`).
    pub fn json<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, String> {
        serde_json::from_str(body).map_err(|e| format!("resposta do provedor ilegível: {e}"))
    }
}
