//! The Pix provider (PSP recebedor) as the server talks to it: the API Pix routes `PUT`, `GET`
//! and `PATCH /cob/{txid}`, `GET /pix?inicio&fim` (the Pix received in a window), the devoluções,
//! and `PUT /webhook/{chave}`, over HTTP with a bearer token. The
//! bundled simulator (`crates/pix-provider`) answers them; a real PSP is put in its place by
//! configuration (its URL and token; its OAuth2 and mTLS set-up is outside this client).

use crate::domain::Txid;
use crate::provider_http::{ClientTls, Credentials};
use crate::provider_http::{NoAnswer, ProviderHttp};
use reqwest::Method;
use serde::Deserialize;

/// What the provider answered.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The txid was used before (`PUT /cob` answers 400 for it): read the charge back.
    #[error("txid já utilizado no provedor")]
    TxidTaken,
    /// The provider refused the request (400, with its detail).
    #[error("o provedor Pix recusou: {0}")]
    Refused(String),
    /// The provider could not be asked, or failed: nothing known to have changed there.
    #[error("provedor Pix indisponível: {0}")]
    Unavailable(String),
}

impl From<NoAnswer> for ProviderError {
    fn from(e: NoAnswer) -> Self {
        ProviderError::Unavailable(e.0)
    }
}

/// A charge as the provider reports it (`CobCompleta`, the part the server reads).
#[derive(Debug, Clone, Deserialize)]
pub struct Cob {
    /// Its txid.
    pub txid: String,
    /// `ATIVA`, `CONCLUIDA`, `REMOVIDA_PELO_USUARIO_RECEBEDOR`, `REMOVIDA_PELO_PSP`.
    pub status: String,
    /// The payload URL (`location`), which the BR Code points at.
    pub location: String,
    /// Creation time and seconds to expiry.
    pub calendario: Calendario,
    /// The amount asked.
    pub valor: Valor,
    /// The BR Code, when the provider makes it.
    #[serde(rename = "pixCopiaECola", default)]
    pub pix_copia_e_cola: Option<String>,
    /// The Pix received for it.
    #[serde(default)]
    pub pix: Vec<PixItem>,
}

impl Cob {
    /// True once the provider removed it (it takes no more payments at a PSP following
    /// `bacen/pix-api#319`).
    pub fn removed(&self) -> bool {
        self.status.starts_with("REMOVIDA")
    }
}

/// `calendario` of a charge.
#[derive(Debug, Clone, Deserialize)]
pub struct Calendario {
    /// RFC 3339.
    pub criacao: String,
    /// Seconds from `criacao`.
    pub expiracao: i64,
}

/// `valor` of a charge.
#[derive(Debug, Clone, Deserialize)]
pub struct Valor {
    /// `"12.34"`.
    pub original: String,
}

/// One Pix in a charge's `pix` list, or in a webhook's.
#[derive(Debug, Clone, Deserialize)]
pub struct PixItem {
    /// End-to-end id.
    #[serde(rename = "endToEndId")]
    pub end_to_end_id: String,
    /// The charge it paid (absent for a Pix to the key with no charge).
    #[serde(default)]
    pub txid: Option<String>,
    /// `"12.34"`.
    pub valor: String,
    /// RFC 3339.
    pub horario: String,
}

/// One page of `GET /pix` (`PixConsultados`, the part the server reads).
#[derive(Debug, Clone, Deserialize)]
pub struct PixConsultados {
    /// The query as the provider understood it, with its paging.
    pub parametros: ParametrosConsulta,
    /// The Pix received on this page.
    #[serde(default)]
    pub pix: Vec<PixItem>,
}

/// `parametros` of a `GET /pix` answer.
#[derive(Debug, Clone, Deserialize)]
pub struct ParametrosConsulta {
    /// Paging.
    pub paginacao: Paginacao,
}

/// `paginacao` of a listing.
#[derive(Debug, Clone, Deserialize)]
pub struct Paginacao {
    /// How many pages the query has.
    #[serde(rename = "quantidadeDePaginas")]
    pub quantidade_de_paginas: u32,
}

