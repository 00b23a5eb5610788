//! Closing the till ("fechar caixa"): every attempt of a store day reconciled against the
//! server's payments by `referencia`, and every refund against its payment's refunds. The
//! evening's proof that nobody was charged twice, that no charge is missing from the till, and
//! that every refund the till made was paid back once.
//!
//! [`reconcile`] is pure: the attempts as the outbox has them and the payments and refunds as
//! the server listed them in, the totals and every discrepancy out.

use crate::client::{RemotePayment, RemoteRefund, RemoteStatus};
use crate::domain::{
    sale_number, AttemptState, Capture, CardMethod, Centavos, Means, Net, Tally, Total, UnixMillis,
};
use crate::outbox::Attempt;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

mod discrepancy;
mod notas;
mod refunds;
#[cfg(test)]
mod tests;
mod totals;

pub use discrepancy::*;
pub use notas::{NotaAtencao, NotasDoFechamento};
use refunds::*;
pub use totals::*;

/// A day's closing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Closing {
    /// The store day, `YYYY-MM-DD`.
    pub day: String,
    /// When it was closed (epoch ms).
    pub closed_at: UnixMillis,
    /// The till's name, if it has one.
    pub terminal: Option<String>,
    /// Payment attempts by state.
    pub totals: Totals,
    /// The approved payments by the way they were paid (débito, crédito, parcelado, voucher,
    /// Pix), each way used once.
    pub por_forma: Vec<MethodTally>,
    /// The cash drawer (set by the engine, which keeps it; `None` from [`reconcile`] alone).
    pub gaveta: Option<crate::drawer::Drawer>,
    /// The Pix apart.
    pub pix: PixTotals,
    /// Refund attempts by state (refunds made that day, whatever day their sale was).
    pub refunds: Totals,
    /// Refunds of this till's payments that the server made for someone else (the API, another
    /// till) on this day: no refund attempt of this till knows them, and the net counts them.
    pub refunds_elsewhere: Tally,
    /// What the day took in: approved payments less approved refunds (this till's and those made
    /// elsewhere), in centavos.
    pub net_centavos: Net,
    /// Sales that day.
    pub sales: usize,
    /// Server payments compared.
    pub server_payments: usize,
    /// Server refunds compared.
    pub server_refunds: usize,
    /// Every disagreement; empty when the day reconciles.
    pub discrepancies: Vec<Discrepancy>,
    /// Attempts (payments and refunds) still pending when the cashier chose to close anyway.
    pub pending: Vec<String>,
    /// The NFC-e (set by the engine when the till issues notes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notas: Option<NotasDoFechamento>,
}

/// What the server and the rest of the outbox say about one day, for [`reconcile`].
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// Every payment the server has for the payment attempts' `referencia`s (from the day's
    /// range and from lookups), and this till's other payments in the range.
    pub payments: &'a [RemotePayment],
    /// Every refund of the day's approved payments and of the payments the day's refund
    /// attempts paid back.
    pub refunds: &'a [RemoteRefund],
    /// Attempt ids the outbox holds for other days: a payment or refund of theirs that the
    /// server lists here is that day's (a sale queued at 23:55 that drained after midnight, a
    /// refund made yesterday), not a stranger.
    pub other_days: &'a HashSet<String>,
    /// The day's bounds (epoch ms): a refund made elsewhere belongs to the day it was made.
    pub bounds: (UnixMillis, UnixMillis),
}

