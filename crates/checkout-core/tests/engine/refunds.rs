//! Refunds (estornos) through the real payment API: an attempt like a payment, written ahead,
//! retried with the same key, queued while offline, replayed after a restart, looked up when
//! refused. Counted in the gateway's refund ledger.

use crate::helpers::*;
use checkout_core::{AttemptKind, AttemptState, Checkout, CoreError, PayOutcome};
use serde_json::json;

fn created(outcome: PayOutcome) -> checkout_core::Attempt {
    match outcome {
        PayOutcome::Created(a) => a,
        PayOutcome::Existing(a) => panic!("expected a new refund attempt, got {a:?}"),
    }
}

/// The ledger's refunds as `(valor, status)`.
async fn refunds(api: &Api) -> Vec<(i64, String)> {
    api.refund_ledger()
        .await
        .iter()
        .map(|r| (r.valor.get(), r.status.as_str().to_string()))
        .collect()
}

#[tokio::test]
async fn part_then_the_rest_is_refunded_once_each_and_nothing_more_can_be() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let sale = engine.pay("venda-e1", 10_000, "tok_aprovado").await;
    let sale = engine.final_state(&sale).await;
    assert_eq!(sale.state, AttemptState::Aprovado);

    let part = created(engine.refund(&sale, Some(3_000)).await);
    assert_eq!(part.kind, AttemptKind::Estorno);
    assert_eq!(part.refund_of.as_ref(), Some(&sale.id));
    assert_eq!(part.sale_id, sale.sale_id);
    let body: serde_json::Value = serde_json::from_slice(
        &engine
            .checkout
            .outbox()
            .request_body(&part.id)
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        body,
        json!({"valor": 3_000, "referencia": part.id.as_ref(), "motivo": "devolução"})
    );
    let part = engine.final_state(&part).await;
    assert_eq!(part.state, AttemptState::Aprovado, "{part:?}");
    assert!(part.payment_id.as_deref().unwrap().starts_with("est_"));

    // "The rest": what is left, as the till knows it.
    let rest = engine
        .final_state(&created(engine.refund(&sale, None).await))
        .await;
    assert_eq!(
        (rest.state, rest.valor.get()),
        (AttemptState::Aprovado, 7_000)
    );

    assert!(matches!(
        engine.checkout.refund(&sale.id, None, None).await,
        Err(CoreError::NothingToRefund)
    ));
    assert_eq!(
        refunds(&api).await,
        [(3_000, "aprovado".into()), (7_000, "aprovado".into())]
    );
    assert_eq!(engine.checkout.refunds_of(&sale.id).await.unwrap().len(), 2);
    // The payment itself is untouched, and the sale is not blocked for payments by its refunds.
    assert_eq!(
        engine.checkout.attempt(&sale.id).await.unwrap().state,
        AttemptState::Aprovado
    );
    engine.checkout.shutdown().await;
}

