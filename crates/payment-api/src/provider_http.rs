//! What the providers' HTTP clients share (the Pix PSP's, the card machine's): one client with
//! the providers' timeouts, a bearer token on every request (fixed, or an OAuth2 client
//! credentials token asked for, kept until shortly before it expires and asked again when
//! refused), and how an answer is read — a
//! 5xx, a 429 or a refused token is no answer at all (nothing known to have changed there: the
//! caller tries again), anything else is the provider's word for its client to read.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// How a provider's client proves who it is.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// A fixed bearer token (the card machine's provider: an application's access token).
    Bearer(String),
    /// OAuth2 client credentials (the API Pix's PSPs): a token is asked of `token_path` with
    /// HTTP Basic, kept until shortly before it expires, and asked again when the provider
    /// refuses it.
    OAuth2 {
        /// The token endpoint: a path on the provider (`/oauth/token`) or a URL of its own
        /// (some PSPs serve tokens from another host).
        token_url: String,
        /// The client id.
        client_id: String,
        /// The client secret.
        client_secret: String,
        /// The scopes asked for, space separated.
        scope: String,
    },
}

/// The TLS a provider asks of its clients beyond the system's roots: the merchant's client
/// certificate (mutual TLS, as the API Pix's PSPs ask) and a CA of the provider's own.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    /// The client certificate chain and its private key, in one PEM file.
    pub client_pem: Option<std::path::PathBuf>,
    /// A CA (PEM) to trust for the provider's server certificate, besides the system's.
    pub ca_pem: Option<std::path::PathBuf>,
}

impl ClientTls {
    /// The HTTP client with the providers' timeouts and this TLS, or why it cannot be made (a
    /// file missing or not PEM).
    pub fn client(&self) -> Result<reqwest::Client, String> {
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(3))
            // A provider's answer is its answer: a charge re-sent to wherever a 3xx points (or
            // turned into a GET) is not one it made; the 3xx itself is what the caller judges.
            .redirect(reqwest::redirect::Policy::none());
        if let Some(path) = &self.client_pem {
            private_to_owner(path)?;
            let pem = std::fs::read(path)
                .map_err(|e| format!("certificado do cliente {}: {e}", path.display()))?;
            let identity = reqwest::Identity::from_pem(&pem)
                .map_err(|e| format!("certificado do cliente {}: {e}", path.display()))?;
            builder = builder.identity(identity);
        }
        if let Some(path) = &self.ca_pem {
            let pem = std::fs::read(path)
                .map_err(|e| format!("CA do provedor {}: {e}", path.display()))?;
            let ca = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| format!("CA do provedor {}: {e}", path.display()))?;
            builder = builder.add_root_certificate(ca);
        }
        builder.build().map_err(|e| e.to_string())
    }
}

/// Refuses a file holding a private key that others than its owner may read (data at rest, like
/// the stores' files): a merchant's certificate key is a credential.
fn private_to_owner(path: &std::path::Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| format!("certificado do cliente {}: {e}", path.display()))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "certificado do cliente {}: a chave privada pode ser lida por outros (modo {:o}); use chmod 600",
                path.display(),
                mode & 0o777
            ));
        }
    }
    Ok(())
}

/// The code and message of a refusal in Mercado Pago's error body (`{"errors": [{"code",
/// "message"}]}`: the card machine's and the acquirer's); an empty code and the body itself (its
/// start) when it is not one.
pub fn mercado_pago_error(body: &str) -> (String, String) {
    let v = serde_json::from_str::<serde_json::Value>(body).unwrap_or_default();
    let first = &v["errors"][0];
    (
        first["code"].as_str().unwrap_or_default().to_string(),
        first["message"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| body.chars().take(200).collect()),
    )
}

/// A token in hand and when to stop using it.
/// A provider's answer to go by: its status and body.
pub type Answer = (reqwest::StatusCode, String);

/// Why a provider gave no answer to go by: it could not be reached, timed out, failed (5xx,
/// 429), refused the credentials, or said what cannot be read. Each client's error takes it as
/// "unavailable": nothing is known to have changed there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoAnswer(pub String);

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug)]
struct Token {
    value: String,
    renew_at: Instant,
}

/// A provider's base URL, its credentials and the HTTP client that reaches it.
#[derive(Debug, Clone)]
pub struct ProviderHttp {
    base: String,
    credentials: Credentials,
    token: Arc<Mutex<Option<Token>>>,
    http: reqwest::Client,
    /// Why the client with the provider's TLS could not be made: every request says so.
    broken: Option<String>,
}

/// A token is renewed this long before the provider said it expires (clocks and the way there
/// take some of its life).
const RENEW_BEFORE: Duration = Duration::from_secs(30);

impl ProviderHttp {
    /// A client of the provider at `base` with a fixed bearer `token`.
    pub fn new(base: &str, token: &str) -> Self {
        Self::with(
            base,
            Credentials::Bearer(token.to_string()),
            &ClientTls::default(),
        )
    }

    /// A client of the provider at `base` that proves itself with `credentials` and `tls`.
    pub fn with(base: &str, credentials: Credentials, tls: &ClientTls) -> Self {
        let (http, broken) = match tls.client() {
            Ok(http) => (http, None),
            Err(why) => (reqwest::Client::new(), Some(why)),
        };
        Self {
            base: base.trim_end_matches('/').to_string(),
            credentials,
            token: Arc::new(Mutex::new(None)),
            http,
            broken,
        }
    }

