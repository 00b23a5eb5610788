//! The till's side of SEFAZ's web services for its NFC-e (messages: `nfce::soap`). A note goes
//! out exactly as it was signed, and every answer the till did not hear — a timeout, a cut
//! connection, a 204 "Duplicidade de NF-e" — is settled by asking SEFAZ for the note's key,
//! never by another note: a lost answer is the one way a till would otherwise issue a sale's
//! note twice.

mod emissor;

pub use crate::domain::Situacao;
pub use emissor::{agora, Emissor, ItemVenda, VendaPaga, REENVIO_MAX};

use nfce::evento::DesfechoEvento;
use nfce::soap::{self, Desfecho, DesfechoInutilizacao, Protocolo, Servico};
use std::time::Duration;

/// A note SEFAZ has, as a consulta by its key shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consultada {
    /// Its authorization.
    pub protocolo: Protocolo,
    /// Whether it stands or was cancelled.
    pub vigencia: Vigencia,
}

/// Whether a note SEFAZ authorized still stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Vigencia {
    /// Authorized, not cancelled (100, 150).
    Autorizada,
    /// Cancelled (101, 151): the cancellation's protocol, when the answer showed its event.
    Cancelada(Option<String>),
}

/// A SEFAZ's web services at a base URL (`…/ws/<service>`).
#[derive(Debug, Clone)]
pub struct Sefaz {
    http: reqwest::Client,
    base: String,
    tp_amb: u8,
    timeout: Duration,
}

impl Sefaz {
    /// SEFAZ at `base`, for environment `tp_amb`, each call given at most `timeout`.
    pub fn new(base: &str, tp_amb: u8, timeout: Duration) -> Self {
        Sefaz {
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_string(),
            tp_amb,
            timeout,
        }
    }

    async fn post(&self, servico: Servico, body: String) -> Result<String, String> {
        let r = self
            .http
            .post(format!("{}/ws/{}", self.base, servico.nome()))
            .header(reqwest::header::CONTENT_TYPE, servico.content_type())
            .body(body)
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| format!("SEFAZ sem resposta: {e}"))?;
        if !r.status().is_success() {
            return Err(format!("SEFAZ respondeu HTTP {}", r.status()));
        }
        r.text()
            .await
            .map_err(|e| format!("resposta da SEFAZ cortada: {e}"))
    }

    /// What SEFAZ has under `chave`: its authorization, and its cancellation's protocol when it
    /// was cancelled (101); `None` when SEFAZ does not have it (217).
    pub async fn consultar(&self, chave: &str) -> Result<Option<Consultada>, String> {
        let text = self
            .post(Servico::Consulta, soap::pedido_consulta(self.tp_amb, chave))
            .await?;
        let r = soap::ler_retorno(&text).map_err(|e| e.to_string())?;
        match (r.c_stat, r.protocolo) {
            (100 | 150, Some(protocolo)) => Ok(Some(Consultada {
                protocolo,
                vigencia: Vigencia::Autorizada,
            })),
            (101 | 151, Some(protocolo)) => Ok(Some(Consultada {
                protocolo,
                vigencia: Vigencia::Cancelada(r.cancelamento.filter(|p| !p.is_empty())),
            })),
            (217, _) => Ok(None),
            (code, _) => Err(format!("consulta: {code} {}", r.x_motivo)),
        }
    }

    /// Asks SEFAZ about a note whose answer was not heard (`why`).
    async fn settle(&self, chave: &str, why: String) -> Situacao {
        match self.consultar(chave).await {
            Ok(Some(c)) => Situacao::Autorizada(c.protocolo),
            Ok(None) => Situacao::SemResposta(format!("{why}; a SEFAZ não tem a nota")),
            Err(e) => Situacao::SemResposta(format!("{why}; consulta: {e}")),
        }
    }

    /// Sends the note of key `chave`, signed as `xml` (the bytes kept with it), for
    /// authorization (synchronous) and settles what was not heard.
    pub async fn autorizar(&self, chave: &str, xml: &str, id_lote: u64) -> Situacao {
        let pedido = soap::pedido_autorizacao(id_lote, xml);
        let text = match self.post(Servico::Autorizacao, pedido).await {
            Ok(text) => text,
            Err(why) => return self.settle(chave, why).await,
        };
        let retorno = match soap::ler_retorno(&text) {
            Ok(r) => r,
            Err(e) => return self.settle(chave, e.to_string()).await,
        };
        match Desfecho::of(&retorno) {
            Desfecho::Autorizada(p) => Situacao::Autorizada(p),
            Desfecho::JaAutorizada => self.settle(chave, "204 Duplicidade de NF-e".into()).await,
            Desfecho::NumeroComOutraChave(why) => Situacao::NumeroComOutraChave(why),
            Desfecho::ConsumoIndevido => Situacao::ConsumoIndevido,
            Desfecho::Rejeitada(code, why) => Situacao::Rejeitada(code, why),
        }
    }

    /// Declares numbers unused with the signed `inutilizacao` (`inutNFe`): SEFAZ's word, or
    /// why none was heard (then the same request is sent again: 563 means it had it).
    pub async fn inutilizar(&self, inutilizacao: &str) -> Result<DesfechoInutilizacao, String> {
        let text = self
            .post(
                Servico::Inutilizacao,
                soap::pedido_inutilizacao(inutilizacao),
            )
            .await?;
        let r = soap::ler_retorno_inutilizacao(&text).map_err(|e| e.to_string())?;
        Ok(DesfechoInutilizacao::of(&r))
    }

    /// Registers the signed `evento` (a cancellation): SEFAZ's word, or why none was heard (then
    /// the same event is sent again: 573 means it had it).
    pub async fn registrar_evento(&self, evento: &str) -> Result<DesfechoEvento, String> {
        let text = self
            .post(Servico::Evento, nfce::evento::pedido(lote(), evento))
            .await?;
        let r = nfce::evento::ler_retorno(&text).map_err(|e| e.to_string())?;
        Ok(DesfechoEvento::of(&r))
    }

    /// Whether SEFAZ says its authorization service is working (`107`) for state `c_uf`.
    pub async fn em_operacao(&self, c_uf: u8) -> Result<bool, String> {
        let text = self
            .post(Servico::Status, soap::pedido_status(self.tp_amb, c_uf))
            .await?;
        let r = soap::ler_retorno(&text).map_err(|e| e.to_string())?;
        Ok(r.c_stat == 107)
    }
}

/// A fresh `idLote` (15 digits at most).
pub fn lote() -> u64 {
    use rand::Rng;
    rand::thread_rng().gen_range(1..999_999_999_999_999)
}
