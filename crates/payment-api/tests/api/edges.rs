//! The server's edges: what either store cannot keep is refused before any charge, a key sent
//! again after its retention, executions abandoned after a crash, readiness, the sandbox.

use crate::helpers::*;
use crate::stores;
use payment_api::store::SqliteStore;
use payment_api::Config;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

#[apply(stores)]
async fn text_that_a_store_cannot_keep_is_refused_before_any_charge(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    for (field, text) in [
        ("descricao", "venda\u{0}nula"),
        ("referencia", "ref\u{7}sino"),
        ("descricao", "linha\nquebrada"),
    ] {
        let res = app
            .pay(
                &key,
                &json!({"valor": 100, "cartao": "tok_aprovado", field: text}),
            )
            .await;
        let problem = assert_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
        assert_eq!(problem["errors"][0]["campo"], field, "{problem}");
    }
    // A lone surrogate is not text at all.
    let res = app
        .post_json_text(
            &key,
            r#"{"valor": 100, "cartao": "tok_aprovado", "descricao": "\ud800"}"#,
        )
        .await;
    assert_problem(res, StatusCode::BAD_REQUEST, "malformed-json").await;
    assert!(app.ledger().await.is_empty(), "nothing was charged");
    assert_eq!(app.stored_keys().await, 0);

    // What both stores keep: 255 characters of four bytes each, stored and replayed as sent.
    let emoji = "🧾".repeat(255);
    let body = json!({"valor": 100, "cartao": "tok_aprovado", "descricao": emoji});
    let first = app.pay(&key, &body).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let first = first.bytes().await.unwrap();
    let again = app.pay(&key, &body).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.bytes().await.unwrap(), first);
    let stored: Value = serde_json::from_slice(&first).unwrap();
    let found = app
        .get_json(&format!("/pagamentos/{}", stored["id"].as_str().unwrap()))
        .await;
    assert_eq!(found["descricao"], emoji.as_str());
}

#[apply(stores)]
async fn a_field_given_twice_and_a_second_authorization_header_are_refused(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    let res = app
        .post_json_text(
            &key,
            r#"{"valor": 100, "valor": 999999, "cartao": "tok_aprovado"}"#,
        )
        .await;
    let problem = assert_problem(res, StatusCode::BAD_REQUEST, "malformed-json").await;
    assert!(
        problem["detail"].as_str().unwrap().contains("repetido"),
        "{problem}"
    );
    let auth = format!("Bearer {API_KEY}");
    let res = app
        .post_raw(
            &[
                ("Authorization", auth.as_str()),
                ("Authorization", "Bearer sk_test_outra_loja"),
                ("Idempotency-Key", key.as_str()),
                ("Content-Type", "application/json"),
            ],
            r#"{"valor": 100, "cartao": "tok_aprovado"}"#,
        )
        .await
        .unwrap();
    assert_problem(res, StatusCode::BAD_REQUEST, "duplicate-header").await;
    assert!(app.ledger().await.is_empty());
    assert_eq!(app.stored_keys().await, 0);
    assert_eq!(
        app.pay(&key, &approved(100)).await.status(),
        StatusCode::CREATED
    );
}

#[apply(stores)]
async fn a_key_sent_again_after_its_retention_gets_its_payment_and_another_request_a_422(
    #[case] backend: Backend,
) {
    // Arrange: keys kept 60 s of the test's clock; the reaper runs every second.
    let app = TestApp::spawn_with_clock(backend, |c| {
        c.key_retention_secs = 60;
        c.reaper_interval_secs = 1;
    })
    .await;
    let key = new_key();
    let body = json!({"valor": 4321, "cartao": "tok_aprovado", "referencia": "venda-ret"});
    let first = app.pay(&key, &body).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let first = first.bytes().await.unwrap();
    let purge = || async {
        app.advance_clock(Duration::from_secs(120));
        assert!(
            eventually(Duration::from_secs(5), || async {
                app.stored_keys().await == 0
            })
            .await,
            "the reaper purged the key"
        );
    };
    purge().await;

    // Act + Assert: the same request, with the key purged, gets the original payment.
    let again = app.pay(&key, &body).await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.bytes().await.unwrap(), first, "the same bytes");
    assert_eq!(app.db.count("payments").await, 1, "no second payment row");

    // Another request under the purged key: refused, and the key stays free for the original.
    purge().await;
    let other = app
        .pay(&key, &json!({"valor": 1, "cartao": "tok_aprovado"}))
        .await;
    assert_problem(
        other,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency-key-reused",
    )
    .await;
    assert_eq!(app.stored_keys().await, 0);
    let original = app.pay(&key, &body).await;
    assert_eq!(original.bytes().await.unwrap(), first);
    assert_eq!(app.ledger().await.len(), 1);
    assert_eq!(app.db.count("payments").await, 1);
}

