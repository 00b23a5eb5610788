//! The DANFE NFC-e: the note as the consumer gets it on paper or on screen, in the divisions the
//! Manual de Especificações Técnicas do DANFE NFC-e e QR Code lays out — the emitter, the
//! document's name, the items, the totals and how it was paid, the consultation by key, the
//! consumer, the note's number and protocol, the QR Code, and in contingência "EMITIDA EM
//! CONTINGÊNCIA / Pendente de autorização". One self-contained HTML page (the QR Code an inline
//! SVG), 80 mm wide, for the receipt screen and the receipt printer alike. Everything on it comes
//! from the note's own XML fields or SEFAZ's answer, as the manual requires.

use crate::chave::TipoEmissao;
use crate::error::{NfceError, Result};
use crate::nota::{Ambiente, Forma, Nota};
use crate::soap::Protocolo;
use crate::xml::text;
use crate::NotaAssinada;

/// `1.234,56`.
fn brl(centavos: i64) -> String {
    let reais = (centavos / 100).to_string();
    let mut grouped = String::new();
    for (i, c) in reais.chars().enumerate() {
        if i > 0 && (reais.len() - i).is_multiple_of(3) {
            grouped.push('.');
        }
        grouped.push(c);
    }
    format!("{grouped},{:02}", centavos % 100)
}

fn forma(f: Forma) -> &'static str {
    match f {
        Forma::Dinheiro => "Dinheiro",
        Forma::Credito => "Cartão de Crédito",
        Forma::Debito => "Cartão de Débito",
        Forma::ValeAlimentacao => "Vale Alimentação",
        Forma::ValeRefeicao => "Vale Refeição",
        Forma::Pix => "Pagamento Instantâneo (PIX)",
    }
}

/// The CSP source that allows [`STYLE`] inline: `'sha256-…'`.
pub fn estilo_csp() -> String {
    let digest = openssl::sha::sha256(STYLE.as_bytes());
    format!("'sha256-{}'", openssl::base64::encode_block(&digest))
}

/// The QR Code of `texto` as an SVG of dark modules on white, with its quiet zone.
pub fn qr_svg(texto: &str) -> Result<String> {
    let code = qrcode::QrCode::with_error_correction_level(texto.as_bytes(), qrcode::EcLevel::M)
        .map_err(|e| NfceError::Invalid("QR Code", e.to_string()))?;
    let width = code.width();
    let quiet = 4;
    let side = width + 2 * quiet;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {side} {side}\" shape-rendering=\"crispEdges\" class=\"qr\"><rect width=\"{side}\" height=\"{side}\" fill=\"#fff\"/><path fill=\"#000\" d=\""
    );
    for (i, color) in code.to_colors().iter().enumerate() {
        if *color == qrcode::Color::Dark {
            let (x, y) = (i % width + quiet, i / width + quiet);
            svg.push_str(&format!("M{x} {y}h1v1h-1z"));
        }
    }
    svg.push_str("\"/></svg>");
    Ok(svg)
}

/// The key in groups of four, as the DANFE prints it.
fn chave_em_grupos(chave: &str) -> String {
    let chars: Vec<char> = chave.chars().collect();
    let groups: Vec<String> = chars.chunks(4).map(|c| c.iter().collect()).collect();
    groups.join(" ")
}

