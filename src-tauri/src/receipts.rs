//! The day around the Pagar button: the receipt of an approved sale and the till's closing, as
//! data the window draws and as files a printer or a spreadsheet reads. The content is made here
//! once; the window and the saved file show the same lines.

use crate::error::{AppError, Result};
use crate::settings::Settings;
use checkout_core::domain::sale_number;
use checkout_core::{Attempt, AttemptState, Closing, Means, Net, Tally, Total};
use serde::Serialize;

/// How the receipt names the card of an attempt (a Pix has none).
fn card_of(attempt: &Attempt) -> String {
    attempt
        .cartao
        .as_ref()
        .map_or_else(|| "Pix".to_string(), |c| c.masked())
}

/// One line of a receipt: what it is and its value.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Line {
    /// The label, pt-BR.
    pub rotulo: &'static str,
    /// The value as printed.
    pub valor: String,
}

/// A receipt ("comprovante") of an approved payment, customer's copy.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Receipt {
    /// Its heading.
    pub titulo: &'static str,
    /// Whose copy it is.
    pub via: &'static str,
    /// Its lines, in print order.
    pub linhas: Vec<Line>,
    /// Where the file was saved, once it was.
    pub arquivo: Option<String>,
}

/// A date and time in the store's time zone, as a receipt prints it: `01/12/2026 14:32:05`.
pub fn local_time(ms: i64, offset: time::UtcOffset) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map(|t| t.to_offset(offset))
        .ok()
        .and_then(|t| {
            t.format(time::macros::format_description!(
                "[day]/[month]/[year] [hour]:[minute]:[second]"
            ))
            .ok()
        })
        .unwrap_or_default()
}

