use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::time::Duration;

/// In-process: a worker stalls past its lease, a retry takes the key over and completes it, and
/// the stale worker's late result is not written (fencing).
#[apply(stores)]
async fn a_retry_after_the_lease_takes_over_and_the_stale_worker_cannot_write(
    #[case] backend: Backend,
) {
    // Arrange: slow gateway 300 ms, lease 1 s of the manual clock.
    let app = TestApp::spawn_with_clock(backend, |c| c.lease_ms = 1_000).await;
    let key = new_key();
    let body = json!({"valor": 4200, "cartao": "tok_lento"});
    let stale = {
        let (client, url, key, body) = (
            app.client.clone(),
            app.url.clone(),
            key.clone(),
            body.clone(),
        );
        tokio::spawn(async move { try_pay(&client, &url, &key, &body).await.unwrap() })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            app.stored_keys().await == 1
        })
        .await
    );
    // Act: while the first worker is still at the gateway, the lease runs out and a retry arrives.
    let in_progress = app.pay(&key, &body).await;
    assert_eq!(in_progress.status(), StatusCode::CONFLICT);
    app.advance_clock(Duration::from_millis(1_001));
    let takeover = app.pay(&key, &body).await;
    let stale = stale.await.unwrap();
    // Assert
    assert_eq!(takeover.status(), StatusCode::CREATED);
    let takeover: Value = takeover.json().await.unwrap();
    // The stale worker lost its lease: it either answers with what the takeover stored, or, when
    // it finishes first, tells the client to retry. Either way it wrote nothing.
    if stale.status() == StatusCode::CREATED {
        assert_eq!(stale.headers()["idempotent-replayed"], "true");
        assert_eq!(stale.json::<Value>().await.unwrap()["id"], takeover["id"]);
    } else {
        assert_problem(stale, StatusCode::CONFLICT, "lease-lost").await;
    }
    let stored: Value = app.pay(&key, &body).await.json().await.unwrap();
    assert_eq!(stored["id"], takeover["id"]);
    assert_eq!(app.ledger().await.len(), 1);
    assert_eq!(app.db.count("payments").await, 1);
}

/// Real process: the server is aborted after the gateway charged and before it stored the
/// payment. A new process on the same database completes the key without charging again.
#[apply(stores)]
async fn a_server_that_dies_after_charging_is_completed_by_the_next_one_without_a_second_charge(
    #[case] backend: Backend,
) {
    let db = TestDb::new(backend).await;
    let client = reqwest::Client::new();
    let key = new_key();
    let pay = |url: String| {
        let (client, key) = (client.clone(), key.clone());
        async move { try_pay(&client, &url, &key, &approved(9900)).await }
    };
    let mut doomed = ServerProcess::start(
        &db,
        &["--fault-crash-after-charge", "1", "--lease-ms", "500"],
    );
    assert!(
        pay(doomed.url.clone()).await.is_err(),
        "the server died before answering"
    );
    assert!(
        doomed.child.wait().unwrap().code().is_none(),
        "killed by a signal (abort)"
    );
    assert_eq!(
        db.count("gateway_ledger").await,
        1,
        "the gateway charged before the crash"
    );
    assert_eq!(db.count("payments").await, 0);

    let next = ServerProcess::start(&db, &["--lease-ms", "500"]);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let res = pay(next.url.clone()).await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let payment: Value = res.json().await.unwrap();
    assert_eq!(
        db.count("gateway_ledger").await,
        1,
        "the takeover found the earlier charge"
    );
    assert_eq!(db.count("payments").await, 1);
    let replay = pay(next.url.clone()).await.unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.json::<Value>().await.unwrap()["id"], payment["id"]);
}

