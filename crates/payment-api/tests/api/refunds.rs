//! Refunds (`POST /pagamentos/{id}/estornos`) on both stores: the same never-twice guarantee as
//! charges, and never more paid back than was charged, counted in the gateway's refund ledger.

use crate::helpers::*;
use crate::stores;
use futures::stream::{self, StreamExt};
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::collections::HashSet;

/// `POST {base}/pagamentos/{payment}/estornos` with merchant A's key.
pub(crate) async fn try_refund(
    client: &reqwest::Client,
    base: &str,
    payment: &str,
    key: &str,
    body: &Value,
) -> reqwest::Result<reqwest::Response> {
    client
        .post(format!("{base}/pagamentos/{payment}/estornos"))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
}

/// The refunds the gateway executed, through the admin route.
pub(crate) async fn refund_ledger(client: &reqwest::Client, base: &str) -> Vec<Value> {
    admin_get(client, base, "/admin/ledger").await["estornos"]
        .as_array()
        .unwrap()
        .clone()
}

/// A payment of `valor` with `cartao`, approved; its id.
async fn paid(app: &TestApp, valor: i64, cartao: &str) -> String {
    let res = app
        .pay(&new_key(), &json!({"valor": valor, "cartao": cartao}))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

pub(crate) fn sum(rows: &[Value], status: &str) -> i64 {
    rows.iter()
        .filter(|r| r["status"] == status)
        .map(|r| r["valor"].as_i64().unwrap())
        .sum()
}

#[apply(stores)]
async fn part_then_the_rest_is_refunded_and_nothing_more(#[case] backend: Backend) {
    // Arrange
    let app = TestApp::spawn(backend).await;
    let payment = paid(&app, 1000, "tok_aprovado").await;
    let (first, rest, too_much) = (new_key(), new_key(), new_key());

    // Act: 400 back, its retry, 700 more (too much), then the 600 left.
    let res = try_refund(
        &app.client,
        &app.url,
        &payment,
        &first,
        &json!({"valor": 400, "motivo": "troca"}),
    )
    .await
    .unwrap();
    let (status, replayed, body) = body_of(res).await;
    let again = try_refund(
        &app.client,
        &app.url,
        &payment,
        &first,
        &json!({"valor": 400, "motivo": "troca"}),
    )
    .await
    .unwrap();
    let (again_status, again_replayed, again_body) = body_of(again).await;
    let refused = try_refund(
        &app.client,
        &app.url,
        &payment,
        &too_much,
        &json!({"valor": 700}),
    )
    .await
    .unwrap();
    let problem = assert_problem(
        refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "estorno-excede-saldo",
    )
    .await;
    let last = try_refund(
        &app.client,
        &app.url,
        &payment,
        &rest,
        &json!({"valor": 600}),
    )
    .await
    .unwrap();

    // Assert: the first answer, replayed byte for byte; the refusal says what is left.
    assert_eq!((status, replayed), (StatusCode::CREATED, None));
    let refund: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (
            &refund["status"],
            &refund["valor"],
            &refund["pagamento"],
            &refund["motivo"]
        ),
        (
            &json!("aprovado"),
            &json!(400),
            &json!(payment),
            &json!("troca")
        )
    );
    assert_eq!(
        (again_status, again_replayed.as_deref(), again_body),
        (StatusCode::CREATED, Some("true"), body)
    );
    assert!(
        problem["detail"].as_str().unwrap().contains("R$ 6,00"),
        "{problem}"
    );
    assert_eq!(last.status(), StatusCode::CREATED);
    // The refused key was not stored: it is free for a corrected request.
    let corrected = try_refund(
        &app.client,
        &app.url,
        &payment,
        &too_much,
        &json!({"valor": 1}),
    )
    .await
    .unwrap();
    assert_problem(
        corrected,
        StatusCode::UNPROCESSABLE_ENTITY,
        "estorno-excede-saldo",
    )
    .await;
    let detail = app.get_json(&format!("/pagamentos/{payment}")).await;
    assert_eq!(
        (&detail["estornado"], &detail["saldo_estornavel"]),
        (&json!(1000), &json!(0))
    );
    assert_eq!(detail["estornos"].as_array().unwrap().len(), 2);
    let ledger = refund_ledger(&app.client, &app.url).await;
    assert_eq!((ledger.len(), sum(&ledger, "aprovado")), (2, 1000));
    assert_eq!(
        app.ledger().await.len(),
        1,
        "one charge, never touched by refunds"
    );
}