/// The receipt of `attempt`, with `refunds` (the refunds of a payment; empty for a refund).
/// Only an approval has one: a declined or pending attempt gets an error, never a page that
/// could be taken for proof of payment (or of money paid back). A payment's receipt lists its
/// approved refunds and what is left; one still on its way back is said to be so.
pub fn receipt(settings: &Settings, attempt: &Attempt, refunds: &[Attempt]) -> Result<Receipt> {
    let refund = attempt.is_refund();
    if attempt.state != AttemptState::Aprovado {
        return Err(AppError::Invalid(format!(
            "só {} aprovado tem comprovante; este está {}",
            if refund { "um estorno" } else { "um pagamento" },
            attempt.state.label()
        )));
    }
    let mut linhas = vec![
        Line {
            rotulo: "Loja",
            valor: settings.loja.clone(),
        },
        Line {
            rotulo: "Terminal",
            valor: settings.terminal.clone(),
        },
    ];
    if let Some(n) = attempt.sale_number {
        linhas.push(Line {
            rotulo: "Venda",
            valor: format!("nº {}", sale_number(n)),
        });
    }
    let line = |rotulo, valor: String| Line { rotulo, valor };
    let when = local_time(attempt.updated_at, settings.utc_offset);
    if refund {
        let payment = attempt.refund_payment.as_ref().map(ToString::to_string);
        linhas.extend([
            line("Valor estornado", attempt.valor.to_string()),
            line("Data e hora", when),
            line("Estorno", attempt.payment_id.clone().unwrap_or_default()),
            line("Pagamento", payment.unwrap_or_default()),
        ]);
        if attempt.is_cash() {
            linhas.push(line("Forma", "Devolvido em dinheiro".into()));
        } else {
            linhas.push(line("Cartão", card_of(attempt)));
        }
        if let Some(plan) = attempt.plano {
            linhas.push(line("Forma", plan.label()));
        }
        linhas.push(line("Situação", "ESTORNADO".into()));
        return Ok(Receipt {
            titulo: "Comprovante de estorno",
            via: "Via do cliente",
            linhas,
            arquivo: None,
        });
    }
    linhas.extend([
        line("Valor", attempt.valor.to_string()),
        line("Data e hora", when),
        line("Pagamento", attempt.payment_id.clone().unwrap_or_default()),
    ]);
    match attempt.metodo {
        Means::Dinheiro => {
            linhas.push(line("Forma", "Dinheiro".into()));
            if let Some(recebido) = attempt.recebido {
                linhas.push(line("Recebido", recebido.to_string()));
            }
            if let Some(troco) = attempt.troco() {
                linhas.push(line("Troco", troco.to_string()));
            }
        }
        Means::Cartao => {
            if let Some(card) = &attempt.cartao {
                linhas.push(line("Cartão", card.masked()));
            }
            if let Some(plan) = attempt.plano {
                linhas.push(line("Forma", plan.label()));
                if let Some(parcelas) = plan.installments_text(attempt.valor) {
                    linhas.push(line("Parcelas", parcelas));
                }
            }
        }
        Means::Maquininha => {
            let order = attempt.maquininha.as_ref();
            let paid = order.and_then(|o| o.pago_com.as_deref()).map(|m| match m {
                "debito" => "Débito",
                "voucher" => "Voucher",
                _ => "Crédito",
            });
            linhas.push(line(
                "Forma",
                format!("Cartão na maquininha ({})", paid.unwrap_or("cartão")),
            ));
            let credit = paid == Some("Crédito");
            if let Some(plan) = attempt.plano.filter(|p| credit && p.parcelas > 1) {
                if let Some(parcelas) = plan.installments_text(attempt.valor) {
                    linhas.push(line("Parcelas", parcelas));
                }
            }
            if let Some(o) = order {
                linhas.push(line("Maquininha", o.maquininha.clone()));
                linhas.push(line("Pedido", o.pedido.clone()));
            }
        }
        Means::Pix => {
            linhas.push(line("Forma", "Pix".into()));
            if let Some(e2e) = attempt.pix.as_ref().and_then(|p| p.e2eid.clone()) {
                linhas.push(line("ID Pix (E2E)", e2e));
            }
            if attempt.motivo.as_deref() == Some("recebido_apos_cancelamento") {
                linhas.push(line("Observação", "Pix recebido após cancelamento".into()));
            }
        }
    }
    let mut refunded = Total::ZERO;
    for r in refunds {
        if r.state == AttemptState::Aprovado {
            refunded += r.valor;
            let at = local_time(r.updated_at, settings.utc_offset);
            linhas.push(line("Estorno", format!("-{} em {at}", r.valor)));
        } else if r.is_undecided() {
            linhas.push(line(
                "Estorno em andamento",
                format!("{} (não concluído)", r.valor),
            ));
        }
    }
    if !refunded.is_zero() {
        linhas.push(line("Total estornado", refunded.to_string()));
        let net = Net::of(attempt.valor.into(), &[refunded]);
        linhas.push(line("Valor líquido", net.to_string()));
    }
    let situacao = match refunded {
        r if r.is_zero() => "APROVADO",
        r if r >= attempt.valor => "APROVADO · ESTORNADO",
        _ => "APROVADO · ESTORNADO EM PARTE",
    };
    linhas.push(line("Situação", situacao.into()));
    Ok(Receipt {
        titulo: "Comprovante de pagamento",
        via: "Via do cliente",
        linhas,
        arquivo: None,
    })
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const PRINT_STYLE: &str = "body{font:14px/1.4 monospace;max-width:32em;margin:1em auto;color:#000}\
h1{font-size:16px;text-align:center;margin:0 0 .5em}table{width:100%;border-collapse:collapse}\
th{text-align:left;font-weight:normal;padding:2px 8px 2px 0}td{text-align:right;padding:2px 0}\
.via{text-align:center;margin-top:1em;border-top:1px dashed #000;padding-top:.5em}\
.num{text-align:right}h2{font-size:14px;margin:1em 0 .3em}li{margin:.2em 0}\
@media print{body{margin:0}}";

/// The receipt as a print-ready HTML page (what is saved under `comprovantes/`).
pub fn receipt_html(r: &Receipt) -> String {
    let rows: String = r
        .linhas
        .iter()
        .map(|l| {
            format!(
                "<tr><th>{}</th><td>{}</td></tr>",
                escape(l.rotulo),
                escape(&l.valor)
            )
        })
        .collect();
    format!(
        "<!doctype html><html lang=\"pt-BR\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{PRINT_STYLE}</style></head><body><h1>{t}</h1><table>{rows}</table>\
         <p class=\"via\">{via}</p></body></html>\n",
        t = escape(r.titulo),
        via = escape(r.via)
    )
}

/// The closing as a printable summary (what is saved under `fechamentos/`).
/// The closing's NFC-e: the day's count and every note still to see.
fn notas_html(n: &checkout_core::closing::NotasDoFechamento) -> String {
    let items: String = n
        .atencao
        .iter()
        .map(|a| format!("<li>{}</li>", escape(&a.texto)))
        .collect();
    format!(
        "<h2>NFC-e</h2><p>{} no dia{}.</p>{}",
        count(n.autorizadas as u64, "autorizada", "autorizadas"),
        [
            (n.inutilizadas, "número inutilizado", "números inutilizados"),
            (n.canceladas, "cancelada", "canceladas"),
        ]
        .iter()
        .filter(|(k, _, _)| *k > 0)
        .map(|(k, one, many)| format!(" · {}", count(*k as u64, one, many)))
        .collect::<String>(),
        if items.is_empty() {
            "<p>Nenhuma nota pendente.</p>".to_string()
        } else {
            format!("<ul>{items}</ul>")
        }
    )
}

pub fn closing_html(c: &Closing, settings: &Settings) -> String {
    let totals = closing_rows(c)
        .iter()
        .map(|(name, t)| {
            format!(
                "<tr><th>{name}</th><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                t.count, t.centavos
            )
        })
        .collect::<String>();
    let discrepancies = if c.discrepancies.is_empty() {
        let r = &c.refunds;
        let refunds = r.aprovado.count + r.recusado.count + r.pendente.count + r.revisao.count;
        format!(
            "<p>Nenhuma divergência: {} com o servidor.</p>",
            if refunds > 0 {
                "cada pagamento e cada estorno do caixa conferem"
            } else {
                "cada pagamento do caixa confere"
            }
        )
    } else {
        let items: String = c
            .discrepancies
            .iter()
            .map(|d| {
                format!(
                    "<li><b>{}</b>{}: {}</li>",
                    escape(d.label),
                    d.venda
                        .as_deref()
                        .map(|v| format!(" — venda nº {v}"))
                        .unwrap_or_default(),
                    escape(&d.detail)
                )
            })
            .collect();
        format!(
            "<h2>{} divergência(s)</h2><ul>{items}</ul>",
            c.discrepancies.len()
        )
    };
    format!(
        "<!doctype html><html lang=\"pt-BR\"><head><meta charset=\"utf-8\">\
         <title>Fechamento de caixa {day}</title><style>{PRINT_STYLE}</style></head><body>\
         <h1>Fechamento de caixa</h1><p>{loja} · terminal {terminal} · dia {day} · fechado em {at}</p>\
         <table><tr><th></th><td class=\"num\">Qtde.</td><td class=\"num\">Valor</td></tr>{totals}\
         <tr><th><b>Líquido do dia</b></th><td></td><td class=\"num\"><b>{net}</b></td></tr>{gaveta}</table>\
         <p>{sales} · {server} no servidor{refunds}</p>{discrepancies}{notas}</body></html>\n",
        notas = c.notas.as_ref().map(notas_html).unwrap_or_default(),
        gaveta = drawer_rows(c)
            .iter()
            .map(|(name, t)| format!("<tr><th>{name}</th><td></td><td class=\"num\">{t}</td></tr>"))
            .collect::<String>(),
        day = escape(&c.day),
        loja = escape(&settings.loja),
        terminal = escape(&settings.terminal),
        at = local_time(c.closed_at, settings.utc_offset),
        sales = count(c.sales as u64, "venda", "vendas"),
        server = count(c.server_payments as u64, "pagamento", "pagamentos"),
        net = c.net_centavos,
        refunds = if c.server_refunds == 0 {
            String::new()
        } else {
            format!(" · {}", count(c.server_refunds as u64, "estorno", "estornos"))
        },
    )
}

/// The closing's totals as rows, payments first, then refunds: refund states other than
/// approved only when the day had some (ui/state.js `closingTotals` shows the same rows).
pub fn closing_rows(c: &Closing) -> Vec<(&'static str, Tally)> {
    let mut rows = vec![("Aprovados", c.totals.aprovado)];
    // The approved by the way they were paid, when the day had more than the card with no
    // method named.
    if c.por_forma.iter().any(|m| m.forma != "cartao") {
        rows.extend(c.por_forma.iter().map(|m| (m.rotulo, m.tally)));
    }
    rows.extend([
        ("Recusados", c.totals.recusado),
        ("Pendentes", c.totals.pendente),
        ("Em revisão", c.totals.revisao),
        ("Estornos aprovados", c.refunds.aprovado),
    ]);
    for (name, t) in [
        ("Autorizações desfeitas (nada cobrado)", c.totals.desfeito),
        ("Estornos recusados", c.refunds.recusado),
        ("Estornos pendentes", c.refunds.pendente),
        ("Estornos em revisão", c.refunds.revisao),
        ("Estornos feitos fora deste caixa", c.refunds_elsewhere),
    ] {
        if t.count > 0 {
            rows.push((name, t));
        }
    }
    // The Pix apart (each is in the rows above too, by its attempt's state).
    if c.pix.any() {
        rows.extend([
            ("Pix recebidos", c.pix.recebidos),
            (
                "Pix recebidos após cancelamento",
                c.pix.recebidos_apos_cancelamento,
            ),
            ("Pix expirados sem pagamento", c.pix.expirados),
            ("Pix cancelados sem pagamento", c.pix.cancelados),
            ("Pix devolvidos", c.pix.devolvidos),
        ]);
        if c.pix.aguardando.count > 0 {
            rows.push(("Pix aguardando", c.pix.aguardando));
        }
    }
    rows
}

/// The closing's cash drawer lines: what it should hold and, when counted, what was there
/// (`ui/state.js` `closingTotals` has the same).
pub fn drawer_rows(c: &Closing) -> Vec<(&'static str, String)> {
    let Some(g) = &c.gaveta else {
        return Vec::new();
    };
    let mut rows = vec![("Dinheiro esperado na gaveta", g.esperado.to_string())];
    if let (Some(contado), Some(diferenca)) = (g.contado, g.diferenca) {
        rows.push(("Dinheiro contado na gaveta", contado.to_string()));
        rows.push(("Diferença na gaveta", checkout_core::format_brl(diferenca)));
    }
    rows
}

/// `1 venda`, `2 vendas`: a count with its noun in the right number.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_time_is_the_stores_local_time() {
        // 2026-12-01T17:32:05Z is 14:32:05 in São Paulo.
        assert_eq!(
            local_time(1_796_146_325_000, time::macros::offset!(-3)),
            "01/12/2026 14:32:05"
        );
    }

    #[test]
    fn the_printed_page_escapes_what_it_shows() {
        let r = Receipt {
            titulo: "Comprovante de pagamento",
            via: "Via do cliente",
            linhas: vec![Line {
                rotulo: "Loja",
                valor: "<Café & Cia>".into(),
            }],
            arquivo: None,
        };
        let html = receipt_html(&r);
        assert!(html.contains("&lt;Café &amp; Cia&gt;"));
        assert!(html.contains("Via do cliente"));
    }
}