/// Real process: `kill -9` while the request waits at a slow gateway; the retry on a new process
/// (after the lease) completes it with one charge.
#[apply(stores)]
async fn a_server_killed_mid_execution_is_completed_after_the_lease_with_one_charge(
    #[case] backend: Backend,
) {
    let db = TestDb::new(backend).await;
    let client = reqwest::Client::new();
    let key = new_key();
    let body = json!({"valor": 150, "cartao": "tok_lento"});
    let mut first = ServerProcess::start(&db, &["--slow-gateway-ms", "5000", "--lease-ms", "400"]);
    let in_flight = {
        let (client, url, key, body) =
            (client.clone(), first.url.clone(), key.clone(), body.clone());
        tokio::spawn(async move { try_pay(&client, &url, &key, &body).await })
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            db.count("idempotency_keys").await == 1
        })
        .await
    );
    first.kill9();
    assert!(in_flight.await.unwrap().is_err());
    assert_eq!(db.count("gateway_ledger").await, 0);

    let second = ServerProcess::start(&db, &["--slow-gateway-ms", "50", "--lease-ms", "400"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let res = try_pay(&client, &second.url, &key, &body).await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(db.count("gateway_ledger").await, 1);
    assert_eq!(db.count("payments").await, 1);
}

/// A client that gives up mid-execution (its timeout, a dropped Wi-Fi) does not cancel the
/// execution: the payment completes, and the client's retry gets it replayed.
#[apply(stores)]
async fn a_client_hanging_up_mid_execution_does_not_cancel_it(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    let body = json!({"valor": 321, "cartao": "tok_lento"});
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let gave_up = try_pay(&impatient, &app.url, &key, &body).await;
    assert!(gave_up.is_err());
    assert!(
        eventually(Duration::from_secs(5), || async {
            app.db.count("payments").await == 1
        })
        .await
    );
    let retry = app.pay(&key, &body).await;
    assert_eq!(retry.status(), StatusCode::CREATED);
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(app.ledger().await.len(), 1);
}

/// The recovery worker settles a key sent again after its purge whose server died after the
/// gateway returned the earlier charge (that charge already has its payment: the key completes
/// with it, no second payment row), and a key that fails never holds up the others.
#[apply(stores)]
async fn the_recovery_worker_reconciles_a_purged_key_sent_again_and_goes_on_to_the_next(
    #[case] backend: Backend,
) {
    let db = TestDb::new(backend).await;
    let client = reqwest::Client::new();
    let (purged_key, fresh_key) = (new_key(), new_key());
    let body = approved(4_200);
    let lookup = |url: String, key: String| {
        let client = client.clone();
        async move { merchant_get(&client, &url, &format!("/pagamentos?idempotency_key={key}")).await }
    };

    // Arrange: a payment whose key is purged...
    let first = ServerProcess::start(
        &db,
        &["--key-retention-secs", "1", "--reaper-interval-secs", "1"],
    );
    let paid: Value = try_pay(&client, &first.url, &purged_key, &body)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || async {
            db.count("idempotency_keys").await == 0
        })
        .await,
        "the key was purged"
    );
    drop(first);
    // ...sent again to a server that dies after the gateway answers (with the earlier charge),
    // and a fresh key whose server dies after charging.
    for key in [&purged_key, &fresh_key] {
        let mut doomed = ServerProcess::start(
            &db,
            &["--fault-crash-after-charge", "1", "--lease-ms", "300"],
        );
        assert!(try_pay(&client, &doomed.url, key, &body).await.is_err());
        let _ = doomed.child.wait();
    }
    assert_eq!(db.count("idempotency_keys").await, 2);

    // Act: a server whose recovery worker runs every second.
    let healer = ServerProcess::start(
        &db,
        &[
            "--recovery-after-ms",
            "0",
            "--reaper-interval-secs",
            "1",
            "--lease-ms",
            "300",
        ],
    );

    // Assert: both settled; one payment per charge.
    assert!(
        eventually(Duration::from_secs(15), || async {
            let found = lookup(healer.url.clone(), fresh_key.clone()).await;
            found["pagamentos"].as_array().is_some_and(|p| p.len() == 1)
        })
        .await,
        "the key after the reconciled one was recovered too"
    );
    let again = lookup(healer.url.clone(), purged_key.clone()).await;
    assert_eq!(again["pagamentos"][0]["id"], paid["id"]);
    assert_eq!(again["em_andamento"], json!([]));
    assert_eq!(db.count("payments").await, 2);
    assert_eq!(ledger_at(&client, &healer.url).await.len(), 2);
    let metrics = client
        .get(format!("{}/metrics", healer.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("pagar_recovered_keys_total{status=\"completed\"} 2"),
        "{metrics}"
    );
    assert!(!metrics.contains("status=\"failed\""), "{metrics}");
    let replay = try_pay(&client, &healer.url, &purged_key, &body)
        .await
        .unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.json::<Value>().await.unwrap()["id"], paid["id"]);
}

