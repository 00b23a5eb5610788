//! Closing the till ("fechar caixa"): every attempt of a store day reconciled against the
//! server's payments by `referencia`, and every refund against its payment's refunds. The
//! evening's proof that nobody was charged twice, that no charge is missing from the till, and
//! that every refund the till made was paid back once.
//!
//! [`reconcile`] is pure: the attempts as the outbox has them and the payments and refunds as
//! the server listed them in, the totals and every discrepancy out.

use crate::client::{RemotePayment, RemoteRefund};
use crate::domain::{format_brl, sale_number, AttemptState, UnixMillis};
use crate::outbox::Attempt;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Count and amount of the attempts in one state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Total {
    /// Attempts.
    pub count: usize,
    /// Their amounts, in centavos.
    pub centavos: i64,
}

/// The day's attempts by state (the latest attempt of each sale and every earlier one: a
/// declined card and its retry are both counted, each in its state).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Approved.
    pub aprovado: Total,
    /// Declined.
    pub recusado: Total,
    /// Still waiting for the server.
    pub pendente: Total,
    /// Waiting for a person.
    pub revisao: Total,
}

impl Totals {
    fn add(&mut self, state: AttemptState, centavos: i64) {
        let t = match state {
            AttemptState::Aprovado => &mut self.aprovado,
            AttemptState::Recusado => &mut self.recusado,
            AttemptState::Pendente => &mut self.pendente,
            AttemptState::Revisao => &mut self.revisao,
        };
        t.count += 1;
        t.centavos += centavos;
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
}

impl DiscrepancyKind {
    /// Every kind, in the order a screen lists them.
    pub const ALL: [DiscrepancyKind; 7] = [
        DiscrepancyKind::TwoChargesForOneSale,
        DiscrepancyKind::ChargedNotFinalLocally,
        DiscrepancyKind::RefundedNotFinalLocally,
        DiscrepancyKind::ApprovedMissingOnServer,
        DiscrepancyKind::AmountMismatch,
        DiscrepancyKind::StateMismatch,
        DiscrepancyKind::UnknownOnServer,
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
    pub local_centavos: Option<i64>,
    /// What the server has, in centavos (the sum, for two charges).
    pub server_centavos: Option<i64>,
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
    /// Refund attempts by state (refunds made that day, whatever day their sale was).
    pub refunds: Totals,
    /// What the day took in: approved payments less approved refunds, in centavos.
    pub net_centavos: i64,
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

/// Reconciles the attempts of a day with the server's payments and refunds. `server` holds every
/// payment the server has for the payment attempts' `referencia`s (from the day's range and from
/// lookups), and this till's other payments in the range; `server_refunds` every refund of the
/// payments the day's refund attempts paid back.
pub fn reconcile(
    day: &str,
    closed_at: UnixMillis,
    terminal: Option<&str>,
    attempts: &[Attempt],
    server: &[RemotePayment],
    server_refunds: &[RemoteRefund],
) -> Closing {
    let (refunds, attempts): (Vec<&Attempt>, Vec<&Attempt>) =
        attempts.iter().partition(|a| a.is_refund());
    let mut totals = Totals::default();
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
        totals.add(a.state, a.valor.get());
        let found = by_ref.get(a.id.as_ref()).cloned().unwrap_or_default();
        let approved: Vec<&RemotePayment> = found
            .iter()
            .copied()
            .filter(|p| p.status == "aprovado")
            .collect();
        for p in &approved {
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
                local_centavos: Some(a.valor.get()),
                server_centavos: (!payments.is_empty())
                    .then(|| payments.iter().map(|p| p.valor).sum()),
                detail,
            };
        match a.state {
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
                        format_brl(approved.iter().map(|p| p.valor).sum()),
                        if a.state == AttemptState::Pendente { "pendente" } else { "revisão" }
                    ),
                ))
            }
            AttemptState::Aprovado | AttemptState::Recusado => {
                let local = a.state.as_str();
                if let Some(p) = found.iter().find(|p| p.status != local) {
                    discrepancies.push(base(
                        DiscrepancyKind::StateMismatch,
                        &[p],
                        format!("no caixa {local}, no servidor {}", p.status),
                    ));
                }
            }
            _ => {}
        }
        for p in &found {
            if p.valor != a.valor.get() {
                discrepancies.push(base(
                    DiscrepancyKind::AmountMismatch,
                    &[p],
                    format!("no caixa {}, no servidor {}", a.valor, format_brl(p.valor)),
                ));
            }
        }
    }
    for (sale, charges) in &approved_by_sale {
        if charges.len() > 1 {
            let (first, _) = charges[0];
            let total: i64 = charges.iter().map(|(_, p)| p.valor).sum();
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
                    format_brl(total)
                ),
            });
        }
    }
    let mut seen_unknown = HashSet::new();
    for p in server {
        let ours = terminal.is_some() && p.terminal.as_deref() == terminal;
        let unknown = p.referencia.as_deref().is_none_or(|r| !known.contains(r));
        if ours && unknown && seen_unknown.insert(p.id.as_str()) {
            discrepancies.push(Discrepancy::unknown_on_server(
                p.referencia.clone(),
                &p.id,
                p.valor,
                format!(
                    "pagamento {} de {} ({}) enviado por este caixa, sem tentativa correspondente no caixa",
                    p.status,
                    format_brl(p.valor),
                    p.criado_em
                ),
            ));
        }
    }
    let (refund_totals, compared) = reconcile_refunds(&refunds, server_refunds, &mut discrepancies);
    discrepancies.sort_by_key(|d| {
        (
            DiscrepancyKind::ALL.iter().position(|k| *k == d.kind),
            d.venda.clone(),
        )
    });
    let sales: HashSet<&str> = attempts.iter().map(|a| a.sale_id.as_ref()).collect();
    Closing {
        day: day.to_string(),
        closed_at,
        terminal: terminal.map(str::to_string),
        net_centavos: totals.aprovado.centavos - refund_totals.aprovado.centavos,
        totals,
        refunds: refund_totals,
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

/// Reconciles the refund attempts with the refunds the server has for their payments, by
/// `referencia`; returns their totals and how many server refunds were compared. A refund the
/// server has for one of those payments that no refund attempt of this till knows is reported
/// too: the payment was paid back outside this till.
fn reconcile_refunds(
    refunds: &[&Attempt],
    server: &[RemoteRefund],
    discrepancies: &mut Vec<Discrepancy>,
) -> (Totals, usize) {
    let mut totals = Totals::default();
    let mut by_ref: HashMap<&str, &RemoteRefund> = HashMap::new();
    let mut seen = HashSet::new();
    for r in server.iter().filter(|r| seen.insert(r.id.as_str())) {
        if let Some(referencia) = r.referencia.as_deref() {
            by_ref.insert(referencia, r);
        }
    }
    for &a in refunds {
        totals.add(a.state, a.valor.get());
        let found = by_ref.get(a.id.as_ref()).copied();
        let payment = a.refund_payment.as_ref().map_or("", |p| p.as_ref());
        let base = |kind: DiscrepancyKind, detail: String| Discrepancy {
            kind,
            label: kind.label(),
            venda: a.sale_number.map(sale_number),
            sale_id: Some(a.sale_id.to_string()),
            attempt_id: Some(a.id.to_string()),
            payment_ids: found.map(|r| r.id.clone()).into_iter().collect(),
            local_centavos: Some(a.valor.get()),
            server_centavos: found.map(|r| r.valor),
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
            (AttemptState::Pendente | AttemptState::Revisao, Some(r)) if r.status == "aprovado" => {
                discrepancies.push(base(
                    DiscrepancyKind::RefundedNotFinalLocally,
                    format!(
                        "o servidor estornou {} do pagamento {payment}; no caixa o estorno está {}",
                        format_brl(r.valor),
                        a.state.label()
                    ),
                ))
            }
            (AttemptState::Aprovado | AttemptState::Recusado, Some(r))
                if r.status != a.state.as_str() =>
            {
                discrepancies.push(base(
                    DiscrepancyKind::StateMismatch,
                    format!("estorno: no caixa {}, no servidor {}", a.state.as_str(), r.status),
                ))
            }
            _ => {}
        }
        if let Some(r) = found.filter(|r| r.valor != a.valor.get()) {
            discrepancies.push(base(
                DiscrepancyKind::AmountMismatch,
                format!(
                    "estorno: no caixa {}, no servidor {}",
                    a.valor,
                    format_brl(r.valor)
                ),
            ));
        }
    }
    let known: HashSet<&str> = refunds.iter().map(|a| a.id.as_ref()).collect();
    let mut reported = HashSet::new();
    for r in server.iter().filter(|r| r.status != "recusado") {
        let unknown = r.referencia.as_deref().is_none_or(|x| !known.contains(x));
        if unknown && reported.insert(r.id.as_str()) {
            discrepancies.push(Discrepancy::unknown_on_server(
                r.referencia.clone(),
                &r.id,
                r.valor,
                format!(
                    "estorno {} de {} de um pagamento deste caixa, feito fora deste caixa",
                    r.status,
                    format_brl(r.valor)
                ),
            ));
        }
    }
    (totals, seen.len())
}

impl Discrepancy {
    /// Something the server has that no attempt of this till knows (referenced by `referencia`,
    /// if it has one).
    fn unknown_on_server(referencia: Option<String>, id: &str, valor: i64, detail: String) -> Self {
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
            ("estorno_aprovado", self.refunds.aprovado),
            ("estorno_recusado", self.refunds.recusado),
            ("estorno_pendente", self.refunds.pendente),
            ("estorno_revisao", self.refunds.revisao),
        ] {
            out.push_str(&format!("total,{name},,,,{},{},,\n", t.count, t.centavos));
        }
        out.push_str(&format!("total,liquido,,,,,{},,\n", self.net_centavos));
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
                d.local_centavos.map(|v| v.to_string()).unwrap_or_default(),
                d.server_centavos.map(|v| v.to_string()).unwrap_or_default(),
                q(&d.detail)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{AttemptId, CardToken, Centavos, IdempotencyKey, SaleId};

    fn attempt(id: &str, sale: &str, n: u32, valor: i64, state: AttemptState) -> Attempt {
        Attempt {
            id: AttemptId::from_stored(id),
            kind: crate::domain::AttemptKind::Pagamento,
            refund_of: None,
            refund_payment: None,
            sale_id: SaleId::parse(sale).unwrap(),
            idempotency_key: IdempotencyKey::from_stored(format!("k-{id}")),
            valor: Centavos::new(valor).unwrap(),
            cartao: CardToken::parse("tok_aprovado").unwrap(),
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
            status: status.into(),
            valor,
            referencia: Some(referencia.into()),
        }
    }

    fn paid(id: &str, referencia: &str, valor: i64, status: &str) -> RemotePayment {
        RemotePayment {
            id: id.into(),
            status: status.into(),
            valor,
            referencia: Some(referencia.into()),
            terminal: Some("caixa-01".into()),
            criado_em: "2026-12-01T12:00:00Z".into(),
        }
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
        let c = reconcile("2026-12-01", 1, Some("caixa-01"), &attempts, &server, &[]);
        assert!(c.discrepancies.is_empty(), "{:?}", c.discrepancies);
        assert_eq!(
            c.totals.aprovado,
            Total {
                count: 2,
                centavos: 1500
            }
        );
        assert_eq!(
            c.totals.recusado,
            Total {
                count: 1,
                centavos: 500
            }
        );
        assert_eq!((c.sales, c.server_payments), (2, 3));
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
        ];
        let mut attempts = attempts.to_vec();
        let r1 = refund("r1", &attempts[2], 1000, AttemptState::Pendente); // the server paid it back
        attempts.push(r1);
        let server = [
            paid("p2", "a2", 2000, "aprovado"),
            paid("p3", "a3", 3300, "aprovado"),
            paid("p4", "a4", 4000, "aprovado"),
            paid("p5", "a5", 4000, "aprovado"),
            paid("p9", "att_de_outro_lugar", 900, "aprovado"),
        ];
        let server_refunds = [refunded("est_r1", "r1", 1000, "aprovado")];
        let c = reconcile(
            "2026-12-01",
            1,
            Some("caixa-01"),
            &attempts,
            &server,
            &server_refunds,
        );
        assert_eq!(
            kinds(&c),
            DiscrepancyKind::ALL,
            "each kind once, in the screen's order"
        );
        let two = &c.discrepancies[0];
        assert_eq!(two.venda.as_deref(), Some("0004"));
        assert_eq!(two.server_centavos, Some(8000));
        assert_eq!(c.pending, ["a6", "r1"]);
        assert_eq!(
            c.totals.pendente,
            Total {
                count: 1,
                centavos: 6000
            }
        );
        let csv = c.to_csv();
        assert!(csv.contains("divergencia,two_charges_for_one_sale,0004,v4,,p4 p5,,8000,"));
        assert!(csv.contains("total,aprovado,,,,3,8000,,"));
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
            &server,
            &server_refunds,
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
            Total {
                count: 1,
                centavos: 10_000
            },
            "refunds are not payments"
        );
        assert_eq!(
            c.refunds.aprovado,
            Total {
                count: 3,
                centavos: 4_500
            }
        );
        assert_eq!(c.net_centavos, 5_500);
        assert_eq!((c.sales, c.server_payments, c.server_refunds), (1, 1, 4));
        assert!(
            c.discrepancies[0].detail.contains("estorno"),
            "{:?}",
            c.discrepancies[0]
        );
        let csv = c.to_csv();
        assert!(csv.contains("total,estorno_aprovado,,,,3,4500,,"), "{csv}");
        assert!(csv.contains("total,liquido,,,,,5500,,"), "{csv}");
    }

    #[test]
    fn another_tills_payments_are_not_this_tills_business() {
        let mut other = paid("p9", "att_x", 900, "aprovado");
        other.terminal = Some("caixa-02".into());
        let c = reconcile("2026-12-01", 1, Some("caixa-01"), &[], &[other], &[]);
        assert!(c.discrepancies.is_empty());
    }
}
