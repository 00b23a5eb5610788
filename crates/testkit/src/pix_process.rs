//! The `pix-provider` binary (the Pix provider simulator) as its own process, and its QA
//! controls: what a payment API pointed at a Pix provider talks to in end-to-end tests.

use crate::api_process::workspace_binary;
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The bearer token every [`PixProcess`] accepts.
pub const PIX_TOKEN: &str = "pix_token_testkit";
/// The secret every [`PixProcess`] signs webhooks with (Standard Webhooks' example secret).
pub const PIX_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The simulator on a loopback port of its own, with its own database, serving over mutual TLS
/// as PSPs do (its CA and the merchant's client certificate in its folder). Killed when dropped.
pub struct PixProcess {
    child: Child,
    url: String,
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

/// A token of the API Pix's OAuth2 client credentials from the simulator at `base`, for the
/// sandbox client (`pagar-sandbox`) with `secret`, every scope: what a test asking the
/// simulator as a PSP's client (not through its QA controls) sends.
pub async fn pix_oauth_token(client: &reqwest::Client, base: &str, secret: &str) -> String {
    let res = client
        .post(format!("{base}/oauth/token"))
        .basic_auth("pagar-sandbox", Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .expect("the simulator answers");
    assert!(res.status().is_success(), "token refused: {}", res.status());
    let body: Value = res.json().await.expect("JSON");
    body["access_token"]
        .as_str()
        .expect("an access token")
        .to_string()
}

impl PixProcess {
    /// Starts the simulator on a free port; its log goes to the test's stderr.
    pub fn start() -> Self {
        Self::start_logging_to(None)
    }

    /// Starts the simulator on a free port, its log appended to `log` (`None`: the test's
    /// stderr).
    pub fn start_logging_to(log: Option<&Path>) -> Self {
        Self::start_binary(&workspace_binary("pix-provider", "PAGAR_PIX_BIN"), log)
    }

    /// Starts the simulator binary at `bin` (the simulator's own tests name theirs) on a free
    /// port, its log appended to `log` (`None`: the test's stderr).
    pub fn start_binary(bin: &Path, log: Option<&Path>) -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let stderr = match log {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .expect("the simulator's log file"),
            ),
            None => Stdio::inherit(),
        };
        let mut child = Command::new(bin)
            .args(["--listen", "127.0.0.1:0"])
            .args(["--client-secret", PIX_TOKEN, "--qa-token", PIX_TOKEN])
            .arg("--tls-dir")
            .arg(dir.path().join("tls"))
            .args(["--webhook-secrets", PIX_SECRET])
            .arg("--database")
            .arg(dir.path().join("psp.db"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("pix-provider starts");
        let url = crate::listening_url(&mut child, "pix-provider");
        let http = merchant_client(&dir.path().join("tls"));
        Self {
            child,
            url,
            http,
            dir,
        }
    }

    /// The merchant's client: its certificate presented, the simulator's CA trusted.
    pub fn client(&self) -> &reqwest::Client {
        &self.http
    }

    /// The merchant's client certificate and key (PEM), as the payment API is given it.
    pub fn client_cert(&self) -> std::path::PathBuf {
        self.dir.path().join("tls").join("cliente.pem")
    }

    /// The simulator's CA (PEM), for a client to trust.
    pub fn ca(&self) -> std::path::PathBuf {
        self.dir.path().join("tls").join("ca.pem")
    }

    /// Its base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The `payment-api` flags that make Pix charges here (the merchant's certificate and
    /// client secret), webhooks registered to that API and checked with [`PIX_SECRET`], and a
    /// poll every `poll_ms`.
    pub fn api_flags(&self, poll_ms: u64) -> Vec<String> {
        let (cert, ca) = (self.client_cert(), self.ca());
        [
            "--pix-provider-url",
            &self.url,
            "--pix-client-secret",
            PIX_TOKEN,
            "--pix-client-cert",
            &cert.to_string_lossy(),
            "--pix-ca-cert",
            &ca.to_string_lossy(),
            "--pix-webhook-secrets",
            PIX_SECRET,
            "--pix-webhook-url",
            "auto",
            "--pix-poll-ms",
            &poll_ms.to_string(),
        ]
        .map(String::from)
        .to_vec()
    }

    /// The customer pays the charge `txid` (`order`: `{"webhook": "perdido"}`,
    /// `{"aceitar_inativa": true}`…); the simulator's answer status and body.
    pub async fn customer_pays(&self, txid: &str, order: Value) -> (u16, Value) {
        let res = self
            .http
            .post(format!("{}/qa/cob/{txid}/pagar", self.url))
            .bearer_auth(PIX_TOKEN)
            .json(&order)
            .send()
            .await
            .expect("the simulator answers");
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// Its own counts: `cobrancas`, `pix`, `devolucoes`, `entregas`, `entregas_aceitas`.
    pub async fn counts(&self) -> Value {
        self.get("/qa/contagens").await
    }

    /// Every charge to the Pix key `chave` as the simulator has it, with its Pix and devoluções
    /// (`GET /qa/cobs?chave=…`).
    pub async fn ledger(&self, chave: &str) -> Value {
        let res = self
            .http
            .get(format!("{}/qa/cobs", self.url))
            .query(&[("chave", chave)])
            .bearer_auth(PIX_TOKEN)
            .send()
            .await
            .expect("the simulator answers");
        res.json().await.expect("JSON")
    }

    /// A charge as the simulator has it (`GET /cob/{txid}`).
    pub async fn cob(&self, txid: &str) -> Value {
        self.get(&format!("/cob/{txid}")).await
    }

    async fn get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.url))
            .bearer_auth(if path.starts_with("/qa/") {
                PIX_TOKEN.to_string()
            } else {
                pix_oauth_token(&self.http, &self.url, PIX_TOKEN).await
            })
            .send()
            .await
            .expect("the simulator answers")
            .json()
            .await
            .expect("JSON")
    }
}

/// A client presenting the merchant's certificate in `tls` and trusting its CA.
fn merchant_client(tls: &Path) -> reqwest::Client {
    let read =
        |name: &str| std::fs::read(tls.join(name)).expect("the simulator made its certificates");
    reqwest::Client::builder()
        .identity(
            reqwest::Identity::from_pem(&read("cliente.pem")).expect("the client certificate"),
        )
        .add_root_certificate(reqwest::Certificate::from_pem(&read("ca.pem")).expect("the CA"))
        .no_proxy()
        .build()
        .expect("an HTTP client")
}

impl Drop for PixProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
