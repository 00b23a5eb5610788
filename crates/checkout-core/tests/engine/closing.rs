//! Closing the till against the real API: numbered sales, the day reconciled by `referencia`
//! through the server's range listing, and discrepancies made on purpose through the API.

use crate::helpers::*;
use checkout_core::{AttemptState, CoreError, DiscrepancyKind};
use serde_json::json;

fn till_config(url: &str) -> checkout_core::Config {
    let mut c = fast_config(url);
    c.terminal = Some("caixa-01".into());
    c
}

#[tokio::test]
async fn sales_are_numbered_per_day_and_a_day_that_agrees_closes_clean() {
    let api = Api::start().await;
    let engine = Engine::open(till_config(&api.url())).await;
    let a1 = engine.pay("venda-a", 1_000, "tok_aprovado").await;
    let declined = engine.pay("venda-b", 500, "tok_recusado").await;
    engine.final_state(&a1).await;
    assert_eq!(
        engine.final_state(&declined).await.state,
        AttemptState::Recusado
    );
    let a2 = engine.pay("venda-b", 500, "tok_aprovado").await;
    engine.final_state(&a2).await;
    let all = engine.checkout.attempts().await.unwrap();
    let numbers: Vec<Option<u32>> = all.iter().map(|a| a.sale_number).collect();
    assert_eq!(
        numbers,
        [Some(1), Some(2), Some(2)],
        "a retry keeps its sale's number"
    );

    let body: serde_json::Value = serde_json::from_slice(
        &engine
            .checkout
            .outbox()
            .request_body(&a2.id)
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(body["terminal"], "caixa-01");
    assert!(body["descricao"]
        .as_str()
        .unwrap()
        .starts_with("Venda nº 0002"));

    let closing = engine.checkout.close_day(None, false).await.unwrap();
    assert!(
        closing.discrepancies.is_empty(),
        "{:?}",
        closing.discrepancies
    );
    assert_eq!(
        (
            closing.totals.aprovado.count,
            closing.totals.aprovado.centavos.get()
        ),
        (2, 1_500)
    );
    assert_eq!(
        (
            closing.totals.recusado.count,
            closing.totals.recusado.centavos.get()
        ),
        (1, 500)
    );
    assert_eq!(closing.sales, 2);
    assert_eq!(closing.server_payments, 3);
    let kept = engine
        .checkout
        .outbox()
        .closing(&closing.day)
        .await
        .unwrap();
    assert!(kept.is_some(), "the closing is kept in the outbox");
}

#[tokio::test]
async fn a_second_charge_and_a_stranger_on_the_server_are_found_and_pending_blocks_closing() {
    let api = Api::start().await;
    let engine = Engine::open(till_config(&api.url())).await;
    let a1 = engine.pay("venda-a", 1_000, "tok_aprovado").await;
    engine.final_state(&a1).await;
    // Planted through the API: a second charge for the same attempt's sale (same referencia, a
    // new key), and a payment sent as this till that the till never made.
    let client = reqwest::Client::new();
    for (key, body) in [
        (
            "plantada-1",
            json!({"valor": 1_000, "cartao": "tok_aprovado", "referencia": a1.id.as_ref(), "terminal": "caixa-01"}),
        ),
        (
            "plantada-2",
            json!({"valor": 777, "cartao": "tok_aprovado", "referencia": "att_desconhecida", "terminal": "caixa-01"}),
        ),
    ] {
        let res = client
            .post(format!("{}/pagamentos", api.url()))
            .bearer_auth(API_KEY)
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
    }
    let closing = engine.checkout.close_day(None, false).await.unwrap();
    let kinds: Vec<DiscrepancyKind> = closing.discrepancies.iter().map(|d| d.kind).collect();
    assert_eq!(
        kinds,
        [
            DiscrepancyKind::TwoChargesForOneSale,
            DiscrepancyKind::UnknownOnServer
        ]
    );
    assert_eq!(closing.discrepancies[0].venda.as_deref(), Some("0001"));
    assert_eq!(
        closing.discrepancies[0].server_centavos.map(|t| t.get()),
        Some(2_000)
    );

    // A payment that cannot reach the server: closing waits for it, or lists it when asked.
    let mut api = api;
    api.down().await;
    let _pending = engine.pay("venda-c", 300, "tok_aprovado").await;
    match engine.checkout.close_day(None, false).await {
        Err(CoreError::PendingAtClose {
            count: 1,
            total,
            refunds: 0,
        }) if total.get() == 300 => {}
        other => panic!("closing with a pending payment: {other:?}"),
    }
    match engine.checkout.close_day(None, true).await {
        Err(CoreError::Unreachable(_)) => {}
        other => panic!("closing needs the server: {other:?}"),
    }
    api.up().await;
    engine.checkout.shutdown().await;
}

/// A refund of one of today's payments made outside this till (through the API) is fetched,
/// listed as made elsewhere, and taken off the net.
#[tokio::test]
async fn a_refund_made_elsewhere_of_todays_payment_is_listed_and_taken_off_the_net() {
    // Arrange: a sale paid here, then part of it refunded by someone else through the API.
    let api = Api::start().await;
    let engine = Engine::open(till_config(&api.url())).await;
    let paid = engine
        .final_state(&engine.pay("venda-e", 10_000, "tok_aprovado").await)
        .await;
    let payment = paid.payment_id.clone().unwrap();
    let res = reqwest::Client::new()
        .post(format!("{}/pagamentos/{payment}/estornos", api.url()))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", "estorno-no-balcao-ao-lado")
        .json(&json!({"valor": 2_500, "referencia": "outro-sistema-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);

    // Act
    let closing = engine.checkout.close_day(None, false).await.unwrap();

    // Assert
    let kinds: Vec<_> = closing.discrepancies.iter().map(|d| d.kind).collect();
    assert_eq!(kinds, [DiscrepancyKind::UnknownOnServer]);
    assert!(closing.discrepancies[0]
        .detail
        .contains("feito fora deste caixa"));
    assert_eq!(
        (
            closing.refunds_elsewhere.count,
            closing.refunds_elsewhere.centavos.get()
        ),
        (1, 2_500)
    );
    assert_eq!(
        closing.net_centavos.get(),
        7_500,
        "the net counts the refund made elsewhere"
    );
}