#[apply(stores)]
async fn two_hundred_concurrent_requests_with_one_refund_key_refund_once(#[case] backend: Backend) {
    // Arrange: a slow refund, so that duplicates arrive while the first executes.
    let app = TestApp::spawn_with(backend, |c| c.slow_gateway_ms = 400).await;
    let payment = paid(&app, 5000, "tok_estorno_lento").await;
    let key = new_key();
    let body = json!({"valor": 1234});

    // Act
    let answers: Vec<(StatusCode, Value)> = stream::iter(0..200)
        .map(|_| {
            let (client, url, payment, key, body) = (
                app.client.clone(),
                app.url.clone(),
                payment.clone(),
                key.clone(),
                body.clone(),
            );
            async move {
                let res = try_refund(&client, &url, &payment, &key, &body)
                    .await
                    .unwrap();
                (res.status(), res.json::<Value>().await.unwrap())
            }
        })
        .buffer_unordered(200)
        .collect()
        .await;

    // Assert: one refund; every answer is that refund or "in progress".
    let ids: HashSet<String> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .map(|(_, b)| b["id"].as_str().unwrap().to_string())
        .collect();
    for (status, body) in &answers {
        assert!(
            matches!(*status, StatusCode::CREATED | StatusCode::CONFLICT),
            "{status} {body}"
        );
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    let ledger = refund_ledger(&app.client, &app.url).await;
    assert_eq!((ledger.len(), sum(&ledger, "aprovado")), (1, 1234));
    let detail = app.get_json(&format!("/pagamentos/{payment}")).await;
    assert_eq!(detail["saldo_estornavel"], 5000 - 1234);
}

#[apply(stores)]
async fn fifty_concurrent_refunds_of_one_payment_never_pay_back_more_than_was_charged(
    #[case] backend: Backend,
) {
    // Arrange: 1 000 charged; 50 different keys each ask for 100 at once.
    let app = TestApp::spawn(backend).await;
    let payment = paid(&app, 1000, "tok_aprovado").await;

    // Act
    let answers: Vec<StatusCode> = stream::iter(0..50)
        .map(|_| {
            let (client, url, payment) = (app.client.clone(), app.url.clone(), payment.clone());
            async move {
                try_refund(&client, &url, &payment, &new_key(), &json!({"valor": 100}))
                    .await
                    .unwrap()
                    .status()
            }
        })
        .buffer_unordered(50)
        .collect()
        .await;

    // Assert: exactly ten paid back; the others refused before the gateway.
    let created = answers
        .iter()
        .filter(|s| **s == StatusCode::CREATED)
        .count();
    let refused = answers
        .iter()
        .filter(|s| **s == StatusCode::UNPROCESSABLE_ENTITY)
        .count();
    assert_eq!((created, refused), (10, 40), "{answers:?}");
    let ledger = refund_ledger(&app.client, &app.url).await;
    assert_eq!((ledger.len(), sum(&ledger, "aprovado")), (10, 1000));
    let detail = app.get_json(&format!("/pagamentos/{payment}")).await;
    assert_eq!(
        (&detail["estornado"], &detail["saldo_estornavel"]),
        (&json!(1000), &json!(0))
    );
}

#[apply(stores)]
async fn a_refund_whose_answer_is_lost_is_replayed_once(#[case] backend: Backend) {
    // Arrange: the server refunds and commits, then cuts the connection.
    let app = TestApp::spawn(backend).await;
    let payment = paid(&app, 3000, "tok_aprovado").await;
    let key = new_key();
    app.set_faults(json!({"drop_response_probability": 1.0}))
        .await;

    // Act
    let lost = try_refund(
        &app.client,
        &app.url,
        &payment,
        &key,
        &json!({"valor": 1500}),
    )
    .await;
    app.set_faults(json!({})).await;
    let retry = try_refund(
        &app.client,
        &app.url,
        &payment,
        &key,
        &json!({"valor": 1500}),
    )
    .await
    .unwrap();

    // Assert: the client heard nothing the first time; the retry is the stored answer.
    assert!(lost.is_err(), "the answer must be lost, got {lost:?}");
    assert_eq!(retry.status(), StatusCode::CREATED);
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    let ledger = refund_ledger(&app.client, &app.url).await;
    assert_eq!((ledger.len(), sum(&ledger, "aprovado")), (1, 1500));
}

#[apply(stores)]
async fn a_declined_refund_is_stored_and_its_amount_is_free_again(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let payment = paid(&app, 800, "tok_estorno_recusado").await;
    let key = new_key();
    let res = try_refund(
        &app.client,
        &app.url,
        &payment,
        &key,
        &json!({"valor": 800}),
    )
    .await
    .unwrap();
    assert_eq!(res.status(), StatusCode::PAYMENT_REQUIRED);
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        (&body["status"], &body["recusa"]),
        (&json!("recusado"), &json!("estorno_recusado"))
    );
    let replay = try_refund(
        &app.client,
        &app.url,
        &payment,
        &key,
        &json!({"valor": 800}),
    )
    .await
    .unwrap();
    assert_eq!(replay.status(), StatusCode::PAYMENT_REQUIRED);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let detail = app.get_json(&format!("/pagamentos/{payment}")).await;
    assert_eq!(
        (&detail["estornado"], &detail["saldo_estornavel"]),
        (&json!(0), &json!(800))
    );
    let ledger = refund_ledger(&app.client, &app.url).await;
    assert_eq!((ledger.len(), sum(&ledger, "recusado")), (1, 800));
}