/// A worker stalled at the gateway past its lease and the recovery worker's look: the recovery
/// finds no charge yet and releases the key (keeping its request); the stalled worker then
/// charges, cannot write its answer, and the next pass finds that charge and stores its payment —
/// one charge, one payment, findable by `referencia`, replayed to the client's retry.
#[apply(stores)]
async fn a_charge_made_by_a_stalled_worker_after_recovery_released_its_key_is_stored_by_the_next_pass(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn_with(backend, |c| {
        c.slow_gateway_ms = 2_500;
        c.lease_ms = 200;
        c.recovery_after_ms = 100;
        c.reaper_interval_secs = 1;
    })
    .await;
    let key = new_key();
    let body = json!({"valor": 4321, "cartao": "tok_lento", "referencia": "venda-parada"});
    let stalled = {
        let (client, url, key, body) = (
            app.client.clone(),
            app.url.clone(),
            key.clone(),
            body.clone(),
        );
        tokio::spawn(async move { try_pay(&client, &url, &key, &body).await.unwrap() })
    };

    // The stalled worker loses its key to the recovery pass and cannot answer with a payment.
    let late = stalled.await.unwrap();
    assert_problem(late, StatusCode::CONFLICT, "lease-lost").await;
    assert_eq!(app.ledger().await.len(), 1, "it did charge");

    // The next pass stores that charge's payment from the request kept with the key.
    let found = eventually(Duration::from_secs(8), || async {
        let found: Value = app.get_json("/pagamentos?referencia=venda-parada").await;
        found["pagamentos"].as_array().is_some_and(|p| p.len() == 1)
    })
    .await;
    assert!(found, "the stalled charge is found by referencia");
    let retry = app.pay(&key, &body).await;
    assert_eq!(retry.status(), StatusCode::CREATED);
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(app.ledger().await.len(), 1);
    assert_eq!(app.db.count("payments").await, 1);
}

/// `--gateway-database`: the simulator's ledger in a file of its own, as a real gateway keeps
/// its charges apart. Charges land there and not in the store's database; and when the store
/// loses a key it had answered (what a power cut does to an unsynced claim, taken to its end), a
/// server started again charges that key sent again at most once: the gateway's downstream key
/// answers with the same charge.
#[tokio::test]
async fn a_gateway_ledger_of_its_own_keeps_the_charge_a_store_lost() {
    let db = TestDb::new(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let gateway_db = dir.path().join("gateway.db");
    let flags = ["--gateway-database", gateway_db.to_str().unwrap()];
    let client = reqwest::Client::new();
    let key = new_key();
    let gateway_rows = || -> Vec<(String, i64)> {
        let c = rusqlite::Connection::open(&gateway_db).unwrap();
        let mut st = c
            .prepare("SELECT cobranca_id, valor FROM gateway_ledger")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };

    let mut first = ServerProcess::start(&db, &flags);
    let paid = try_pay(&client, &first.url, &key, &approved(4200))
        .await
        .unwrap();
    assert_eq!(paid.status(), StatusCode::CREATED);
    let paid: Value = paid.json().await.unwrap();
    assert_eq!(
        db.count("gateway_ledger").await,
        0,
        "the store keeps no charge"
    );
    let charged = gateway_rows();
    assert_eq!(charged.len(), 1);
    assert_eq!(
        charged[0],
        (paid["cobranca_id"].as_str().unwrap().to_string(), 4200)
    );
    first.kill9();

    db.execute(
        "DELETE FROM payments; DELETE FROM idempotency_keys;",
        "unused",
    )
    .await;
    let next = ServerProcess::start(&db, &flags);
    let again = try_pay(&client, &next.url, &key, &approved(4200))
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::CREATED);
    let again: Value = again.json().await.unwrap();
    assert_eq!(gateway_rows(), charged, "no second charge");
    assert_eq!(
        again["cobranca_id"], paid["cobranca_id"],
        "the same charge answers"
    );
    assert_eq!(db.count("payments").await, 1);
}

