//! The `sefaz` binary (the SEFAZ simulator for NFC-e) as its own process, with its base on a
//! folder that outlives it, and a client of its web services made of `nfce::soap`'s messages.

use crate::api_process::workspace_binary;
use nfce::soap::{self, Retorno, RetornoInutilizacao, Servico};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The official schemas `make deps-nfce` fetched (`NFCE_XSD_DIR`, or the workspace's
/// `target/nfce-xsd`).
pub fn nfce_xsd_dir() -> PathBuf {
    std::env::var_os("NFCE_XSD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/nfce-xsd"))
}

/// The simulator on a loopback port. Killed when dropped.
pub struct SefazProcess {
    child: Child,
    url: String,
    dir: PathBuf,
    limite: u64,
    http: reqwest::Client,
}

impl SefazProcess {
    /// Starts it with its base in `dir`; an emitter is refused 656 after `limite` rejections in
    /// an hour.
    pub fn start(dir: &Path, limite: u64) -> Self {
        Self::start_on(dir, "127.0.0.1:0", limite)
    }

    fn start_on(dir: &Path, listen: &str, limite: u64) -> Self {
        let mut child = Command::new(workspace_binary("sefaz", "PAGAR_SEFAZ_BIN"))
            .args(["--listen", listen])
            .args(["--limite-rejeicoes", &limite.to_string()])
            .arg("--xsd-dir")
            .arg(nfce_xsd_dir())
            .arg("--database")
            .arg(dir.join("sefaz.db"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("sefaz starts");
        let url = crate::listening_url(&mut child, "sefaz");
        Self {
            child,
            url,
            dir: dir.to_path_buf(),
            limite,
            http: reqwest::Client::new(),
        }
    }

    /// Its base URL (the web services are under `/ws/`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Kills it (SIGKILL) and starts it again on the same port and base.
    pub fn restart(&mut self) {
        self.kill();
        let listen = self.url.trim_start_matches("http://").to_string();
        *self = Self::start_on(&self.dir, &listen, self.limite);
    }

    /// Whether its process still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills it (SIGKILL).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sets how it behaves (`{"modo": "fora"}`, `{"modo": "perde-resposta", "segundos": 3}`, …).
    pub async fn modo(&self, modo: Value) {
        let r = self
            .http
            .put(format!("{}/qa/modo", self.url))
            .json(&modo)
            .send()
            .await
            .expect("the simulator answers");
        assert!(r.status().is_success(), "modo {modo}: {}", r.status());
    }

    /// Its base: every note it authorized (`GET /qa/notas`).
    pub async fn notas(&self) -> Vec<Value> {
        self.qa("notas")
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Its counts: `autorizadas`, `rejeicoes`.
    pub async fn contagens(&self) -> Value {
        self.qa("contagens").await
    }

    async fn qa(&self, what: &str) -> Value {
        let r = self
            .http
            .get(format!("{}/qa/{what}", self.url))
            .send()
            .await;
        r.expect("the simulator answers")
            .json()
            .await
            .expect("JSON")
    }

    /// Calls a web service with `body`, waiting at most `timeout`: SEFAZ's answer, or the HTTP
    /// failure (a status, a timeout, a refused connection) as text.
    pub async fn call(
        &self,
        servico: Servico,
        body: String,
        timeout: Duration,
    ) -> Result<Retorno, String> {
        let text = self.post(servico, body, timeout).await?;
        soap::ler_retorno(&text).map_err(|e| e.to_string())
    }

    /// Calls `NFeInutilizacao4` with `body`: SEFAZ's answer, or the HTTP failure as text.
    pub async fn call_inutilizacao(
        &self,
        body: String,
        timeout: Duration,
    ) -> Result<RetornoInutilizacao, String> {
        let text = self.post(Servico::Inutilizacao, body, timeout).await?;
        soap::ler_retorno_inutilizacao(&text).map_err(|e| e.to_string())
    }

    /// Calls `NFeRecepcaoEvento4` with the signed `evento`: SEFAZ's answer on it, or the HTTP
    /// failure as text.
    pub async fn call_evento(
        &self,
        evento: &str,
        timeout: Duration,
    ) -> Result<nfce::evento::RetornoEvento, String> {
        let text = self
            .post(Servico::Evento, nfce::evento::pedido(1, evento), timeout)
            .await?;
        nfce::evento::ler_retorno(&text).map_err(|e| e.to_string())
    }

    async fn post(
        &self,
        servico: Servico,
        body: String,
        timeout: Duration,
    ) -> Result<String, String> {
        let r = self
            .http
            .post(format!("{}/ws/{}", self.url, servico.nome()))
            .header(reqwest::header::CONTENT_TYPE, servico.content_type())
            .body(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !r.status().is_success() {
            return Err(format!("HTTP {}", r.status()));
        }
        r.text().await.map_err(|e| e.to_string())
    }
}

impl Drop for SefazProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
