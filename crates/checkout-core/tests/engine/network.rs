//! The engine on a real network path: a fault proxy of our own between it and the API, a TLS
//! endpoint with a private CA, and what the engine says about connectivity through each.

use crate::helpers::*;
use checkout_core::outbox::OfflineCaps;
use checkout_core::{
    AttemptState, CardToken, Centavos, Checkout, Connectivity, CoreError, Event, PayOutcome, SaleId,
};
use pagar_testkit::{Fault, FaultProxy, TlsFront};
use serde_json::json;
use std::time::{Duration, Instant};

async fn wait_connectivity(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    want: Connectivity,
) {
    wait_event(
        events,
        |e| matches!(e, Event::ConnectivityChanged { connectivity, .. } if *connectivity == want),
    )
    .await;
}

#[tokio::test]
async fn every_way_the_api_can_be_unreachable_marks_the_engine_offline_within_one_try() {
    for (n, fault) in [
        Fault::Refuse,
        Fault::AcceptClose,
        Fault::Swallow,
        Fault::CutAfterAnswer,
    ]
    .into_iter()
    .enumerate()
    {
        // Arrange: online through the proxy, then the path fails this way.
        let api = Api::start().await;
        let proxy = FaultProxy::start(api.addr).await;
        let mut config = fast_config(&proxy.url());
        config.request_timeout = Duration::from_secs(1); // a swallowed request ends here
        config.backoff_base = Duration::from_secs(5); // no second try before the assertion
        config.backoff_cap = Duration::from_secs(5);
        let engine = Engine::open(config).await;
        assert_eq!(engine.checkout.connectivity(), Connectivity::Online);
        let mut events = engine.checkout.subscribe();
        proxy.set(fault).await;
        // Act
        let sale = format!("venda-net-{n}");
        let attempt = engine.pay(&sale, 1_000, "tok_aprovado").await;
        wait_connectivity(&mut events, Connectivity::Offline).await;
        // Assert: one try was enough to know.
        let now = engine.checkout.attempt(&attempt.id).await.unwrap();
        assert_eq!(now.state, AttemptState::Pendente, "{fault:?}");
        assert!(
            now.tries <= 1,
            "{fault:?}: offline after one try, not {}",
            now.tries
        );
        // Offline: the caps apply at once.
        let too_big = engine
            .checkout
            .pay(
                SaleId::parse(&format!("{sale}-b")).unwrap(),
                Centavos::new(100_001).unwrap(),
                CardToken::parse("tok_aprovado").unwrap(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(too_big, CoreError::OfflinePaymentTooLarge { .. }),
            "{fault:?}: {too_big}"
        );
        // The path heals: the probe sees it, the attempt completes with one charge.
        proxy.set(Fault::Pass).await;
        wait_connectivity(&mut events, Connectivity::Online).await;
        let done = engine.final_state(&attempt).await;
        assert_eq!(done.state, AttemptState::Aprovado, "{fault:?}");
        assert_eq!(api.ledger().await.len(), 1, "{fault:?}");
    }
}

#[tokio::test]
async fn with_nothing_listening_at_start_the_engine_says_offline_at_once_and_caps_apply() {
    // Arrange: nothing answers at the API address from the start.
    let api = Api::start().await;
    let proxy = FaultProxy::start(api.addr).await;
    proxy.set(Fault::Refuse).await;
    let mut config = fast_config(&proxy.url());
    config.offline_caps = OfflineCaps {
        per_payment: Some(Centavos::new(50_000).unwrap()),
        total: Some(checkout_core::Total::new(80_000).unwrap()),
    };
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let checkout = Checkout::open(dir.path().join("outbox.db"), config)
        .await
        .unwrap();
    let pay = |sale: &'static str, valor| {
        checkout.pay(
            SaleId::parse(sale).unwrap(),
            Centavos::new(valor).unwrap(),
            CardToken::parse("tok_aprovado").unwrap(),
        )
    };
    // Act + Assert: before anything answered, the caps already apply.
    pay("venda-d1", 40_000).await.unwrap();
    let over_total = pay("venda-d2", 40_001).await.unwrap_err();
    assert!(
        matches!(over_total, CoreError::OfflineQueueFull { .. }),
        "{over_total}"
    );
    assert!(over_total.to_string().contains("R$ 800,00"), "{over_total}");
    assert_eq!(settled_connectivity(&checkout).await, Connectivity::Offline);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the first probe settles the badge quickly: {:?}",
        started.elapsed()
    );
    assert_eq!(
        checkout.attempts().await.unwrap().len(),
        1,
        "nothing queued for the refused one"
    );
    // The path heals: the queue drains by itself.
    proxy.set(Fault::Pass).await;
    let a = &checkout.attempts().await.unwrap()[0];
    let done = checkout
        .wait_final(&a.id, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done.state, AttemptState::Aprovado);
    assert_eq!(api.ledger().await.len(), 1);
    checkout.shutdown().await;
}

