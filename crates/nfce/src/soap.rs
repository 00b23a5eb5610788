//! The SEFAZ web services a till calls, as messages — one definition for the till's client and
//! the SEFAZ simulator (`crates/sefaz`), so the two cannot drift. SOAP 1.2, leiaute 4.00:
//!
//! - `NFeAutorizacao4` (`enviNFe`, one note, `indSinc` 1: the answer carries the note's
//!   protocol), answered `retEnviNFe`;
//! - `NFeConsultaProtocolo4` (`consSitNFe` by key), answered `retConsSitNFe`;
//! - `NFeStatusServico4` (`consStatServ`), answered `retConsStatServ`.
//!
//! [`Desfecho::of`] is what a till makes of an authorization's answer: above all, **204
//! ("Duplicidade de NF-e") means the note is already authorized** — a lost answer sent again —
//! and is settled by a consulta by key, never by a new note.

use crate::error::{NfceError, Result};
use crate::nota::NFE_NS;
use crate::xml::Xml;

const SOAP_NS: &str = "http://www.w3.org/2003/05/soap-envelope";
const WSDL: &str = "http://www.portalfiscal.inf.br/nfe/wsdl/";

/// A web service of SEFAZ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Servico {
    /// `NFeAutorizacao4`.
    Autorizacao,
    /// `NFeConsultaProtocolo4`.
    Consulta,
    /// `NFeStatusServico4`.
    Status,
    /// `NFeInutilizacao4`.
    Inutilizacao,
    /// `NFeRecepcaoEvento4` ([`crate::evento`]).
    Evento,
}

impl Servico {
    /// Its name, the last segment of its address and of its WSDL namespace.
    pub fn nome(self) -> &'static str {
        match self {
            Servico::Autorizacao => "NFeAutorizacao4",
            Servico::Consulta => "NFeConsultaProtocolo4",
            Servico::Status => "NFeStatusServico4",
            Servico::Inutilizacao => "NFeInutilizacao4",
            Servico::Evento => "NFeRecepcaoEvento4",
        }
    }

    fn operacao(self) -> &'static str {
        match self {
            Servico::Autorizacao => "nfeAutorizacaoLote",
            Servico::Consulta => "nfeConsultaNF",
            Servico::Status => "nfeStatusServicoNF",
            Servico::Inutilizacao => "nfeInutilizacaoNF",
            Servico::Evento => "nfeRecepcaoEvento",
        }
    }

    /// The `Content-Type` of a request to it (SOAP 1.2 carries the action there).
    pub fn content_type(self) -> String {
        format!(
            "application/soap+xml; charset=utf-8; action=\"{WSDL}{}/{}\"",
            self.nome(),
            self.operacao()
        )
    }
}

pub(crate) fn envelope(servico: Servico, wrapper: &str, body: &str) -> String {
    let mut x = Xml::default();
    x.open("soap12:Envelope", &[("xmlns:soap12", SOAP_NS)])
        .open("soap12:Body", &[])
        .open(wrapper, &[("xmlns", &format!("{WSDL}{}", servico.nome()))])
        .raw(body)
        .close(wrapper)
        .close("soap12:Body")
        .close("soap12:Envelope");
    x.finish()
}

/// `enviNFe` of one signed note, answered synchronously.
pub fn pedido_autorizacao(id_lote: u64, nfe: &str) -> String {
    let mut x = Xml::default();
    x.open("enviNFe", &[("xmlns", NFE_NS), ("versao", "4.00")])
        .leaf("idLote", &id_lote.to_string())
        .leaf("indSinc", "1")
        .raw(nfe)
        .close("enviNFe");
    envelope(Servico::Autorizacao, "nfeDadosMsg", &x.finish())
}

/// `consSitNFe` of a key.
pub fn pedido_consulta(tp_amb: u8, chave: &str) -> String {
    let mut x = Xml::default();
    x.open("consSitNFe", &[("xmlns", NFE_NS), ("versao", "4.00")])
        .leaf("tpAmb", &tp_amb.to_string())
        .leaf("xServ", "CONSULTAR")
        .leaf("chNFe", chave)
        .close("consSitNFe");
    envelope(Servico::Consulta, "nfeDadosMsg", &x.finish())
}

