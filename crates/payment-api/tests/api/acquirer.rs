//! Card charges at the acquirer in its own process (`crates/adquirente`: Mercado Pago's Orders
//! API for online payments in shape, its ledger on a file of its own), on both stores: a charge,
//! an authorization's capture and undo, partial refunds, an acquirer that is down, an answer
//! lost on the way back, and a server killed after the acquirer charged — each counted in the
//! acquirer's own ledger, never by what the server says.

use crate::helpers::*;
use crate::stores;
use pagar_testkit::{AcquirerProcess, Fault, FaultProxy, ACQUIRER_TOKEN};
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};

/// The acquirer on a free port, its ledger in a folder of the test's.
fn acquirer() -> (AcquirerProcess, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (AcquirerProcess::start(dir.path()), dir)
}

/// A server whose card charges go to the acquirer at `url`.
async fn app_charging_at(backend: Backend, url: &str) -> TestApp {
    TestApp::spawn_with(backend, |c| {
        c.gateway_url = Some(url.to_string());
        c.gateway_token = ACQUIRER_TOKEN.to_string();
    })
    .await
}

/// `POST /pagamentos/{payment}/{path}` with merchant A's key.
async fn post(app: &TestApp, payment: &str, path: &str, key: &str, body: Value) -> Value {
    let res = app
        .client
        .post(format!("{}/pagamentos/{payment}/{path}", app.url))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{path}: {}", res.status());
    res.json().await.unwrap()
}

/// A charge's row in the acquirer's ledger.
async fn row(acq: &AcquirerProcess, cobranca: &Value) -> Value {
    acq.charges()
        .await
        .into_iter()
        .find(|r| &r["cobranca_id"] == cobranca)
        .expect("the acquirer has the charge")
}

