//! A signed note read back from its own XML: what the DANFE prints comes from the bytes SEFAZ
//! received, never from a note made again (a DANFE printed from another source could differ from
//! the note it stands for). Reads the subset this crate writes; anything else is refused.

use crate::chave::{Chave, Cnpj, Cpf, TipoEmissao, Uf};
use crate::error::{NfceError, Result};
use crate::nota::{
    Ambiente, Emissao, Emitente, Endereco, Forma, Item, Nota, Pagamento, ResponsavelTecnico,
    UrlsConsulta, DATA_HORA,
};
use crate::NotaAssinada;
use pagar_rules::decimal;
use roxmltree::Node;
use time::OffsetDateTime;

fn bad(what: &str) -> NfceError {
    NfceError::Invalid("XML da nota", what.to_string())
}

fn child<'a>(node: Node<'a, 'a>, name: &str) -> Option<Node<'a, 'a>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

fn req<'a>(node: Node<'a, 'a>, name: &str) -> Result<Node<'a, 'a>> {
    child(node, name).ok_or_else(|| bad(&format!("sem {name}")))
}

fn opt_text(node: Node<'_, '_>, name: &str) -> Option<String> {
    child(node, name).and_then(|c| c.text()).map(str::to_string)
}

fn text(node: Node<'_, '_>, name: &str) -> Result<String> {
    opt_text(node, name).ok_or_else(|| bad(&format!("sem {name}")))
}

fn number<T: std::str::FromStr>(node: Node<'_, '_>, name: &str) -> Result<T> {
    text(node, name)?
        .parse()
        .map_err(|_| bad(&format!("{name} não é um número")))
}

fn money(node: Node<'_, '_>, name: &str) -> Result<i64> {
    decimal::parse(&text(node, name)?).ok_or_else(|| bad(&format!("{name} não é um valor")))
}

fn when(s: &str) -> Result<OffsetDateTime> {
    OffsetDateTime::parse(s, DATA_HORA).map_err(|_| bad(&format!("data {s:?}")))
}

/// `qCom` (four decimals) in thousandths.
fn milesimos(s: &str) -> Result<u64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, "0"));
    let frac = format!("{frac:0<4}");
    let whole: u64 = whole.parse().map_err(|_| bad("qCom"))?;
    let frac: u64 = frac[..3].parse().map_err(|_| bad("qCom"))?;
    Ok(whole * 1000 + frac)
}

