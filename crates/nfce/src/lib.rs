//! The NFC-e (Nota Fiscal de Consumidor Eletrônica, modelo 65, leiaute 4.00) of a sale, made
//! and signed by the till: its chave de acesso ([`Chave`]), its XML written in canonical form
//! ([`Nota::assinar`]), signed as the schema fixes it with the merchant's A1 certificate
//! ([`Certificado`]), and the QR Code its DANFE prints ([`qrcode`]). A note is signed once and its
//! bytes kept: nothing here reads a signed note back to change it.
//!
//! Transmission to SEFAZ, the outbox that numbers notes exactly once and the DANFE are other
//! parts' work; this crate does no I/O but reading the certificate's bytes it is given.

mod assinatura;
mod chave;
pub mod danfe;
mod error;
pub mod evento;
pub mod exemplo;
pub mod inutilizacao;
mod leitura;
mod nota;
pub mod qrcode;
pub mod soap;
mod xml;

pub use assinatura::Certificado;
pub use chave::{Chave, Cnpj, Cpf, PartesChave, TipoEmissao, Uf};
pub use error::{NfceError, Result};
pub use leitura::ler;
pub use nota::{
    data_hora, Ambiente, Emissao, Emitente, Endereco, Forma, Item, Nota, Pagamento,
    ResponsavelTecnico, UrlsConsulta, HOMOLOGACAO, NFE_NS,
};

use xml::Xml;

/// A signed note, as it is sent to SEFAZ (and kept: it is never rebuilt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotaAssinada {
    /// Its key.
    pub chave: Chave,
    /// The `NFe` element, signed.
    pub xml: String,
    /// The QR Code's text (also in the XML's `infNFeSupl`).
    pub qrcode: String,
    /// The consultation by key, printed on the DANFE.
    pub url_chave: String,
    /// Its total, in centavos.
    pub total: i64,
}

impl Nota {
    /// Makes and signs the note: `infNFe`, then `infNFeSupl` with the QR Code (signed too when
    /// issued in contingência), then the signature of `infNFe`.
    pub fn assinar(&self, cert: &Certificado) -> Result<NotaAssinada> {
        let (chave, inner) = self.inf_nfe()?;
        let id = format!("NFe{chave}");
        // The signed subset's apex carries the namespace it inherits from NFe (C14N 1.0).
        let canonical =
            format!("<infNFe xmlns=\"{NFE_NS}\" Id=\"{id}\" versao=\"4.00\">{inner}</infNFe>");
        let signature = assinatura::signature(cert, &id, &canonical)?;
        let qrcode = match &self.emissao {
            Emissao::Normal => qrcode::online(&self.urls.qrcode, &chave, self.ambiente),
            Emissao::Contingencia { .. } => qrcode::offline(
                &self.urls.qrcode,
                &chave,
                self.ambiente,
                qrcode::Offline {
                    dia: self.emitida_em.day(),
                    total: self.total(),
                    consumidor: self.consumidor.as_ref(),
                },
                cert,
            )?,
        };
        let mut x = Xml::default();
        x.open("NFe", &[("xmlns", NFE_NS)])
            .open("infNFe", &[("Id", &id), ("versao", "4.00")])
            .raw(&inner)
            .close("infNFe")
            .open("infNFeSupl", &[])
            .leaf("qrCode", &qrcode)
            .leaf("urlChave", &self.urls.chave)
            .close("infNFeSupl")
            .raw(&signature)
            .close("NFe");
        Ok(NotaAssinada {
            chave,
            xml: x.finish(),
            qrcode,
            url_chave: self.urls.chave.clone(),
            total: self.total(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert() -> Certificado {
        exemplo::certificado().unwrap()
    }

    #[test]
    fn a_sale_its_payments_do_not_cover_is_refused_with_what_is_missing() {
        let mut nota = exemplo::nota(1, Emissao::Normal, false);
        nota.pagamentos.truncate(1);
        let e = nota.assinar(&cert()).unwrap_err();
        assert!(
            e.to_string().contains("não cobrem a venda (R$ 45.38)"),
            "{e}"
        );
    }

    #[test]
    fn change_is_given_only_out_of_cash() {
        let mut nota = exemplo::nota(1, Emissao::Normal, false);
        nota.pagamentos = vec![Pagamento {
            forma: Forma::Credito,
            valor: 5_000,
        }];
        assert!(nota.assinar(&cert()).is_err());
        nota.pagamentos[0].forma = Forma::Dinheiro;
        let signed = nota.assinar(&cert()).unwrap();
        assert!(
            signed.xml.contains("<vTroco>4.62</vTroco>"),
            "{}",
            signed.xml
        );
    }

    #[test]
    fn a_contingencia_without_a_real_reason_is_refused() {
        let mut nota = exemplo::contingencia(2);
        nota.emissao = Emissao::Contingencia {
            desde: nota.emitida_em,
            justificativa: "sem rede".to_string(),
        };
        assert!(matches!(nota.assinar(&cert()), Err(NfceError::Invalid(..))));
    }

    #[test]
    fn in_homologacao_the_first_item_and_the_consumer_carry_the_no_fiscal_value_text() {
        let signed = exemplo::nota(3, Emissao::Normal, true)
            .assinar(&cert())
            .unwrap();
        assert!(signed
            .xml
            .contains(&format!("<det nItem=\"1\"><prod><cProd>7891000100103</cProd><cEAN>SEM GTIN</cEAN><xProd>{HOMOLOGACAO}</xProd>")));
        assert!(signed.xml.contains("<dest><CPF>52998224725</CPF><xNome>NF-E EMITIDA EM AMBIENTE DE HOMOLOGACAO - SEM VALOR FISCAL</xNome><indIEDest>9</indIEDest></dest>"));
        assert!(signed.xml.contains("<xProd>Banana prata</xProd>"));
    }

    #[test]
    fn a_certificate_reads_back_from_its_pkcs12_only_with_its_password() {
        let c = cert();
        let p12 = c.to_pkcs12("segredo").unwrap();
        let again = Certificado::from_pkcs12(&p12, "segredo").unwrap();
        assert_eq!(
            again.certificate_pem().unwrap(),
            c.certificate_pem().unwrap()
        );
        let e = Certificado::from_pkcs12(&p12, "errada").unwrap_err();
        assert!(e.to_string().contains("senha ou arquivo inválido"), "{e}");
        assert!(!format!("{again:?}").contains("PRIVATE"));
    }

    #[test]
    fn the_same_note_signed_twice_is_the_same_bytes() {
        // RSA PKCS#1 v1.5 is deterministic: a note kept and a note made again from the same
        // stored parts cannot differ (what differs is drawn once: cNF, the number).
        let c = cert();
        let a = exemplo::nota(4, Emissao::Normal, false)
            .assinar(&c)
            .unwrap();
        let b = exemplo::nota(4, Emissao::Normal, false)
            .assinar(&c)
            .unwrap();
        assert_eq!(a, b);
    }
}