/// Real process: the server aborts after the gateway charged; nobody retries. The next process's
/// recovery worker stores the payment from the ledger, so a lookup by `referencia` finds it.
#[apply(stores)]
async fn a_charge_abandoned_by_a_crash_is_stored_by_the_recovery_worker_without_a_retry(
    #[case] backend: Backend,
) {
    let db = TestDb::new(backend).await;
    let client = reqwest::Client::new();
    let (key, body) = charge_abandoned_by_a_crash(&db, "venda-abandonada").await;
    assert_eq!(db.count("gateway_ledger").await, 1);
    assert_eq!(db.count("payments").await, 0);

    // A key abandoned before any charge, older than the key retention, is cancelled instead.
    let uncharged = new_key();
    if let TestDb::Sqlite { path, .. } = &db {
        let c = rusqlite::Connection::open(path).unwrap();
        c.execute(
            "INSERT INTO idempotency_keys (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point)
             VALUES ('loja_a', ?1, 'fp', 0, 0, 1, 'started')",
            [&uncharged],
        )
        .unwrap();
    }

    let next = recovering_server(&db);
    let found = eventually(Duration::from_secs(5), || async {
        admin_lookup(&client, &next.url, "venda-abandonada")
            .await
            .len()
            == 1
    })
    .await;
    assert!(
        found,
        "the payment appeared by referencia within one recovery interval"
    );
    let payments = admin_lookup(&client, &next.url, "venda-abandonada").await;
    // The client's late retry gets that same payment, answered as a replay.
    let res = try_pay(&client, &next.url, &key, &body).await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    assert_eq!(res.json::<Value>().await.unwrap()["id"], payments[0]["id"]);
    assert_eq!(ledger_at(&client, &next.url).await.len(), 1, "one charge");
    assert_eq!(db.count("payments").await, 1);
    if matches!(db, TestDb::Sqlite { .. }) {
        let cancelled = eventually(Duration::from_secs(5), || async {
            let res = client
                .get(format!(
                    "{}/pagamentos?idempotency_key={uncharged}",
                    next.url
                ))
                .bearer_auth(API_KEY)
                .send()
                .await
                .unwrap();
            let found: Value = res.json().await.unwrap();
            found["em_andamento"] == json!([]) && found["pagamentos"] == json!([])
        })
        .await;
        assert!(cancelled, "the uncharged abandoned key was settled");
        let refused = try_pay(&client, &next.url, &uncharged, &approved(100))
            .await
            .unwrap();
        assert_problem(
            refused,
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency-key-cancelled",
        )
        .await;
        assert_eq!(db.count("payments").await, 1, "nothing charged for it");
    }
}