/// The DANFE NFC-e of `nota`, signed as `assinada`, with SEFAZ's protocol once authorized.
pub fn html(
    nota: &Nota,
    assinada: &NotaAssinada,
    autorizacao: Option<&Protocolo>,
) -> Result<String> {
    let e = &nota.emitente;
    let end = &e.endereco;
    let mut h = String::with_capacity(8 * 1024);
    h.push_str(
        "<!doctype html><html lang=\"pt-BR\"><head><meta charset=\"utf-8\"><title>DANFE NFC-e ",
    );
    h.push_str(&text(assinada.chave.as_ref()));
    h.push_str("</title><style>");
    h.push_str(STYLE);
    h.push_str("</style></head><body><main class=\"danfe\">");
    // I — the emitter.
    h.push_str(&format!(
        "<header><strong>{}</strong><div>CNPJ: {} &nbsp; IE: {}</div><div>{}, {} – {} – {}/{}</div></header>",
        text(&e.razao_social),
        text(e.cnpj.as_ref()),
        text(&e.ie),
        text(&end.logradouro),
        text(&end.numero),
        text(&end.bairro),
        text(&end.municipio),
        end.uf.sigla()
    ));
    // II — the document.
    h.push_str(
        "<p class=\"titulo\">Documento Auxiliar da Nota Fiscal de Consumidor Eletrônica</p>",
    );
    // III — the items.
    h.push_str("<p class=\"cab\"><span>Código Descrição</span><span>Qtde Un x Vl Unit = Vl Total</span></p>");
    for (n, item) in nota.itens.iter().enumerate() {
        let q = item.quantidade_milesimos;
        let qtde = if q.is_multiple_of(1000) {
            (q / 1000).to_string()
        } else {
            format!("{},{:03}", q / 1000, q % 1000)
        };
        h.push_str(&format!(
            "<div class=\"item\"><div>{} {}</div><div class=\"linha\"><span>{} {} x {}</span><span>{}</span></div></div>",
            text(&item.codigo),
            text(nota.descricao_no_xml(n)),
            qtde,
            text(&item.unidade),
            brl(item.valor_unitario),
            brl(item.total())
        ));
    }
    // IV — totals and payments.
    let troco = nota.troco()?;
    h.push_str(&format!(
        "<dl class=\"totais\"><dt>Qtde. total de itens</dt><dd>{}</dd><dt>Valor total R$</dt><dd>{}</dd><dt class=\"forte\">Valor a Pagar R$</dt><dd class=\"forte\">{}</dd></dl>",
        nota.itens.len(),
        brl(nota.total()),
        brl(nota.total())
    ));
    h.push_str("<dl class=\"pagamentos\"><dt>FORMA PAGAMENTO</dt><dd>VALOR PAGO R$</dd>");
    for p in &nota.pagamentos {
        h.push_str(&format!(
            "<dt>{}</dt><dd>{}</dd>",
            forma(p.forma),
            brl(p.valor)
        ));
    }
    if troco > 0 {
        h.push_str(&format!("<dt>Troco R$</dt><dd>{}</dd>", brl(troco)));
    }
    h.push_str("</dl>");
    // VI — the fiscal message: where to consult, the key, the environment, contingência.
    h.push_str("<section class=\"fiscal\">");
    if nota.ambiente == Ambiente::Homologacao {
        h.push_str("<p class=\"aviso\">EMITIDA EM AMBIENTE DE HOMOLOGAÇÃO – SEM VALOR FISCAL</p>");
    }
    if assinada.chave.tipo() == TipoEmissao::ContingenciaOffline {
        h.push_str("<p class=\"aviso contingencia\">EMITIDA EM CONTINGÊNCIA<br>Pendente de autorização</p>");
    }
    h.push_str(&format!(
        "<p>Consulte pela Chave de Acesso em<br><span class=\"url\">{}</span></p><p class=\"chave\">{}</p>",
        text(&assinada.url_chave),
        chave_em_grupos(assinada.chave.as_ref())
    ));
    // VII — the consumer.
    h.push_str(&match &nota.consumidor {
        Some(cpf) => {
            let c = cpf.as_ref();
            format!(
                "<p>CONSUMIDOR CPF: {}.{}.{}-{}</p>",
                &c[..3],
                &c[3..6],
                &c[6..9],
                &c[9..]
            )
        }
        None => "<p>CONSUMIDOR NÃO IDENTIFICADO</p>".to_string(),
    });
    // VIII — number, série, issue time, protocol.
    h.push_str(&format!(
        "<p><strong>NFC-e nº {:09} Série {:03}</strong> {}</p>",
        nota.numero,
        nota.serie,
        nota.emitida_em
            .format(time::macros::format_description!(
                "[day]/[month]/[year] [hour]:[minute]:[second]"
            ))
            .map_err(|e| NfceError::Invalid("dhEmi", e.to_string()))?
    ));
    if let Some(p) = autorizacao {
        h.push_str(&format!(
            "<p>Protocolo de autorização: {}<br>Data de autorização: {}</p>",
            text(p.n_prot.as_deref().unwrap_or("")),
            text(&p.dh_recbto)
        ));
    }
    h.push_str("</section>");
    // IX — the QR Code.
    h.push_str("<figure>");
    h.push_str(&qr_svg(&assinada.qrcode)?);
    h.push_str("</figure></main></body></html>");
    Ok(h)
}

/// The DANFE's one stylesheet (inline in its page). A window whose content-security policy
/// allows only its own styles shows the page by allowing this one by its hash
/// ([`estilo_csp`]).
pub const STYLE: &str = "body{margin:0}\
.danfe{width:80mm;padding:3mm;box-sizing:border-box;background:#fff;color:#000;font:12px/1.35 monospace}\
header{text-align:center}header strong{font-size:13px}\
.titulo{text-align:center;font-weight:bold;border-top:1px dashed #000;border-bottom:1px dashed #000;padding:2px 0}\
.cab,.linha{display:flex;justify-content:space-between;margin:0}.cab{font-size:10px;font-weight:bold}\
.item{margin:2px 0}.linha{padding-left:2ch}\
dl{display:grid;grid-template-columns:1fr auto;margin:6px 0;border-top:1px dashed #000;padding-top:4px}dd{margin:0;text-align:right}\
.forte{font-weight:bold}.fiscal{text-align:center;border-top:1px dashed #000}\
.aviso{font-weight:bold}.contingencia{font-size:14px}.url{word-break:break-all}.chave{font-weight:bold}\
figure{margin:6px auto;text-align:center}.qr{width:60mm;height:60mm}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_written_as_brazilians_read_them() {
        assert_eq!(brl(0), "0,00");
        assert_eq!(brl(4_538), "45,38");
        assert_eq!(brl(123_456_789), "1.234.567,89");
        assert_eq!(chave_em_grupos("12345678"), "1234 5678");
    }
}