/// `consStatServ` of a state.
pub fn pedido_status(tp_amb: u8, c_uf: u8) -> String {
    let mut x = Xml::default();
    x.open("consStatServ", &[("xmlns", NFE_NS), ("versao", "4.00")])
        .leaf("tpAmb", &tp_amb.to_string())
        .leaf("cUF", &c_uf.to_string())
        .leaf("xServ", "STATUS")
        .close("consStatServ");
    envelope(Servico::Status, "nfeDadosMsg", &x.finish())
}

/// `inutNFe`, signed (`crate::inutilizacao::Inutilizacao::assinar`).
pub fn pedido_inutilizacao(inut: &str) -> String {
    envelope(Servico::Inutilizacao, "nfeDadosMsg", inut)
}

/// SEFAZ's answer to an inutilização.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetornoInutilizacao {
    /// 102 homologated; anything else refused.
    pub c_stat: u16,
    /// The reason.
    pub x_motivo: String,
    /// The protocol, when homologated.
    pub n_prot: Option<String>,
}

/// What a till makes of an inutilização's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DesfechoInutilizacao {
    /// 102: the numbers are declared unused; keep the protocol.
    Homologada(String),
    /// 563: this very range was declared before (an answer lost, the request sent again): done.
    JaPedida,
    /// 241: a number of the range is a note SEFAZ authorized — consult it, it is no gap.
    NumeroUsado,
    /// 256: part of the range was declared before: declare only what is left.
    Sobreposta,
    /// 656: SEFAZ blocks this emitter for repeating rejected requests.
    ConsumoIndevido,
    /// Refused as it is (code and reason).
    Rejeitada(u16, String),
}

impl DesfechoInutilizacao {
    /// The till's reading of `r`.
    pub fn of(r: &RetornoInutilizacao) -> Self {
        match (r.c_stat, &r.n_prot) {
            (102, Some(n)) => DesfechoInutilizacao::Homologada(n.clone()),
            (563, _) => DesfechoInutilizacao::JaPedida,
            (241, _) => DesfechoInutilizacao::NumeroUsado,
            (256, _) => DesfechoInutilizacao::Sobreposta,
            (656, _) => DesfechoInutilizacao::ConsumoIndevido,
            (code, _) => DesfechoInutilizacao::Rejeitada(code, r.x_motivo.clone()),
        }
    }
}

/// Reads `retInutNFe`.
pub fn ler_retorno_inutilizacao(xml: &str) -> Result<RetornoInutilizacao> {
    let doc = parse_doc(xml)?;
    let inf = find(&doc, "retInutNFe")
        .and_then(|r| {
            r.children()
                .find(|c| c.is_element() && c.tag_name().name() == "infInut")
        })
        .ok_or_else(|| bad("sem retInutNFe/infInut"))?;
    Ok(RetornoInutilizacao {
        c_stat: code(inf)?,
        x_motivo: child_text(inf, "xMotivo").unwrap_or_default().to_string(),
        n_prot: child_text(inf, "nProt").map(str::to_string),
    })
}

/// A note's protocol: SEFAZ's word on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocolo {
    /// The note's key.
    pub chave: String,
    /// 100 authorized; any other code a rejection of the note.
    pub c_stat: u16,
    /// The reason, in SEFAZ's words.
    pub x_motivo: String,
    /// The authorization's protocol number (only when authorized).
    pub n_prot: Option<String>,
    /// When SEFAZ received it.
    pub dh_recbto: String,
    /// The digest of the note SEFAZ authorized (`digVal`).
    pub dig_val: Option<String>,
}

/// An answer of SEFAZ: the code of the request, and the note's protocol when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retorno {
    /// The request's code (104 "lote processado", 225 schema error, 107 in operation, …).
    pub c_stat: u16,
    /// Its reason.
    pub x_motivo: String,
    /// The note's protocol (authorization, consulta).
    pub protocolo: Option<Protocolo>,
    /// The protocol of the note's cancellation (a consulta's 101 shows its event).
    pub cancelamento: Option<String>,
}

/// What a till makes of an authorization's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Desfecho {
    /// Authorized: keep the protocol with the note.
    Autorizada(Protocolo),
    /// 204: the key is already authorized (an earlier send whose answer was lost). Ask for it by
    /// key and keep that protocol; never issue the note again.
    JaAutorizada,
    /// 539: this number is authorized under another key — another note was sent with it. The
    /// number is spent; the sale needs its note under a new number (and the other key looked
    /// for).
    NumeroComOutraChave(String),
    /// 656: SEFAZ blocks this emitter for repeating rejected requests. Send nothing for an hour.
    ConsumoIndevido,
    /// Rejected: the note as it is will never be authorized (code and reason).
    Rejeitada(u16, String),
}

