use crate::helpers::*;
use checkout_core::{AttemptState, Connectivity, Event};
use serde_json::json;
use std::time::Duration;

/// With `fault` on, the server refuses every try with `status` and `Retry-After: retry_after_ms`;
/// the attempt stays pending, waits that long, and completes with its key once the fault is off.
async fn assert_waited_out(fault: serde_json::Value, status: &str, retry_after_ms: i64) {
    let api = Api::start().await;
    api.set_faults(fault).await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let mut events = engine.checkout.subscribe();
    let attempt = engine.pay("venda-f1", 100, "tok_aprovado").await;
    let Event::AttemptChanged { attempt: pending } = wait_event(
        &mut events,
        |e| matches!(e, Event::AttemptChanged { attempt } if attempt.tries == 1),
    )
    .await
    else {
        unreachable!()
    };
    assert_eq!(pending.state, AttemptState::Pendente);
    assert!(
        pending.last_error.as_deref().unwrap().contains(status),
        "{pending:?}"
    );
    assert!(
        pending.next_try_at - pending.last_tried_at.unwrap() >= retry_after_ms,
        "Retry-After honoured"
    );
    assert_eq!(
        engine.checkout.connectivity(),
        Connectivity::Online,
        "a refusal is an answer: the server is reachable"
    );
    assert_eq!(
        api.requests("rejected").await,
        1,
        "not retried before Retry-After"
    );
    api.set_faults(json!({})).await;
    let done = engine.final_state(&attempt).await;
    assert_eq!(done.state, AttemptState::Aprovado);
    assert_eq!(done.idempotency_key, attempt.idempotency_key);
    assert_eq!(api.ledger().await.len(), 1);
}

#[tokio::test]
async fn a_503_with_retry_after_is_waited_out_and_retried_with_the_same_key() {
    assert_waited_out(json!({"error_5xx_probability": 1.0}), "503", 1_000).await;
}

#[tokio::test]
async fn a_429_with_retry_after_is_waited_out_and_retried_with_the_same_key() {
    assert_waited_out(json!({"rate_limit_probability": 1.0}), "429", 2_000).await;
}

#[tokio::test]
async fn a_422_puts_the_attempt_in_review_and_it_is_never_sent_with_another_key() {
    // Arrange: the server is down while the attempt is stored, so its key is known before any
    // try; someone else then uses that key with another body.
    let mut api = Api::start().await;
    api.down().await;
    let mut config = fast_config(&api.url());
    config.probe_interval = Duration::from_millis(1_500); // the foreign request goes first
    let engine = Engine::open(config).await;
    assert_eq!(engine.checkout.connectivity(), Connectivity::Offline);
    let attempt = engine.pay("venda-f2", 100, "tok_aprovado").await;
    api.up().await;
    let res = reqwest::Client::new()
        .post(format!("{}/pagamentos", api.url()))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", attempt.idempotency_key.as_ref())
        .json(&json!({"valor": 999, "cartao": "tok_aprovado"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    // Act
    let done = engine.final_state(&attempt).await;
    // Assert
    assert_eq!(done.state, AttemptState::Revisao);
    assert_eq!(done.response_status, Some(422));
    assert!(done.last_error.as_deref().unwrap().contains("422"));
    let tries = done.tries;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let later = engine.checkout.attempt(&attempt.id).await.unwrap();
    assert_eq!(
        (later.state, later.tries),
        (AttemptState::Revisao, tries),
        "not retried"
    );
    assert_eq!(api.requests("mismatch").await, 1);
    assert_eq!(
        api.ledger().await.len(),
        1,
        "only the other request's charge"
    );
    // The engine asked the server by referencia before saying "review": it has no payment.
    assert!(done.review_checked_at.is_some(), "{done:?}");
    // Only then may the sale be paid again: a new attempt with a new key (another card), made
    // after the old key was settled on the server — it belongs to the other request's payment,
    // so this attempt never charged under it and is final, not to be sent again.
    let again = engine.pay("venda-f2", 100, "tok_recusado").await;
    assert_ne!(again.id, attempt.id);
    assert_ne!(again.idempotency_key, attempt.idempotency_key);
    let settled = engine.checkout.attempt(&attempt.id).await.unwrap();
    assert_eq!(
        (settled.state, settled.motivo.as_deref()),
        (AttemptState::Recusado, Some("chave_cancelada"))
    );
    let refused = engine.checkout.retry_review(&attempt.id).await.unwrap_err();
    assert!(
        refused.to_string().contains("não está em revisão"),
        "{refused}"
    );
}

#[tokio::test]
async fn an_attempt_older_than_the_servers_key_retention_is_looked_up_before_it_is_resent() {
    // Arrange: keys live 1 s on the server, which says so in /health.
    let api = Api::start_with(|c| {
        c.key_retention_secs = 1;
        c.reaper_interval_secs = 1;
    })
    .await;
    api.set_faults(json!({"drop_response_probability": 1.0}))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    // The client's own setting says 24 h: it learns the 1 s from the server's /health.
    let mut config = fast_config(&api.url());
    config.retention_margin = Duration::from_millis(500);
    let first = checkout_core::Checkout::open(&db, config.clone())
        .await
        .unwrap();
    let attempt = match first
        .pay(
            checkout_core::SaleId::parse("venda-f3").unwrap(),
            checkout_core::Centavos::new(4_200).unwrap(),
            checkout_core::CardToken::parse("tok_aprovado").unwrap(),
        )
        .await
        .unwrap()
    {
        checkout_core::PayOutcome::Created(a) => a,
        other => panic!("{other:?}"),
    };
    // The charge lands, the answer is lost; the client stops before it hears anything.
    tokio::time::timeout(Duration::from_secs(10), async {
        while api.requests("first").await == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    first.shutdown().await;
    api.set_faults(json!({})).await;
    // Wait for the server to forget the key.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let posts_before = api.all_requests().await;
    // Act
    let second = checkout_core::Checkout::open(&db, config).await.unwrap();
    let done = second
        .wait_final(&attempt.id, Duration::from_secs(20))
        .await
        .unwrap();
    // Assert
    assert_eq!(done.state, AttemptState::Aprovado);
    assert!(done.payment_id.is_some());
    assert_eq!(
        api.all_requests().await,
        posts_before,
        "found by referencia: no POST was sent again"
    );
    assert_eq!(api.ledger().await.len(), 1);
    second.shutdown().await;
}
