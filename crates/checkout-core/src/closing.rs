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

/// The day's attempts by state (the latest attempt of each sale and every earlier one: a
/// declined card and its retry are both counted, each in its state).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Approved.
    pub aprovado: Tally,
    /// Declined.
    pub recusado: Tally,
    /// Still waiting for the server.
    pub pendente: Tally,
    /// Waiting for a person.
    pub revisao: Tally,
    /// Authorized on a card, then undone or lapsed: nothing was taken.
    pub desfeito: Tally,
}

impl Totals {
    fn add(&mut self, state: AttemptState, valor: Centavos) {
        match state {
            AttemptState::Aprovado => &mut self.aprovado,
            AttemptState::Recusado => &mut self.recusado,
            AttemptState::Pendente => &mut self.pendente,
            AttemptState::Revisao => &mut self.revisao,
        }
        .add(valor);
    }
}

/// The day's Pix apart, as the cashier saw them end (each also counted in [`Totals`] by its
/// attempt's state; a Pix given back is also in the refunds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PixTotals {
    /// Paid while the QR was on screen.
    pub recebidos: Tally,
    /// Paid after the till showed it cancelled or expired: kept as the sale's payment when the
    /// sale still waited, otherwise money to give back.
    pub recebidos_apos_cancelamento: Tally,
    /// Expired unpaid.
    pub expirados: Tally,
    /// Cancelled unpaid.
    pub cancelados: Tally,
    /// Still waiting for the customer.
    pub aguardando: Tally,
    /// Given back (devoluções approved).
    pub devolvidos: Tally,
}

impl PixTotals {
    fn add(&mut self, a: &Attempt) {
        let late = a.is_late_pix();
        let t = match (a.state, a.motivo.as_deref()) {
            _ if a.is_refund() => {
                if a.state != AttemptState::Aprovado {
                    return;
                }
                &mut self.devolvidos
            }
            (AttemptState::Aprovado, Some("recebido_apos_cancelamento")) => {
                &mut self.recebidos_apos_cancelamento
            }
            (AttemptState::Aprovado, _) => &mut self.recebidos,
            (AttemptState::Recusado, _) if late => &mut self.recebidos_apos_cancelamento,
            (AttemptState::Recusado, Some("pix_expirado")) => &mut self.expirados,
            (AttemptState::Recusado, _) => &mut self.cancelados,
            (AttemptState::Pendente | AttemptState::Revisao, _) => &mut self.aguardando,
        };
        t.add(a.valor);
    }

    /// True when the day had a Pix.
    pub fn any(&self) -> bool {
        [
            self.recebidos,
            self.recebidos_apos_cancelamento,
            self.expirados,
            self.cancelados,
            self.aguardando,
            self.devolvidos,
        ]
        .iter()
        .any(|t| t.count > 0)
    }
}

/// How the day's approved payments were paid, one line per way (only the ways used).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MethodTally {
    /// `debito`, `credito`, `parcelado`, `voucher`, `pix`, or `cartao` (a card attempt that
    /// named no method).
    pub forma: &'static str,
    /// How the closing names it: `Aprovados no débito`, `Aprovados no crédito parcelado`, …
    pub rotulo: &'static str,
    /// Approved payments and their amounts.
    pub tally: Tally,
}

/// The ways a sale is paid, in the order the closing lists them.
const FORMAS: [(&str, &str); 7] = [
    ("dinheiro", "Aprovados em dinheiro"),
    ("debito", "Aprovados no débito"),
    ("credito", "Aprovados no crédito à vista"),
    ("parcelado", "Aprovados no crédito parcelado"),
    ("voucher", "Aprovados no voucher"),
    ("pix", "Aprovados por Pix"),
    ("cartao", "Aprovados no cartão (forma não informada)"),
];

/// The way an attempt paid, as [`FORMAS`] names it.
fn forma_of(a: &Attempt) -> &'static str {
    match (a.metodo, a.plano) {
        (Means::Dinheiro, _) => "dinheiro",
        (Means::Pix, _) => "pix",
        (Means::Cartao, None) => "cartao",
        (Means::Cartao, Some(p)) => match p.method() {
            CardMethod::Debito => "debito",
            CardMethod::Voucher => "voucher",
            CardMethod::Credito if p.parcelas() > 1 => "parcelado",
            CardMethod::Credito => "credito",
        },
    }
}

