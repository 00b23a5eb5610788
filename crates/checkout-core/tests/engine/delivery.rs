use crate::helpers::*;
use checkout_core::{AttemptState, PayOutcome};
use pagar_testkit::{Fault, FaultProxy};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn pay_is_approved_and_the_ledger_has_one_charge_for_it() {
    // Arrange
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    // Act
    let attempt = engine.pay("venda-1", 1_234, "tok_aprovado").await;
    let done = engine.final_state(&attempt).await;
    // Assert
    assert_eq!(attempt.state, AttemptState::Pendente);
    assert_eq!(done.state, AttemptState::Aprovado);
    assert_eq!(done.response_status, Some(201));
    assert_eq!(done.idempotency_key, attempt.idempotency_key);
    let ledger = api.ledger().await;
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].valor.get(), 1_234);
    let body: serde_json::Value = serde_json::from_slice(
        &engine
            .checkout
            .outbox()
            .request_body(&attempt.id)
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        body["referencia"],
        attempt.id.as_ref(),
        "the attempt id travels as referencia"
    );
    assert_eq!(engine.checkout.queue().await.unwrap().count, 0);
}

#[tokio::test]
async fn a_response_lost_after_the_charge_is_replayed_with_the_same_key_and_payment() {
    let api = Api::start().await;
    api.set_faults(json!({"drop_response_probability": 1.0}))
        .await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let attempt = engine.pay("venda-2", 500, "tok_aprovado").await;
    // The server charges and commits, then cuts the connection: the client retries with the key.
    tokio::time::timeout(Duration::from_secs(10), async {
        while api.requests("first").await == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    api.set_faults(json!({})).await;
    let done = engine.final_state(&attempt).await;
    assert_eq!(done.state, AttemptState::Aprovado);
    assert!(done.tries >= 2, "the first answer was lost");
    let ledger = api.ledger().await;
    assert_eq!(ledger.len(), 1);
    let by_key = api
        .get_json(&format!(
            "/pagamentos?idempotency_key={}",
            attempt.idempotency_key
        ))
        .await;
    assert_eq!(
        by_key["pagamentos"][0]["id"],
        done.payment_id.unwrap().as_str()
    );
    assert!(api.requests("replay").await >= 1);
}

#[tokio::test]
async fn a_connection_cut_after_the_request_is_replayed_with_one_charge() {
    // Arrange: a proxy of our own cuts every connection the moment the server answers.
    let api = Api::start().await;
    let proxy = FaultProxy::start(api.addr).await;
    let engine = Engine::open(fast_config(&proxy.url())).await;
    proxy.set(Fault::CutAfterAnswer).await;
    // Act: the server charges and commits; the client hears nothing and retries with the key.
    let attempt = engine.pay("venda-3", 990, "tok_aprovado").await;
    tokio::time::timeout(Duration::from_secs(10), async {
        while api.requests("first").await == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    proxy.set(Fault::Pass).await;
    // Assert
    let done = engine.final_state(&attempt).await;
    assert_eq!(done.state, AttemptState::Aprovado);
    assert!(done.tries >= 2);
    assert_eq!(api.ledger().await.len(), 1);
    assert_eq!(api.requests("first").await, 1);
    assert!(
        api.requests("replay").await >= 1,
        "the retry was answered from the stored response"
    );
}

#[tokio::test]
async fn a_hundred_concurrent_pays_for_one_sale_make_one_attempt_one_key_one_charge() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let pays = (0..100).map(|_| engine.pay_outcome("venda-4", 700, "tok_aprovado"));
    let outcomes = futures::future::join_all(pays).await;
    let created = outcomes
        .iter()
        .filter(|o| matches!(o, PayOutcome::Created(_)))
        .count();
    assert_eq!(created, 1);
    let keys: std::collections::HashSet<_> = outcomes
        .iter()
        .map(|o| match o {
            PayOutcome::Created(a) | PayOutcome::Existing(a) => a.idempotency_key.clone(),
        })
        .collect();
    assert_eq!(keys.len(), 1);
    let attempts = engine.checkout.attempts().await.unwrap();
    assert_eq!(attempts.len(), 1);
    engine.final_state(&attempts[0]).await;
    assert_eq!(api.ledger().await.len(), 1);
    // Paying the approved sale again returns the approved attempt, never a new charge.
    let again = engine.pay_outcome("venda-4", 700, "tok_aprovado").await;
    assert!(matches!(again, PayOutcome::Existing(a) if a.state == AttemptState::Aprovado));
    assert_eq!(api.ledger().await.len(), 1);
}

#[tokio::test]
async fn a_decline_is_final_and_the_sale_may_then_be_paid_with_a_new_key() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let declined = engine.pay("venda-5", 300, "tok_saldo_insuficiente").await;
    let declined = engine.final_state(&declined).await;
    assert_eq!(declined.state, AttemptState::Recusado);
    assert_eq!(declined.motivo.as_deref(), Some("saldo_insuficiente"));
    let second = engine.pay_outcome("venda-5", 300, "tok_aprovado").await;
    let PayOutcome::Created(second) = second else {
        panic!("a new attempt after a decline")
    };
    assert_ne!(second.idempotency_key, declined.idempotency_key);
    assert_eq!(
        engine.final_state(&second).await.state,
        AttemptState::Aprovado
    );
    let ledger = api.ledger().await;
    assert_eq!(ledger.len(), 2);
    assert_eq!(
        ledger
            .iter()
            .filter(|r| r.status.as_str() == "aprovado")
            .count(),
        1
    );
}

#[tokio::test]
async fn a_slow_attempt_does_not_hold_up_the_ones_behind_it() {
    let api = Api::start_with(|c| c.slow_gateway_ms = 2_000).await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let slow = engine.pay("venda-lenta", 100, "tok_lento").await;
    let quick: Vec<_> = futures::future::join_all((0..5).map(|i| {
        let engine = &engine;
        async move {
            engine
                .pay(&format!("venda-rapida-{i}"), 100, "tok_aprovado")
                .await
        }
    }))
    .await;
    for q in &quick {
        assert_eq!(engine.final_state(q).await.state, AttemptState::Aprovado);
    }
    assert_eq!(
        engine.checkout.attempt(&slow.id).await.unwrap().state,
        AttemptState::Pendente,
        "the quick ones finished while the slow one was still at the gateway"
    );
    assert_eq!(
        engine.final_state(&slow).await.state,
        AttemptState::Aprovado
    );
    assert_eq!(api.ledger().await.len(), 6);
}

#[tokio::test]
async fn a_timed_out_request_is_retried_with_the_same_key_and_honours_409_retry_after() {
    // Arrange: the gateway takes 2.5 s, the client gives up after 1 s and retries.
    let api = Api::start_with(|c| {
        c.slow_gateway_ms = 2_500;
        c.lease_ms = 3_000;
    })
    .await;
    let mut config = fast_config(&api.url());
    config.request_timeout = Duration::from_secs(1);
    let engine = Engine::open(config).await;
    let mut events = engine.checkout.subscribe();
    // Act
    let attempt = engine.pay("venda-6", 100, "tok_lento").await;
    let retried = wait_event(&mut events, |e| {
        matches!(e, checkout_core::Event::AttemptChanged { attempt: a } if a.tries >= 2 && a.state == AttemptState::Pendente)
    })
    .await;
    // Assert: the second try met the first still executing: 409 with Retry-After ≥ 1 s.
    let checkout_core::Event::AttemptChanged { attempt: pending } = retried else {
        unreachable!()
    };
    assert!(
        pending.last_error.as_deref().unwrap_or("").contains("409"),
        "{pending:?}"
    );
    assert!(
        pending.next_try_at - pending.last_tried_at.unwrap() >= 1_000,
        "waited at least Retry-After"
    );
    let done = engine.final_state(&attempt).await;
    assert_eq!(done.state, AttemptState::Aprovado);
    assert_eq!(done.idempotency_key, attempt.idempotency_key);
    assert_eq!(api.ledger().await.len(), 1);
}

#[tokio::test]
async fn an_attempt_a_clock_running_ahead_put_off_is_sent_once_the_clock_is_set_right() {
    // Arrange: the server answers 503 (the engine stays online and retries); the attempt's next
    // try is put two hours off, as a till whose clock ran ahead leaves it once the clock is set
    // right while the app runs.
    let api = Api::start().await;
    api.set_faults(json!({"error_5xx_probability": 1.0})).await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let attempt = engine.pay("venda-relogio", 500, "tok_aprovado").await;
    attempt_until(&engine, &attempt, Duration::from_secs(10), |a| a.tries >= 1)
        .await
        .unwrap();
    let outbox = rusqlite::Connection::open(&engine.db).unwrap();
    outbox.busy_timeout(Duration::from_secs(5)).unwrap();
    // (tries, whether the next try is more than an hour off)
    let row = |c: &rusqlite::Connection| -> (i64, bool) {
        c.query_row(
            "SELECT tries, next_try_at > CAST(strftime('%s', 'now') AS INTEGER) * 1000 + 3600000
               FROM attempts WHERE id = ?1",
            [attempt.id.as_ref()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    // A try in flight when the row is moved writes its own next try over it (it counts a try):
    // move it again until it stays moved with no try in between.
    let mut moved = false;
    for _ in 0..50 {
        let (before, _) = row(&outbox);
        outbox
            .execute(
                "UPDATE attempts SET next_try_at = next_try_at + 7200000 WHERE id = ?1",
                [attempt.id.as_ref()],
            )
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        if row(&outbox) == (before, true) {
            moved = true;
            break;
        }
    }
    api.set_faults(json!({})).await;
    // Act
    let done = attempt_until(&engine, &attempt, Duration::from_secs(10), |a| {
        a.state == AttemptState::Aprovado
    })
    .await;
    // Assert: sent in seconds, not in two hours; charged once.
    assert!(moved, "the attempt's next try was never two hours off");
    assert!(done.is_ok(), "{done:?}");
    assert_eq!(api.ledger().await.len(), 1);
}