#[apply(stores)]
async fn a_card_is_charged_at_the_acquirer_once_per_key_and_replayed_without_asking_it_again(
    #[case] backend: Backend,
) {
    let (acq, _dir) = acquirer();
    let app = app_charging_at(backend, acq.url()).await;
    let key = new_key();
    let body = json!({"valor": 12_345, "cartao": "tok_aprovado", "metodo": "credito",
                      "parcelas": 3, "parcelamento": "emissor", "referencia": "venda-1"});

    let first = app.pay(&key, &body).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let first: Value = first.json().await.unwrap();
    let replay = app.pay(&key, &body).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.json::<Value>().await.unwrap(), first);
    let declined = app
        .pay(
            &new_key(),
            &json!({"valor": 500, "cartao": "tok_saldo_insuficiente"}),
        )
        .await;
    assert_eq!(declined.status(), StatusCode::PAYMENT_REQUIRED);
    assert_eq!(
        declined.json::<Value>().await.unwrap()["motivo"],
        "saldo_insuficiente"
    );

    let charges = acq.charges().await;
    assert_eq!(charges.len(), 2, "{charges:?}");
    let charged = row(&acq, &first["cobranca_id"]).await;
    assert_eq!(
        (&charged["valor"], &charged["status"], &charged["plano"]),
        (
            &json!(12_345),
            &json!("aprovado"),
            &json!("credito:3:emissor")
        )
    );
    assert_eq!(charged["merchant"], "loja_a");
    // The server keeps no ledger of its own: the acquirer's is the only one.
    let res = app
        .client
        .get(format!("{}/admin/ledger", app.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

#[apply(stores)]
async fn an_authorization_is_captured_or_undone_and_a_payment_refunded_in_parts_at_the_acquirer(
    #[case] backend: Backend,
) {
    let (acq, _dir) = acquirer();
    let app = app_charging_at(backend, acq.url()).await;
    let authorize = |valor: i64| {
        let app = &app;
        async move {
            let res = app
                .pay(
                    &new_key(),
                    &json!({"valor": valor, "cartao": "tok_aprovado", "metodo": "debito",
                            "captura": false}),
                )
                .await;
            assert_eq!(res.status(), StatusCode::CREATED);
            res.json::<Value>().await.unwrap()
        }
    };

    let kept = authorize(5_000).await;
    assert_eq!(row(&acq, &kept["cobranca_id"]).await["captura"], "pendente");
    let id = kept["id"].as_str().unwrap();
    let captured = post(&app, id, "captura", &new_key(), json!({})).await;
    assert_eq!(captured["captura"], "capturada", "{captured}");
    assert_eq!(
        row(&acq, &kept["cobranca_id"]).await["captura"],
        "capturada"
    );

    let dropped = authorize(2_000).await;
    let undone = post(
        &app,
        dropped["id"].as_str().unwrap(),
        "desfazimento",
        &new_key(),
        json!({}),
    )
    .await;
    assert_eq!(undone["captura"], "desfeita", "{undone}");
    assert_eq!(
        row(&acq, &dropped["cobranca_id"]).await["captura"],
        "desfeita"
    );

    // The captured 50,00 paid back in two parts, the first asked twice.
    let part = new_key();
    let first = post(&app, id, "estornos", &part, json!({"valor": 1_000})).await;
    let again = post(&app, id, "estornos", &part, json!({"valor": 1_000})).await;
    assert_eq!(first, again);
    post(&app, id, "estornos", &new_key(), json!({"valor": 4_000})).await;
    let refused = app
        .client
        .post(format!("{}/pagamentos/{id}/estornos", app.url))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", new_key())
        .json(&json!({"valor": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let estornos = acq.ledger().await["estornos"].as_array().unwrap().clone();
    let paid_back: Vec<i64> = estornos
        .iter()
        .map(|e| e["valor"].as_i64().unwrap())
        .collect();
    assert_eq!(paid_back, [1_000, 4_000], "{estornos:?}");
}

#[apply(stores)]
async fn with_the_acquirer_down_a_charge_is_retryable_and_its_retry_charges_once_when_it_is_back(
    #[case] backend: Backend,
) {
    let (mut acq, _dir) = acquirer();
    let app = app_charging_at(backend, acq.url()).await;
    let before = app.pay(&new_key(), &approved(700)).await;
    assert_eq!(before.status(), StatusCode::CREATED);

    acq.kill();
    let key = new_key();
    let down = app.pay(&key, &approved(900)).await;
    let problem =
        assert_problem(down, StatusCode::SERVICE_UNAVAILABLE, "gateway-unavailable").await;
    assert_eq!(problem["retryable"], true, "{problem}");

    // Back on the same port and ledger (killed -9: what it had written is still there).
    acq.restart();
    let retried = app.pay(&key, &approved(900)).await;
    assert_eq!(retried.status(), StatusCode::CREATED);
    let charges = acq.charges().await;
    let amounts: Vec<i64> = charges
        .iter()
        .map(|c| c["valor"].as_i64().unwrap())
        .collect();
    assert_eq!(amounts, [700, 900], "{charges:?}");
}

#[apply(stores)]
async fn an_answer_lost_on_the_way_back_from_the_acquirer_is_found_again_under_the_same_key(
    #[case] backend: Backend,
) {
    let (acq, _dir) = acquirer();
    let upstream = acq.url().trim_start_matches("http://").parse().unwrap();
    let proxy = FaultProxy::start(upstream).await;
    let app = app_charging_at(backend, &proxy.url()).await;
    let key = new_key();
    let body = json!({"valor": 3_300, "cartao": "tok_aprovado", "referencia": "perdida"});

    proxy.set(Fault::CutAfterAnswer).await;
    let lost = app.pay(&key, &body).await;
    let (status, said) = (lost.status(), lost.text().await.unwrap());
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{said}");
    assert_eq!(acq.charges().await.len(), 1, "the acquirer charged");

    proxy.set(Fault::Pass).await;
    let retried = app.pay(&key, &body).await;
    let (status, said) = (retried.status(), retried.text().await.unwrap());
    assert_eq!(status, StatusCode::CREATED, "{said}");
    let payment: Value = serde_json::from_str(&said).unwrap();
    assert_eq!(payment["valor"], 3_300);
    let charges = acq.charges().await;
    assert_eq!(
        charges.len(),
        1,
        "the same order, not a second: {charges:?}"
    );
    assert_eq!(charges[0]["cobranca_id"], payment["cobranca_id"]);
}

#[apply(stores)]
async fn a_server_killed_after_the_acquirer_charged_whose_claim_was_lost_answers_that_charge(
    #[case] backend: Backend,
) {
    let (acq, _dir) = acquirer();
    let db = TestDb::new(backend).await;
    let client = reqwest::Client::new();
    let key = new_key();
    let body = json!({"valor": 4_321, "cartao": "tok_aprovado", "referencia": "venda-cortada",
                      "descricao": "caixa sem luz", "terminal": "caixa-07"});
    let flags = acq.api_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut doomed = ServerProcess::start(
        &db,
        &[&["--fault-crash-after-charge", "1"], flags.as_slice()].concat(),
    );
    assert!(try_pay(&client, &doomed.url, &key, &body).await.is_err());
    let _ = doomed.child.wait();
    assert_eq!(acq.charges().await.len(), 1, "the acquirer charged");
    // A power cut took the server's claim of the key too (it is a relaxed write).
    db.execute(
        "DELETE FROM idempotency_keys",
        "DELETE FROM idempotency_keys",
    )
    .await;

    let next = ServerProcess::start(&db, &flags);
    let cancelled = cancel_at(&client, &next.url, &key).await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    let cancelled: Value = cancelled.json().await.unwrap();
    assert_eq!(cancelled["resultado"], "pagamento", "{cancelled}");
    let payment = &cancelled["pagamento"];
    assert_eq!(
        (
            &payment["valor"],
            &payment["referencia"],
            &payment["terminal"]
        ),
        (&json!(4_321), &json!("venda-cortada"), &json!("caixa-07"))
    );
    let replay = try_pay(&client, &next.url, &key, &body).await.unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(&replay.json::<Value>().await.unwrap(), payment);
    assert_eq!(acq.charges().await.len(), 1, "nothing charged again");
}
