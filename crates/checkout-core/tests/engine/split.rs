//! A sale paid in parts at the till: each tender its own attempt and key, one at a time, never
//! above the sale's total — checked by the till first and by the server for every till.

use crate::helpers::*;
use checkout_core::{
    AttemptState, Capture, CardPlan, CardToken, Centavos, CoreError, PayOutcome, SaleId,
};
use pagar_testkit::{Fault, FaultProxy};
use payment_api::domain::CaptureState;
use std::time::Duration;

async fn tender(
    engine: &Engine,
    sale: &str,
    total: i64,
    valor: i64,
    plan: CardPlan,
) -> checkout_core::Result<PayOutcome> {
    tender_by(engine, sale, total, valor, "tok_aprovado", plan).await
}

async fn tender_by(
    engine: &Engine,
    sale: &str,
    total: i64,
    valor: i64,
    card: &str,
    plan: CardPlan,
) -> checkout_core::Result<PayOutcome> {
    engine
        .checkout
        .pay_tender(
            SaleId::parse(sale).unwrap(),
            Centavos::new(total).unwrap(),
            Centavos::new(valor).unwrap(),
            CardToken::parse(card).unwrap(),
            plan,
        )
        .await
}

#[tokio::test]
async fn a_sale_of_150_is_paid_50_by_debit_and_100_by_credit_and_never_a_centavo_more() {
    let api = Api::start().await;
    let mut config = fast_config(&api.url());
    config.terminal = Some("caixa-01".into());
    let engine = Engine::open(config).await;
    let first = attempt_of(
        tender(&engine, "venda-1", 15_000, 5_000, CardPlan::DEBITO)
            .await
            .unwrap(),
    );
    assert_eq!(first.sale_total.map(Centavos::get), Some(15_000));
    // One tender at a time: while the first is live, asking again returns it.
    let again = tender(&engine, "venda-1", 15_000, 5_000, CardPlan::DEBITO)
        .await
        .unwrap();
    assert!(matches!(again, PayOutcome::Existing(ref a) if a.id == first.id));
    assert_eq!(
        engine.final_state(&first).await.state,
        AttemptState::Aprovado
    );

    // More than what is missing is refused before anything is stored or sent.
    match tender(&engine, "venda-1", 15_000, 12_000, CardPlan::CREDITO).await {
        Err(CoreError::TenderExceeds { falta, .. }) => assert_eq!(falta.get(), 10_000),
        other => panic!("expected TenderExceeds, got {other:?}"),
    }
    // The total does not change after the first tender, and the sale cannot be paid at once.
    assert!(matches!(
        tender(&engine, "venda-1", 20_000, 1_000, CardPlan::CREDITO).await,
        Err(CoreError::Invalid(_))
    ));
    let second = attempt_of(
        tender(&engine, "venda-1", 15_000, 10_000, CardPlan::CREDITO)
            .await
            .unwrap(),
    );
    assert_ne!(second.idempotency_key, first.idempotency_key);
    assert_eq!(
        engine.final_state(&second).await.state,
        AttemptState::Aprovado
    );
    // Paid: a further press returns the last tender, nothing new.
    let paid = tender(&engine, "venda-1", 15_000, 1, CardPlan::CREDITO)
        .await
        .unwrap();
    assert!(matches!(paid, PayOutcome::Existing(ref a) if a.id == second.id));

    // Both tenders are authorizations until the sale is confirmed (its receipt shown): the
    // gateway holds the money, takes none.
    let ledger = api.ledger().await;
    assert_eq!(ledger.len(), 2);
    assert!(ledger
        .iter()
        .all(|r| r.captura == Some(CaptureState::Pendente)));
    let sale = SaleId::parse("venda-1").unwrap();
    let decided = engine.checkout.confirm_sale(&sale).await.unwrap();
    assert_eq!(decided.len(), 2);
    assert!(decided.iter().all(|a| a.captura == Some(Capture::Capturar)));
    for a in [&first, &second] {
        assert_eq!(
            settled_capture(&engine, a).await.captura,
            Some(Capture::Capturada)
        );
    }
    assert!(
        engine
            .checkout
            .confirm_sale(&sale)
            .await
            .unwrap()
            .is_empty(),
        "confirmed twice: nothing new is decided"
    );
    let ledger = api.ledger().await;
    assert!(ledger
        .iter()
        .all(|r| r.captura == Some(CaptureState::Capturada)));
    // The server saw both tenders of one sale, and the closing finds nothing wrong with two
    // approved payments for it.
    let body: serde_json::Value = serde_json::from_slice(
        &engine
            .checkout
            .outbox()
            .request_body(&second.id)
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        body["venda"],
        serde_json::json!({"referencia": "venda-1", "total": 15_000})
    );
    let closing = engine.checkout.close_day(None, false).await.unwrap();
    assert!(
        closing.discrepancies.is_empty(),
        "{:?}",
        closing.discrepancies
    );
    assert_eq!(closing.totals.aprovado.centavos.get(), 15_000);
}