impl Desfecho {
    /// The till's reading of `retorno`.
    pub fn of(retorno: &Retorno) -> Desfecho {
        if retorno.c_stat == 656 {
            return Desfecho::ConsumoIndevido;
        }
        let Some(p) = retorno.protocolo.as_ref().filter(|_| retorno.c_stat == 104) else {
            return Desfecho::Rejeitada(retorno.c_stat, retorno.x_motivo.clone());
        };
        match p.c_stat {
            100 | 150 => Desfecho::Autorizada(p.clone()),
            204 => Desfecho::JaAutorizada,
            539 => Desfecho::NumeroComOutraChave(p.x_motivo.clone()),
            656 => Desfecho::ConsumoIndevido,
            code => Desfecho::Rejeitada(code, p.x_motivo.clone()),
        }
    }
}

pub(crate) fn child_text<'a>(node: roxmltree::Node<'a, 'a>, name: &str) -> Option<&'a str> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
        .and_then(|c| c.text())
}

pub(crate) fn find<'a>(
    doc: &'a roxmltree::Document<'a>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .find(|n| n.is_element() && n.tag_name().name() == name)
}

pub(crate) fn bad(what: &str) -> NfceError {
    NfceError::Invalid("resposta da SEFAZ", what.to_string())
}

pub(crate) fn parse_doc(xml: &str) -> Result<roxmltree::Document<'_>> {
    roxmltree::Document::parse(xml).map_err(|e| bad(&e.to_string()))
}

pub(crate) fn code(node: roxmltree::Node<'_, '_>) -> Result<u16> {
    child_text(node, "cStat")
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("sem cStat"))
}

fn protocolo(doc: &roxmltree::Document<'_>) -> Result<Option<Protocolo>> {
    let Some(inf) = find(doc, "infProt") else {
        return Ok(None);
    };
    Ok(Some(Protocolo {
        chave: child_text(inf, "chNFe")
            .ok_or_else(|| bad("infProt sem chNFe"))?
            .to_string(),
        c_stat: code(inf)?,
        x_motivo: child_text(inf, "xMotivo").unwrap_or_default().to_string(),
        n_prot: child_text(inf, "nProt").map(str::to_string),
        dh_recbto: child_text(inf, "dhRecbto").unwrap_or_default().to_string(),
        dig_val: child_text(inf, "digVal").map(str::to_string),
    }))
}

/// Reads an answer of any of the three services (`retEnviNFe`, `retConsSitNFe`,
/// `retConsStatServ`).
pub fn ler_retorno(xml: &str) -> Result<Retorno> {
    let doc = parse_doc(xml)?;
    let root = ["retEnviNFe", "retConsSitNFe", "retConsStatServ"]
        .iter()
        .find_map(|name| find(&doc, name))
        .ok_or_else(|| bad("sem retEnviNFe, retConsSitNFe ou retConsStatServ"))?;
    Ok(Retorno {
        c_stat: code(root)?,
        x_motivo: child_text(root, "xMotivo").unwrap_or_default().to_string(),
        protocolo: protocolo(&doc)?,
        cancelamento: cancelamento_em(&doc),
    })
}

// ---- The SEFAZ side (the simulator) ----

/// A request as SEFAZ reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pedido {
    /// `enviNFe`: the lote's id, and the `NFe` element exactly as it was sent.
    Autorizacao {
        /// `idLote`.
        id_lote: String,
        /// `indSinc`.
        sincrono: bool,
        /// The note, byte for byte.
        nfe: String,
    },
    /// `consSitNFe`.
    Consulta {
        /// `tpAmb`.
        tp_amb: u8,
        /// The key asked about.
        chave: String,
    },
    /// `consStatServ`.
    Status {
        /// `tpAmb`.
        tp_amb: u8,
    },
    /// `inutNFe`, byte for byte.
    Inutilizacao {
        /// The signed request.
        inut: String,
    },
    /// `envEvento`, byte for byte (the lote and its signed event).
    Evento {
        /// The lote as sent.
        envio: String,
    },
}