#[tokio::test]
async fn a_refund_that_is_not_approved_or_too_large_is_refused_and_nothing_is_stored() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let declined = engine
        .final_state(&engine.pay("venda-e2", 5_000, "tok_recusado").await)
        .await;
    assert!(matches!(
        engine.checkout.refund(&declined.id, None, None).await,
        Err(CoreError::Invalid(m)) if m.contains("só um pagamento aprovado")
    ));
    let sale = engine
        .final_state(&engine.pay("venda-e3", 5_000, "tok_aprovado").await)
        .await;
    let too_much = engine
        .checkout
        .refund(
            &sale.id,
            Some(checkout_core::Centavos::new(5_001).unwrap()),
            None,
        )
        .await;
    match too_much {
        Err(e @ CoreError::RefundExceeds { asked, left })
            if asked.get() == 5_001 && left.get() == 5_000 =>
        {
            assert!(e.to_string().contains("R$ 50,00"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // A refund cannot itself be refunded.
    let r = engine
        .final_state(&created(engine.refund(&sale, Some(100)).await))
        .await;
    assert!(matches!(
        engine.checkout.refund(&r.id, None, None).await,
        Err(CoreError::Invalid(_))
    ));
    let stored = engine.checkout.attempts().await.unwrap();
    assert_eq!(
        stored
            .iter()
            .filter(|a| a.kind == AttemptKind::Estorno)
            .count(),
        1
    );
    assert_eq!(refunds(&api).await.len(), 1);
    engine.checkout.shutdown().await;
}

#[tokio::test]
async fn offline_a_refund_waits_counted_apart_pressing_again_returns_it_and_it_drains_once() {
    let mut api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let sale = engine
        .final_state(&engine.pay("venda-e4", 8_000, "tok_aprovado").await)
        .await;
    api.down().await;
    let waiting = engine.pay("venda-e5", 1_500, "tok_aprovado").await;
    let refund = created(engine.refund(&sale, Some(2_000)).await);
    // "Estornar" again while it is undecided: the same attempt, no second key.
    match engine.refund(&sale, Some(2_000)).await {
        PayOutcome::Existing(a) => assert_eq!(a.idempotency_key, refund.idempotency_key),
        other => panic!("{other:?}"),
    }
    let queue = engine.checkout.queue().await.unwrap();
    assert_eq!(
        (
            queue.count,
            queue.total.get(),
            queue.refund_count,
            queue.refund_total.get()
        ),
        (1, 1_500, 1, 2_000),
        "the banner counts refunds apart"
    );
    api.up().await;
    assert_eq!(
        engine.final_state(&refund).await.state,
        AttemptState::Aprovado
    );
    assert_eq!(
        engine.final_state(&waiting).await.state,
        AttemptState::Aprovado
    );
    assert_eq!(refunds(&api).await, [(2_000, "aprovado".into())]);
    let queue = engine.checkout.queue().await.unwrap();
    assert_eq!(
        (queue.count, queue.refund_count, queue.refund_total.get()),
        (0, 0, 0)
    );
    engine.checkout.shutdown().await;
}

#[tokio::test]
async fn a_refund_whose_answers_are_lost_is_paid_back_once() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let sale = engine
        .final_state(&engine.pay("venda-e6", 6_000, "tok_aprovado").await)
        .await;
    // The server refunds, commits, and cuts the connection before answering: the engine hears
    // nothing and retries with the same key, which the server answers from what it stored.
    api.set_faults(json!({"drop_response_probability": 1.0}))
        .await;
    let refund = created(engine.refund(&sale, Some(6_000)).await);
    let done = engine.final_state(&refund).await;
    assert_eq!(done.state, AttemptState::Aprovado);
    assert!(done.tries >= 2, "the first answer was lost: {done:?}");
    api.set_faults(json!({})).await;
    assert_eq!(
        refunds(&api).await,
        [(6_000, "aprovado".into())],
        "paid back once"
    );
    engine.checkout.shutdown().await;
}

#[tokio::test]
async fn a_declined_refund_is_final_with_its_reason_and_may_be_asked_again() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let sale = engine
        .final_state(&engine.pay("venda-e7", 4_000, "tok_estorno_recusado").await)
        .await;
    assert_eq!(sale.state, AttemptState::Aprovado);
    let first = engine
        .final_state(&created(engine.refund(&sale, None).await))
        .await;
    assert_eq!(first.state, AttemptState::Recusado);
    assert_eq!(first.motivo.as_deref(), Some("estorno_recusado"));
    // A declined refund gives nothing back, so the whole amount may be asked again (new key).
    let second = created(engine.refund(&sale, None).await);
    assert_ne!(second.idempotency_key, first.idempotency_key);
    assert_eq!(second.valor.get(), 4_000);
    engine.final_state(&second).await;
    assert_eq!(
        refunds(&api).await,
        [(4_000, "recusado".into()), (4_000, "recusado".into())]
    );
    engine.checkout.shutdown().await;
}

#[tokio::test]
async fn a_refund_the_server_refuses_goes_to_review_after_a_lookup_finds_none() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let sale = engine
        .final_state(&engine.pay("venda-e8", 3_000, "tok_aprovado").await)
        .await;
    // Someone refunds part of it outside this till: the till still thinks R$ 30,00 are left.
    let payment = sale.payment_id.clone().unwrap();
    let res = reqwest::Client::new()
        .post(format!("{}/pagamentos/{payment}/estornos", api.url()))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", "fora-do-caixa")
        .json(&json!({"valor": 1_000}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let refund = created(engine.refund(&sale, None).await);
    let reviewed = engine.final_state(&refund).await;
    assert_eq!(reviewed.state, AttemptState::Revisao);
    assert!(
        reviewed.review_checked_at.is_some(),
        "looked up among the payment's refunds and not found"
    );
    assert!(
        reviewed.last_error.as_deref().unwrap().contains("R$ 20,00"),
        "{reviewed:?}"
    );
    // Checked: a new refund of what is really left may be made.
    let right = engine
        .checkout
        .refund(
            &sale.id,
            Some(checkout_core::Centavos::new(2_000).unwrap()),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        engine.final_state(right.attempt()).await.state,
        AttemptState::Aprovado
    );
    assert_eq!(
        refunds(&api).await,
        [(1_000, "aprovado".into()), (2_000, "aprovado".into())]
    );
    engine.checkout.shutdown().await;
}

#[tokio::test]
async fn a_refund_pending_when_the_engine_stops_is_completed_once_by_the_next_one() {
    let mut api = Api::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    let checkout = Checkout::open(&db, fast_config(&api.url())).await.unwrap();
    settled_connectivity(&checkout).await;
    let sale = checkout
        .pay(
            checkout_core::SaleId::parse("venda-e9").unwrap(),
            checkout_core::Centavos::new(9_000).unwrap(),
            checkout_core::CardToken::parse("tok_aprovado").unwrap(),
        )
        .await
        .unwrap();
    let sale = checkout
        .wait_final(&sale.attempt().id, std::time::Duration::from_secs(20))
        .await
        .unwrap();
    api.down().await;
    let refund = checkout
        .refund(
            &sale.id,
            Some(checkout_core::Centavos::new(4_500).unwrap()),
            None,
        )
        .await
        .unwrap()
        .attempt()
        .clone();
    checkout.shutdown().await;
    api.up().await;
    let again = Checkout::open(&db, fast_config(&api.url())).await.unwrap();
    let done = again
        .wait_final(&refund.id, std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done.state, AttemptState::Aprovado);
    assert_eq!(done.idempotency_key, refund.idempotency_key);
    assert_eq!(refunds(&api).await, [(4_500, "aprovado".into())]);
    again.shutdown().await;
}

#[tokio::test]
async fn the_closing_totals_refunds_apart_and_reconciles_them_with_the_server() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let sale = engine
        .final_state(&engine.pay("venda-e10", 10_000, "tok_aprovado").await)
        .await;
    engine
        .final_state(&created(engine.refund(&sale, Some(2_500)).await))
        .await;
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
        (1, 10_000)
    );
    assert_eq!(
        (
            closing.refunds.aprovado.count,
            closing.refunds.aprovado.centavos.get()
        ),
        (1, 2_500)
    );
    assert_eq!(closing.net_centavos.get(), 7_500);
    assert_eq!((closing.sales, closing.server_refunds), (1, 1));
    engine.checkout.shutdown().await;
}