/// Reconciles the attempts of a day with what the server has.
pub fn reconcile(
    day: &str,
    closed_at: UnixMillis,
    terminal: Option<&str>,
    attempts: &[Attempt],
    evidence: &Evidence<'_>,
) -> Closing {
    let server = evidence.payments;
    let (refunds, attempts): (Vec<&Attempt>, Vec<&Attempt>) =
        attempts.iter().partition(|a| a.is_refund());
    let mut totals = Totals::default();
    let mut pix = PixTotals::default();
    for a in attempts.iter().chain(refunds.iter()).filter(|a| a.is_pix()) {
        pix.add(a);
    }
    // What each payment attempt had paid back (approved refunds), for the late Pix.
    let mut paid_back: HashMap<&str, Total> = HashMap::new();
    for r in refunds.iter().filter(|r| r.state == AttemptState::Aprovado) {
        if let Some(of) = &r.refund_of {
            *paid_back.entry(of.as_ref()).or_default() += r.valor;
        }
    }
    let mut by_ref: HashMap<&str, Vec<&RemotePayment>> = HashMap::new();
    let mut seen = HashSet::new();
    for p in server {
        // The same payment may come from the range and from a lookup.
        if seen.insert(p.id.as_str()) {
            if let Some(r) = p.referencia.as_deref() {
                by_ref.entry(r).or_default().push(p);
            }
        }
    }
    let known: HashSet<&str> = attempts.iter().map(|a| a.id.as_ref()).collect();
    let mut discrepancies = Vec::new();
    let venda = |a: &Attempt| a.sale_number.map(sale_number);
    let mut approved_by_sale: BTreeMap<&str, Vec<(&Attempt, &RemotePayment)>> = BTreeMap::new();
    for &a in &attempts {
        if a.state == AttemptState::Aprovado && !a.pays() {
            totals.desfeito.add(a.valor);
        } else {
            totals.add(a.state, a.valor);
        }
        // Cash never reaches the server: the drawer's count is its reconciliation.
        if a.is_cash() {
            continue;
        }
        let found = by_ref.get(a.id.as_ref()).cloned().unwrap_or_default();
        let approved: Vec<&RemotePayment> = found
            .iter()
            .copied()
            .filter(|p| p.status == RemoteStatus::Aprovado)
            .collect();
        let late_on_server: Vec<&RemotePayment> = found
            .iter()
            .copied()
            .filter(|p| p.status == RemoteStatus::RecebidoAposCancelamento)
            .collect();
        // The till learns of a late Pix by asking about its closed charge; a Pix the server
        // found later (its reconciliation with the provider) is listed here all the same.
        let late_pix = a.is_late_pix() || !late_on_server.is_empty();
        // A late Pix is the customer's money, listed below until given back; it is not a
        // second payment of the sale.
        for p in approved.iter().filter(|_| !late_pix) {
            approved_by_sale
                .entry(a.sale_id.as_ref())
                .or_default()
                .push((a, p));
        }
        let base =
            |kind: DiscrepancyKind, payments: &[&RemotePayment], detail: String| Discrepancy {
                kind,
                label: kind.label(),
                venda: venda(a),
                sale_id: Some(a.sale_id.to_string()),
                attempt_id: Some(a.id.to_string()),
                payment_ids: payments.iter().map(|p| p.id.clone()).collect(),
                local_centavos: Some(a.valor.into()),
                server_centavos: (!payments.is_empty())
                    .then(|| payments.iter().map(|p| p.valor).sum()),
                detail,
            };
        match a.state {
            AttemptState::Recusado if late_pix => {
                let back = paid_back.get(a.id.as_ref()).copied().unwrap_or_default();
                if back < Total::from(a.valor) {
                    discrepancies.push(base(
                        DiscrepancyKind::PixReceivedAfterCancel,
                        if late_on_server.is_empty() {
                            &approved
                        } else {
                            &late_on_server
                        },
                        format!(
                            "o cliente pagou {} depois que o caixa mostrou o Pix {}; devolvido {} — devolva o resto (Estornar)",
                            a.valor,
                            if a.motivo.as_deref() == Some("pix_expirado") { "expirado" } else { "cancelado" },
                            back
                        ),
                    ));
                }
            }
            AttemptState::Aprovado if found.is_empty() => discrepancies.push(base(
                DiscrepancyKind::ApprovedMissingOnServer,
                &[],
                format!(
                    "o caixa registrou {} aprovado (pagamento {}), o servidor não tem pagamento para esta tentativa",
                    a.valor,
                    a.payment_id.as_deref().unwrap_or("sem id")
                ),
            )),
            AttemptState::Pendente | AttemptState::Revisao if !approved.is_empty() => {
                discrepancies.push(base(
                    DiscrepancyKind::ChargedNotFinalLocally,
                    &approved,
                    format!(
                        "o servidor cobrou {}; no caixa a tentativa está em {}",
                        approved.iter().map(|p| p.valor).sum::<Total>(),
                        if a.state == AttemptState::Pendente { "pendente" } else { "revisão" }
                    ),
                ))
            }
            AttemptState::Aprovado | AttemptState::Recusado => {
                let local = a.state.as_str();
                if let Some(p) = found.iter().find(|p| !p.status.agrees_with(a.state)) {
                    discrepancies.push(base(
                        DiscrepancyKind::StateMismatch,
                        &[p],
                        format!("no caixa {local}, no servidor {}", p.status),
                    ));
                }
            }
            _ => {}
        }
        // An authorization the server still holds: the sale was neither confirmed (captured)
        // nor cancelled (undone).
        for p in found
            .iter()
            .filter(|p| p.status == RemoteStatus::Autorizado)
        {
            let decided = match a.captura {
                Some(Capture::Capturar) => "a captura foi pedida e ainda não confirmada",
                Some(Capture::Desfazer) => "o desfazimento foi pedido e ainda não confirmado",
                _ => "a venda não foi concluída nem cancelada",
            };
            discrepancies.push(base(
                DiscrepancyKind::AuthorizationOpen,
                &[p],
                format!(
                    "{} autorizado no cartão do cliente e não capturado nem desfeito: {decided} — conclua a venda (captura) ou cancele-a (desfaz)",
                    p.valor
                ),
            ));
        }
        for p in &found {
            if p.valor != a.valor {
                discrepancies.push(base(
                    DiscrepancyKind::AmountMismatch,
                    &[p],
                    format!("no caixa {}, no servidor {}", a.valor, p.valor),
                ));
            }
            // A server that names the plan it charged must have charged the one asked.
            if let (Some(plan), Some(metodo)) = (a.plano, p.metodo.as_deref()) {
                let parcelas = p.parcelas.unwrap_or(1);
                if metodo != plan.method.as_str() || parcelas != plan.parcelas {
                    discrepancies.push(base(
                        DiscrepancyKind::PlanMismatch,
                        &[p],
                        format!(
                            "no caixa {}, no servidor {metodo} em {parcelas}×",
                            plan.label()
                        ),
                    ));
                }
            }
        }
    }
    for (sale, charges) in &approved_by_sale {
        let (first, _) = charges[0];
        let total: Total = charges.iter().map(|(_, p)| p.valor).sum();
        // A sale paid in parts has several approved payments by design: only more than its
        // total is wrong.
        if let Some(sale_total) = first.sale_total {
            if total > Total::from(sale_total) {
                discrepancies.push(Discrepancy {
                    kind: DiscrepancyKind::TendersAboveTotal,
                    label: DiscrepancyKind::TendersAboveTotal.label(),
                    venda: venda(first),
                    sale_id: Some(sale.to_string()),
                    attempt_id: None,
                    payment_ids: charges.iter().map(|(_, p)| p.id.clone()).collect(),
                    local_centavos: Some(sale_total.into()),
                    server_centavos: Some(total),
                    detail: format!(
                        "{} pagamentos aprovados no servidor somam {total}, acima do total da venda ({sale_total})",
                        charges.len()
                    ),
                });
            }
            continue;
        }
        if charges.len() > 1 {
            discrepancies.push(Discrepancy {
                kind: DiscrepancyKind::TwoChargesForOneSale,
                label: DiscrepancyKind::TwoChargesForOneSale.label(),
                venda: venda(first),
                sale_id: Some(sale.to_string()),
                attempt_id: None,
                payment_ids: charges.iter().map(|(_, p)| p.id.clone()).collect(),
                local_centavos: None,
                server_centavos: Some(total),
                detail: format!(
                    "{} pagamentos aprovados no servidor para a mesma venda, {} no total",
                    charges.len(),
                    total
                ),
            });
        }
    }
    let mut seen_unknown = HashSet::new();
    for p in server {
        let ours = terminal.is_some() && p.terminal.as_deref() == terminal;
        let unknown = p
            .referencia
            .as_deref()
            .is_none_or(|r| !known.contains(r) && !evidence.other_days.contains(r));
        if ours && unknown && seen_unknown.insert(p.id.as_str()) {
            discrepancies.push(Discrepancy::unknown_on_server(
                p.referencia.clone(),
                &p.id,
                p.valor.into(),
                format!(
                    "pagamento {} de {} ({}) enviado por este caixa, sem tentativa correspondente no caixa",
                    p.status,
                    p.valor,
                    p.criado_em
                ),
            ));
        }
    }
    let (refund_totals, elsewhere, compared) =
        reconcile_refunds(&refunds, evidence, &mut discrepancies);
    discrepancies.sort_by_key(|d| {
        (
            DiscrepancyKind::ALL.iter().position(|k| *k == d.kind),
            d.venda.clone(),
        )
    });
    let sales: HashSet<&str> = attempts.iter().map(|a| a.sale_id.as_ref()).collect();
    let por_forma = FORMAS
        .iter()
        .filter_map(|&(forma, rotulo)| {
            let mut tally = Tally::default();
            for a in attempts.iter().filter(|a| a.pays()) {
                if forma_of(a) == forma {
                    tally.count += 1;
                    tally.centavos += a.valor;
                }
            }
            (tally.count > 0).then_some(MethodTally {
                forma,
                rotulo,
                tally,
            })
        })
        .collect();
    Closing {
        day: day.to_string(),
        closed_at,
        terminal: terminal.map(str::to_string),
        // A late Pix was money in, whatever the attempt's state; its devolução is money out.
        net_centavos: Net::of(
            totals.aprovado.centavos
                + if pix.recebidos_apos_cancelamento.count > 0 {
                    late_declined(&attempts)
                } else {
                    Total::ZERO
                },
            &[refund_totals.aprovado.centavos, elsewhere.centavos],
        ),
        totals,
        por_forma,
        gaveta: None,
        pix,
        refunds: refund_totals,
        refunds_elsewhere: elsewhere,
        sales: sales.len(),
        server_payments: seen.len(),
        server_refunds: compared,
        discrepancies,
        pending: attempts
            .iter()
            .chain(&refunds)
            .filter(|a| a.state == AttemptState::Pendente)
            .map(|a| a.id.to_string())
            .collect(),
        notas: None,
    }
}

