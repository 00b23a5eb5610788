//! Events on an authorized note (`envEvento`, leiaute 1.00, web service `NFeRecepcaoEvento4`):
//! the cancelamento (110111) and the **cancelamento por substituição** (110112) — the event a
//! till sends when a note it sent normally, whose answer it never heard, turns out authorized
//! after the sale got its note in contingência: the first is cancelled, naming the note that
//! replaced it (`chNFeRef`). SEFAZ keeps one event per (key, type, `nSeqEvento`): the same event
//! sent again after a lost answer is refused 573 ("Duplicidade de Evento"), which means it is
//! registered — never a reason to make another.
//!
//! The 110111 `detEvento` is the schema's `e110111_v1.00.xsd`; 110112's is laid out as SEFAZ's
//! technical note and the public emitters have it (`descEvento`, `cOrgaoAutor`, `tpAutor`,
//! `verAplic`, `nProt`, `xJust`, `chNFeRef`), its schema not being in the published package this
//! workspace installs (the generic `envEvento_v1.00.xsd` checks the rest).

use crate::assinatura::{self, Certificado};
use crate::error::{NfceError, Result};
use crate::nota::{Ambiente, NFE_NS};
use crate::soap::{self, Servico};
use crate::xml::Xml;
use crate::{Chave, Cnpj};

/// Which event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TipoEvento {
    /// 110111: the note is cancelled (within the state's window after its authorization).
    Cancelamento,
    /// 110112: the note is cancelled because the note under this key replaced it.
    CancelamentoPorSubstituicao {
        /// The note that replaced it (issued in contingência for the same sale).
        substituta: Chave,
    },
}

impl TipoEvento {
    /// `tpEvento`.
    pub fn codigo(&self) -> &'static str {
        match self {
            TipoEvento::Cancelamento => "110111",
            TipoEvento::CancelamentoPorSubstituicao { .. } => "110112",
        }
    }

    /// `descEvento`, as the schema spells it (no accents).
    pub fn descricao(&self) -> &'static str {
        match self {
            TipoEvento::Cancelamento => "Cancelamento",
            TipoEvento::CancelamentoPorSubstituicao { .. } => "Cancelamento por substituicao",
        }
    }
}

/// An event on one note, before it is signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evento {
    /// Which event.
    pub tipo: TipoEvento,
    /// The note it is about.
    pub chave: Chave,
    /// Who sends it (the note's emitter).
    pub cnpj: Cnpj,
    /// Production or homologação.
    pub ambiente: Ambiente,
    /// The note's authorization protocol.
    pub protocolo: String,
    /// Why (15 to 255 characters).
    pub justificativa: String,
    /// When (`dhEvento`, [`crate::data_hora`]).
    pub quando: String,
    /// The emitter's application (`verAplic`, 110112).
    pub aplicativo: String,
}

/// `nSeqEvento`: one cancellation per note.
const SEQUENCIA: u8 = 1;

impl Evento {
    /// Its `Id`: `ID`, the type, the key and the sequence (52 digits).
    pub fn id(&self) -> Result<String> {
        let chave = self.chave.as_ref();
        if !chave.bytes().all(|b| b.is_ascii_digit()) {
            // The schema's Id (`ID[0-9]{52}`) has no room for an alphanumeric CNPJ yet.
            return Err(NfceError::Invalid("chave numérica no evento", chave.into()));
        }
        Ok(format!("ID{}{chave}{SEQUENCIA:02}", self.tipo.codigo()))
    }

    fn check(&self) -> Result<()> {
        let n = self.justificativa.trim().chars().count();
        if !(15..=255).contains(&n) {
            return Err(NfceError::Invalid(
                "justificativa do evento (15 a 255 caracteres)",
                self.justificativa.clone(),
            ));
        }
        if !(self.protocolo.len() == 15 && self.protocolo.bytes().all(|b| b.is_ascii_digit())) {
            return Err(NfceError::Invalid(
                "protocolo de autorização (15 dígitos)",
                self.protocolo.clone(),
            ));
        }
        if let TipoEvento::CancelamentoPorSubstituicao { substituta } = &self.tipo {
            if substituta == &self.chave {
                return Err(NfceError::Invalid(
                    "a nota substituta não pode ser a própria nota",
                    substituta.as_ref().into(),
                ));
            }
        }
        Ok(())
    }

