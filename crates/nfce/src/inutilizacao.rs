//! The inutilização of numbers: a série's numbers that will never be a note (a gap a crash or a
//! rejection left) declared to SEFAZ, signed like a note, so that no number is ever skipped
//! without it. `inutNFe` of leiaute 4.00 (`infInut`, its `Id` `ID` + cUF + ano + CNPJ + modelo +
//! série + first and last numbers), signed as the schema fixes it.

use crate::assinatura::{self, Certificado};
use crate::error::{NfceError, Result};
use crate::nota::{Ambiente, Emitente, NFE_NS};
use crate::xml::Xml;

/// A range of a série's numbers to declare unused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inutilizacao {
    /// Who declares it.
    pub emitente: Emitente,
    /// Production or homologação.
    pub ambiente: Ambiente,
    /// The year the numbers belong to (two digits are sent).
    pub ano: u16,
    /// Série.
    pub serie: u16,
    /// First number of the range.
    pub inicio: u32,
    /// Last number of the range (the same as `inicio` for one).
    pub fim: u32,
    /// Why (15 to 255 characters).
    pub justificativa: String,
}

impl Inutilizacao {
    /// Its `Id`: `ID` and 41 digits.
    pub fn id(&self) -> Result<String> {
        let cnpj = self.emitente.cnpj.as_ref();
        if !cnpj.bytes().all(|b| b.is_ascii_digit()) {
            // The schema's Id (`ID[0-9]{41}`) has no room for letters yet.
            return Err(NfceError::Invalid(
                "CNPJ numérico na inutilização",
                cnpj.into(),
            ));
        }
        Ok(format!(
            "ID{:02}{:02}{cnpj}65{:03}{:09}{:09}",
            self.emitente.endereco.uf.codigo(),
            self.ano % 100,
            self.serie,
            self.inicio,
            self.fim
        ))
    }

    fn check(&self) -> Result<()> {
        let n = self.justificativa.trim().chars().count();
        if !(15..=255).contains(&n) {
            return Err(NfceError::Invalid(
                "justificativa da inutilização (15 a 255 caracteres)",
                self.justificativa.clone(),
            ));
        }
        if self.inicio == 0 || self.fim < self.inicio || self.fim > 999_999_999 || self.serie > 999
        {
            return Err(NfceError::Invalid(
                "faixa de números",
                format!("série {} de {} a {}", self.serie, self.inicio, self.fim),
            ));
        }
        Ok(())
    }

    /// The signed `inutNFe`.
    pub fn assinar(&self, cert: &Certificado) -> Result<String> {
        self.check()?;
        let id = self.id()?;
        let mut inner = Xml::default();
        inner
            .leaf("tpAmb", &self.ambiente.codigo().to_string())
            .leaf("xServ", "INUTILIZAR")
            .leaf("cUF", &self.emitente.endereco.uf.codigo().to_string())
            .leaf("ano", &format!("{:02}", self.ano % 100))
            .leaf("CNPJ", self.emitente.cnpj.as_ref())
            .leaf("mod", "65")
            .leaf("serie", &self.serie.to_string())
            .leaf("nNFIni", &self.inicio.to_string())
            .leaf("nNFFin", &self.fim.to_string())
            .leaf("xJust", self.justificativa.trim());
        let inner = inner.finish();
        let canonical = format!("<infInut xmlns=\"{NFE_NS}\" Id=\"{id}\">{inner}</infInut>");
        let signature = assinatura::signature(cert, &id, &canonical)?;
        let mut x = Xml::default();
        x.open("inutNFe", &[("xmlns", NFE_NS), ("versao", "4.00")])
            .open("infInut", &[("Id", &id)])
            .raw(&inner)
            .close("infInut")
            .raw(&signature)
            .close("inutNFe");
        Ok(x.finish())
    }
}
