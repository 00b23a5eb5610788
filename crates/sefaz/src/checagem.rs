//! What SEFAZ checks of a note before its base decides: the official schema (libxml2's
//! `xmllint`), the XML signature (`xmlsec1`, with the key of the certificate the note carries),
//! that the certificate is the emitter's (its CNPJ root), and that the note is for this state and
//! this environment. The checks run the reference tools on the note's exact bytes: a simulator that
//! re-implemented them would check Pagar against itself.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use std::path::Path;
use tokio::process::Command;

/// The fields of a note SEFAZ decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lida {
    /// Its key (`Id` without `NFe`).
    pub chave: String,
    /// The emitter's CNPJ.
    pub cnpj: String,
    /// `mod`.
    pub modelo: u8,
    /// `serie`.
    pub serie: u16,
    /// `nNF`.
    pub numero: u32,
    /// `tpEmis`.
    pub tp_emis: u8,
    /// `tpAmb`.
    pub tp_amb: u8,
    /// `cUF`.
    pub c_uf: u8,
    /// `vNF`.
    pub valor: String,
    /// `DigestValue`.
    pub dig_val: String,
    /// The CNPJ in the signing certificate's subject (`…:<CNPJ>`), if any.
    pub cnpj_certificado: Option<String>,
}

/// A note SEFAZ refuses before its base is asked: the code and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recusa(pub u16, pub String);

fn text<'a>(doc: &'a roxmltree::Document<'a>, name: &str) -> Option<&'a str> {
    doc.descendants()
        .find(|n| n.is_element() && n.tag_name().name() == name)
        .and_then(|n| n.text())
}

fn schema_error() -> Recusa {
    Recusa(225, "Rejeição: Falha no Schema XML da NFe".to_string())
}

/// The CNPJ in the subject of the certificate a signed document carries (`…:<CNPJ>`).
fn cnpj_do_certificado(doc: &roxmltree::Document<'_>) -> Option<String> {
    text(doc, "X509Certificate")
        .and_then(|b64| B64.decode(b64.split_whitespace().collect::<String>()).ok())
        .and_then(|der| openssl::x509::X509::from_der(&der).ok())
        .and_then(|cert| {
            cert.subject_name()
                .entries_by_nid(openssl::nid::Nid::COMMONNAME)
                .next()
                .and_then(|cn| cn.data().to_string().ok())
                .and_then(|cn| cn.rsplit_once(':').map(|(_, c)| c.to_string()))
        })
}

/// The fields of an inutilização SEFAZ decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inut {
    /// The emitter.
    pub cnpj: String,
    /// `mod`.
    pub modelo: u8,
    /// `serie`.
    pub serie: u16,
    /// `nNFIni`.
    pub inicio: u32,
    /// `nNFFin`.
    pub fim: u32,
    /// `tpAmb`.
    pub tp_amb: u8,
    /// `cUF`.
    pub c_uf: u8,
    /// The CNPJ in the signing certificate's subject.
    pub cnpj_certificado: Option<String>,
}

/// The fields of an inutilização, or 225.
pub fn ler_inutilizacao(xml: &str) -> Result<Inut, Recusa> {
    let doc = roxmltree::Document::parse(xml).map_err(|_| schema_error())?;
    let field = |name| text(&doc, name).ok_or_else(schema_error);
    let num = |name| field(name).and_then(|v| v.parse::<u32>().map_err(|_| schema_error()));
    Ok(Inut {
        cnpj: field("CNPJ")?.to_string(),
        modelo: num("mod")? as u8,
        serie: num("serie")? as u16,
        inicio: num("nNFIni")?,
        fim: num("nNFFin")?,
        tp_amb: num("tpAmb")? as u8,
        c_uf: num("cUF")? as u8,
        cnpj_certificado: cnpj_do_certificado(&doc),
    })
}

/// The fields of an event SEFAZ decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ev {
    /// The author's CNPJ.
    pub cnpj: String,
    /// The note it is about.
    pub chave: String,
    /// `tpEvento`.
    pub tp_evento: String,
    /// `nSeqEvento`.
    pub n_seq: u8,
    /// `detEvento/nProt`: the note's authorization.
    pub n_prot: String,
    /// `detEvento/chNFeRef`: the note that replaced it (110112).
    pub substituta: Option<String>,
    /// `tpAmb`.
    pub tp_amb: u8,
    /// `cOrgao`.
    pub c_orgao: u8,
    /// The CNPJ in the signing certificate's subject.
    pub cnpj_certificado: Option<String>,
}

