//! Cash at the till: the change, the drawer, and a sale paid part by card and part in cash —
//! local (nothing reaches the server), in the outbox, the export and the closing.

use crate::helpers::*;
use checkout_core::drawer::DrawerKind;
use checkout_core::{
    AttemptState, CardPlan, CardToken, Centavos, CoreError, DiscrepancyKind, PayOutcome, SaleId,
    Total,
};

fn c(v: i64) -> Centavos {
    Centavos::new(v).unwrap()
}

#[tokio::test]
async fn cash_with_change_is_approved_at_once_never_sent_and_the_drawer_counts_it() {
    let api = Api::start().await;
    let mut config = fast_config(&api.url());
    config.terminal = Some("caixa-01".into());
    let engine = Engine::open(config).await;
    let drawer = engine
        .checkout
        .drawer_move(DrawerKind::Abertura, Total::new(10_000).unwrap(), None)
        .await
        .unwrap();
    assert_eq!(drawer.esperado.get(), 10_000);

    // R$ 100,00 paid with R$ 120,00: R$ 20,00 change, approved as it is stored.
    let sale = SaleId::parse("venda-1").unwrap();
    let paid = attempt_of(
        engine
            .checkout
            .pay_cash(sale.clone(), c(10_000), c(12_000), None)
            .await
            .unwrap(),
    );
    assert_eq!(
        (paid.state, paid.metodo),
        (AttemptState::Aprovado, checkout_core::Means::Dinheiro)
    );
    assert_eq!(paid.troco().map(Total::get), Some(2_000));
    // Less than the amount is refused, nothing stored.
    let short = engine
        .checkout
        .pay_cash(SaleId::parse("venda-2").unwrap(), c(5_000), c(4_000), None)
        .await;
    assert!(
        matches!(&short, Err(CoreError::Invalid(m)) if m.contains("faltam R$ 10,00")),
        "{short:?}"
    );
    // A paid sale stays paid: cash again returns the payment, a card is not charged.
    let again = engine
        .checkout
        .pay(sale, c(10_000), CardToken::parse("tok_aprovado").unwrap())
        .await
        .unwrap();
    assert!(matches!(again, PayOutcome::Existing(ref a) if a.id == paid.id));

    // A sangria of more than the drawer holds is refused; a real one is kept with its reason.
    let too_much = engine
        .checkout
        .drawer_move(DrawerKind::Sangria, Total::new(30_000).unwrap(), None)
        .await;
    assert!(
        matches!(too_much, Err(CoreError::Invalid(_))),
        "{too_much:?}"
    );
    engine
        .checkout
        .drawer_move(
            DrawerKind::Sangria,
            Total::new(15_000).unwrap(),
            Some("cofre".into()),
        )
        .await
        .unwrap();
    // A second opening the same day is refused.
    assert!(engine
        .checkout
        .drawer_move(DrawerKind::Abertura, Total::new(1).unwrap(), None)
        .await
        .is_err());
    // R$ 30,00 of the sale given back in cash: from the drawer, at once.
    let back = attempt_of(engine.refund(&paid, Some(3_000)).await);
    assert_eq!(back.state, AttemptState::Aprovado);
    let d = engine.checkout.drawer().await.unwrap();
    assert_eq!(d.esperado.get(), 10_000 + 10_000 - 15_000 - 3_000);

    // Counted R$ 1,00 short: the closing says so, and nothing cash is a mismatch with the server.
    engine
        .checkout
        .drawer_move(DrawerKind::Contagem, Total::new(1_900).unwrap(), None)
        .await
        .unwrap();
    let closing = engine.checkout.close_day(None, false).await.unwrap();
    let kinds: Vec<DiscrepancyKind> = closing.discrepancies.iter().map(|d| d.kind).collect();
    assert_eq!(kinds, [DiscrepancyKind::DrawerDifference]);
    assert!(closing.discrepancies[0].detail.contains("faltam R$ 1,00"));
    let gaveta = closing.gaveta.clone().unwrap();
    assert_eq!(
        (gaveta.esperado.get(), gaveta.diferenca),
        (2_000, Some(-100))
    );
    assert_eq!(closing.por_forma[0].forma, "dinheiro");
    // The closing's CSV carries the drawer and its movements.
    let csv = closing.to_csv();
    for want in [
        "gaveta,esperado,,,,,2000,,",
        "gaveta,contado,,,,,1900,,",
        "gaveta,diferenca,,,,,-100,,",
        "movimento,sangria,,,,,15000,,\"cofre\"",
    ] {
        assert!(csv.contains(want), "{want} in {csv}");
    }
    assert!(
        api.ledger().await.is_empty(),
        "cash never reaches the gateway"
    );
    assert!(api.refund_ledger().await.is_empty());
    // The export carries the cash and its change.
    let csv = String::from_utf8(
        checkout_core::export::to_csv(&engine.checkout.attempts().await.unwrap()).unwrap(),
    )
    .unwrap();
    let header = csv.lines().next().unwrap();
    assert!(
        header.contains("metodo,parcelas,parcelamento,recebido_centavos,troco_centavos"),
        "{header}"
    );
    assert!(
        csv.lines().any(|l| l.contains(",dinheiro,1,,12000,2000,")),
        "{csv}"
    );
}

#[tokio::test]
async fn a_sale_is_paid_by_debit_and_the_rest_in_cash_with_change() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let sale = SaleId::parse("venda-9").unwrap();
    let card = attempt_of(
        engine
            .checkout
            .pay_tender(
                sale.clone(),
                c(15_000),
                c(5_000),
                CardToken::parse("tok_aprovado").unwrap(),
                CardPlan::DEBITO,
            )
            .await
            .unwrap(),
    );
    assert_eq!(
        engine.final_state(&card).await.state,
        AttemptState::Aprovado
    );
    // More cash than what is missing as the tender: refused (the change is on the rest).
    assert!(matches!(
        engine
            .checkout
            .pay_cash(sale.clone(), c(12_000), c(12_000), Some(c(15_000)))
            .await,
        Err(CoreError::TenderExceeds { .. })
    ));
    let cash = attempt_of(
        engine
            .checkout
            .pay_cash(sale.clone(), c(10_000), c(10_500), Some(c(15_000)))
            .await
            .unwrap(),
    );
    // Paid, its receipt shown: the card part is captured.
    engine.checkout.confirm_sale(&sale).await.unwrap();
    assert_eq!(
        settled_capture(&engine, &card).await.captura,
        Some(checkout_core::Capture::Capturada)
    );
    assert_eq!(cash.troco().map(Total::get), Some(500));
    assert_eq!(cash.sale_total.map(Centavos::get), Some(15_000));
    let closing = engine.checkout.close_day(None, false).await.unwrap();
    assert!(
        closing.discrepancies.is_empty(),
        "{:?}",
        closing.discrepancies
    );
    assert_eq!(closing.totals.aprovado.centavos.get(), 15_000);
    assert_eq!(
        api.ledger().await.len(),
        1,
        "only the card tender was charged"
    );
}