/// Reads a request's SOAP envelope.
pub fn ler_pedido(xml: &str) -> Result<Pedido> {
    let doc =
        roxmltree::Document::parse(xml).map_err(|e| NfceError::Invalid("pedido", e.to_string()))?;
    let field = |node, name| {
        child_text(node, name)
            .map(str::to_string)
            .ok_or_else(|| NfceError::Invalid("pedido", format!("sem {name}")))
    };
    let amb = |node| {
        field(node, "tpAmb")?
            .parse::<u8>()
            .map_err(|e| NfceError::Invalid("tpAmb", e.to_string()))
    };
    if let Some(envi) = find(&doc, "enviNFe") {
        let nfe = envi
            .children()
            .find(|c| c.is_element() && c.tag_name().name() == "NFe")
            .ok_or_else(|| NfceError::Invalid("pedido", "enviNFe sem NFe".into()))?;
        return Ok(Pedido::Autorizacao {
            id_lote: field(envi, "idLote")?,
            sincrono: child_text(envi, "indSinc") == Some("1"),
            nfe: xml[nfe.range()].to_string(),
        });
    }
    if let Some(cons) = find(&doc, "consSitNFe") {
        return Ok(Pedido::Consulta {
            tp_amb: amb(cons)?,
            chave: field(cons, "chNFe")?,
        });
    }
    if let Some(inut) = find(&doc, "inutNFe") {
        return Ok(Pedido::Inutilizacao {
            inut: xml[inut.range()].to_string(),
        });
    }
    if let Some(env) = find(&doc, "envEvento") {
        return Ok(Pedido::Evento {
            envio: xml[env.range()].to_string(),
        });
    }
    if let Some(cons) = find(&doc, "consStatServ") {
        return Ok(Pedido::Status { tp_amb: amb(cons)? });
    }
    Err(NfceError::Invalid("pedido", "serviço desconhecido".into()))
}

/// What SEFAZ answers, before it becomes a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resposta {
    /// `tpAmb`.
    pub tp_amb: u8,
    /// `cUF`.
    pub c_uf: u8,
    /// `verAplic`.
    pub ver_aplic: String,
    /// When it was received.
    pub dh_recbto: String,
    /// The request's code and reason.
    pub c_stat: u16,
    /// Its reason.
    pub x_motivo: String,
    /// The note's protocol.
    pub protocolo: Option<Protocolo>,
}

fn prot_nfe(x: &mut Xml, r: &Resposta, p: &Protocolo) {
    x.open("protNFe", &[("versao", "4.00")])
        .open("infProt", &[])
        .leaf("tpAmb", &r.tp_amb.to_string())
        .leaf("verAplic", &r.ver_aplic)
        .leaf("chNFe", &p.chave)
        .leaf("dhRecbto", &p.dh_recbto)
        .opt("nProt", p.n_prot.as_deref())
        .opt("digVal", p.dig_val.as_deref())
        .leaf("cStat", &p.c_stat.to_string())
        .leaf("xMotivo", &p.x_motivo)
        .close("infProt")
        .close("protNFe");
}

pub(crate) fn resultado(servico: Servico, body: &str) -> String {
    let mut x = Xml::default();
    x.open("soap:Envelope", &[("xmlns:soap", SOAP_NS)])
        .open("soap:Body", &[])
        .open(
            "nfeResultMsg",
            &[("xmlns", &format!("{WSDL}{}", servico.nome()))],
        )
        .raw(body)
        .close("nfeResultMsg")
        .close("soap:Body")
        .close("soap:Envelope");
    x.finish()
}

/// What every answer of a web service starts with: environment, application, code, reason,
/// state and time received.
fn answer_head<'x>(x: &'x mut Xml, r: &Resposta) -> &'x mut Xml {
    x.leaf("tpAmb", &r.tp_amb.to_string())
        .leaf("verAplic", &r.ver_aplic)
        .leaf("cStat", &r.c_stat.to_string())
        .leaf("xMotivo", &r.x_motivo)
        .leaf("cUF", &r.c_uf.to_string())
        .leaf("dhRecbto", &r.dh_recbto)
}

/// An answer's root: what every answer starts with, then `extra` (the key a consulta names),
/// then the note's protocol when there is one.
fn retorno(
    servico: Servico,
    root: &str,
    r: &Resposta,
    chave: Option<&str>,
    eventos: &[EventoRegistrado],
) -> String {
    let mut x = Xml::default();
    x.open(root, &[("xmlns", NFE_NS), ("versao", "4.00")]);
    answer_head(&mut x, r).opt("chNFe", chave);
    if let Some(p) = &r.protocolo {
        prot_nfe(&mut x, r, p);
    }
    for e in eventos {
        proc_evento(&mut x, r, chave.unwrap_or_default(), e);
    }
    x.close(root);
    resultado(servico, &x.finish())
}