    /// The signed `evento` element.
    pub fn assinar(&self, cert: &Certificado) -> Result<String> {
        self.check()?;
        let id = self.id()?;
        let c_orgao = &self.chave.as_ref()[..2];
        let mut det = Xml::default();
        det.open("detEvento", &[("versao", "1.00")])
            .leaf("descEvento", self.tipo.descricao());
        if let TipoEvento::CancelamentoPorSubstituicao { .. } = self.tipo {
            det.leaf("cOrgaoAutor", c_orgao)
                .leaf("tpAutor", "1")
                .leaf("verAplic", &self.aplicativo);
        }
        det.leaf("nProt", &self.protocolo)
            .leaf("xJust", self.justificativa.trim());
        if let TipoEvento::CancelamentoPorSubstituicao { substituta } = &self.tipo {
            det.leaf("chNFeRef", substituta.as_ref());
        }
        det.close("detEvento");
        let mut inner = Xml::default();
        inner
            .leaf("cOrgao", c_orgao)
            .leaf("tpAmb", &self.ambiente.codigo().to_string())
            .leaf("CNPJ", self.cnpj.as_ref())
            .leaf("chNFe", self.chave.as_ref())
            .leaf("dhEvento", &self.quando)
            .leaf("tpEvento", self.tipo.codigo())
            .leaf("nSeqEvento", &SEQUENCIA.to_string())
            .leaf("verEvento", "1.00")
            .raw(&det.finish());
        let inner = inner.finish();
        let canonical = format!("<infEvento xmlns=\"{NFE_NS}\" Id=\"{id}\">{inner}</infEvento>");
        let signature = assinatura::signature(cert, &id, &canonical)?;
        let mut x = Xml::default();
        x.open("evento", &[("xmlns", NFE_NS), ("versao", "1.00")])
            .open("infEvento", &[("Id", &id)])
            .raw(&inner)
            .close("infEvento")
            .raw(&signature)
            .close("evento");
        Ok(x.finish())
    }
}

/// `envEvento` of one signed event, in its SOAP envelope.
pub fn pedido(id_lote: u64, evento: &str) -> String {
    let mut x = Xml::default();
    x.open("envEvento", &[("xmlns", NFE_NS), ("versao", "1.00")])
        .leaf("idLote", &id_lote.to_string())
        .raw(evento)
        .close("envEvento");
    soap::envelope(Servico::Evento, "nfeDadosMsg", &x.finish())
}

/// SEFAZ's word on one event (`retEvento/infEvento`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetornoEvento {
    /// The lote's code (128 processed) when the event itself has none.
    pub c_stat: u16,
    /// The reason.
    pub x_motivo: String,
    /// The event's protocol, when registered.
    pub n_prot: Option<String>,
}

/// What a till makes of an event's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DesfechoEvento {
    /// 135/136: registered; keep its protocol.
    Registrado(String),
    /// 573: this very event was registered before (an answer lost, the event sent again);
    /// 218: the note is cancelled already. Either way: done.
    JaRegistrado(u16),
    /// 656: SEFAZ blocks this emitter for repeating rejected requests.
    ConsumoIndevido,
    /// Refused as it is (code and reason): sending it again would be refused again.
    Rejeitado(u16, String),
}

impl DesfechoEvento {
    /// The till's reading of `r`.
    pub fn of(r: &RetornoEvento) -> Self {
        match (r.c_stat, &r.n_prot) {
            (135 | 136, Some(n)) => DesfechoEvento::Registrado(n.clone()),
            (573 | 218, _) => DesfechoEvento::JaRegistrado(r.c_stat),
            (656, _) => DesfechoEvento::ConsumoIndevido,
            (code, _) => DesfechoEvento::Rejeitado(code, r.x_motivo.clone()),
        }
    }
}

/// Reads `retEnvEvento`: the event's own answer when the lote was processed, else the lote's.
pub fn ler_retorno(xml: &str) -> Result<RetornoEvento> {
    let doc = soap::parse_doc(xml)?;
    let lote = soap::find(&doc, "retEnvEvento").ok_or_else(|| soap::bad("sem retEnvEvento"))?;
    let inf = soap::find(&doc, "retEvento").and_then(|r| {
        r.children()
            .find(|c| c.is_element() && c.tag_name().name() == "infEvento")
    });
    let node = inf.unwrap_or(lote);
    Ok(RetornoEvento {
        c_stat: soap::code(node)?,
        x_motivo: soap::child_text(node, "xMotivo")
            .unwrap_or_default()
            .to_string(),
        n_prot: soap::child_text(node, "nProt").map(str::to_string),
    })
}