/// A devolução as the provider reports it (`Devolucao`).
#[derive(Debug, Clone, Deserialize)]
pub struct Devolucao {
    /// The client's id for it.
    pub id: String,
    /// Its `ReturnIdentification`.
    #[serde(rename = "rtrId")]
    pub rtr_id: String,
    /// `"12.34"`.
    pub valor: String,
    /// `EM_PROCESSAMENTO`, `DEVOLVIDO`, `NAO_REALIZADO`.
    pub status: String,
}

/// The Pix provider.
#[async_trait::async_trait]
pub trait PixProvider: Send + Sync + std::fmt::Debug + 'static {
    /// `PUT /cob/{txid}`: a charge of `valor` (`"12.34"`) to the key, expiring in `expiracao` s.
    async fn create(
        &self,
        txid: &Txid,
        valor: &str,
        expiracao: u32,
        solicitacao: Option<&str>,
    ) -> Result<Cob, ProviderError>;
    /// `GET /cob/{txid}`; `None` when the provider has no such charge.
    async fn get(&self, txid: &Txid) -> Result<Option<Cob>, ProviderError>;
    /// `PATCH /cob/{txid}` to `REMOVIDA_PELO_USUARIO_RECEBEDOR`; `Refused` once it is paid.
    async fn remove(&self, txid: &Txid) -> Result<Cob, ProviderError>;
    /// `PUT /webhook/{chave}`: where the provider posts `{"pix": [...]}` (`{url}/pix`).
    async fn register_webhook(&self, url: &str) -> Result<(), ProviderError>;
    /// `GET /pix?inicio&fim&paginacao.paginaAtual&paginacao.itensPorPagina`: page `pagina`
    /// (from 0) of the Pix received between `inicio` and `fim` (RFC 3339), `itens` a page.
    async fn received(
        &self,
        inicio: &str,
        fim: &str,
        pagina: u32,
        itens: u32,
    ) -> Result<PixConsultados, ProviderError>;
    /// `PUT /pix/{e2eid}/devolucao/{id}`: pays `valor` back under the client's `id`. An `id`
    /// used before is refused by the provider (400), never replayed: then it is read back, so a
    /// retry after a lost answer never pays back twice.
    async fn refund(&self, e2eid: &str, id: &str, valor: &str) -> Result<Devolucao, ProviderError>;
    /// `GET /pix/{e2eid}/devolucao/{id}`; `None` when there is none.
    async fn get_refund(&self, e2eid: &str, id: &str) -> Result<Option<Devolucao>, ProviderError>;
}

/// The API Pix over HTTP.
#[derive(Debug, Clone)]
pub struct HttpPixProvider {
    http: ProviderHttp,
    chave: String,
}

/// The API Pix scopes this client asks its token for: immediate charges, Pix and devoluções,
/// and the webhook.
pub const SCOPES: &str = "cob.write cob.read pix.write pix.read webhook.write webhook.read";

impl HttpPixProvider {
    /// A client of the PSP at `base` that proves itself with `credentials` (OAuth2 client
    /// credentials for the scopes of [`SCOPES`]) and `tls` (the merchant's certificate), for
    /// the Pix key `chave`.
    pub fn new(base: &str, credentials: Credentials, tls: &ClientTls, chave: &str) -> Self {
        Self {
            http: ProviderHttp::with(base, credentials, tls),
            chave: chave.to_string(),
        }
    }

    fn detail(body: &str) -> String {
        serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("detail").and_then(|d| d.as_str()).map(String::from))
            .unwrap_or_else(|| body.chars().take(200).collect())
    }
}