/// What kind of disagreement a discrepancy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscrepancyKind {
    /// Approved at the till, no payment on the server: the till says the customer paid and the
    /// merchant will not get the money.
    ApprovedMissingOnServer,
    /// The server has an approved payment for an attempt the till still has as pending or in
    /// review: the customer was charged and the till does not know it.
    ChargedNotFinalLocally,
    /// The amounts differ.
    AmountMismatch,
    /// The till and the server disagree on approved/declined.
    StateMismatch,
    /// More than one approved payment on the server for one sale: a double charge.
    TwoChargesForOneSale,
    /// The server paid back a refund the till still has as pending or in review.
    RefundedNotFinalLocally,
    /// A payment this till sent (by `terminal`) that no attempt in the outbox knows.
    UnknownOnServer,
    /// A Pix the customer paid after the till showed it cancelled or expired, not given back in
    /// full: money that belongs to the customer.
    PixReceivedAfterCancel,
    /// The server charged another method or other installments than the till asked for.
    PlanMismatch,
    /// A sale paid in parts whose approved tenders on the server pass its total.
    TendersAboveTotal,
    /// The cash counted in the drawer is not what it should hold.
    DrawerDifference,
    /// A card authorization neither captured nor undone: money held on the customer's card
    /// for a sale nobody finished.
    AuthorizationOpen,
}

impl DiscrepancyKind {
    /// Every kind, in the order a screen lists them.
    pub const ALL: [DiscrepancyKind; 12] = [
        DiscrepancyKind::TwoChargesForOneSale,
        DiscrepancyKind::AuthorizationOpen,
        DiscrepancyKind::TendersAboveTotal,
        DiscrepancyKind::PixReceivedAfterCancel,
        DiscrepancyKind::ChargedNotFinalLocally,
        DiscrepancyKind::RefundedNotFinalLocally,
        DiscrepancyKind::ApprovedMissingOnServer,
        DiscrepancyKind::AmountMismatch,
        DiscrepancyKind::PlanMismatch,
        DiscrepancyKind::StateMismatch,
        DiscrepancyKind::UnknownOnServer,
        DiscrepancyKind::DrawerDifference,
    ];

    /// The heading a cashier reads.
    pub fn label(self) -> &'static str {
        match self {
            DiscrepancyKind::ApprovedMissingOnServer => "Aprovado no caixa, ausente no servidor",
            DiscrepancyKind::ChargedNotFinalLocally => {
                "Cobrado no servidor, não concluído no caixa"
            }
            DiscrepancyKind::AmountMismatch => "Valor diferente",
            DiscrepancyKind::StateMismatch => "Resultado diferente",
            DiscrepancyKind::TwoChargesForOneSale => "Duas cobranças para uma venda",
            DiscrepancyKind::RefundedNotFinalLocally => {
                "Estornado no servidor, não concluído no caixa"
            }
            DiscrepancyKind::UnknownOnServer => "No servidor, sem registro neste caixa",
            DiscrepancyKind::PixReceivedAfterCancel => "Pix recebido após cancelamento, a devolver",
            DiscrepancyKind::PlanMismatch => "Forma de pagamento ou parcelas diferentes",
            DiscrepancyKind::TendersAboveTotal => "Pagamentos acima do total da venda",
            DiscrepancyKind::DrawerDifference => "Diferença na gaveta",
            DiscrepancyKind::AuthorizationOpen => "Autorização em aberto no cartão",
        }
    }
}

/// One disagreement between the till and the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Discrepancy {
    /// What kind.
    pub kind: DiscrepancyKind,
    /// Its heading, pt-BR.
    pub label: &'static str,
    /// The sale's number that day (`0042`), when known.
    pub venda: Option<String>,
    /// The sale id.
    pub sale_id: Option<String>,
    /// The attempt concerned.
    pub attempt_id: Option<String>,
    /// The server payments concerned.
    pub payment_ids: Vec<String>,
    /// What the till has, in centavos.
    pub local_centavos: Option<Total>,
    /// What the server has, in centavos (the sum, for two charges).
    pub server_centavos: Option<Total>,
    /// What it means, pt-BR.
    pub detail: String,
}

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
}

/// What the late Pix of declined attempts brought in.
fn late_declined(attempts: &[&Attempt]) -> Total {
    attempts
        .iter()
        .filter(|a| a.is_late_pix())
        .map(|a| a.valor)
        .sum()
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
                if metodo != plan.method().as_str() || parcelas != plan.parcelas() {
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
    }
}