/// Real process: a charge abandoned by a crash behind more released keys than a recovery pass
/// takes (150 executions abandoned before any charge, their clients gone, each looked at and
/// released by earlier passes). A released key is no longer what a pass looks at first: the
/// charge's payment is stored at the next pass, and the released keys are looked at in turn —
/// not the same hundred at every pass while the others wait for their retention to end.
#[apply(stores)]
async fn a_charge_abandoned_behind_many_released_keys_is_stored_at_the_next_pass_and_they_take_turns(
    #[case] backend: Backend,
) {
    // Arrange: one charge abandoned by a crash; 150 keys released, none charged.
    let db = TestDb::new(backend).await;
    let client = reqwest::Client::new();
    charge_abandoned_by_a_crash(&db, "venda-atras").await;
    let released = |now: &str, series: &str| {
        format!(
            "INSERT INTO idempotency_keys (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point)
             SELECT 'loja_a', 'solta-' || n, 'fp', {now}, 0, 1, 'started' FROM {series}"
        )
    };
    db.execute(
        &format!(
            "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 150) {}",
            released(
                "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
                "s"
            )
        ),
        &released("pagar_now_ms()", "generate_series(1, 150) AS s(n)"),
    )
    .await;

    // Act: a server whose recovery worker passes every second.
    let next = recovering_server(&db);

    // Assert: the charge's payment is found by referencia; every released key was looked at.
    let found = eventually(Duration::from_secs(5), || async {
        admin_lookup(&client, &next.url, "venda-atras").await.len() == 1
    })
    .await;
    assert!(
        found,
        "the abandoned charge was stored despite the released keys"
    );
    let never_looked_at = || async {
        db.count("idempotency_keys WHERE key LIKE 'solta-%' AND fence = 1")
            .await
    };
    let all_looked_at = eventually(Duration::from_secs(5), || async {
        never_looked_at().await == 0
    })
    .await;
    assert!(
        all_looked_at,
        "{} released keys never looked at again",
        never_looked_at().await
    );
    assert_eq!(ledger_at(&client, &next.url).await.len(), 1, "one charge");
    assert_eq!(
        db.count("idempotency_keys WHERE key LIKE 'solta-%' AND completed_at IS NULL")
            .await,
        150,
        "the released keys stay free for their clients' retries"
    );
}

/// A server process that aborts right after the gateway charged a payment for `referencia`,
/// nobody retrying it: its key is left started, its charge in the ledger with no payment.
/// Returns the key and the request.
async fn charge_abandoned_by_a_crash(db: &TestDb, referencia: &str) -> (String, Value) {
    let key = new_key();
    let body = json!({"valor": 7700, "cartao": "tok_aprovado", "referencia": referencia});
    let mut doomed = ServerProcess::start(
        db,
        &["--fault-crash-after-charge", "1", "--lease-ms", "300"],
    );
    let crashed = try_pay(&reqwest::Client::new(), &doomed.url, &key, &body).await;
    assert!(crashed.is_err(), "the server aborted before answering");
    let _ = doomed.child.wait();
    (key, body)
}

/// A server process whose recovery worker passes every second, taking over executions 200 ms
/// after their lease (300 ms) ended.
fn recovering_server(db: &TestDb) -> ServerProcess {
    ServerProcess::start(
        db,
        &[
            "--lease-ms",
            "300",
            "--recovery-after-ms",
            "200",
            "--reaper-interval-secs",
            "1",
        ],
    )
}

async fn admin_lookup(client: &reqwest::Client, url: &str, referencia: &str) -> Vec<Value> {
    let res = merchant_get(client, url, &format!("/pagamentos?referencia={referencia}")).await;
    res["pagamentos"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn readiness_fails_when_the_sqlite_writer_is_gone_while_liveness_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(
        dir.path().join("api.db"),
        Arc::new(payment_api::clock::SystemClock::default()),
    )
    .unwrap();
    let config = Config::sandbox(dir.path().join("unused.db"), API_KEY, "loja_a", ADMIN);
    let server = payment_api::start_with_store(
        config,
        Arc::new(store.clone()) as Arc<dyn payment_api::server::Database>,
    )
    .await
    .unwrap();
    let get = |path: &'static str| {
        let url = format!("{}{path}", server.url());
        async move { reqwest::get(url).await.unwrap() }
    };
    assert_eq!(get("/health/ready").await.status(), StatusCode::OK);
    store.close();
    let ready = get("/health/ready").await;
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let live = get("/health").await;
    assert_eq!(live.status(), StatusCode::OK);
    assert!(live.json::<Value>().await.unwrap()["key_retention_secs"].is_u64());
}