/// The fields of the one event of an `envEvento`, or 225.
pub fn ler_evento(envio: &str) -> Result<Ev, Recusa> {
    let doc = roxmltree::Document::parse(envio).map_err(|_| schema_error())?;
    let eventos = doc
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "evento")
        .count();
    if eventos != 1 {
        // A till sends one event per lote; a lote of several is not what this simulator plays.
        return Err(schema_error());
    }
    let field = |name| text(&doc, name).ok_or_else(schema_error);
    let num = |name| field(name).and_then(|v| v.parse::<u32>().map_err(|_| schema_error()));
    Ok(Ev {
        cnpj: field("CNPJ")?.to_string(),
        chave: field("chNFe")?.to_string(),
        tp_evento: field("tpEvento")?.to_string(),
        n_seq: num("nSeqEvento")? as u8,
        n_prot: field("nProt")?.to_string(),
        substituta: text(&doc, "chNFeRef").map(str::to_string),
        tp_amb: num("tpAmb")? as u8,
        c_orgao: num("cOrgao")? as u8,
        cnpj_certificado: cnpj_do_certificado(&doc),
    })
}

/// The schema an event is checked with, below the schemas' folder: 110111's own package;
/// 110112's `detEvento` has no schema in the package the workspace installs, so the generic
/// event schema checks the rest and [`regras_evento`] its fields.
pub fn schema_do_evento(tp_evento: &str) -> Option<&'static str> {
    match tp_evento {
        "110111" => Some("cancelamento/envEventoCancNFe_v1.00.xsd"),
        "110112" => Some("evento/envEvento_v1.00.xsd"),
        _ => None,
    }
}

/// What SEFAZ refuses of an event that passed the tools, before its base is asked.
pub fn regras_evento(e: &Ev, c_uf: u8, tp_amb: u8) -> Option<Recusa> {
    if let Some(r) = comuns(e, c_uf, tp_amb) {
        return Some(r);
    }
    if nfce::Chave::parse(&e.chave).is_err() {
        return Some(Recusa(
            236,
            "Rejeição: Chave de Acesso inválida".to_string(),
        ));
    }
    if e.chave.get(6..20) != Some(e.cnpj.as_str()) {
        return Some(Recusa(
            574,
            "Rejeição: O autor do evento diverge do emissor da NF-e".to_string(),
        ));
    }
    if e.tp_evento == "110112" {
        let valid = e.substituta.as_deref().is_some_and(|s| {
            nfce::Chave::parse(s).is_ok() && s != e.chave && s.get(6..20) == Some(&e.cnpj)
        });
        if !valid {
            return Some(Recusa(
                225,
                "Rejeição: Falha no Schema XML do evento (chNFeRef)".to_string(),
            ));
        }
    }
    None
}

impl Origem for Ev {
    fn destino(&self) -> (u8, u8, u8) {
        let modelo = self.chave.get(20..22).and_then(|m| m.parse().ok());
        (self.tp_amb, self.c_orgao, modelo.unwrap_or(0))
    }
    fn emitente(&self) -> (&str, Option<&str>) {
        (&self.cnpj, self.cnpj_certificado.as_deref())
    }
}

/// What SEFAZ refuses of an inutilização that passed the tools.
pub fn regras_inutilizacao(n: &Inut, c_uf: u8, tp_amb: u8) -> Option<Recusa> {
    comuns(n, c_uf, tp_amb)
}

/// The fields of a note, or 225 when it is not even a note.
pub fn ler(nfe: &str) -> Result<Lida, Recusa> {
    let doc = roxmltree::Document::parse(nfe).map_err(|_| schema_error())?;
    let inf = doc
        .descendants()
        .find(|n| n.is_element() && n.tag_name().name() == "infNFe")
        .ok_or_else(schema_error)?;
    let chave = inf
        .attribute("Id")
        .and_then(|id| id.strip_prefix("NFe"))
        .ok_or_else(schema_error)?
        .to_string();
    let field = |name| text(&doc, name).ok_or_else(schema_error);
    let num = |name| field(name).and_then(|v| v.parse::<u32>().map_err(|_| schema_error()));
    let cnpj_certificado = cnpj_do_certificado(&doc);
    Ok(Lida {
        chave,
        cnpj: field("CNPJ")?.to_string(),
        modelo: num("mod")? as u8,
        serie: num("serie")? as u16,
        numero: num("nNF")?,
        tp_emis: num("tpEmis")? as u8,
        tp_amb: num("tpAmb")? as u8,
        c_uf: num("cUF")? as u8,
        valor: field("vNF")?.to_string(),
        dig_val: field("DigestValue")?.to_string(),
        cnpj_certificado,
    })
}

