//! Authorize, then capture or undo (`"captura": false`, `POST /pagamentos/{id}/captura`,
//! `/desfazimento`), on both stores: each step keyed and replayed, never both a capture and an
//! undo of one authorization, a lapsed one never captured, and an undone one holding nothing of
//! its sale. Counted in the gateway's ledger.

use crate::helpers::*;
use crate::stores;
use futures::stream::{self, StreamExt};
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::time::Duration;

/// `POST {base}/pagamentos/{payment}/{step}` with merchant A's key and an empty body.
async fn step(app: &TestApp, payment: &str, step: &str, key: &str) -> reqwest::Response {
    app.client
        .post(format!("{}/pagamentos/{payment}/{step}", app.url))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", key)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
}

/// An authorization of `valor` (approved, not captured); its answer.
async fn authorize(app: &TestApp, valor: i64) -> Value {
    let res = app
        .pay(
            &new_key(),
            &json!({"valor": valor, "cartao": "tok_aprovado", "metodo": "debito", "captura": false}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json().await.unwrap()
}

/// The gateway's ledger row of a charge.
async fn ledger_row(app: &TestApp, cobranca: &str) -> Value {
    app.ledger()
        .await
        .into_iter()
        .find(|r| r["cobranca_id"] == cobranca)
        .expect("a ledger row")
}

#[apply(stores)]
async fn an_authorization_is_captured_once_and_its_answers_replay(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let auth = authorize(&app, 5_000).await;
    assert_eq!(auth["status"], "autorizado", "{auth}");
    assert_eq!(auth["captura"], "pendente");
    assert!(auth["autorizacao_expira_em"].is_string(), "{auth}");
    let id = auth["id"].as_str().unwrap();
    let cobranca = auth["cobranca_id"].as_str().unwrap();
    assert_eq!(ledger_row(&app, cobranca).await["captura"], "pendente");

    // Nothing was taken, so nothing can be refunded: undo it instead.
    let refused = app
        .client
        .post(format!("{}/pagamentos/{id}/estornos", app.url))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", new_key())
        .json(&json!({"valor": 100}))
        .send()
        .await
        .unwrap();
    assert_problem(
        refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "pagamento-nao-capturado",
    )
    .await;

    let key = new_key();
    let (status, replayed, first) = body_of(step(&app, id, "captura", &key).await).await;
    assert_eq!((status, replayed), (StatusCode::OK, None));
    let captured: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(
        (&captured["status"], &captured["captura"]),
        (&json!("aprovado"), &json!("capturada"))
    );
    let (status, replayed, again) = body_of(step(&app, id, "captura", &key).await).await;
    assert_eq!(
        (status, replayed.as_deref(), again),
        (StatusCode::OK, Some("true"), first)
    );
    // The same key cannot undo it, nor capture another payment.
    assert_problem(
        step(&app, id, "desfazimento", &key).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency-key-reused",
    )
    .await;
    // An undo after the capture is refused, and that answer is stored like any other.
    let late = new_key();
    let p = assert_problem(
        step(&app, id, "desfazimento", &late).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "pagamento-capturado",
    )
    .await;
    assert!(p["detail"].as_str().unwrap().contains("estorne"), "{p}");
    let res = step(&app, id, "desfazimento", &late).await;
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    assert_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "pagamento-capturado").await;

    let row = ledger_row(&app, cobranca).await;
    assert_eq!(
        (&row["captura"], &row["valor"]),
        (&json!("capturada"), &json!(5_000))
    );
    assert_eq!(app.ledger().await.len(), 1, "one charge, captured once");
    let read = app.get_json(&format!("/pagamentos/{id}")).await;
    assert_eq!(read["status"], "aprovado", "{read}");
    assert_eq!(read["saldo_estornavel"], 5_000);
    // Captured, it is refunded like any payment.
    let refund = app
        .client
        .post(format!("{}/pagamentos/{id}/estornos", app.url))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", new_key())
        .json(&json!({"valor": 5_000}))
        .send()
        .await
        .unwrap();
    assert_eq!(refund.status(), StatusCode::CREATED);
}

#[apply(stores)]
async fn captures_and_undos_racing_on_one_authorization_never_both_take_effect(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    for round in 0..8 {
        let auth = authorize(&app, 1_000 + round).await;
        let id = auth["id"].as_str().unwrap().to_string();
        // Eight captures and eight undos at once, each under its own key.
        let answers: Vec<(&str, StatusCode, Value)> = stream::iter(0..16)
            .map(|i| {
                let (app, id) = (&app, id.clone());
                async move {
                    let which = if i % 2 == 0 {
                        "captura"
                    } else {
                        "desfazimento"
                    };
                    let res = step(app, &id, which, &new_key()).await;
                    let status = res.status();
                    (which, status, res.json::<Value>().await.unwrap())
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        let won = |which: &str| {
            answers
                .iter()
                .filter(|(w, s, _)| *w == which && *s == StatusCode::OK)
                .count()
        };
        let (captured, undone) = (won("captura"), won("desfazimento"));
        assert!(
            (captured == 8 && undone == 0) || (captured == 0 && undone == 8),
            "round {round}: {captured} captures and {undone} undos answered 200: {answers:?}"
        );
        for (which, status, body) in &answers {
            if *status != StatusCode::OK {
                assert_eq!(*status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
                let expected = match *which {
                    "captura" => "urn:pagar:problem:autorizacao-desfeita",
                    _ => "urn:pagar:problem:pagamento-capturado",
                };
                assert_eq!(body["type"], expected);
            }
        }
        let want = if captured == 8 {
            "capturada"
        } else {
            "desfeita"
        };
        let row = ledger_row(&app, auth["cobranca_id"].as_str().unwrap()).await;
        assert_eq!(row["captura"], want, "the gateway agrees");
        let read = app.get_json(&format!("/pagamentos/{id}")).await;
        assert_eq!(read["captura"], want, "the payment agrees");
    }
}

#[apply(stores)]
async fn a_lapsed_authorization_is_never_captured_and_the_reaper_marks_it(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn_with_clock(backend, |c| {
        c.authorization_ttl_ms = 60_000;
        c.reaper_interval_secs = 1;
    })
    .await;
    let asked = authorize(&app, 2_000).await;
    let left_alone = authorize(&app, 3_000).await;
    app.advance_clock(Duration::from_secs(61));

    let id = asked["id"].as_str().unwrap();
    let key = new_key();
    assert_problem(
        step(&app, id, "captura", &key).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "autorizacao-expirada",
    )
    .await;
    assert_eq!(
        app.get_json(&format!("/pagamentos/{id}")).await["status"],
        "expirado"
    );
    // Nobody asked about the other one: the reaper asks the gateway and records the lapse.
    let other = left_alone["id"].as_str().unwrap().to_string();
    let lapsed = eventually(Duration::from_secs(10), || {
        let (app, other) = (&app, other.clone());
        async move { app.get_json(&format!("/pagamentos/{other}")).await["status"] == "expirado" }
    })
    .await;
    assert!(lapsed, "the reaper never settled the lapsed authorization");
    for auth in [&asked, &left_alone] {
        let row = ledger_row(&app, auth["cobranca_id"].as_str().unwrap()).await;
        assert_eq!(row["captura"], "expirada");
    }
    // An undo of a lapsed authorization answers it lapsed: nothing was taken either way.
    let res = step(&app, &other, "desfazimento", &new_key()).await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

#[apply(stores)]
async fn an_undone_authorization_holds_nothing_of_its_sale(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let venda = new_key();
    let tender = |valor: i64| {
        json!({
            "valor": valor,
            "cartao": "tok_aprovado",
            "metodo": "debito",
            "terminal": "caixa-01",
            "venda": {"referencia": venda, "total": 10_000},
            "captura": false,
        })
    };
    let res = app.pay(&new_key(), &tender(6_000)).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let first: Value = res.json().await.unwrap();
    // Authorized, it holds its part: R$ 50,00 more would pass the total.
    assert_problem(
        app.pay(&new_key(), &tender(5_000)).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "venda-excedida",
    )
    .await;
    let sale = app
        .get_json(&format!("/vendas/{venda}?terminal=caixa-01"))
        .await;
    assert_eq!(sale["pagamentos"][0]["status"], "autorizado", "{sale}");
    assert_eq!(
        (&sale["autorizado"], &sale["falta"]),
        (&json!(6_000), &json!(4_000))
    );

    let res = step(
        &app,
        first["id"].as_str().unwrap(),
        "desfazimento",
        &new_key(),
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    let undone: Value = res.json().await.unwrap();
    assert_eq!(
        (&undone["status"], &undone["captura"]),
        (&json!("desfeito"), &json!("desfeita"))
    );
    // Undone, it holds nothing: the whole total fits again.
    let res = app.pay(&new_key(), &tender(10_000)).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let takes_money = app
        .ledger()
        .await
        .iter()
        .filter(|r| r["status"] == "aprovado" && r["captura"] != "desfeita")
        .count();
    assert_eq!(takes_money, 1, "only the second authorization holds money");
}

#[apply(stores)]
async fn a_step_on_what_is_no_authorization_stores_nothing(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let res = app.pay(&new_key(), &approved(1_000)).await;
    let paid: Value = res.json().await.unwrap();
    assert!(paid.get("captura").is_none(), "captured at once: {paid}");
    let key = new_key();
    for which in ["captura", "desfazimento"] {
        assert_problem(
            step(&app, paid["id"].as_str().unwrap(), which, &new_key()).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "nao-e-autorizacao",
        )
        .await;
    }
    assert_problem(
        step(&app, "pay_nao_existe", "captura", &key).await,
        StatusCode::NOT_FOUND,
        "not-found",
    )
    .await;
    // A declined authorization is a decline, not an authorization.
    let res = app
        .pay(
            &new_key(),
            &json!({"valor": 1_000, "cartao": "tok_recusado", "captura": false}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::PAYMENT_REQUIRED);
    let declined: Value = res.json().await.unwrap();
    assert!(declined.get("captura").is_none(), "{declined}");
    // A body with fields is refused before anything is stored.
    let res = app
        .client
        .post(format!(
            "{}/pagamentos/{}/captura",
            app.url,
            paid["id"].as_str().unwrap()
        ))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", new_key())
        .json(&json!({"valor": 10}))
        .send()
        .await
        .unwrap();
    assert_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
    assert_eq!(
        app.stored_keys().await,
        2,
        "only the two payments' keys are stored"
    );
}

#[apply(stores)]
async fn an_open_authorization_keeps_its_key_past_a_short_retention_until_it_is_captured(
    #[case] backend: Backend,
) {
    // Arrange: keys kept 2 s, the reaper every second; an authorization and a payment captured
    // at once.
    let app = TestApp::spawn_with_clock(backend, |c| {
        c.key_retention_secs = 2;
        c.reaper_interval_secs = 1;
    })
    .await;
    let auth = authorize(&app, 2_500).await;
    let id = auth["id"].as_str().unwrap();
    assert_eq!(app.pay(&new_key(), &approved(500)).await.status(), 201);

    // Act: the retention passes.
    app.advance_clock(Duration::from_secs(10));

    // Assert: the captured payment's key goes; the open authorization's stays until captured.
    app.keys_become(1, "only the captured payment's key is purged")
        .await;
    let key = new_key();
    let captured = step(&app, id, "captura", &key).await;
    assert_eq!(captured.status(), StatusCode::OK);
    app.advance_clock(Duration::from_secs(10));
    app.keys_become(
        0,
        "captured, its key and the capture's are purged after their retention",
    )
    .await;
}