#[tokio::test]
async fn the_embedded_sandbox_allows_no_web_origin_and_no_crash_fault() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = payment_api::start(Config::sandbox(
        dir.path().join("sandbox.db"),
        API_KEY,
        "loja_a",
        ADMIN,
    ))
    .await
    .unwrap();
    let mut standalone = Config::sandbox(dir.path().join("api.db"), API_KEY, "loja_a", ADMIN);
    standalone.cors_origins = "*".into();
    standalone.embedded = false;
    let standalone = payment_api::start(standalone).await.unwrap();
    let client = reqwest::Client::new();
    let preflight = |url: String| {
        client
            .request(reqwest::Method::OPTIONS, format!("{url}/pagamentos"))
            .header("Origin", "https://evil.example")
            .header("Access-Control-Request-Method", "POST")
            .send()
    };
    let open = preflight(standalone.url()).await.unwrap();
    assert_eq!(open.headers()["access-control-allow-origin"], "*");
    let closed = preflight(sandbox.url()).await.unwrap();
    assert!(closed
        .headers()
        .get("access-control-allow-origin")
        .is_none());

    let res = client
        .put(format!("{}/admin/faults", sandbox.url()))
        .bearer_auth(ADMIN)
        .json(&json!({"crash_after_charge_probability": 1.0}))
        .send()
        .await
        .unwrap();
    assert_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
}

/// The store refuses the payment row after the gateway charged (a disk, a constraint, a broken
/// connection: here a trigger). What happens: the request answers 503 `store-unavailable`,
/// retryable; the key stays held by its lease; a retry after the lease takes it over and gets the
/// same charge back from the gateway (never a second one), and tries to store it again. While
/// the store keeps refusing, every retry answers 503 the same way, with no new charge; once it
/// can store, the next retry (or the recovery worker) completes the payment.
#[apply(stores)]
async fn a_store_failure_after_the_charge_never_charges_again_and_completes_once_the_store_can(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn_with_clock(backend, |c| c.lease_ms = 1_000).await;
    app.db
        .execute(
            "CREATE TRIGGER refuse AFTER INSERT ON payments WHEN NEW.descricao = 'falhar'
             BEGIN SELECT RAISE(ABORT, 'disco recusou'); END;",
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN IF NEW.descricao = 'falhar' THEN RAISE EXCEPTION 'disco recusou'; END IF; RETURN NEW; END $$;
             CREATE TRIGGER refuse BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION refuse();",
        )
        .await;
    let key = new_key();
    let body = json!({"valor": 555, "cartao": "tok_aprovado", "descricao": "falhar"});
    for _ in 0..3 {
        let res = app.pay(&key, &body).await;
        let problem =
            assert_problem(res, StatusCode::SERVICE_UNAVAILABLE, "store-unavailable").await;
        assert_eq!(problem["retryable"], true);
        app.advance_clock(Duration::from_millis(1_001)); // the lease ends; the next try takes over
    }
    assert_eq!(
        app.ledger().await.len(),
        1,
        "charged once, however often it is retried"
    );
    assert_eq!(app.db.count("payments").await, 0);

    app.db
        .execute("DROP TRIGGER refuse;", "DROP TRIGGER refuse ON payments;")
        .await;
    let res = app.pay(&key, &body).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let again = app.pay(&key, &body).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(app.ledger().await.len(), 1);
    assert_eq!(app.db.count("payments").await, 1);
}

/// The standalone server's SQLite files are the owner's alone, whatever the umask it starts under.
#[tokio::test]
async fn the_servers_sqlite_files_are_0600_under_a_permissive_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("api.db");
    let mut child = std::process::Command::new("sh")
        .args(["-c", "umask 0000 && exec \"$@\"", "sh"])
        .arg(env!("CARGO_BIN_EXE_payment-api"))
        .args(["--listen", "127.0.0.1:0", "--api-key"])
        .arg(format!("{API_KEY}=loja_a"))
        .arg("--database")
        .arg(&db)
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let url = listening_url(&mut child);
    let res = try_pay(&reqwest::Client::new(), &url, &new_key(), &approved(100))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    for suffix in ["", "-wal", "-shm"] {
        let path = format!("{}{suffix}", db.display());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{path}");
    }
    let _ = child.kill();
    let _ = child.wait();
}