impl Closing {
    /// Adds the day's drawer, and a discrepancy when the cash counted is not what it should hold.
    pub fn with_drawer(mut self, gaveta: crate::drawer::Drawer) -> Self {
        if let (Some(contado), Some(diferenca)) = (gaveta.contado, gaveta.diferenca) {
            if diferenca != 0 {
                let kind = DiscrepancyKind::DrawerDifference;
                self.discrepancies.push(Discrepancy {
                    kind,
                    label: kind.label(),
                    venda: None,
                    sale_id: None,
                    attempt_id: None,
                    payment_ids: Vec::new(),
                    local_centavos: Some(gaveta.esperado),
                    server_centavos: None,
                    detail: format!(
                        "a gaveta devia ter {}, foram contados {contado}: {} {}",
                        gaveta.esperado,
                        if diferenca > 0 { "sobram" } else { "faltam" },
                        crate::domain::format_brl(diferenca.abs())
                    ),
                });
            }
        }
        self.gaveta = Some(gaveta);
        self
    }

    /// The closing as CSV: one line per discrepancy after the totals, for a spreadsheet.
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "secao,tipo,venda,sale_id,attempt_id,pagamentos,valor_caixa,valor_servidor,detalhe\n",
        );
        let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        for (name, t) in [
            ("aprovado", self.totals.aprovado),
            ("recusado", self.totals.recusado),
            ("pendente", self.totals.pendente),
            ("revisao", self.totals.revisao),
            ("autorizacao_desfeita", self.totals.desfeito),
            ("estorno_aprovado", self.refunds.aprovado),
            ("estorno_recusado", self.refunds.recusado),
            ("estorno_pendente", self.refunds.pendente),
            ("estorno_revisao", self.refunds.revisao),
        ] {
            out.push_str(&format!(
                "total,{name},,,,{},{},,\n",
                t.count,
                t.centavos.get()
            ));
        }
        for m in &self.por_forma {
            out.push_str(&format!(
                "forma,{},,,,{},{},,\n",
                m.forma,
                m.tally.count,
                m.tally.centavos.get()
            ));
        }
        out.push_str(&format!(
            "total,estorno_fora_deste_caixa,,,,{},{},,\n",
            self.refunds_elsewhere.count,
            self.refunds_elsewhere.centavos.get()
        ));
        out.push_str(&format!(
            "total,liquido,,,,,{},,\n",
            self.net_centavos.get()
        ));
        // The cash drawer: what it should hold, what was counted, and each movement.
        if let Some(g) = &self.gaveta {
            out.push_str(&format!("gaveta,esperado,,,,,{},,\n", g.esperado.get()));
            if let (Some(contado), Some(diferenca)) = (g.contado, g.diferenca) {
                out.push_str(&format!("gaveta,contado,,,,,{},,\n", contado.get()));
                out.push_str(&format!("gaveta,diferenca,,,,,{diferenca},,\n"));
            }
            for m in &g.movimentos {
                out.push_str(&format!(
                    "movimento,{},,,,,{},,{}\n",
                    m.kind.as_str(),
                    m.valor.get(),
                    q(m.motivo.as_deref().unwrap_or(""))
                ));
            }
        }
        for d in &self.discrepancies {
            out.push_str(&format!(
                "divergencia,{},{},{},{},{},{},{},{}\n",
                serde_json::to_value(d.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                d.venda.as_deref().unwrap_or(""),
                d.sale_id.as_deref().unwrap_or(""),
                d.attempt_id.as_deref().unwrap_or(""),
                d.payment_ids.join(" "),
                d.local_centavos
                    .map(|v| v.get().to_string())
                    .unwrap_or_default(),
                d.server_centavos
                    .map(|v| v.get().to_string())
                    .unwrap_or_default(),
                q(&d.detail)
            ));
        }
        out
    }
}