#[apply(stores)]
async fn what_cannot_be_refunded_says_why_and_stores_nothing(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // A declined payment.
    let declined = app
        .pay(&new_key(), &json!({"valor": 500, "cartao": "tok_recusado"}))
        .await
        .json::<Value>()
        .await
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let res = try_refund(
        &app.client,
        &app.url,
        &declined,
        &new_key(),
        &json!({"valor": 100}),
    )
    .await
    .unwrap();
    assert_problem(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "pagamento-nao-estornavel",
    )
    .await;
    // No such payment, and another merchant's payment.
    let res = try_refund(
        &app.client,
        &app.url,
        "pay_nao_existe",
        &new_key(),
        &json!({"valor": 100}),
    )
    .await
    .unwrap();
    assert_problem(res, StatusCode::NOT_FOUND, "not-found").await;
    let theirs = app
        .pay_as(OTHER_API_KEY, &new_key(), &approved(900))
        .await
        .json::<Value>()
        .await
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let res = try_refund(
        &app.client,
        &app.url,
        &theirs,
        &new_key(),
        &json!({"valor": 100}),
    )
    .await
    .unwrap();
    assert_problem(res, StatusCode::NOT_FOUND, "not-found").await;
    // Bad bodies.
    let mine = paid(&app, 1000, "tok_aprovado").await;
    for bad in [
        json!({}),
        json!({"valor": 0}),
        json!({"valor": 10, "cartao": "tok_aprovado"}),
    ] {
        let res = try_refund(&app.client, &app.url, &mine, &new_key(), &bad)
            .await
            .unwrap();
        assert_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
    }
    // A key that paid cannot refund.
    let key = new_key();
    assert_eq!(
        app.pay(&key, &approved(100)).await.status(),
        StatusCode::CREATED
    );
    let res = try_refund(&app.client, &app.url, &mine, &key, &json!({"valor": 100}))
        .await
        .unwrap();
    assert_problem(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency-key-reused",
    )
    .await;
    // Nothing was refunded, and only the payments' keys are stored.
    assert!(refund_ledger(&app.client, &app.url).await.is_empty());
    assert_eq!(app.stored_keys().await, 4);
    let detail = app.get_json(&format!("/pagamentos/{mine}")).await;
    assert_eq!(detail["saldo_estornavel"], 1000);
}

/// Real process: `kill -9` while a refund waits at a slow gateway, its amount held. The retry on
/// a new process after the lease takes the key over, keeps the hold and refunds once.
#[apply(stores)]
async fn a_server_killed_mid_refund_refunds_once_after_the_lease(#[case] backend: Backend) {
    // Arrange and kill -9 mid-refund, its amount held.
    let db = TestDb::new(backend).await;
    let client = reqwest::Client::new();
    let (key, body) = (new_key(), json!({"valor": 1500}));
    let payment = killed_mid_refund(&db, &client, 2000, &key, &body).await;

    // Act: a new process; the client's retry after the lease.
    let second = ServerProcess::start(&db, &["--slow-gateway-ms", "50", "--lease-ms", "400"]);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let res = try_refund(&client, &second.url, &payment, &key, &body)
        .await
        .unwrap();

    // Assert: refunded once; the hold was kept, not taken twice.
    assert_eq!(res.status(), StatusCode::CREATED);
    let ledger = refund_ledger(&client, &second.url).await;
    assert_eq!((ledger.len(), sum(&ledger, "aprovado")), (1, 1500));
    let detail: Value = client
        .get(format!("{}/pagamentos/{payment}", second.url))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&detail["estornado"], &detail["saldo_estornavel"]),
        (&json!(1500), &json!(500))
    );
}