/// Reconciles the refund attempts with the refunds the server has for their payments and the
/// day's payments, by `referencia`; returns their totals, the total paid back elsewhere that
/// day, and how many server refunds were compared. A refund made that day that no refund attempt
/// of this till knows (on any day) is reported too: the payment was paid back outside this till.
fn reconcile_refunds(
    refunds: &[&Attempt],
    evidence: &Evidence<'_>,
    discrepancies: &mut Vec<Discrepancy>,
) -> (Totals, Tally, usize) {
    let server = evidence.refunds;
    let mut totals = Totals::default();
    let mut by_ref: HashMap<&str, &RemoteRefund> = HashMap::new();
    let mut seen = HashSet::new();
    for r in server.iter().filter(|r| seen.insert(r.id.as_str())) {
        if let Some(referencia) = r.referencia.as_deref() {
            by_ref.insert(referencia, r);
        }
    }
    for &a in refunds {
        totals.add(a.state, a.valor);
        if a.is_cash() {
            continue;
        }
        let found = by_ref.get(a.id.as_ref()).copied();
        let payment = a.refund_payment.as_ref().map_or("", |p| p.as_ref());
        let base = |kind: DiscrepancyKind, detail: String| Discrepancy {
            kind,
            label: kind.label(),
            venda: a.sale_number.map(sale_number),
            sale_id: Some(a.sale_id.to_string()),
            attempt_id: Some(a.id.to_string()),
            payment_ids: found.map(|r| r.id.clone()).into_iter().collect(),
            local_centavos: Some(a.valor.into()),
            server_centavos: found.map(|r| r.valor.into()),
            detail,
        };
        match (a.state, found) {
            (AttemptState::Aprovado, None) => discrepancies.push(base(
                DiscrepancyKind::ApprovedMissingOnServer,
                format!(
                    "o caixa registrou o estorno de {} do pagamento {payment} (estorno {}), o servidor não tem este estorno",
                    a.valor,
                    a.payment_id.as_deref().unwrap_or("sem id")
                ),
            )),
            (AttemptState::Pendente | AttemptState::Revisao, Some(r))
                if r.status == RemoteStatus::Aprovado =>
            {
                discrepancies.push(base(
                    DiscrepancyKind::RefundedNotFinalLocally,
                    format!(
                        "o servidor estornou {} do pagamento {payment}; no caixa o estorno está {}",
                        r.valor,
                        a.state.label()
                    ),
                ))
            }
            (AttemptState::Aprovado | AttemptState::Recusado, Some(r))
                if !r.status.agrees_with(a.state) =>
            {
                discrepancies.push(base(
                    DiscrepancyKind::StateMismatch,
                    format!("estorno: no caixa {}, no servidor {}", a.state.as_str(), r.status),
                ))
            }
            _ => {}
        }
        if let Some(r) = found.filter(|r| r.valor != a.valor) {
            discrepancies.push(base(
                DiscrepancyKind::AmountMismatch,
                format!("estorno: no caixa {}, no servidor {}", a.valor, r.valor),
            ));
        }
    }
    let known: HashSet<&str> = refunds.iter().map(|a| a.id.as_ref()).collect();
    let mut reported = HashSet::new();
    let mut elsewhere = Tally::default();
    let (from, to) = evidence.bounds;
    for r in server.iter().filter(|r| r.status != RemoteStatus::Recusado) {
        let unknown = r
            .referencia
            .as_deref()
            .is_none_or(|x| !known.contains(x) && !evidence.other_days.contains(x));
        // A refund made elsewhere counts on the day it was made (a server that does not say
        // when: on this one).
        let that_day = r
            .criado_em
            .as_deref()
            .and_then(epoch_ms)
            .is_none_or(|at| at >= from && at < to);
        if unknown && that_day && reported.insert(r.id.as_str()) {
            if r.status == RemoteStatus::Aprovado {
                elsewhere.count += 1;
                elsewhere.centavos += r.valor;
            }
            discrepancies.push(Discrepancy::unknown_on_server(
                r.referencia.clone(),
                &r.id,
                r.valor.into(),
                format!(
                    "estorno {} de {} de um pagamento deste caixa, feito fora deste caixa",
                    r.status, r.valor
                ),
            ));
        }
    }
    (totals, elsewhere, seen.len())
}

