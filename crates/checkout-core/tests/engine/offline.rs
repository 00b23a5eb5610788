use crate::helpers::*;
use checkout_core::outbox::OfflineCaps;
use checkout_core::{
    AttemptState, CardToken, Centavos, Checkout, Connectivity, CoreError, Event, SaleId,
};
use std::time::Duration;

#[tokio::test]
async fn with_the_server_down_payments_wait_and_drain_by_themselves_when_it_returns() {
    // Arrange: the server is down when the cashier pays.
    let mut api = Api::start().await;
    api.down().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let mut events = engine.checkout.subscribe();
    // Act
    let a = engine.pay("venda-o1", 1_000, "tok_aprovado").await;
    assert_eq!(engine.checkout.connectivity(), Connectivity::Offline);
    let b = engine.pay("venda-o2", 2_000, "tok_aprovado").await;
    let c = engine.pay("venda-o3", 3_000, "tok_recusado").await;
    let queue = engine.checkout.queue().await.unwrap();
    assert_eq!((queue.count, queue.total.get()), (3, 6_000));
    for x in [&a, &b, &c] {
        assert_eq!(
            engine.checkout.attempt(&x.id).await.unwrap().state,
            AttemptState::Pendente
        );
    }
    api.up().await;
    // Assert: nobody touches anything; the prober notices and the queue drains.
    wait_event(&mut events, |e| {
        matches!(
            e,
            Event::ConnectivityChanged {
                connectivity: Connectivity::Online,
                ..
            }
        )
    })
    .await;
    assert_eq!(engine.final_state(&a).await.state, AttemptState::Aprovado);
    assert_eq!(engine.final_state(&b).await.state, AttemptState::Aprovado);
    assert_eq!(engine.final_state(&c).await.state, AttemptState::Recusado);
    wait_event(
        &mut events,
        |e| matches!(e, Event::QueueChanged { queue } if queue.count == 0),
    )
    .await;
    assert_eq!(api.ledger().await.len(), 3);
}

#[tokio::test]
async fn a_queue_drained_through_every_slot_sends_each_sale_once() {
    // Arrange: 120 sales queued while the server is away, 8 requests at once; each answer is
    // written down while the next requests are already on the wire.
    let mut api = Api::start().await;
    api.down().await;
    let mut config = fast_config(&api.url());
    config.max_in_flight = 8;
    config.offline_caps = OfflineCaps::default();
    let engine = Engine::open(config).await;
    let mut attempts = Vec::new();
    for i in 0..120 {
        attempts.push(
            engine
                .pay(&format!("venda-d{i}"), 100 + i, "tok_aprovado")
                .await,
        );
    }
    // Act
    api.up().await;
    for a in &attempts {
        assert_eq!(engine.final_state(a).await.state, AttemptState::Aprovado);
    }
    // Assert: one request per sale (none sent again from a read of the outbox made while its
    // answer was being recorded, none met its own key in progress), one charge per sale.
    assert_eq!(api.requests("first").await, 120);
    assert_eq!(api.all_requests().await, 120, "no replay, no 409");
    assert_eq!(api.ledger().await.len(), 120);
    assert_eq!(engine.checkout.queue().await.unwrap().count, 0);
}

#[tokio::test]
async fn offline_caps_refuse_a_payment_instead_of_queueing_it() {
    let mut api = Api::start().await;
    api.down().await;
    let mut config = fast_config(&api.url());
    config.offline_caps = OfflineCaps {
        per_payment: Some(Centavos::new(50_000).unwrap()),
        total: Some(checkout_core::Total::new(80_000).unwrap()),
    };
    let engine = Engine::open(config).await;
    engine.pay("venda-c1", 40_000, "tok_aprovado").await;
    assert_eq!(engine.checkout.connectivity(), Connectivity::Offline);
    let pay = |sale: &'static str, valor| {
        engine.checkout.pay(
            SaleId::parse(sale).unwrap(),
            Centavos::new(valor).unwrap(),
            CardToken::parse("tok_aprovado").unwrap(),
        )
    };
    let too_big = pay("venda-c2", 50_001).await.unwrap_err();
    assert!(
        matches!(too_big, CoreError::OfflinePaymentTooLarge { cap } if cap.get() == 50_000),
        "{too_big}"
    );
    assert!(too_big.to_string().contains("R$ 500,00"), "{too_big}");
    let over_total = pay("venda-c3", 40_001).await.unwrap_err();
    assert!(
        matches!(over_total, CoreError::OfflineQueueFull { .. }),
        "{over_total}"
    );
    pay("venda-c4", 40_000).await.unwrap();
    let attempts = engine.checkout.attempts().await.unwrap();
    assert_eq!(attempts.len(), 2, "refused payments are not stored");
    api.up().await;
    for a in &attempts {
        assert_eq!(engine.final_state(a).await.state, AttemptState::Aprovado);
    }
    // Online again: the caps no longer apply.
    assert_eq!(
        engine
            .final_state(&engine.pay("venda-c5", 90_000, "tok_aprovado").await)
            .await
            .state,
        AttemptState::Aprovado
    );
}

#[tokio::test]
async fn pending_attempts_are_replayed_with_their_keys_when_the_engine_restarts() {
    let mut api = Api::start().await;
    api.down().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    let first = Checkout::open(&db, fast_config(&api.url())).await.unwrap();
    let a = first
        .pay(
            SaleId::parse("venda-r1").unwrap(),
            Centavos::new(100).unwrap(),
            CardToken::parse("tok_aprovado").unwrap(),
        )
        .await
        .unwrap();
    let key = match &a {
        checkout_core::PayOutcome::Created(a) => a.clone(),
        other => panic!("{other:?}"),
    };
    first.shutdown().await;
    api.up().await;
    let second = Checkout::open(&db, fast_config(&api.url())).await.unwrap();
    let done = second
        .wait_final(&key.id, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done.state, AttemptState::Aprovado);
    assert_eq!(done.idempotency_key, key.idempotency_key);
    assert_eq!(api.ledger().await.len(), 1);
    second.shutdown().await;
}