/// `--gateway-database` names a SQLite file: with PostgreSQL the flag is refused at start.
#[test]
fn a_gateway_database_with_postgres_is_refused() {
    use clap::Parser;
    let err = payment_api::config::Config::try_parse_from([
        "payment-api",
        "--database-url",
        "postgres://x@127.0.0.1/db",
        "--gateway-database",
        "g.db",
    ])
    .expect_err("refused");
    assert!(err.to_string().contains("--gateway-database"), "{err}");
}

/// Real process: the server dies after the gateway charged, and its claim of the key is lost
/// with it (a power cut takes a relaxed claim; the gateway, a system of its own, keeps the
/// charge). The till, in doubt, cancels the key before it makes another: the cancellation finds
/// the charge, and the key becomes the payment the request would have made — with what the
/// request said (the gateway keeps it with the charge) — so a retry of that request is answered
/// with it, and a look-up by its `referencia` finds it.
#[apply(stores)]
async fn a_charge_whose_claim_was_lost_is_found_by_a_cancellation_and_answers_its_request(
    #[case] backend: Backend,
) {
    let db = TestDb::new(backend).await;
    let client = reqwest::Client::new();
    let key = new_key();
    let body = json!({"valor": 4321, "cartao": "tok_aprovado", "referencia": "venda-cortada",
                      "descricao": "caixa sem luz", "terminal": "caixa-07"});
    let mut doomed = ServerProcess::start(&db, &["--fault-crash-after-charge", "1"]);
    assert!(try_pay(&client, &doomed.url, &key, &body).await.is_err());
    let _ = doomed.child.wait();
    assert_eq!(db.count("gateway_ledger").await, 1, "the gateway charged");
    db.execute(
        "DELETE FROM idempotency_keys",
        "DELETE FROM idempotency_keys",
    )
    .await;

    let next = ServerProcess::start(&db, &[]);
    let cancelled = cancel_at(&client, &next.url, &key).await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    let cancelled: Value = cancelled.json().await.unwrap();
    assert_eq!(cancelled["resultado"], "pagamento", "{cancelled}");
    let payment = &cancelled["pagamento"];
    assert_eq!(payment["valor"], 4321);
    assert_eq!(payment["referencia"], "venda-cortada");
    assert_eq!(payment["descricao"], "caixa sem luz");
    assert_eq!(payment["terminal"], "caixa-07");

    // The request the key was made for gets that payment, as a replay; another is refused.
    let replay = try_pay(&client, &next.url, &key, &body).await.unwrap();
    assert_eq!(replay.status(), StatusCode::CREATED);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(&replay.json::<Value>().await.unwrap(), payment);
    let other = try_pay(&client, &next.url, &key, &approved(4321))
        .await
        .unwrap();
    assert_problem(
        other,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency-key-reused",
    )
    .await;
    let found = merchant_get(&client, &next.url, "/pagamentos?referencia=venda-cortada").await;
    assert_eq!(found["pagamentos"], json!([payment]));
    assert_eq!(db.count("gateway_ledger").await, 1, "nothing charged again");
}