/// Epoch milliseconds of an RFC 3339 instant.
fn epoch_ms(rfc3339: &str) -> Option<UnixMillis> {
    let t = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .ok()?;
    UnixMillis::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

impl Discrepancy {
    /// Something the server has that no attempt of this till knows (referenced by `referencia`,
    /// if it has one).
    fn unknown_on_server(
        referencia: Option<String>,
        id: &str,
        valor: Total,
        detail: String,
    ) -> Self {
        let kind = DiscrepancyKind::UnknownOnServer;
        Self {
            kind,
            label: kind.label(),
            venda: None,
            sale_id: None,
            attempt_id: referencia,
            payment_ids: vec![id.to_string()],
            local_centavos: None,
            server_centavos: Some(valor),
            detail,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: i64) -> Total {
        Total::new(v).unwrap()
    }
    use crate::domain::{AttemptId, CardToken, Centavos, IdempotencyKey, PixStatus, SaleId};

    fn attempt(id: &str, sale: &str, n: u32, valor: i64, state: AttemptState) -> Attempt {
        Attempt {
            id: AttemptId::from_stored(id),
            kind: crate::domain::AttemptKind::Pagamento,
            refund_of: None,
            refund_payment: None,
            sale_id: SaleId::parse(sale).unwrap(),
            idempotency_key: IdempotencyKey::from_stored(format!("k-{id}")),
            valor: Centavos::new(valor).unwrap(),
            cartao: CardToken::parse("tok_aprovado").ok(),
            metodo: Means::Cartao,
            plano: None,
            pix: None,
            state,
            tries: 1,
            next_try_at: 0,
            last_tried_at: None,
            last_error: None,
            response_status: None,
            payment_id: Some(format!("pay_{id}")),
            motivo: None,
            created_at: 0,
            updated_at: 0,
            review_checked_at: None,
            sale_number: Some(n),
            sale_day: Some("2026-12-01".into()),
            sale_total: None,
            captura: None,
            captura_por: None,
            recebido: None,
        }
    }

    /// A refund attempt `id` of the payment attempt `of` (whose server id is `pay_{of}`).
    fn refund(id: &str, of: &Attempt, valor: i64, state: AttemptState) -> Attempt {
        let mut a = attempt(
            id,
            of.sale_id.as_ref(),
            of.sale_number.unwrap(),
            valor,
            state,
        );
        a.kind = crate::domain::AttemptKind::Estorno;
        a.refund_of = Some(of.id.clone());
        a.refund_payment = of
            .payment_id
            .as_deref()
            .map(|p| crate::domain::PaymentId::parse(p).unwrap());
        a.payment_id = Some(format!("est_{id}"));
        a
    }

    fn refunded(id: &str, referencia: &str, valor: i64, status: &str) -> RemoteRefund {
        RemoteRefund {
            id: id.into(),
            status: serde_json::from_value(status.into()).unwrap(),
            valor: Centavos::new(valor).unwrap(),
            referencia: Some(referencia.into()),
            criado_em: Some("2026-12-01T15:00:00Z".into()),
        }
    }

    /// The day 2026-12-01 in São Paulo (UTC−3), in epoch ms.
    const DAY: (UnixMillis, UnixMillis) = (1_796_094_000_000, 1_796_180_400_000);

    fn evidence<'a>(
        payments: &'a [RemotePayment],
        refunds: &'a [RemoteRefund],
        other_days: &'a HashSet<String>,
    ) -> Evidence<'a> {
        Evidence {
            payments,
            refunds,
            other_days,
            bounds: DAY,
        }
    }

    fn paid(id: &str, referencia: &str, valor: i64, status: &str) -> RemotePayment {
        RemotePayment {
            id: id.into(),
            status: serde_json::from_value(status.into()).unwrap(),
            valor: Centavos::new(valor).unwrap(),
            referencia: Some(referencia.into()),
            terminal: Some("caixa-01".into()),
            criado_em: "2026-12-01T12:00:00Z".into(),
            metodo: None,
            parcelas: None,
        }
    }

    #[test]
    fn approved_payments_are_totalled_by_method_and_a_plan_the_server_changed_is_reported() {
        use crate::domain::{CardPlan, Financing};
        let with = |mut a: Attempt, plan: Option<CardPlan>| {
            a.plano = plan;
            a
        };
        let tres = CardPlan::parcelado(Centavos::new(9_000).unwrap(), 3, Financing::Loja).ok();
        let attempts = [
            with(
                attempt("att_1", "v1", 1, 1_000, AttemptState::Aprovado),
                Some(CardPlan::DEBITO),
            ),
            with(
                attempt("att_2", "v2", 2, 2_000, AttemptState::Aprovado),
                Some(CardPlan::DEBITO),
            ),
            with(
                attempt("att_3", "v3", 3, 9_000, AttemptState::Aprovado),
                tres,
            ),
            with(
                attempt("att_4", "v4", 4, 500, AttemptState::Aprovado),
                Some(CardPlan::VOUCHER),
            ),
            with(
                attempt("att_5", "v5", 5, 700, AttemptState::Recusado),
                Some(CardPlan::CREDITO),
            ),
        ];
        let named = |mut p: RemotePayment, metodo: &str, parcelas: u8| {
            p.metodo = Some(metodo.into());
            p.parcelas = Some(parcelas);
            p
        };
        let server = [
            named(paid("pay_1", "att_1", 1_000, "aprovado"), "debito", 1),
            named(paid("pay_2", "att_2", 2_000, "aprovado"), "debito", 1),
            // The till asked 3×, the server charged 2×: reported.
            named(paid("pay_3", "att_3", 9_000, "aprovado"), "credito", 2),
            // An older server that does not say: nothing to compare.
            paid("pay_4", "att_4", 500, "aprovado"),
            named(paid("pay_5", "att_5", 700, "recusado"), "credito", 1),
        ];
        let c = reconcile(
            "2026-12-01",
            0,
            Some("caixa-01"),
            &attempts,
            &evidence(&server, &[], &HashSet::new()),
        );
        let by: Vec<(&str, usize, i64)> = c
            .por_forma
            .iter()
            .map(|m| (m.forma, m.tally.count, m.tally.centavos.get()))
            .collect();
        assert_eq!(
            by,
            [
                ("debito", 2, 3_000),
                ("parcelado", 1, 9_000),
                ("voucher", 1, 500)
            ]
        );
        assert_eq!(kinds(&c), [DiscrepancyKind::PlanMismatch]);
        assert!(
            c.discrepancies[0].detail.contains("Crédito 3× sem juros"),
            "{}",
            c.discrepancies[0].detail
        );
        assert!(c.to_csv().contains("forma,parcelado,,,,1,9000,,"));
    }

    fn kinds(c: &Closing) -> Vec<DiscrepancyKind> {
        c.discrepancies.iter().map(|d| d.kind).collect()
    }

    #[test]
    fn a_day_that_agrees_has_totals_and_no_discrepancy() {
        let attempts = [
            attempt("a1", "v1", 1, 1000, AttemptState::Aprovado),
            attempt("a2", "v2", 2, 500, AttemptState::Recusado),
            attempt("a3", "v2", 2, 500, AttemptState::Aprovado),
        ];
        let server = [
            paid("p1", "a1", 1000, "aprovado"),
            paid("p2", "a2", 500, "recusado"),
            paid("p3", "a3", 500, "aprovado"),
            paid("p3", "a3", 500, "aprovado"), // listed twice (range and lookup)
        ];
        let none = HashSet::new();
        let c = reconcile(
            "2026-12-01",
            1,
            Some("caixa-01"),
            &attempts,
            &evidence(&server, &[], &none),
        );
        assert!(c.discrepancies.is_empty(), "{:?}", c.discrepancies);
        assert_eq!(
            c.totals.aprovado,
            Tally {
                count: 2,
                centavos: t(1500)
            }
        );
        assert_eq!(
            c.totals.recusado,
            Tally {
                count: 1,
                centavos: t(500)
            }
        );
        assert_eq!((c.sales, c.server_payments), (2, 3));
    }

    fn pix(mut a: Attempt, motivo: Option<&str>, status: PixStatus) -> Attempt {
        a.metodo = Means::Pix;
        a.cartao = None;
        a.motivo = motivo.map(String::from);
        a.pix = Some(crate::domain::PixCharge {
            payment_id: a.payment_id.clone().unwrap(),
            txid: format!("tx{}", a.id),
            copia_e_cola: "000201".into(),
            expira_em: 0,
            status,
            e2eid: None,
            pago_em: None,
        });
        a
    }

    #[test]
    fn the_pix_are_counted_apart_and_a_late_one_is_listed_until_given_back() {
        // Arrange: a Pix received, one expired, one cancelled then paid by the customer anyway
        // (the sale then paid by card), and that late Pix given back in part.
        let received = pix(
            attempt("x1", "v1", 1, 1000, AttemptState::Aprovado),
            None,
            PixStatus::Aprovado,
        );
        let expired = pix(
            attempt("x2", "v2", 2, 700, AttemptState::Recusado),
            Some("pix_expirado"),
            PixStatus::Expirado,
        );
        let late = pix(
            attempt("x3", "v3", 3, 500, AttemptState::Recusado),
            Some("pix_cancelado"),
            PixStatus::RecebidoAposCancelamento,
        );
        let card = attempt("x4", "v3", 3, 500, AttemptState::Aprovado);
        let mut back = refund("r1", &late, 200, AttemptState::Aprovado);
        back.metodo = Means::Pix;
        let attempts = [
            received.clone(),
            expired.clone(),
            late.clone(),
            card.clone(),
            back,
        ];
        let server = [
            paid("pay_x1", "x1", 1000, "aprovado"),
            paid("pay_x3", "x3", 500, "aprovado"),
            paid("pay_x4", "x4", 500, "aprovado"),
        ];
        let refunds = [refunded("est_r1", "r1", 200, "aprovado")];
        let none = HashSet::new();
        // Act
        let c = reconcile(
            "2026-12-01",
            1,
            Some("caixa-01"),
            &attempts,
            &evidence(&server, &refunds, &none),
        );
        // Assert: one discrepancy, the late Pix not given back in full; no "two charges".
        assert_eq!(
            kinds(&c),
            [DiscrepancyKind::PixReceivedAfterCancel],
            "{:?}",
            c.discrepancies
        );
        assert!(
            c.discrepancies[0].detail.contains("devolvido R$ 2,00"),
            "{}",
            c.discrepancies[0].detail
        );
        let p = &c.pix;
        assert_eq!(
            (
                p.recebidos.count,
                p.expirados.count,
                p.recebidos_apos_cancelamento.count,
                p.devolvidos.count
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(p.devolvidos.centavos, t(200));
        // Net: R$ 10,00 + R$ 5,00 (card) + R$ 5,00 (the late Pix came in) − R$ 2,00 given back.
        assert_eq!(c.net_centavos, Net::of(t(2000), &[t(200)]));
        // Given back in full: nothing listed.
        let mut rest = refund("r2", &late, 300, AttemptState::Aprovado);
        rest.metodo = Means::Pix;
        let attempts = [received, expired, late, card, attempts[4].clone(), rest];
        let refunds = [
            refunds[0].clone(),
            refunded("est_r2", "r2", 300, "aprovado"),
        ];
        let c = reconcile(
            "2026-12-01",
            1,
            Some("caixa-01"),
            &attempts,
            &evidence(&server, &refunds, &none),
        );
        assert!(c.discrepancies.is_empty(), "{:?}", c.discrepancies);
    }

    #[test]
    fn a_late_pix_only_the_server_found_is_listed_to_give_back_not_as_a_state_mismatch() {
        // Arrange: the till closed a Pix as cancelled and never heard of its late payment; the
        // server's reconciliation with the provider found it and lists it as received after
        // cancellation.
        let closed = pix(
            attempt("x1", "v1", 1, 500, AttemptState::Recusado),
            Some("pix_cancelado"),
            PixStatus::Cancelado,
        );
        let card = attempt("x2", "v1", 1, 500, AttemptState::Aprovado);
        let server = [
            paid("pay_x1", "x1", 500, "recebido_apos_cancelamento"),
            paid("pay_x2", "x2", 500, "aprovado"),
        ];
        let none = HashSet::new();
        // Act
        let c = reconcile(
            "2026-12-01",
            1,
            Some("caixa-01"),
            &[closed, card],
            &evidence(&server, &[], &none),
        );
        // Assert: to give back, naming the server's payment; the sale's one payment is the card.
        assert_eq!(
            kinds(&c),
            [DiscrepancyKind::PixReceivedAfterCancel],
            "{:?}",
            c.discrepancies
        );
        assert_eq!(c.discrepancies[0].payment_ids, ["pay_x1"]);
    }

    #[test]
    fn every_kind_of_discrepancy_is_found() {
        let attempts = [
            attempt("a1", "v1", 1, 1000, AttemptState::Aprovado), // missing on the server
            attempt("a2", "v2", 2, 2000, AttemptState::Revisao),  // the server charged it
            attempt("a3", "v3", 3, 3000, AttemptState::Aprovado), // amount differs
            attempt("a4", "v4", 4, 4000, AttemptState::Aprovado), // two charges for the sale
            attempt("a5", "v4", 4, 4000, AttemptState::Recusado), // ... the other was "declined"
            attempt("a6", "v6", 6, 6000, AttemptState::Pendente),
            attempt("a8", "v8", 8, 800, AttemptState::Aprovado), // charged on another plan
        ];
        let mut attempts = attempts.to_vec();
        attempts[6].plano = Some(crate::domain::CardPlan::DEBITO);
        // A sale of R$ 10,00 paid in parts whose two tenders the server approved at R$ 6,00 each.
        for id in ["a9", "a10"] {
            let mut tender = attempt(id, "v9", 9, 600, AttemptState::Aprovado);
            tender.sale_total = Some(Centavos::new(1000).unwrap());
            attempts.push(tender);
        }
        // A tender authorized on a card, its sale neither confirmed nor cancelled.
        let mut held = attempt("a12", "v12", 12, 1200, AttemptState::Aprovado);
        held.sale_total = Some(Centavos::new(5000).unwrap());
        held.captura = Some(Capture::Pendente);
        attempts.push(held);
        let r1 = refund("r1", &attempts[2], 1000, AttemptState::Pendente); // the server paid it back
        attempts.push(r1);
        // A Pix cancelled at the till, paid by the customer anyway, not given back.
        attempts.push(pix(
            attempt("a7", "v7", 7, 700, AttemptState::Recusado),
            Some("pix_cancelado"),
            PixStatus::RecebidoAposCancelamento,
        ));
        let server = [
            paid("p7", "a7", 700, "aprovado"),
            paid("p2", "a2", 2000, "aprovado"),
            paid("p3", "a3", 3300, "aprovado"),
            paid("p4", "a4", 4000, "aprovado"),
            paid("p5", "a5", 4000, "aprovado"),
            paid("p9", "att_de_outro_lugar", 900, "aprovado"),
            RemotePayment {
                metodo: Some("credito".into()),
                parcelas: Some(1),
                ..paid("p8", "a8", 800, "aprovado")
            },
            paid("p10", "a9", 600, "aprovado"),
            paid("p11", "a10", 600, "aprovado"),
            paid("p12", "a12", 1200, "autorizado"),
        ];
        let server_refunds = [refunded("est_r1", "r1", 1000, "aprovado")];
        // The drawer should be empty; R$ 5,00 were counted in it.
        let counted = crate::drawer::DrawerMove {
            kind: crate::drawer::DrawerKind::Contagem,
            valor: t(500),
            motivo: None,
            at: 0,
        };
        let c = reconcile(
            "2026-12-01",
            1,
            Some("caixa-01"),
            &attempts,
            &evidence(&server, &server_refunds, &HashSet::new()),
        )
        .with_drawer(crate::drawer::Drawer::of(
            vec![counted],
            Tally::default(),
            Tally::default(),
        ));
        assert_eq!(
            kinds(&c),
            DiscrepancyKind::ALL,
            "each kind once, in the screen's order"
        );
        let two = &c.discrepancies[0];
        assert_eq!(two.venda.as_deref(), Some("0004"));
        assert_eq!(two.server_centavos, Some(t(8000)));
        assert_eq!(c.pending, ["a6", "r1"]);
        assert_eq!(
            c.totals.pendente,
            Tally {
                count: 1,
                centavos: t(6000)
            }
        );
        let csv = c.to_csv();
        assert!(csv.contains("divergencia,two_charges_for_one_sale,0004,v4,,p4 p5,,8000,"));
        assert!(csv.contains("total,aprovado,,,,7,11200,,"));
    }

    #[test]
    fn refunds_are_totalled_apart_and_reconciled_with_their_payments_refunds() {
        let sale = attempt("a1", "v1", 1, 10_000, AttemptState::Aprovado);
        let attempts = [
            sale.clone(),
            refund("r1", &sale, 3_000, AttemptState::Aprovado), // agrees
            refund("r2", &sale, 2_000, AttemptState::Recusado), // agrees
            refund("r3", &sale, 1_000, AttemptState::Aprovado), // missing on the server
            refund("r4", &sale, 500, AttemptState::Aprovado),   // amount differs
        ];
        let server = [paid("pay_a1", "a1", 10_000, "aprovado")];
        let server_refunds = [
            refunded("est_r1", "r1", 3_000, "aprovado"),
            refunded("est_r2", "r2", 2_000, "recusado"),
            refunded("est_r4", "r4", 700, "aprovado"),
            refunded("est_r1", "r1", 3_000, "aprovado"), // listed twice
            refunded("est_x", "att_outro_sistema", 400, "aprovado"),
        ];
        let c = reconcile(
            "2026-12-01",
            1,
            Some("caixa-01"),
            &attempts,
            &evidence(&server, &server_refunds, &HashSet::new()),
        );
        assert_eq!(
            kinds(&c),
            [
                DiscrepancyKind::ApprovedMissingOnServer,
                DiscrepancyKind::AmountMismatch,
                DiscrepancyKind::UnknownOnServer
            ]
        );
        assert_eq!(
            c.totals.aprovado,
            Tally {
                count: 1,
                centavos: t(10_000)
            },
            "refunds are not payments"
        );
        assert_eq!(
            c.refunds.aprovado,
            Tally {
                count: 3,
                centavos: t(4_500)
            }
        );
        assert_eq!(
            c.refunds_elsewhere,
            Tally {
                count: 1,
                centavos: t(400)
            },
            "paid back outside this till, and counted"
        );
        assert_eq!(c.net_centavos.get(), 5_100);
        assert_eq!((c.sales, c.server_payments, c.server_refunds), (1, 1, 4));
        assert!(
            c.discrepancies[0].detail.contains("estorno"),
            "{:?}",
            c.discrepancies[0]
        );
        let csv = c.to_csv();
        assert!(csv.contains("total,estorno_aprovado,,,,3,4500,,"), "{csv}");
        assert!(
            csv.contains("total,estorno_fora_deste_caixa,,,,1,400,,"),
            "{csv}"
        );
        assert!(csv.contains("total,liquido,,,,,5100,,"), "{csv}");
    }

    #[test]
    fn another_tills_payments_are_not_this_tills_business() {
        let mut other = paid("p9", "att_x", 900, "aprovado");
        other.terminal = Some("caixa-02".into());
        let none = HashSet::new();
        let c = reconcile(
            "2026-12-01",
            1,
            Some("caixa-01"),
            &[],
            &evidence(&[other], &[], &none),
        );
        assert!(c.discrepancies.is_empty());
    }

    #[test]
    fn what_belongs_to_another_day_of_this_till_is_no_stranger_and_the_net_counts_only_the_day() {
        // Today: one sale, refunded in part here; yesterday this till refunded the same payment
        // (r0) and sold a sale queued at 23:55 that reached the server after midnight (a0).
        let sale = attempt("a1", "v1", 1, 10_000, AttemptState::Aprovado);
        let attempts = [
            sale.clone(),
            refund("r1", &sale, 1_000, AttemptState::Aprovado),
        ];
        let mut drained = paid("pay_a0", "a0", 700, "aprovado");
        drained.criado_em = "2026-12-01T03:02:00Z".into(); // 00:02 in São Paulo
        let server = [paid("pay_a1", "a1", 10_000, "aprovado"), drained];
        let mut yesterday = refunded("est_r0", "r0", 2_000, "aprovado");
        yesterday.criado_em = Some("2026-11-30T20:00:00Z".into());
        let mut elsewhere_before = refunded("est_y", "att_api", 300, "aprovado");
        elsewhere_before.criado_em = Some("2026-11-30T21:00:00Z".into());
        let server_refunds = [
            refunded("est_r1", "r1", 1_000, "aprovado"),
            yesterday,
            elsewhere_before,
            refunded("est_z", "att_api_2", 500, "aprovado"), // today, elsewhere
        ];
        let other_days: HashSet<String> = ["r0", "a0"].map(String::from).into();
        let c = reconcile(
            "2026-12-01",
            1,
            Some("caixa-01"),
            &attempts,
            &evidence(&server, &server_refunds, &other_days),
        );
        // Only today's refund made elsewhere is reported, and the net counts it.
        assert_eq!(
            kinds(&c),
            [DiscrepancyKind::UnknownOnServer],
            "{:?}",
            c.discrepancies
        );
        assert!(c.discrepancies[0].detail.contains("feito fora deste caixa"));
        assert_eq!(c.discrepancies[0].payment_ids, ["est_z"]);
        assert_eq!(
            c.refunds_elsewhere,
            Tally {
                count: 1,
                centavos: t(500)
            }
        );
        assert_eq!(c.net_centavos.get(), 10_000 - 1_000 - 500);
    }

    #[test]
    fn an_attempt_is_undecided_while_pending_or_in_a_review_the_server_has_not_answered() {
        let mut a = attempt("a1", "v1", 1, 1_000, AttemptState::Pendente);
        assert!(a.is_undecided());
        a.state = AttemptState::Revisao;
        assert!(a.is_undecided());
        a.review_checked_at = Some(5);
        assert!(!a.is_undecided(), "the server said it has nothing for it");
        a.state = AttemptState::Aprovado;
        assert!(!a.is_undecided());
    }
}
