//! Several `payment-api` processes on one PostgreSQL database: the unique constraint, the lease
//! and the database clock keep one charge per key across replicas.

use crate::helpers::*;
use futures::stream::{self, StreamExt};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Three replicas of the real binary on one fresh PostgreSQL database.
async fn three_replicas(extra: &[&str]) -> (TestDb, Vec<ServerProcess>) {
    let db = TestDb::new(Backend::Postgres).await;
    // The first start migrates; the others find the schema in place.
    let replicas = (0..3).map(|_| ServerProcess::start(&db, extra)).collect();
    (db, replicas)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Sends until the key completes (a 409 while another replica holds it), at most `limit`.
async fn pay_until_done(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    body: &Value,
    limit: Duration,
) -> (StatusCode, Value) {
    let started = Instant::now();
    loop {
        let res = try_pay(client, url, key, body)
            .await
            .expect("the replica answers");
        let status = res.status();
        if status != StatusCode::CONFLICT || started.elapsed() > limit {
            return (status, res.json().await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn two_hundred_concurrent_requests_with_one_key_across_three_replicas_charge_once() {
    // Arrange: a gateway slow enough that every duplicate arrives while the first executes.
    let (db, replicas) = three_replicas(&["--slow-gateway-ms", "700"]).await;
    let client = client();
    let key = new_key();
    let body = json!({"valor": 2590, "cartao": "tok_lento", "referencia": "venda-200"});

    // Act: 200 requests at once, round-robin over the replicas.
    let answers: Vec<(StatusCode, Value)> = stream::iter(0..200)
        .map(|i| {
            let (client, url, key, body) = (
                client.clone(),
                replicas[i % 3].url.clone(),
                key.clone(),
                body.clone(),
            );
            async move {
                let res = try_pay(&client, &url, &key, &body).await.unwrap();
                (res.status(), res.json::<Value>().await.unwrap())
            }
        })
        .buffer_unordered(200)
        .collect()
        .await;

    // Assert: one charge; every answer is the payment or "in progress", never a 5xx.
    for (status, body) in &answers {
        assert!(
            *status == StatusCode::CREATED || *status == StatusCode::CONFLICT,
            "{status} {body}"
        );
    }
    let created: HashSet<String> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .map(|(_, b)| b["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(created.len(), 1, "one payment id: {created:?}");
    for r in &replicas {
        let (status, paid) =
            pay_until_done(&client, &r.url, &key, &body, Duration::from_secs(10)).await;
        assert_eq!(status, StatusCode::CREATED, "{paid}");
        if let Some(id) = created.iter().next() {
            assert_eq!(paid["id"], id.as_str());
        }
    }
    assert_eq!(db.count("gateway_ledger").await, 1);
    assert_eq!(db.count("payments").await, 1);
}

#[tokio::test]
async fn a_thousand_keys_each_sent_to_two_replicas_at_once_make_a_thousand_charges() {
    let (db, replicas) = three_replicas(&[]).await;
    let client = client();
    let keys: Vec<String> = (0..1_000).map(|_| new_key()).collect();

    // Each key goes to two different replicas at the same moment; 64 keys in flight.
    let answers: Vec<(StatusCode, StatusCode)> = stream::iter(keys.iter().enumerate())
        .map(|(i, key)| {
            let (client, a, b) = (
                client.clone(),
                replicas[i % 3].url.clone(),
                replicas[(i + 1) % 3].url.clone(),
            );
            async move {
                let body = approved(100 + i as i64);
                let (x, y) = tokio::join!(
                    try_pay(&client, &a, key, &body),
                    try_pay(&client, &b, key, &body)
                );
                (x.unwrap().status(), y.unwrap().status())
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;

    let mut conflicts = 0;
    for (x, y) in &answers {
        for s in [x, y] {
            assert!(
                *s == StatusCode::CREATED || *s == StatusCode::CONFLICT,
                "only 201 or 409, got {s}"
            );
        }
        assert!(
            *x == StatusCode::CREATED || *y == StatusCode::CREATED,
            "one of the two ran it"
        );
        conflicts += usize::from(*x == StatusCode::CONFLICT || *y == StatusCode::CONFLICT);
    }
    println!(
        "1000 keys × 2 replicas: {conflicts} pairs met while in progress (409), the rest replayed"
    );
    assert_eq!(db.count("gateway_ledger").await, 1_000);
    assert_eq!(db.count("payments").await, 1_000);
    assert_eq!(db.count("idempotency_keys").await, 1_000);
}

#[tokio::test]
async fn a_replica_killed_mid_execution_is_completed_by_another_after_the_lease() {
    // Arrange: a short lease; the doomed replica's gateway call takes seconds.
    let db = TestDb::new(Backend::Postgres).await;
    let mut doomed = ServerProcess::start(&db, &["--lease-ms", "800", "--slow-gateway-ms", "5000"]);
    let others: Vec<ServerProcess> = (0..2)
        .map(|_| ServerProcess::start(&db, &["--lease-ms", "800", "--slow-gateway-ms", "50"]))
        .collect();
    let client = client();
    let key = new_key();
    let body = json!({"valor": 7700, "cartao": "tok_lento"});
    let in_flight = {
        let (client, url, key, body) = (
            client.clone(),
            doomed.url.clone(),
            key.clone(),
            body.clone(),
        );
        tokio::spawn(async move { try_pay(&client, &url, &key, &body).await })
    };
    // Other traffic keeps flowing on the surviving replicas the whole time.
    let background = {
        let (client, urls) = (
            client.clone(),
            others.iter().map(|r| r.url.clone()).collect::<Vec<_>>(),
        );
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            for i in 0..60 {
                let res = try_pay(&client, &urls[i % 2], &new_key(), &approved(10 + i as i64))
                    .await
                    .unwrap();
                statuses.push(res.status());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            statuses
        })
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            db.count("idempotency_keys").await >= 1
        })
        .await
    );

    // Act: kill -9 while it waits on the gateway; retry on another replica.
    doomed.kill9();
    assert!(in_flight.await.unwrap().is_err(), "the killed connection");
    let early = try_pay(&client, &others[0].url, &key, &body).await.unwrap();
    let (status, paid) = pay_until_done(
        &client,
        &others[1].url,
        &key,
        &body,
        Duration::from_secs(10),
    )
    .await;

    // Assert: "in progress" until the lease ran out, then one charge by a survivor.
    assert!(
        early.status() == StatusCode::CONFLICT || early.status() == StatusCode::CREATED,
        "{}",
        early.status()
    );
    assert_eq!(status, StatusCode::CREATED, "{paid}");
    let replay = try_pay(&client, &others[0].url, &key, &body).await.unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.json::<Value>().await.unwrap()["id"], paid["id"]);
    let statuses = background.await.unwrap();
    assert!(
        statuses.iter().all(|s| *s == StatusCode::CREATED),
        "no 5xx on the survivors: {statuses:?}"
    );
    assert_eq!(db.count("gateway_ledger").await, 61);
    let ledger: Vec<Value> = ledger_at(&client, &others[0].url).await;
    assert_eq!(
        ledger.iter().filter(|r| r["valor"] == 7700).count(),
        1,
        "the killed key charged once"
    );
}

/// Replicas one hour ahead and one hour behind agree with an honest one, because leases and
/// retention are read from the database clock.
#[tokio::test]
async fn replicas_with_skewed_clocks_behave_the_same() {
    let db = TestDb::new(Backend::Postgres).await;
    // The gateway takes 4 s: both skewed replicas ask while the honest one still executes.
    let common = ["--lease-ms", "10000", "--slow-gateway-ms", "4000"];
    let honest = ServerProcess::start(&db, &common);
    let ahead = ServerProcess::start(
        &db,
        &[
            &common[..],
            &[
                "--clock-offset-ms",
                "3600000",
                "--key-retention-secs",
                "600",
                "--reaper-interval-secs",
                "1",
            ],
        ]
        .concat(),
    );
    let behind = ServerProcess::start(
        &db,
        &[&common[..], &["--clock-offset-ms", "-3600000"]].concat(),
    );
    let client = client();
    let key = new_key();
    let body = json!({"valor": 990, "cartao": "tok_lento", "referencia": "venda-skew"});
    let first = {
        let (client, url, key, body) = (
            client.clone(),
            honest.url.clone(),
            key.clone(),
            body.clone(),
        );
        tokio::spawn(async move { try_pay(&client, &url, &key, &body).await.unwrap() })
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            db.count("idempotency_keys").await == 1
        })
        .await
    );

    // A replica an hour ahead must not think the 10 s lease ran out an hour ago.
    let from_ahead = try_pay(&client, &ahead.url, &key, &body).await.unwrap();
    assert_eq!(
        from_ahead.status(),
        StatusCode::CONFLICT,
        "no takeover of a live lease"
    );
    let retry_after: u64 = from_ahead.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=10).contains(&retry_after), "Retry-After {retry_after}");
    let from_behind = try_pay(&client, &behind.url, &key, &body).await.unwrap();
    assert_eq!(from_behind.status(), StatusCode::CONFLICT);

    let paid: Value = first.await.unwrap().json().await.unwrap();
    // The reaper of the replica an hour ahead (retention 10 min) leaves the fresh key alone.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(
        db.count("idempotency_keys").await,
        1,
        "not purged by a fast clock"
    );
    for r in [&ahead, &behind] {
        let res = try_pay(&client, &r.url, &key, &body).await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        assert_eq!(res.headers()["idempotent-replayed"], "true");
        assert_eq!(res.json::<Value>().await.unwrap()["id"], paid["id"]);
    }
    // A payment created through a skewed replica is stamped with the database's time.
    let other: Value = try_pay(&client, &ahead.url, &new_key(), &approved(55))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let stamped = time::OffsetDateTime::parse(
        other["criado_em"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let drift = (stamped - time::OffsetDateTime::now_utc()).abs();
    assert!(
        drift < time::Duration::minutes(1),
        "criado_em {stamped} is an hour off"
    );
    assert_eq!(db.count("gateway_ledger").await, 2);
}

/// The `payment-api` binary started on `url`: its exit status and stderr.
fn start_on(url: &str) -> (std::process::ExitStatus, String, Vec<u8>) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_payment-api"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--api-key",
            "sk_test_loja_a_123=loja_a",
            "--database-url",
            url,
        ])
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.stdout,
    )
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_error_and_a_non_zero_exit() {
    let started = Instant::now();
    // Nothing listens on port 1; the password must never be printed.
    let (status, stderr, stdout) = start_on("postgres://pagar:segredo@127.0.0.1:1/pagar");
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("PostgreSQL"), "{stderr}");
    assert!(stderr.contains("inacessível"), "{stderr}");
    assert!(stderr.contains("error connecting to server"), "{stderr}");
    assert!(stderr.contains("pagar:***@"), "{stderr}");
    assert!(
        !stderr.contains("segredo"),
        "the password is not printed: {stderr}"
    );
    assert!(stdout.is_empty(), "it never said it was listening");
    assert!(started.elapsed() < Duration::from_secs(20));

    // The server answers, but the database does not exist: the server's reason is shown.
    let (status, stderr, _) = start_on("postgres://postgres@127.0.0.1:5432/pagar_nao_existe");
    assert_eq!(status.code(), Some(1));
    assert!(
        stderr.contains(r#"database "pagar_nao_existe" does not exist"#),
        "{stderr}"
    );

    // Not a PostgreSQL URL at all.
    let (status, stderr, _) = start_on("mysql://root@127.0.0.1/pagar");
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("postgres://"), "{stderr}");
}