#[tokio::test]
async fn a_refusal_after_a_lost_answer_is_settled_from_the_servers_payment() {
    // Arrange: the first try charges and its answer is cut; the next POST meets a 401 from
    // something in the path (a middlebox, a rotated key).
    let api = Api::start().await;
    let proxy = FaultProxy::start(api.addr).await;
    let engine = Engine::open(fast_config(&proxy.url())).await;
    proxy.set(Fault::CutAfterAnswer).await;
    let attempt = engine.pay("venda-rev", 4_567, "tok_aprovado").await;
    tokio::time::timeout(Duration::from_secs(10), async {
        while api.requests("first").await == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    // Act
    proxy.set(Fault::RejectNextPost(401)).await;
    let done = engine.final_state(&attempt).await;
    // Assert: before saying "review", the engine asked by referencia and found the charge.
    assert_eq!(done.state, AttemptState::Aprovado, "{done:?}");
    let ledger = api.ledger().await;
    assert_eq!(ledger.len(), 1);
    assert_eq!(
        proxy.forwarded_posts(),
        0,
        "the 401 was the only POST after the cut"
    );
    assert!(done.payment_id.is_some());
    // Paying the sale again returns the settled attempt: no second key, no second charge.
    let again = engine.pay("venda-rev", 4_567, "tok_aprovado").await;
    assert_eq!(again.id, attempt.id);
    assert_eq!(api.ledger().await.len(), 1);
}

#[tokio::test]
async fn the_engine_learns_the_servers_key_retention_from_health() {
    let api = Api::start_with(|c| c.key_retention_secs = 120).await;
    let engine = Engine::open(fast_config(&api.url())).await;
    assert_eq!(
        engine.checkout.advertised_retention(),
        Some(Duration::from_secs(120))
    );
}

#[tokio::test]
async fn the_dispatcher_does_not_spin_when_every_slot_is_busy() {
    // Arrange: every request takes 5 s on the server; 50 payments, 8 slots.
    let api = Api::start().await;
    let mut config = fast_config(&api.url());
    config.max_in_flight = 8;
    config.request_timeout = Duration::from_secs(30);
    config.offline_caps = OfflineCaps::default();
    let engine = Engine::open(config).await;
    api.set_faults(json!({"latency_ms": 5_000})).await;
    for i in 0..50 {
        engine
            .pay(&format!("venda-s{i}"), 100 + i, "tok_aprovado")
            .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await; // the first 8 are on the wire
                                                          // Act: count the dispatcher's reads of the outbox over 3 s with every slot busy.
    let before = engine.checkout.outbox().dispatch_reads();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reads = engine.checkout.outbox().dispatch_reads() - before;
    eprintln!("dispatcher: {reads} outbox reads in 3 s with all 8 slots busy");
    // Assert: it waits for a try to end instead of polling (it used to loop with no sleep).
    assert!(
        reads <= 6,
        "{reads} outbox reads in 3 s while all 8 slots were busy (bound: 2 per second)"
    );
    api.set_faults(json!({})).await;
}

#[tokio::test]
async fn the_engine_pays_over_tls_trusting_a_private_ca_and_refuses_an_unknown_one() {
    // Arrange: the API behind a TLS endpoint whose CA exists only in this test.
    let api = Api::start().await;
    let tls = TlsFront::start(api.addr).await;
    let mut config = fast_config(&tls.url());
    config.ca_cert = Some(tls.ca_pem().to_path_buf());
    // Act
    let engine = Engine::open(config).await;
    let attempt = engine.pay("venda-tls", 2_500, "tok_aprovado").await;
    // Assert
    assert_eq!(
        engine.final_state(&attempt).await.state,
        AttemptState::Aprovado
    );
    assert_eq!(api.ledger().await.len(), 1);

    // Without the CA the server is not trusted: nothing is sent in clear, nothing charged, and
    // the engine says it is the certificate, in words that name what to configure.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    let untrusted = Checkout::open(&db, fast_config(&tls.url())).await.unwrap();
    assert_eq!(
        settled_connectivity(&untrusted).await,
        Connectivity::Untrusted
    );
    let problem = untrusted.connectivity_problem().unwrap();
    assert!(problem.contains("ca_cert"), "{problem}");
    assert!(!problem.contains("https://"), "no URL: {problem}");
    let a = match untrusted
        .pay(
            SaleId::parse("venda-tls-2").unwrap(),
            Centavos::new(2_500).unwrap(),
            CardToken::parse("tok_aprovado").unwrap(),
        )
        .await
        .unwrap()
    {
        PayOutcome::Created(a) => a,
        other => panic!("{other:?}"),
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let a = untrusted.attempt(&a.id).await.unwrap();
    assert_eq!(a.state, AttemptState::Pendente);
    assert_eq!(api.ledger().await.len(), 1);
    // The same outbox with the CA configured: the waiting payment goes through once, with its key.
    untrusted.shutdown().await;
    let mut config = fast_config(&tls.url());
    config.ca_cert = Some(tls.ca_pem().to_path_buf());
    let fixed = Checkout::open(&db, config).await.unwrap();
    let done = fixed
        .wait_final(&a.id, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done.state, AttemptState::Aprovado);
    assert_eq!(done.idempotency_key, a.idempotency_key);
    assert_eq!(api.ledger().await.len(), 2);
    fixed.shutdown().await;
}

#[tokio::test]
async fn a_missing_ca_file_or_plain_http_to_another_host_is_refused_before_anything_opens() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    let mut config = fast_config("https://localhost:1");
    config.ca_cert = Some(dir.path().join("nao-existe.pem"));
    let err = Checkout::open(&db, config).await.unwrap_err();
    assert!(
        matches!(&err, CoreError::Config(m) if m.contains("nao-existe.pem")),
        "{err}"
    );
    // Never contacted: refused before any socket is opened.
    let err = Checkout::open(&db, fast_config("http://192.0.2.7:8080"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CoreError::Config(m) if m.contains("sem criptografia")),
        "{err}"
    );
    assert!(!db.exists(), "nothing was opened");
}

/// The edge of "revisão" while the first try still executes: the gateway is slower than the
/// till's request timeout, the next POST meets a 403 from a middlebox. The look-up sees the
/// execution in progress, so the review is never marked "no charge found" and another card is
/// never offered; when the execution ends, the look-up finds its payment and the sale is paid,
/// once.
#[tokio::test]
async fn a_review_while_the_first_try_still_executes_waits_for_it_and_charges_once() {
    // Arrange
    let api = Api::start_with(|c| c.slow_gateway_ms = 4_000).await;
    let proxy = FaultProxy::start(api.addr).await;
    let mut config = fast_config(&proxy.url());
    config.request_timeout = Duration::from_millis(1_000);
    let engine = Engine::open(config).await;
    let attempt = engine.pay("venda-lenta", 2_500, "tok_lento").await;
    // The first try reaches the server and times out at the till; the middlebox refuses only
    // the POST after it.
    let tried = attempt_until(&engine, &attempt, Duration::from_secs(5), |a| a.tries > 0).await;
    assert!(tried.is_ok(), "{tried:?}");
    proxy.set(Fault::RejectNextPost(403)).await;

    // Act: the attempt goes to review while the server is still at the gateway.
    let in_review = attempt_until(&engine, &attempt, Duration::from_secs(10), |a| {
        a.state == AttemptState::Revisao
    })
    .await
    .unwrap_or_else(|now| panic!("the 403 puts the attempt in review: {now:?}"));
    assert!(
        in_review.review_checked_at.is_none(),
        "never 'no charge found' while an execution runs: {in_review:?}"
    );
    // The cashier tries another card meanwhile: refused, nothing sent, no new key.
    let refused = engine
        .checkout
        .pay(
            SaleId::parse("venda-lenta").unwrap(),
            Centavos::new(2_500).unwrap(),
            CardToken::parse("tok_aprovado").unwrap(),
        )
        .await;
    match refused {
        Ok(PayOutcome::Existing(a)) => assert_eq!(a.id, attempt.id),
        Err(e) => assert!(
            e.to_string().contains("revis") || e.to_string().contains("cobrou"),
            "{e}"
        ),
        Ok(other) => panic!("a second attempt while the first may charge: {other:?}"),
    }

    // Assert: the execution ends, the review checker finds its payment, the sale is paid once.
    let paid = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let a = engine.checkout.attempt(&attempt.id).await.unwrap();
            assert!(
                a.state == AttemptState::Aprovado || a.review_checked_at.is_none(),
                "'no charge found' while the execution ran: {a:?}"
            );
            if a.state == AttemptState::Aprovado {
                return a;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let done = engine.checkout.attempt(&attempt.id).await.unwrap();
    assert!(
        paid.is_ok(),
        "the review settles from the payment: {done:?}"
    );
    assert_eq!(api.ledger().await.len(), 1);
    let again = engine.pay("venda-lenta", 2_500, "tok_aprovado").await;
    assert_eq!(again.id, attempt.id);
    assert_eq!(api.ledger().await.len(), 1, "one charge for the sale");
}