#[tokio::test]
async fn a_second_till_paying_the_same_sale_is_refused_by_the_server_and_charges_nothing() {
    let api = Api::start().await;
    let open = || {
        let mut config = fast_config(&api.url());
        config.terminal = Some("caixa-01".into());
        Engine::open(config)
    };
    let (a, b) = (open().await, open().await);
    let paid = attempt_of(
        tender(&a, "venda-7", 10_000, 8_000, CardPlan::DEBITO)
            .await
            .unwrap(),
    );
    assert_eq!(a.final_state(&paid).await.state, AttemptState::Aprovado);
    // Till B does not know of A's tender: its own check lets R$ 50,00 through, the server's
    // does not (R$ 20,00 missing). Nothing is charged and B's attempt is looked up, not retried.
    let refused = attempt_of(
        tender(&b, "venda-7", 10_000, 5_000, CardPlan::DEBITO)
            .await
            .unwrap(),
    );
    let settled = b
        .checkout
        .wait_final(&refused.id, std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(settled.state, AttemptState::Revisao);
    assert!(
        settled
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("falta R$ 20,00"),
        "{:?}",
        settled.last_error
    );
    assert_eq!(api.ledger().await.len(), 1, "one charge: A's");
}

#[tokio::test]
async fn a_divided_sale_given_up_refunds_every_paid_part_and_cash_from_the_drawer() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let card = attempt_of(
        tender(&engine, "venda-x", 15_000, 5_000, CardPlan::DEBITO)
            .await
            .unwrap(),
    );
    assert_eq!(
        engine.final_state(&card).await.state,
        AttemptState::Aprovado
    );
    let cash = attempt_of(
        engine
            .checkout
            .pay_cash(
                SaleId::parse("venda-x").unwrap(),
                Centavos::new(3_000).unwrap(),
                Centavos::new(3_000).unwrap(),
                Some(Centavos::new(15_000).unwrap()),
            )
            .await
            .unwrap(),
    );
    let sale = SaleId::parse("venda-x").unwrap();
    let refunds = engine.checkout.abandon_sale(&sale).await.unwrap();
    assert_eq!(
        refunds.len(),
        2,
        "the card part undone, the cash given back"
    );
    let undone = refunds
        .iter()
        .find(|r| r.id == card.id)
        .expect("the card part");
    assert_eq!(undone.captura, Some(Capture::Desfazer));
    assert_eq!(
        settled_capture(&engine, &card).await.captura,
        Some(Capture::Desfeita)
    );
    // Asked again: the same refunds, nothing new.
    let again = engine.checkout.abandon_sale(&sale).await.unwrap();
    assert!(again.iter().all(|r| refunds.iter().any(|x| x.id == r.id)));
    for r in refunds.iter().filter(|r| r.is_refund()) {
        assert_eq!(engine.final_state(r).await.state, AttemptState::Aprovado);
    }
    let of_cash = refunds
        .iter()
        .find(|r| r.refund_of.as_ref() == Some(&cash.id))
        .unwrap();
    assert!(of_cash.is_cash());
    assert!(
        api.refund_ledger().await.is_empty(),
        "nothing refunded at the gateway: the card part was never taken, the cash came from the drawer"
    );
    let ledger = api.ledger().await;
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].captura, Some(CaptureState::Desfeita));
    // Nothing of it is left: a further cancel refunds nothing more.
    assert!(engine
        .checkout
        .abandon_sale(&sale)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_till_started_again_undoes_the_authorizations_of_an_unfinished_sale_and_never_captures_them(
) {
    let api = Api::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    let open = || checkout_core::Checkout::open(&db, fast_config(&api.url()));
    let checkout = open().await.unwrap();
    settled_connectivity(&checkout).await;
    let sale = SaleId::parse("venda-r").unwrap();
    let part = attempt_of(
        checkout
            .pay_tender(
                sale.clone(),
                Centavos::new(10_000).unwrap(),
                Centavos::new(4_000).unwrap(),
                CardToken::parse("tok_aprovado").unwrap(),
                CardPlan::DEBITO,
            )
            .await
            .unwrap(),
    );
    let part = checkout
        .wait_final(&part.id, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(
        (part.state, part.captura),
        (AttemptState::Aprovado, Some(Capture::Pendente))
    );
    // The sale is not finished: it cannot be confirmed, so nothing is captured.
    assert!(matches!(
        checkout.confirm_sale(&sale).await,
        Err(CoreError::Invalid(_))
    ));
    checkout.shutdown().await;

    // Started again, the till finds an authorization nobody confirmed: it is undone.
    let engine = Engine {
        checkout: open().await.unwrap(),
        db: db.clone(),
        _dir: dir,
    };
    let undone = settled_capture(&engine, &part).await;
    assert_eq!(undone.captura, Some(Capture::Desfeita));
    assert!(!undone.pays());
    let ledger = api.ledger().await;
    assert_eq!(ledger[0].captura, Some(CaptureState::Desfeita));
    // The sale is open again with its whole total missing: another card pays it.
    let again = attempt_of(
        tender(&engine, "venda-r", 10_000, 10_000, CardPlan::CREDITO)
            .await
            .unwrap(),
    );
    assert_eq!(
        engine.final_state(&again).await.state,
        AttemptState::Aprovado
    );
    engine.checkout.confirm_sale(&sale).await.unwrap();
    assert_eq!(
        settled_capture(&engine, &again).await.captura,
        Some(Capture::Capturada)
    );
    let taken: i64 = api
        .ledger()
        .await
        .iter()
        .filter(|r| r.takes_money())
        .map(|r| r.valor.get())
        .sum();
    assert_eq!(taken, 10_000, "the customer paid the total once");
}

#[tokio::test]
async fn the_closing_lists_an_authorization_left_open_and_counts_an_undone_one_as_nothing_taken() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let open = attempt_of(
        tender(&engine, "venda-a", 9_000, 3_000, CardPlan::DEBITO)
            .await
            .unwrap(),
    );
    assert_eq!(
        engine.final_state(&open).await.state,
        AttemptState::Aprovado
    );
    let given_up = attempt_of(
        tender(&engine, "venda-b", 5_000, 2_000, CardPlan::DEBITO)
            .await
            .unwrap(),
    );
    assert_eq!(
        engine.final_state(&given_up).await.state,
        AttemptState::Aprovado
    );
    engine
        .checkout
        .abandon_sale(&SaleId::parse("venda-b").unwrap())
        .await
        .unwrap();
    settled_capture(&engine, &given_up).await;

    let closing = engine.checkout.close_day(None, false).await.unwrap();
    let open_ones: Vec<_> = closing
        .discrepancies
        .iter()
        .filter(|d| d.kind == checkout_core::DiscrepancyKind::AuthorizationOpen)
        .collect();
    assert_eq!(open_ones.len(), 1, "{:?}", closing.discrepancies);
    assert_eq!(open_ones[0].attempt_id.as_deref(), Some(open.id.as_ref()));
    assert!(
        open_ones[0].detail.contains("R$ 30,00"),
        "{}",
        open_ones[0].detail
    );
    assert_eq!(closing.totals.desfeito.centavos.get(), 2_000);
    assert_eq!(closing.totals.aprovado.centavos.get(), 3_000);
}

#[tokio::test]
async fn with_confirmation_after_the_receipt_a_sale_paid_at_once_is_authorized_captured_on_confirm_and_undone_by_a_restart(
) {
    let api = Api::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    let config = || {
        let mut c = fast_config(&api.url());
        c.confirm_after_receipt = true;
        c
    };
    let engine = Engine {
        checkout: checkout_core::Checkout::open(&db, config()).await.unwrap(),
        db: db.clone(),
        _dir: tempfile::tempdir().unwrap(),
    };
    settled_connectivity(&engine.checkout).await;
    let paid = engine
        .final_state(&engine.pay("venda-c", 2_500, "tok_aprovado").await)
        .await;
    assert_eq!(
        (paid.state, paid.captura),
        (AttemptState::Aprovado, Some(Capture::Pendente))
    );
    assert_eq!(api.ledger().await[0].captura, Some(CaptureState::Pendente));
    let sale = SaleId::parse("venda-c").unwrap();
    assert_eq!(engine.checkout.confirm_sale(&sale).await.unwrap().len(), 1);
    assert_eq!(
        settled_capture(&engine, &paid).await.captura,
        Some(Capture::Capturada)
    );

    // Another sale approved, and the till stops before its receipt was confirmed.
    let left = engine
        .final_state(&engine.pay("venda-d", 4_000, "tok_aprovado").await)
        .await;
    assert_eq!(left.captura, Some(Capture::Pendente));
    engine.checkout.shutdown().await;
    let engine = Engine {
        checkout: checkout_core::Checkout::open(&db, config()).await.unwrap(),
        db: db.clone(),
        _dir: dir,
    };
    let undone = settled_capture(&engine, &left).await;
    assert_eq!(
        (undone.captura, undone.captura_por),
        (Some(Capture::Desfeita), Some("reinicio"))
    );
    // The sale is charged again with a new key: the undone authorization no longer blocks it.
    let again = engine.pay("venda-d", 4_000, "tok_aprovado").await;
    assert_ne!(again.id, left.id);
    assert_ne!(again.idempotency_key, left.idempotency_key);
    assert_eq!(
        engine.final_state(&again).await.state,
        AttemptState::Aprovado
    );
    let taken: Vec<i64> = api
        .ledger()
        .await
        .iter()
        .filter(|r| r.takes_money())
        .map(|r| r.valor.get())
        .collect();
    assert_eq!(
        taken,
        [2_500, 4_000],
        "the undone authorization took nothing"
    );
}

/// A tender's answer lost on the way (the gateway slower than the till's timeout, then a
/// middlebox's 403 on the retry) puts it in review; the look-up that settles it finds an
/// authorization, and the till holds it as one: the sale's confirmation captures it with the
/// rest, never leaving money held on the customer's card.
#[tokio::test]
async fn a_tender_settled_from_review_is_held_as_an_authorization_and_captured_on_confirm() {
    // Arrange
    let api = Api::start_with(|c| c.slow_gateway_ms = 2_000).await;
    let proxy = FaultProxy::start(api.addr).await;
    let mut config = fast_config(&proxy.url());
    config.request_timeout = Duration::from_millis(800);
    let engine = Engine::open(config).await;
    let sale = SaleId::parse("venda-revisao").unwrap();
    let first = attempt_of(
        tender_by(
            &engine,
            "venda-revisao",
            15_000,
            5_000,
            "tok_lento",
            CardPlan::DEBITO,
        )
        .await
        .unwrap(),
    );
    let tried = attempt_until(&engine, &first, Duration::from_secs(5), |a| a.tries > 0).await;
    assert!(
        tried.is_ok(),
        "the first try timed out at the till: {tried:?}"
    );
    proxy.set(Fault::RejectNextPost(403)).await;

    // Act: the review's look-up finds the authorization once the gateway answers.
    let settled = attempt_until(&engine, &first, Duration::from_secs(15), |a| {
        a.state == AttemptState::Aprovado
    })
    .await
    .unwrap_or_else(|now| panic!("settled from review: {now:?}"));
    assert!(
        settled.review_checked_at.is_some(),
        "it went through review: {settled:?}"
    );

    // Assert: held like any authorization answered in time, and captured with the rest.
    assert_eq!(settled.captura, Some(Capture::Pendente), "{settled:?}");
    let rest = attempt_of(
        tender(&engine, "venda-revisao", 15_000, 10_000, CardPlan::CREDITO)
            .await
            .unwrap(),
    );
    assert_eq!(
        engine.final_state(&rest).await.state,
        AttemptState::Aprovado
    );
    let decided = engine.checkout.confirm_sale(&sale).await.unwrap();
    assert_eq!(decided.len(), 2, "both tenders decided: {decided:?}");
    for a in [&first, &rest] {
        assert_eq!(
            settled_capture(&engine, a).await.captura,
            Some(Capture::Capturada)
        );
    }
    let ledger = api.ledger().await;
    assert_eq!(ledger.len(), 2);
    assert!(
        ledger
            .iter()
            .all(|r| r.captura == Some(CaptureState::Capturada)),
        "nothing left held: {ledger:?}"
    );
}