#[async_trait::async_trait]
impl PixProvider for HttpPixProvider {
    async fn create(
        &self,
        txid: &Txid,
        valor: &str,
        expiracao: u32,
        solicitacao: Option<&str>,
    ) -> Result<Cob, ProviderError> {
        let mut body = serde_json::json!({
            "calendario": {"expiracao": expiracao},
            "valor": {"original": valor},
            "chave": self.chave,
        });
        if let Some(s) = solicitacao {
            body["solicitacaoPagador"] = serde_json::json!(s.chars().take(140).collect::<String>());
        }
        let (status, text) = self
            .http
            .send_json(Method::PUT, &format!("/cob/{txid}"), &body)
            .await?;
        match status.as_u16() {
            201 | 200 => Ok(ProviderHttp::json(&text)?),
            // PSPs word it differently; a charge found under the txid is what "taken" means.
            400 if self.get(txid).await?.is_some() => Err(ProviderError::TxidTaken),
            _ => Err(ProviderError::Refused(Self::detail(&text))),
        }
    }

    async fn get(&self, txid: &Txid) -> Result<Option<Cob>, ProviderError> {
        let (status, text) = self.http.get(&format!("/cob/{txid}")).await?;
        match status.as_u16() {
            200 => Ok(Some(ProviderHttp::json(&text)?)),
            404 => Ok(None),
            _ => Err(ProviderError::Refused(Self::detail(&text))),
        }
    }

    async fn remove(&self, txid: &Txid) -> Result<Cob, ProviderError> {
        let body = serde_json::json!({"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"});
        let (status, text) = self
            .http
            .send_json(Method::PATCH, &format!("/cob/{txid}"), &body)
            .await?;
        match status.as_u16() {
            200 => Ok(ProviderHttp::json(&text)?),
            _ => Err(ProviderError::Refused(Self::detail(&text))),
        }
    }

    async fn refund(&self, e2eid: &str, id: &str, valor: &str) -> Result<Devolucao, ProviderError> {
        let body = serde_json::json!({"valor": valor});
        let (status, text) = self
            .http
            .send_json(Method::PUT, &format!("/pix/{e2eid}/devolucao/{id}"), &body)
            .await?;
        match status.as_u16() {
            201 | 200 => Ok(ProviderHttp::json(&text)?),
            // A reused id: the devolução asked before under it is the answer.
            400 => match self.get_refund(e2eid, id).await? {
                Some(d) => Ok(d),
                None => Err(ProviderError::Refused(Self::detail(&text))),
            },
            _ => Err(ProviderError::Refused(Self::detail(&text))),
        }
    }

    async fn get_refund(&self, e2eid: &str, id: &str) -> Result<Option<Devolucao>, ProviderError> {
        let path = format!("/pix/{e2eid}/devolucao/{id}");
        let (status, text) = self.http.get(&path).await?;
        match status.as_u16() {
            200 => Ok(Some(ProviderHttp::json(&text)?)),
            404 => Ok(None),
            _ => Err(ProviderError::Refused(Self::detail(&text))),
        }
    }

    async fn received(
        &self,
        inicio: &str,
        fim: &str,
        pagina: u32,
        itens: u32,
    ) -> Result<PixConsultados, ProviderError> {
        let (pagina, itens) = (pagina.to_string(), itens.to_string());
        let query = [
            ("inicio", inicio),
            ("fim", fim),
            ("paginacao.paginaAtual", pagina.as_str()),
            ("paginacao.itensPorPagina", itens.as_str()),
        ];
        let (status, text) = self
            .http
            .send(self.http.at(Method::GET, "/pix").query(&query))
            .await?;
        match status.as_u16() {
            200 => Ok(ProviderHttp::json(&text)?),
            _ => Err(ProviderError::Refused(Self::detail(&text))),
        }
    }

    async fn register_webhook(&self, url: &str) -> Result<(), ProviderError> {
        let body = serde_json::json!({"webhookUrl": url});
        let (status, text) = self
            .http
            .send_json(Method::PUT, &format!("/webhook/{}", self.chave), &body)
            .await?;
        if status.is_success() {
            Ok(())
        } else {
            Err(ProviderError::Refused(Self::detail(&text)))
        }
    }
}