/// The note signed as `xml` (an `NFe` as [`Nota::assinar`] writes it), and its signed parts.
pub fn ler(xml: &str) -> Result<(Nota, NotaAssinada)> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| bad(&e.to_string()))?;
    let nfe = doc.root_element();
    if nfe.tag_name().name() != "NFe" {
        return Err(bad("não é uma NFe"));
    }
    let inf = req(nfe, "infNFe")?;
    let id = inf.attribute("Id").ok_or_else(|| bad("infNFe sem Id"))?;
    let chave = Chave::parse(id.strip_prefix("NFe").ok_or_else(|| bad("Id"))?)?;
    let ide = req(inf, "ide")?;
    let emit = req(inf, "emit")?;
    let ender = req(emit, "enderEmit")?;
    let supl = req(nfe, "infNFeSupl")?;
    let qrcode = text(supl, "qrCode")?;
    let url_chave = text(supl, "urlChave")?;
    let ambiente = match text(ide, "tpAmb")?.as_str() {
        "1" => Ambiente::Producao,
        "2" => Ambiente::Homologacao,
        other => return Err(bad(&format!("tpAmb {other}"))),
    };
    let emissao = match chave.tipo() {
        TipoEmissao::Normal => Emissao::Normal,
        TipoEmissao::ContingenciaOffline => Emissao::Contingencia {
            desde: when(&text(ide, "dhCont")?)?,
            justificativa: text(ide, "xJust")?,
        },
    };
    let itens = inf
        .children()
        .filter(|c| c.tag_name().name() == "det")
        .map(|det| {
            let prod = req(det, "prod")?;
            Ok(Item {
                codigo: text(prod, "cProd")?,
                descricao: text(prod, "xProd")?,
                ncm: text(prod, "NCM")?,
                cfop: number(prod, "CFOP")?,
                unidade: text(prod, "uCom")?,
                quantidade_milesimos: milesimos(&text(prod, "qCom")?)?,
                valor_unitario: money(prod, "vUnCom")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let pagamentos = req(inf, "pag")?
        .children()
        .filter(|c| c.tag_name().name() == "detPag")
        .map(|p| {
            let codigo = text(p, "tPag")?;
            Ok(Pagamento {
                forma: Forma::do_codigo(&codigo).ok_or_else(|| bad(&format!("tPag {codigo}")))?,
                valor: money(p, "vPag")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let consumidor = child(inf, "dest")
        .and_then(|d| opt_text(d, "CPF"))
        .map(|cpf| Cpf::parse(&cpf))
        .transpose()?;
    let responsavel_tecnico = child(inf, "infRespTec")
        .map(|r| {
            Ok::<_, NfceError>(ResponsavelTecnico {
                cnpj: Cnpj::parse(&text(r, "CNPJ")?)?,
                contato: text(r, "xContato")?,
                email: text(r, "email")?,
                fone: text(r, "fone")?,
            })
        })
        .transpose()?;
    let nota = Nota {
        emitente: Emitente {
            cnpj: Cnpj::parse(&text(emit, "CNPJ")?)?,
            ie: text(emit, "IE")?,
            razao_social: text(emit, "xNome")?,
            nome_fantasia: opt_text(emit, "xFant"),
            endereco: Endereco {
                logradouro: text(ender, "xLgr")?,
                numero: text(ender, "nro")?,
                bairro: text(ender, "xBairro")?,
                codigo_municipio: number(ender, "cMun")?,
                municipio: text(ender, "xMun")?,
                uf: Uf::parse(&text(ender, "UF")?)?,
                cep: text(ender, "CEP")?,
            },
        },
        ambiente,
        serie: number(ide, "serie")?,
        numero: number(ide, "nNF")?,
        codigo_numerico: number(ide, "cNF")?,
        emitida_em: when(&text(ide, "dhEmi")?)?,
        emissao,
        itens,
        pagamentos,
        consumidor,
        urls: UrlsConsulta {
            qrcode: qrcode
                .split_once("?p=")
                .map(|(base, _)| base.to_string())
                .ok_or_else(|| bad("qrCode sem ?p="))?,
            chave: url_chave.clone(),
        },
        responsavel_tecnico,
        versao_processo: text(ide, "verProc")?,
    };
    if nota.chave()? != chave {
        return Err(bad("a chave do Id não é a das partes da nota"));
    }
    let total = nota.total();
    if money(req(req(inf, "total")?, "ICMSTot")?, "vNF")? != total {
        return Err(bad("vNF não é a soma dos itens"));
    }
    Ok((
        nota,
        NotaAssinada {
            chave,
            xml: xml.to_string(),
            qrcode,
            url_chave,
            total,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{exemplo, Certificado, HOMOLOGACAO};

    fn cert() -> Certificado {
        exemplo::certificado().unwrap()
    }

    #[test]
    fn a_signed_note_reads_back_as_the_note_it_was_made_from_normal_and_in_contingencia() {
        let c = cert();
        for nota in [
            exemplo::nota(7, Emissao::Normal, true),
            exemplo::contingencia(8),
        ] {
            let signed = nota.assinar(&c).unwrap();
            let (read, again) = ler(&signed.xml).unwrap();
            // In homologação the first line's name is SEFAZ's fixed text, on the note and so on
            // what is read back.
            let mut expected = nota.clone();
            expected.itens[0].descricao = HOMOLOGACAO.to_string();
            assert_eq!(read, expected);
            assert_eq!(again, signed);
            assert_eq!(
                crate::danfe::html(&read, &again, None).unwrap(),
                crate::danfe::html(&nota, &signed, None).unwrap()
            );
        }
    }

    #[test]
    fn a_note_whose_parts_do_not_make_its_key_is_refused() {
        let signed = exemplo::nota(9, Emissao::Normal, false)
            .assinar(&cert())
            .unwrap();
        let changed = signed.xml.replace("<nNF>9</nNF>", "<nNF>10</nNF>");
        assert!(ler(&changed).is_err());
        assert!(ler("<NFe/>").is_err());
        assert!(ler("não é xml").is_err());
    }
}
