//! Cancel by key and look-ups that see work in progress: before a client makes a new key for a
//! sale in doubt, the old key must be unable to charge. Charges are counted in the ledger.

use crate::helpers::*;
use crate::stores;
use futures::stream::{self, StreamExt};
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::time::Duration;

/// A server whose `tok_lento` charges take `slow_ms` and whose leases last `lease_ms`.
async fn slow_app(backend: Backend, slow_ms: u64, lease_ms: u64) -> TestApp {
    TestApp::spawn_with(backend, |c| {
        c.slow_gateway_ms = slow_ms;
        c.lease_ms = lease_ms;
    })
    .await
}

fn slow(valor: i64, referencia: &str) -> Value {
    json!({"valor": valor, "cartao": "tok_lento", "referencia": referencia})
}

#[apply(stores)]
async fn a_lookup_by_referencia_lists_a_key_still_executing_until_it_becomes_its_payment(
    #[case] backend: Backend,
) {
    // Arrange: a charge that takes a while at the gateway.
    let app = slow_app(backend, 1_500, 10_000).await;
    let key = new_key();
    let in_flight = {
        let (client, url, key) = (app.client.clone(), app.url.clone(), key.clone());
        tokio::spawn(async move { try_pay(&client, &url, &key, &slow(700, "venda-7")).await })
    };

    // Act + Assert: while it executes, "no payment" is never the answer.
    assert!(
        eventually(Duration::from_secs(5), || async {
            let found: Value = app.get_json("/pagamentos?referencia=venda-7").await;
            found["em_andamento"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
        .await
    );
    let during: Value = app.get_json("/pagamentos?referencia=venda-7").await;
    assert_eq!(during["pagamentos"], json!([]));
    assert_eq!(during["em_andamento"][0]["idempotency_key"], key);
    let by_key: Value = app
        .get_json(&format!("/pagamentos?idempotency_key={key}"))
        .await;
    assert_eq!(by_key["em_andamento"][0]["idempotency_key"], key);

    let paid: Value = in_flight.await.unwrap().unwrap().json().await.unwrap();
    let after: Value = app.get_json("/pagamentos?referencia=venda-7").await;
    assert_eq!(after["pagamentos"], json!([paid]));
    assert_eq!(after["em_andamento"], json!([]));
    let none: Value = app.get_json("/pagamentos?referencia=outra").await;
    assert_eq!(none, json!({"pagamentos": [], "em_andamento": []}));
}

#[apply(stores)]
async fn cancelling_an_unused_key_burns_it_for_good_and_says_so_every_time(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();

    let first = app.cancel(&key).await;
    assert_eq!(first.status(), StatusCode::OK);
    let first: Value = first.json().await.unwrap();
    assert_eq!(
        first,
        json!({"idempotency_key": key, "resultado": "cancelada"})
    );
    let again: Value = app.cancel(&key).await.json().await.unwrap();
    assert_eq!(again, first, "a cancellation is idempotent");

    // Any request with the key is refused; it never reaches the gateway.
    for body in [approved(500), approved(600)] {
        assert_problem(
            app.pay(&key, &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency-key-cancelled",
        )
        .await;
    }
    assert!(app.ledger().await.is_empty(), "nothing charged");
    let found: Value = app
        .get_json(&format!("/pagamentos?idempotency_key={key}"))
        .await;
    assert_eq!(found, json!({"pagamentos": [], "em_andamento": []}));
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("pagar_key_cancellations_total{status=\"cancelada\"} 2"),
        "{metrics}"
    );
}

#[apply(stores)]
async fn cancelling_a_key_that_charged_answers_its_payment_and_charges_nothing_more(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    for body in [
        approved(1_250),
        json!({"valor": 300, "cartao": "tok_recusado"}),
    ] {
        let key = new_key();
        let paid: Value = app.pay(&key, &body).await.json().await.unwrap();

        let res = app.cancel(&key).await;
        assert_eq!(res.status(), StatusCode::OK);
        let answer: Value = res.json().await.unwrap();
        assert_eq!(answer["resultado"], "pagamento");
        assert_eq!(answer["pagamento"], paid);

        // The key still replays its payment.
        let replay = app.pay(&key, &body).await;
        assert_eq!(replay.headers()["idempotent-replayed"], "true");
    }
    assert_eq!(app.ledger().await.len(), 2, "one charge per key, no more");
}

#[apply(stores)]
async fn cancelling_a_key_while_it_executes_is_409_and_afterwards_answers_its_payment(
    #[case] backend: Backend,
) {
    let app = slow_app(backend, 1_500, 10_000).await;
    let key = new_key();
    let in_flight = {
        let (client, url, key) = (app.client.clone(), app.url.clone(), key.clone());
        tokio::spawn(async move { try_pay(&client, &url, &key, &slow(800, "venda-8")).await })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            app.stored_keys().await == 1
        })
        .await
    );

    let busy = app.cancel(&key).await;
    assert!(busy.headers().contains_key("retry-after"));
    assert_problem(busy, StatusCode::CONFLICT, "key-in-progress").await;

    let paid: Value = in_flight.await.unwrap().unwrap().json().await.unwrap();
    let after: Value = app.cancel(&key).await.json().await.unwrap();
    assert_eq!(after["resultado"], "pagamento");
    assert_eq!(after["pagamento"]["id"], paid["id"]);
    assert_eq!(app.ledger().await.len(), 1);
}

/// A worker stalled at the gateway past its lease: the cancellation takes the key over and voids
/// it at the gateway, so when the stalled worker finally asks for its charge, none is made.
#[apply(stores)]
async fn a_worker_stalled_past_its_lease_cannot_charge_a_key_cancelled_meanwhile(
    #[case] backend: Backend,
) {
    let app = slow_app(backend, 2_000, 300).await;
    let key = new_key();
    let stalled = {
        let (client, url, key) = (app.client.clone(), app.url.clone(), key.clone());
        tokio::spawn(async move { try_pay(&client, &url, &key, &slow(900, "venda-9")).await })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            app.stored_keys().await == 1
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(500)).await; // the lease is over; the worker sleeps on

    let cancelled: Value = app.cancel(&key).await.json().await.unwrap();
    assert_eq!(cancelled["resultado"], "cancelada");

    let late = stalled.await.unwrap().unwrap();
    assert_problem(
        late,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency-key-cancelled",
    )
    .await;
    assert!(
        app.ledger().await.is_empty(),
        "the stalled worker charged nothing"
    );
    let again: Value = app.cancel(&key).await.json().await.unwrap();
    assert_eq!(again["resultado"], "cancelada");
}

/// Payments and cancellations of the same keys at once: each key ends exactly one way — charged
/// once and answered as its payment, or never charged and cancelled — whatever the order.
#[apply(stores)]
async fn a_payment_racing_its_cancellation_ends_exactly_one_way(#[case] backend: Backend) {
    let app = slow_app(backend, 50, 10_000).await;
    let keys: Vec<String> = (0..40).map(|_| new_key()).collect();
    let body = json!({"valor": 100, "cartao": "tok_lento"});

    let jobs = keys
        .iter()
        .flat_map(|k| [(k.clone(), true), (k.clone(), false)]);
    let answers: Vec<(String, bool, StatusCode, Value)> = stream::iter(jobs)
        .map(|(key, pay)| {
            let (client, url, body) = (app.client.clone(), app.url.clone(), body.clone());
            async move {
                let res = if pay {
                    try_pay(&client, &url, &key, &body).await.unwrap()
                } else {
                    cancel_at(&client, &url, &key).await
                };
                let status = res.status();
                (key, pay, status, res.json::<Value>().await.unwrap())
            }
        })
        .buffer_unordered(80)
        .collect()
        .await;
    for (_, pay, status, body) in &answers {
        let allowed: &[StatusCode] = if *pay {
            &[
                StatusCode::CREATED,
                StatusCode::CONFLICT,
                StatusCode::UNPROCESSABLE_ENTITY,
            ]
        } else {
            &[StatusCode::OK, StatusCode::CONFLICT]
        };
        assert!(allowed.contains(status), "{pay} {status} {body}");
    }

    // Settle every key by asking again until it answers, then count.
    let mut charged = 0;
    for key in &keys {
        let outcome = cancel_until_settled(&app.client, &app.url, key).await;
        match outcome["resultado"].as_str() {
            Some("pagamento") => charged += 1,
            Some("cancelada") => {
                let refused = app.pay(key, &body).await;
                assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
            }
            other => panic!("{key}: {other:?}"),
        }
    }
    assert_eq!(
        app.ledger().await.len(),
        charged,
        "one charge per key that says it charged"
    );
}