/// Real process: a refund abandoned mid-execution (`kill -9`) that nobody retries. The recovery
/// worker of the next process rolls it forward (its amount is held): the gateway refunds it once
/// and the answer is stored; the client's late retry gets it replayed.
#[apply(stores)]
async fn an_abandoned_refund_is_completed_by_the_recovery_worker(#[case] backend: Backend) {
    let db = TestDb::new(backend).await;
    let client = reqwest::Client::new();
    let (key, body) = (new_key(), json!({"valor": 900}));
    let payment = killed_mid_refund(&db, &client, 900, &key, &body).await;

    // The next process, with a quick recovery worker, and no client retry.
    let next = ServerProcess::start(
        &db,
        &[
            "--slow-gateway-ms",
            "50",
            "--lease-ms",
            "300",
            "--recovery-after-ms",
            "200",
            "--reaper-interval-secs",
            "1",
        ],
    );
    let completed = eventually(std::time::Duration::from_secs(8), || async {
        db.count("gateway_refunds").await == 1
    })
    .await;
    assert!(completed, "the recovery worker refunded the held amount");
    // The client's late retry gets the stored answer; nothing is refunded again.
    let res = eventually_answer(&client, &next.url, &payment, &key, &body).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    let ledger = refund_ledger(&client, &next.url).await;
    assert_eq!((ledger.len(), sum(&ledger, "aprovado")), (1, 900));
}

/// The refund's answer, once the key is no longer in progress (at most 5 s).
async fn eventually_answer(
    client: &reqwest::Client,
    base: &str,
    payment: &str,
    key: &str,
    body: &Value,
) -> reqwest::Response {
    for _ in 0..50 {
        let res = try_refund(client, base, payment, key, body).await.unwrap();
        if res.status() != StatusCode::CONFLICT {
            return res;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the refund key stayed in progress");
}

/// A payment of `charged` (made through a process of its own), then a refund `body` under `key`
/// sent to a second process whose gateway takes 5 s, killed with `kill -9` once the refund's
/// amount is held and before the gateway refunded anything. Returns the payment's id.
async fn killed_mid_refund(
    db: &TestDb,
    client: &reqwest::Client,
    charged: i64,
    key: &str,
    body: &Value,
) -> String {
    let setup = ServerProcess::start(db, &[]);
    let res = try_pay(
        client,
        &setup.url,
        &new_key(),
        &json!({"valor": charged, "cartao": "tok_estorno_lento"}),
    )
    .await
    .unwrap();
    let payment = res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    drop(setup);
    let mut first = ServerProcess::start(db, &["--slow-gateway-ms", "5000", "--lease-ms", "300"]);
    let in_flight = {
        let (client, url, payment, key, body) = (
            client.clone(),
            first.url.clone(),
            payment.clone(),
            key.to_string(),
            body.clone(),
        );
        tokio::spawn(async move { try_refund(&client, &url, &payment, &key, &body).await })
    };
    assert!(
        eventually(std::time::Duration::from_secs(10), || async {
            db.count("refunds").await == 1
        })
        .await,
        "the refund's amount is held"
    );
    first.kill9();
    assert!(
        in_flight.await.unwrap().is_err(),
        "killed before it answered"
    );
    assert_eq!(
        db.count("gateway_refunds").await,
        0,
        "the gateway refunded nothing yet"
    );
    payment
}

/// A server that purges completed keys after an hour of its (manual) clock, every second.
async fn purging_app(backend: Backend) -> TestApp {
    TestApp::spawn_with_clock(backend, |c| {
        c.key_retention_secs = 3_600;
        c.reaper_interval_secs = 1;
    })
    .await
}

/// Two hours pass and the reaper purges every completed key.
async fn purge_all(app: &TestApp) {
    app.advance_clock(std::time::Duration::from_secs(2 * 3_600));
    assert!(
        eventually(std::time::Duration::from_secs(5), || async {
            app.stored_keys().await == 0
        })
        .await,
        "the reaper purged the keys"
    );
}

/// Case A: a declined refund's key sent again after its purge gets the same decline, and its
/// amount is not given back a second time.
#[apply(stores)]
async fn a_declined_refund_sent_again_after_its_purge_is_replayed_and_frees_nothing_twice(
    #[case] backend: Backend,
) {
    let app = purging_app(backend).await;
    let payment = paid(&app, 1_000, "tok_estorno_recusado").await;
    let key = new_key();
    let body = json!({"valor": 300});
    let first = try_refund(&app.client, &app.url, &payment, &key, &body)
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::PAYMENT_REQUIRED);
    let first: Value = first.json().await.unwrap();
    purge_all(&app).await;

    let again = try_refund(&app.client, &app.url, &payment, &key, &body)
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::PAYMENT_REQUIRED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap(), first);
    let detail = app.get_json(&format!("/pagamentos/{payment}")).await;
    assert_eq!(
        (&detail["estornado"], &detail["saldo_estornavel"]),
        (&json!(0), &json!(1_000))
    );
    assert_eq!(refund_ledger(&app.client, &app.url).await.len(), 1);
}