/// Every pooled connection dies at once (a database restart or failover): requests answer a
/// retryable 503 or succeed on a fresh connection, nothing is half-written, and the retry with
/// the same key charges once.
#[tokio::test]
async fn a_database_that_drops_every_connection_recovers_without_a_double_charge() {
    let app = TestApp::spawn_with(Backend::Postgres, |c| c.lease_ms = 500).await;
    let warm = app.pay(&new_key(), &approved(100)).await;
    assert_eq!(warm.status(), StatusCode::CREATED);
    assert!(
        app.db.terminate_connections().await >= 1,
        "the pool had connections"
    );

    let key = new_key();
    let mut waits = Vec::new();
    let mut paid = None;
    for _ in 0..50 {
        let res = app.pay(&key, &approved(4321)).await;
        match res.status() {
            StatusCode::CREATED => {
                paid = Some(res.json::<Value>().await.unwrap());
                break;
            }
            // A dead connection: retry. A claim that committed before its connection died holds
            // the key until the lease (500 ms) runs out: retry.
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::CONFLICT => {
                let problem: Value = res.json().await.unwrap();
                assert_eq!(problem["retryable"], true, "{problem}");
                waits.push(problem["type"].as_str().unwrap().to_string());
            }
            other => panic!("only 201, 503 or 409 while the pool reconnects, got {other}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let paid = paid.expect("a retry succeeds once the pool reconnects");
    println!("answers before the pool reconnected: {waits:?}");
    let again = app.pay(&key, &approved(4321)).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap()["id"], paid["id"]);
    assert_eq!(app.ledger().await.len(), 2);
    assert_eq!(app.db.count("payments").await, 2);
}

#[tokio::test]
async fn fifty_refund_keys_for_one_payment_across_three_replicas_never_pay_back_more_than_it() {
    use crate::refunds::{refund_ledger, sum, try_refund};
    // Arrange: 1 000 charged on one replica; a slow refund, so the 50 overlap.
    let (_db, replicas) = three_replicas(&["--slow-gateway-ms", "300"]).await;
    let client = client();
    let res = try_pay(
        &client,
        &replicas[0].url,
        &new_key(),
        &json!({"valor": 1000, "cartao": "tok_estorno_lento"}),
    )
    .await
    .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let payment = res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Act: 50 different keys, 100 each, at once, round-robin over the replicas.
    let answers: Vec<StatusCode> = stream::iter(0..50)
        .map(|i| {
            let (client, url, payment) =
                (client.clone(), replicas[i % 3].url.clone(), payment.clone());
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

    // Assert: the database let exactly ten through; the refund ledger pays back exactly 1 000.
    let created = answers
        .iter()
        .filter(|s| **s == StatusCode::CREATED)
        .count();
    let refused = answers
        .iter()
        .filter(|s| **s == StatusCode::UNPROCESSABLE_ENTITY)
        .count();
    assert_eq!((created, refused), (10, 40), "{answers:?}");
    let ledger = refund_ledger(&client, &replicas[1].url).await;
    assert_eq!((ledger.len(), sum(&ledger, "aprovado")), (10, 1000));
}

/// 100 keys, each paid on one replica and cancelled on another at the same moment (200 requests
/// at once over three replicas): every key ends exactly one way — charged once and answered as
/// its payment, or never charged and burned — and the ledger holds one charge per key that says
/// it charged.
#[tokio::test]
async fn payments_racing_their_cancellations_across_three_replicas_end_exactly_one_way() {
    let (db, replicas) = three_replicas(&["--slow-gateway-ms", "80"]).await;
    let client = client();
    let keys: Vec<String> = (0..100).map(|_| new_key()).collect();
    let body = json!({"valor": 990, "cartao": "tok_lento"});

    let jobs = keys
        .iter()
        .enumerate()
        .flat_map(|(i, k)| [(i, k.clone(), true), (i, k.clone(), false)]);
    let answers: Vec<(bool, StatusCode)> = stream::iter(jobs)
        .map(|(i, key, pay)| {
            let (client, body) = (client.clone(), body.clone());
            let url = replicas[(i + usize::from(pay)) % 3].url.clone();
            async move {
                let res = if pay {
                    try_pay(&client, &url, &key, &body).await.unwrap()
                } else {
                    cancel_at(&client, &url, &key).await
                };
                (pay, res.status())
            }
        })
        .buffer_unordered(200)
        .collect()
        .await;
    for (pay, status) in &answers {
        let allowed: &[StatusCode] = if *pay {
            &[
                StatusCode::CREATED,
                StatusCode::CONFLICT,
                StatusCode::UNPROCESSABLE_ENTITY,
            ]
        } else {
            &[StatusCode::OK, StatusCode::CONFLICT]
        };
        assert!(allowed.contains(status), "pay={pay}: {status}");
    }

    let mut charged = 0;
    let mut burned = 0;
    for (i, key) in keys.iter().enumerate() {
        let url = &replicas[i % 3].url;
        let outcome = cancel_until_settled(&client, url, key).await;
        match outcome["resultado"].as_str() {
            Some("pagamento") => charged += 1,
            Some("cancelada") => {
                burned += 1;
                let refused = try_pay(&client, url, key, &body).await.unwrap();
                assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
            }
            other => panic!("{key}: {other:?}"),
        }
    }
    println!(
        "100 keys paid and cancelled at once on 3 replicas: {charged} charged, {burned} burned"
    );
    assert_eq!(charged + burned, 100);
    assert_eq!(ledger_at(&client, &replicas[0].url).await.len(), charged);
    assert_eq!(db.count("payments").await, charged as i64);
}

#[tokio::test]
async fn a_pix_across_three_replicas_is_one_charge_settled_by_the_webhook_to_one_and_seen_by_all() {
    // Arrange: three replicas making Pix charges at one provider; the callback goes to whichever
    // replica registered last, and no replica polls: the others learn it from the database.
    let psp = crate::pix::Provider::start(crate::pix::SECRET).await;
    let flags = [
        "--pix-provider-url",
        psp.url.as_str(),
        "--pix-client-secret",
        crate::pix::PIX_TOKEN,
        "--pix-webhook-secrets",
        crate::pix::SECRET,
        "--pix-webhook-url",
        "auto",
        "--pix-poll-ms",
        "3600000",
    ];
    let (db, replicas) = three_replicas(&flags).await;
    let client = client();
    let key = new_key();
    let body = json!({"valor": 4321, "metodo": "pix", "referencia": "venda-pix-replicas"});

    // Act: thirty presses with one key, round-robin over the replicas, until each is answered.
    let answers: Vec<(StatusCode, Value)> = stream::iter(0..30)
        .map(|i| {
            let (client, url, key, body) = (
                client.clone(),
                replicas[i % 3].url.clone(),
                key.clone(),
                body.clone(),
            );
            async move { pay_until_done(&client, &url, &key, &body, Duration::from_secs(20)).await }
        })
        .buffer_unordered(30)
        .collect()
        .await;

    // Assert: one charge at the provider, every answer the same waiting Pix.
    let ids: HashSet<(String, String)> = answers
        .iter()
        .map(|(status, b)| {
            assert_eq!(*status, StatusCode::CREATED, "{b}");
            assert_eq!(b["status"], "aguardando", "{b}");
            (
                b["id"].as_str().unwrap().to_string(),
                b["pix"]["txid"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let (id, txid) = ids.into_iter().next().unwrap();
    assert_eq!(psp.counts().cobrancas, 1);

    // Act: every replica long-polls the payment; the customer pays.
    let polls: Vec<_> = replicas
        .iter()
        .map(|r| {
            let (client, url) = (
                client.clone(),
                format!("{}/pagamentos/{id}?aguardar=20", r.url),
            );
            tokio::spawn(async move {
                let res = client.get(url).bearer_auth(API_KEY).send().await.unwrap();
                res.json::<Value>().await.unwrap()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let paid = psp.customer_pays(&txid, json!({})).await;
    assert_eq!(paid.status(), StatusCode::CREATED);

    // Assert: each replica's long poll answers it received, with the same end-to-end id, and
    // the Pix is recorded once.
    let mut e2e = HashSet::new();
    for poll in polls {
        let answer = poll.await.unwrap();
        assert_eq!(answer["status"], "aprovado", "{answer}");
        e2e.insert(answer["pix"]["e2eid"].as_str().unwrap().to_string());
    }
    assert_eq!(e2e.len(), 1, "{e2e:?}");
    assert_eq!(db.count("pix_received").await, 1);
    assert_eq!(db.count("payments WHERE status = 'aprovado'").await, 1);
    let counts = psp.counts();
    assert_eq!((counts.cobrancas, counts.pix), (1, 1));
    assert!(counts.entregas_aceitas >= 1, "{counts:?}");
}
