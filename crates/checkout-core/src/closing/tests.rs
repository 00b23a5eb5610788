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
        maquininha: None,
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