/// Case B: the key of a refund of payment A, purged, sent to payment B's path: refused, and B is
/// not refunded (nor is A again).
#[apply(stores)]
async fn a_refund_key_sent_to_another_payment_after_its_purge_is_refused(#[case] backend: Backend) {
    let app = purging_app(backend).await;
    let a = paid(&app, 1_000, "tok_aprovado").await;
    let b = paid(&app, 1_000, "tok_aprovado").await;
    let key = new_key();
    let body = json!({"valor": 200});
    let first = try_refund(&app.client, &app.url, &a, &key, &body)
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    purge_all(&app).await;

    let other = try_refund(&app.client, &app.url, &b, &key, &body)
        .await
        .unwrap();
    assert_problem(
        other,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency-key-reused",
    )
    .await;
    for (payment, estornado) in [(&a, 200), (&b, 0)] {
        let detail = app.get_json(&format!("/pagamentos/{payment}")).await;
        assert_eq!(detail["estornado"], json!(estornado), "{payment}");
    }
    assert_eq!(refund_ledger(&app.client, &app.url).await.len(), 1);
}

/// Case C: an approved refund's key, purged, sent again: another amount is refused, the same
/// request is answered with the same refund, and nothing more is paid back.
#[apply(stores)]
async fn an_approved_refund_sent_again_after_its_purge_is_replayed_and_pays_back_nothing_more(
    #[case] backend: Backend,
) {
    let app = purging_app(backend).await;
    let payment = paid(&app, 1_000, "tok_aprovado").await;
    let key = new_key();
    let body = json!({"valor": 300});
    let first: Value = try_refund(&app.client, &app.url, &payment, &key, &body)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    purge_all(&app).await;

    let more = try_refund(
        &app.client,
        &app.url,
        &payment,
        &key,
        &json!({"valor": 400}),
    )
    .await
    .unwrap();
    assert_problem(
        more,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency-key-reused",
    )
    .await;
    let same = try_refund(&app.client, &app.url, &payment, &key, &body)
        .await
        .unwrap();
    assert_eq!(same.status(), StatusCode::CREATED);
    assert_eq!(same.json::<Value>().await.unwrap(), first);
    let detail = app.get_json(&format!("/pagamentos/{payment}")).await;
    assert_eq!(detail["estornado"], json!(300));
    let ledger = refund_ledger(&app.client, &app.url).await;
    assert_eq!((ledger.len(), sum(&ledger, "aprovado")), (1, 300));
}

#[apply(stores)]
async fn a_refund_still_executing_is_seen_by_its_referencia_until_it_is_paid_back(
    #[case] backend: Backend,
) {
    // Arrange: a refund that takes a while at the gateway.
    let app = TestApp::spawn_with(backend, |c| c.slow_gateway_ms = 1_500).await;
    let payment = paid(&app, 5000, "tok_estorno_lento").await;
    let key = new_key();
    let body = json!({"valor": 700, "referencia": "estorno-7"});
    let in_flight = {
        let (client, url, payment, key, body) = (
            app.client.clone(),
            app.url.clone(),
            payment.clone(),
            key.clone(),
            body.clone(),
        );
        tokio::spawn(async move { try_refund(&client, &url, &payment, &key, &body).await })
    };

    // Act + Assert: while it executes, its referencia lists it in progress (from its claim on,
    // before its amount is even held against the payment), never as nothing.
    assert!(
        eventually(std::time::Duration::from_secs(5), || async {
            let found: Value = app.get_json("/pagamentos?referencia=estorno-7").await;
            found["em_andamento"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
        .await
    );
    let during: Value = app.get_json("/pagamentos?referencia=estorno-7").await;
    assert_eq!(during["em_andamento"][0]["idempotency_key"], key);
    let detail = app.get_json(&format!("/pagamentos/{payment}")).await;
    assert_eq!(
        detail["estornos"][0]["status"], "pendente",
        "held, not paid back yet"
    );

    let done = in_flight.await.unwrap().unwrap();
    assert_eq!(done.status(), StatusCode::CREATED);
    let after: Value = app.get_json("/pagamentos?referencia=estorno-7").await;
    assert_eq!(after["em_andamento"], json!([]));
    let detail = app.get_json(&format!("/pagamentos/{payment}")).await;
    assert_eq!(detail["estornos"][0]["referencia"], "estorno-7");
}