async fn tool(cmd: &mut Command) -> Result<bool, String> {
    cmd.kill_on_drop(true)
        .output()
        .await
        .map(|o| o.status.success())
        .map_err(|e| format!("{cmd:?}: {e} (instale com make deps-nfce)"))
}

/// Checks the note's bytes with the reference tools: schema (225), then signature (297).
/// `Err(String)` when a tool could not run (the simulator answers 999, as SEFAZ does when it
/// fails itself).
pub async fn ferramentas(nfe: &str, xsd_dir: &Path) -> Result<Option<Recusa>, String> {
    ferramentas_de(nfe, &xsd_dir.join("nfe_v4.00.xsd"), "infNFe").await
}

/// [`ferramentas`] for any signed document: its schema `xsd`, the signed `element`.
pub async fn ferramentas_de(
    xml: &str,
    xsd: &Path,
    element: &str,
) -> Result<Option<Recusa>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("doc.xml");
    std::fs::write(&file, xml).map_err(|e| e.to_string())?;
    let schema = tool(
        Command::new("xmllint")
            .arg("--noout")
            .arg("--schema")
            .arg(xsd)
            .arg(&file),
    )
    .await?;
    if !schema {
        return Ok(Some(schema_error()));
    }
    // The key of the certificate the note carries; whether that certificate is the emitter's
    // is checked apart (213), and no chain of authorities is asked of a simulator's notes.
    let signature = tool(
        Command::new("xmlsec1")
            .args(["--verify", "--insecure", "--id-attr:Id", element])
            .arg(&file),
    )
    .await?;
    if !signature {
        return Ok(Some(Recusa(
            297,
            "Rejeição: Assinatura difere do calculado".to_string(),
        )));
    }
    Ok(None)
}

/// What SEFAZ refuses of a note that passed the tools, for this state and environment.
pub fn regras(n: &Lida, c_uf: u8, tp_amb: u8) -> Option<Recusa> {
    if let Some(r) = comuns(n, c_uf, tp_amb) {
        return Some(r);
    }
    if nfce::Chave::parse(&n.chave).is_err() {
        return Some(Recusa(
            502,
            "Rejeição: Erro na Chave de Acesso - Campo Id não corresponde à concatenação dos campos correspondentes".to_string(),
        ));
    }
    None
}

/// Who sent a signed request, and for where: what every request is checked for.
pub trait Origem {
    /// `tpAmb`, `cUF`, `mod`.
    fn destino(&self) -> (u8, u8, u8);
    /// The emitter's CNPJ, and the one in the signing certificate.
    fn emitente(&self) -> (&str, Option<&str>);
}

impl Origem for Lida {
    fn destino(&self) -> (u8, u8, u8) {
        (self.tp_amb, self.c_uf, self.modelo)
    }
    fn emitente(&self) -> (&str, Option<&str>) {
        (&self.cnpj, self.cnpj_certificado.as_deref())
    }
}

impl Origem for Inut {
    fn destino(&self) -> (u8, u8, u8) {
        (self.tp_amb, self.c_uf, self.modelo)
    }
    fn emitente(&self) -> (&str, Option<&str>) {
        (&self.cnpj, self.cnpj_certificado.as_deref())
    }
}

/// The state, environment, model and certificate every signed request is checked for.
fn comuns(n: &impl Origem, c_uf: u8, tp_amb: u8) -> Option<Recusa> {
    let ((tp, uf, modelo), (cnpj, cnpj_certificado)) = (n.destino(), n.emitente());
    if tp != tp_amb {
        return Some(Recusa(
            252,
            "Rejeição: Ambiente informado diverge do Ambiente de recebimento".to_string(),
        ));
    }
    if uf != c_uf {
        return Some(Recusa(
            226,
            "Rejeição: Código da UF do Emitente diverge da UF autorizadora".to_string(),
        ));
    }
    if modelo != 65 {
        return Some(Recusa(
            247,
            "Rejeição: Modelo do documento diverge do Web Service".to_string(),
        ));
    }
    let root = |c: &str| c.get(..8).map(str::to_string);
    if cnpj_certificado.and_then(root) != root(cnpj) {
        return Some(Recusa(
            213,
            "Rejeição: CNPJ-Base do Emitente difere do CNPJ-Base do Certificado Digital"
                .to_string(),
        ));
    }
    None
}