/// The answer SEFAZ writes for one event: the lote's code (128) and the event's.
pub fn resposta(r: &soap::Resposta, chave: &str, tp_evento: &str, n_prot: Option<&str>) -> String {
    let mut x = Xml::default();
    x.open("retEnvEvento", &[("xmlns", NFE_NS), ("versao", "1.00")])
        .leaf("idLote", "0")
        .leaf("tpAmb", &r.tp_amb.to_string())
        .leaf("verAplic", &r.ver_aplic)
        .leaf("cOrgao", &r.c_uf.to_string())
        .leaf("cStat", "128")
        .leaf("xMotivo", "Lote de Evento Processado");
    soap::ret_evento(&mut x, r, chave, tp_evento, SEQUENCIA, n_prot);
    x.close("retEnvEvento");
    soap::resultado(Servico::Evento, &x.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exemplo;

    fn evento() -> Evento {
        let nota = exemplo::nota(1, crate::Emissao::Normal, false);
        let chave = nota.chave().expect("a key");
        let substituta = exemplo::contingencia(2).chave().expect("a key");
        Evento {
            tipo: TipoEvento::CancelamentoPorSubstituicao { substituta },
            chave,
            cnpj: nota.emitente.cnpj.clone(),
            ambiente: Ambiente::Homologacao,
            protocolo: "135260000000001".into(),
            justificativa: "Nota substituida pela emitida em contingencia".into(),
            quando: "2026-12-06T10:00:00-03:00".into(),
            aplicativo: "Pagar 0.1".into(),
        }
    }

    #[test]
    fn a_substitution_names_the_note_that_replaced_it_and_is_signed_over_its_id() {
        let e = evento();
        let xml = e
            .assinar(&exemplo::certificado().expect("a certificate"))
            .expect("signed");
        let id = e.id().expect("an id");
        assert_eq!(id.len(), 54);
        assert!(id.starts_with("ID110112"));
        assert!(xml.contains(&format!("<infEvento Id=\"{id}\">")));
        assert!(xml.contains("<tpAutor>1</tpAutor>"));
        let TipoEvento::CancelamentoPorSubstituicao { substituta } = &e.tipo else {
            unreachable!()
        };
        assert!(xml.contains(&format!("<chNFeRef>{}</chNFeRef>", substituta.as_ref())));
        assert!(xml.contains(&format!("<Reference URI=\"#{id}\">")));
    }

    #[test]
    fn a_note_is_never_its_own_substitute() {
        let mut e = evento();
        e.tipo = TipoEvento::CancelamentoPorSubstituicao {
            substituta: e.chave.clone(),
        };
        assert!(e
            .assinar(&exemplo::certificado().expect("a certificate"))
            .is_err());
    }

    #[test]
    fn a_duplicate_event_is_registered_and_a_refusal_is_final() {
        let r = |c_stat, n_prot: Option<&str>| RetornoEvento {
            c_stat,
            x_motivo: "x".into(),
            n_prot: n_prot.map(Into::into),
        };
        assert_eq!(
            DesfechoEvento::of(&r(135, Some("1"))),
            DesfechoEvento::Registrado("1".into())
        );
        assert_eq!(
            DesfechoEvento::of(&r(573, None)),
            DesfechoEvento::JaRegistrado(573)
        );
        assert!(matches!(
            DesfechoEvento::of(&r(501, None)),
            DesfechoEvento::Rejeitado(501, _)
        ));
    }

    #[test]
    fn the_answer_reads_back() {
        let r = soap::Resposta {
            tp_amb: 2,
            c_uf: 35,
            ver_aplic: "SIM".into(),
            dh_recbto: "2026-12-06T10:00:01-03:00".into(),
            c_stat: 135,
            x_motivo: "Evento registrado e vinculado a NF-e".into(),
            protocolo: None,
        };
        let xml = resposta(&r, &"3".repeat(44), "110112", Some("135260000000002"));
        let back = ler_retorno(&xml).expect("read");
        assert_eq!(back.c_stat, 135);
        assert_eq!(back.n_prot.as_deref(), Some("135260000000002"));
    }
}