/// `retEnviNFe`.
pub fn resposta_autorizacao(r: &Resposta) -> String {
    retorno(Servico::Autorizacao, "retEnviNFe", r, None, &[])
}

/// `retConsSitNFe` of `chave`: its authorization's protocol, and the events registered for it
/// (a cancelled note: 101, with its cancellation).
pub fn resposta_consulta(r: &Resposta, chave: &str, eventos: &[EventoRegistrado]) -> String {
    retorno(Servico::Consulta, "retConsSitNFe", r, Some(chave), eventos)
}

/// `retConsStatServ` (never with a protocol).
pub fn resposta_status(r: &Resposta) -> String {
    let r = Resposta {
        protocolo: None,
        ..r.clone()
    };
    retorno(Servico::Status, "retConsStatServ", &r, None, &[])
}

/// `retInutNFe`: its `infInut` carries the code, and the protocol when homologated.
pub fn resposta_inutilizacao(r: &Resposta, n_prot: Option<&str>) -> String {
    let mut x = Xml::default();
    x.open("retInutNFe", &[("xmlns", NFE_NS), ("versao", "4.00")])
        .open("infInut", &[]);
    answer_head(&mut x, r)
        .opt("nProt", n_prot)
        .close("infInut")
        .close("retInutNFe");
    resultado(Servico::Inutilizacao, &x.finish())
}

/// `retEvento`: SEFAZ's word on one event (`r` holds its code, reason and time).
pub(crate) fn ret_evento(
    x: &mut Xml,
    r: &Resposta,
    chave: &str,
    tp_evento: &str,
    n_seq: u8,
    n_prot: Option<&str>,
) {
    x.open("retEvento", &[("versao", "1.00")])
        .open("infEvento", &[])
        .leaf("tpAmb", &r.tp_amb.to_string())
        .leaf("verAplic", &r.ver_aplic)
        .leaf("cOrgao", &r.c_uf.to_string())
        .leaf("cStat", &r.c_stat.to_string())
        .leaf("xMotivo", &r.x_motivo)
        .leaf("chNFe", chave)
        .leaf("tpEvento", tp_evento)
        .leaf("nSeqEvento", &n_seq.to_string())
        .leaf("dhRegEvento", &r.dh_recbto)
        .opt("nProt", n_prot)
        .close("infEvento")
        .close("retEvento");
}

/// An event SEFAZ registered, as a consulta of its note shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventoRegistrado {
    /// The signed `evento`, as it was sent.
    pub evento: String,
    /// `tpEvento` (110111, 110112).
    pub tp_evento: String,
    /// `nSeqEvento`.
    pub n_seq: u8,
    /// Its protocol.
    pub n_prot: String,
    /// When SEFAZ registered it.
    pub dh_reg: String,
}

/// `procEventoNFe`: a registered event and SEFAZ's answer to it (135), as `retConsSitNFe`
/// carries it; `r` gives the answer's environment and application.
fn proc_evento(x: &mut Xml, r: &Resposta, chave: &str, e: &EventoRegistrado) {
    let registro = Resposta {
        c_stat: 135,
        x_motivo: "Evento registrado e vinculado a NF-e".to_string(),
        dh_recbto: e.dh_reg.clone(),
        protocolo: None,
        ..r.clone()
    };
    x.open("procEventoNFe", &[("versao", "1.00")])
        .raw(&e.evento);
    ret_evento(x, &registro, chave, &e.tp_evento, e.n_seq, Some(&e.n_prot));
    x.close("procEventoNFe");
}

/// The protocol of a cancellation (110111 or 110112) registered for the note, read from the
/// `procEventoNFe` of a consulta's answer (`None`: the answer shows none).
fn cancelamento_em(doc: &roxmltree::Document<'_>) -> Option<String> {
    doc.descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "retEvento")
        .filter_map(|r| {
            r.children()
                .find(|c| c.is_element() && c.tag_name().name() == "infEvento")
        })
        .filter(|inf| {
            matches!(child_text(*inf, "cStat"), Some("135" | "136"))
                && matches!(child_text(*inf, "tpEvento"), Some("110111" | "110112"))
        })
        .find_map(|inf| child_text(inf, "nProt").map(str::to_string))
}

#[cfg(test)]
mod tests;