    /// The bearer token to send now: the fixed one, or an OAuth2 token still good (asked for
    /// when there is none or it is about to expire).
    async fn bearer(&self) -> Result<String, String> {
        let (token_url, client_id, client_secret, scope) = match &self.credentials {
            Credentials::Bearer(token) => return Ok(token.clone()),
            Credentials::OAuth2 {
                token_url,
                client_id,
                client_secret,
                scope,
            } => (token_url, client_id, client_secret, scope),
        };
        let mut held = self.token.lock().await;
        if let Some(t) = held.as_ref().filter(|t| t.renew_at > Instant::now()) {
            return Ok(t.value.clone());
        }
        let res = self
            .http
            .post(if token_url.contains("://") {
                token_url.clone()
            } else {
                self.url(token_url)
            })
            .basic_auth(client_id, Some(client_secret))
            .form(&[("grant_type", "client_credentials"), ("scope", scope)])
            .send()
            .await
            .map_err(|e| format!("token OAuth2: {e}"))?;
        let status = res.status();
        let body = res.text().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!(
                "o provedor recusou as credenciais OAuth2 ({status}): confira client_id e client_secret — {body}"
            ));
        }
        #[derive(serde::Deserialize)]
        struct Granted {
            access_token: String,
            expires_in: u64,
        }
        let granted: Granted = Self::json(&body).map_err(|e| e.0)?;
        let life = Duration::from_secs(granted.expires_in).saturating_sub(RENEW_BEFORE);
        *held = Some(Token {
            value: granted.access_token.clone(),
            renew_at: Instant::now() + life,
        });
        tracing::info!(
            expires_in = granted.expires_in,
            "OAuth2 token obtained from the provider"
        );
        Ok(granted.access_token)
    }

    /// Forgets the OAuth2 token in hand (the provider refused it before its time).
    async fn forget_token(&self) {
        *self.token.lock().await = None;
    }

    /// The provider's URL of `path` (`/cob/…`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request of `method` to `path`, to send with [`ProviderHttp::send`].
    pub fn at(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path))
    }

    /// Sends `req` with the bearer token and reads the answer: its status and body, or why
    /// there is no answer to go by (`Err`: say it is unavailable). An OAuth2 token the provider
    /// refuses (401: revoked, or expired before its time) is asked for again once.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Result<Answer, NoAnswer> {
        self.send_why(req).await.map_err(NoAnswer)
    }

    /// `GET path`, sent as [`send`](Self::send) sends.
    pub async fn get(&self, path: &str) -> Result<Answer, NoAnswer> {
        self.send(self.at(reqwest::Method::GET, path)).await
    }

    /// `method path` with `body` as JSON, sent as [`send`](Self::send) sends.
    pub async fn send_json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &impl serde::Serialize,
    ) -> Result<Answer, NoAnswer> {
        self.send(self.at(method, path).json(body)).await
    }

    /// `method path` under Mercado Pago's `X-Idempotency-Key` header, to be given a body or sent.
    pub fn keyed(&self, method: reqwest::Method, path: &str, key: &str) -> reqwest::RequestBuilder {
        self.at(method, path).header("X-Idempotency-Key", key)
    }

    async fn send_why(&self, req: reqwest::RequestBuilder) -> Result<Answer, String> {
        if let Some(why) = &self.broken {
            return Err(why.clone());
        }
        let again = req.try_clone();
        let (status, body) = self.send_once(req).await?;
        let (status, body) = match (status, again, &self.credentials) {
            (reqwest::StatusCode::UNAUTHORIZED, Some(again), Credentials::OAuth2 { .. }) => {
                tracing::info!("the provider refused the OAuth2 token: asking for a new one");
                self.forget_token().await;
                self.send_once(again).await?
            }
            (status, _, _) => (status, body),
        };
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(format!("{status}: {body}"));
        }
        if status == reqwest::StatusCode::FORBIDDEN || status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(format!(
                "acesso negado pelo provedor ({status}): confira as credenciais e os escopos — {body}"
            ));
        }
        Ok((status, body))
    }

    async fn send_once(&self, req: reqwest::RequestBuilder) -> Result<Answer, String> {
        let res = req
            .bearer_auth(self.bearer().await?)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = res.status();
        let body = res.text().await.map_err(|e| e.to_string())?;
        Ok((status, body))
    }

    /// A body the provider answered, read as `T`; one it cannot be is no answer at all (`Err`).
    pub fn json<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, NoAnswer> {
        serde_json::from_str(body)
            .map_err(|e| NoAnswer(format!("resposta do provedor ilegível: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_client_certificate_others_may_read_missing_or_not_pem_is_refused_with_why() {
        let dir = tempfile::tempdir().unwrap();
        let tls = |path: &std::path::Path| ClientTls {
            client_pem: Some(path.to_path_buf()),
            ca_pem: None,
        };
        let missing = dir.path().join("nada.pem");
        assert!(tls(&missing).client().unwrap_err().contains("nada.pem"));

        let open = dir.path().join("aberto.pem");
        std::fs::write(&open, "não é PEM").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        let why = tls(&open).client().unwrap_err();
        assert!(why.contains("chmod 600") && why.contains("644"), "{why}");

        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o600)).unwrap();
        let why = tls(&open).client().unwrap_err();
        assert!(
            why.contains("aberto.pem") && !why.contains("chmod"),
            "{why}"
        );

        assert!(
            ClientTls::default().client().is_ok(),
            "no TLS asked: a plain client"
        );
    }
}
