use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};

#[apply(stores)]
async fn the_same_key_and_body_replays_the_same_status_and_bytes_and_charges_once(
    #[case] backend: Backend,
) {
    // Arrange
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    // Act
    let (s1, r1, b1) = body_of(app.pay(&key, &approved(1234)).await).await;
    let (s2, r2, b2) = body_of(app.pay(&key, &approved(1234)).await).await;
    let (s3, r3, b3) = body_of(app.pay(&key, &approved(1234)).await).await;
    // Assert
    assert_eq!(s1, StatusCode::CREATED);
    assert_eq!(r1, None, "a first execution is not a replay");
    assert_eq!((s2, s3), (s1, s1));
    assert_eq!((r2.as_deref(), r3.as_deref()), (Some("true"), Some("true")));
    assert_eq!(b2, b1);
    assert_eq!(b3, b1);
    let body: Value = serde_json::from_slice(&b1).unwrap();
    assert!(body["id"].as_str().unwrap().starts_with("pay_"));
    assert_eq!(body["status"], "aprovado");
    assert_eq!(body["valor"], 1234);
    assert!(time_is_rfc3339(body["criado_em"].as_str().unwrap()));
    assert_eq!(app.ledger().await.len(), 1);
}

fn time_is_rfc3339(s: &str) -> bool {
    s.len() >= 20
        && s.as_bytes()[4] == b'-'
        && s.contains('T')
        && (s.ends_with('Z') || s.contains('+'))
}

#[apply(stores)]
async fn reordered_json_keys_and_whitespace_replay_instead_of_422(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    let first = app
        .post_json_text(
            &key,
            r#"{"valor":500,"cartao":"tok_aprovado","referencia":"r1"}"#,
        )
        .await;
    let (s1, _, b1) = body_of(first).await;
    let again = app
        .post_json_text(
            &key,
            "{\n  \"referencia\" : \"r1\",\n  \"cartao\": \"tok_aprovado\", \"valor\": 500 }",
        )
        .await;
    let (s2, replayed, b2) = body_of(again).await;
    assert_eq!((s1, s2), (StatusCode::CREATED, StatusCode::CREATED));
    assert_eq!(replayed.as_deref(), Some("true"));
    assert_eq!(b1, b2);
    // Both byte forms are now answered from memory unparsed (same bytes, same fingerprint); a
    // third form still goes through the fingerprint, and other JSON under the key is still 422.
    for text in [
        r#"{"valor":500,"cartao":"tok_aprovado","referencia":"r1"}"#,
        "{\n  \"referencia\" : \"r1\",\n  \"cartao\": \"tok_aprovado\", \"valor\": 500 }",
        r#"{ "cartao":"tok_aprovado","valor":500,"referencia":"r1" }"#,
    ] {
        let (s, replayed, b) = body_of(app.post_json_text(&key, text).await).await;
        assert_eq!(
            (s, replayed.as_deref()),
            (StatusCode::CREATED, Some("true")),
            "{text}"
        );
        assert_eq!(b, b1, "{text}");
    }
    let other = app
        .post_json_text(
            &key,
            r#"{"valor":501,"cartao":"tok_aprovado","referencia":"r1"}"#,
        )
        .await;
    assert_eq!(other.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(app.ledger().await.len(), 1);
}

#[apply(stores)]
async fn the_same_key_with_a_different_body_is_422_and_the_original_still_replays(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    let (_, _, original) = body_of(app.pay(&key, &approved(100)).await).await;
    for changed in [
        approved(101),
        json!({"valor": 100, "cartao": "tok_recusado"}),
        json!({"valor": 100, "cartao": "tok_aprovado", "descricao": null}),
    ] {
        let res = app.pay(&key, &changed).await;
        let p = assert_problem(
            res,
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency-key-reused",
        )
        .await;
        assert_eq!(p["retryable"], false);
    }
    let (status, replayed, body) = body_of(app.pay(&key, &approved(100)).await).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(replayed.as_deref(), Some("true"));
    assert_eq!(body, original);
    assert_eq!(app.ledger().await.len(), 1);
}

#[apply(stores)]
async fn two_merchants_may_use_the_same_key_for_independent_payments(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = "pedido-1";
    let a: Value = app
        .pay_as(API_KEY, key, &approved(100))
        .await
        .json()
        .await
        .unwrap();
    let res_b = app.pay_as(OTHER_API_KEY, key, &approved(999)).await;
    assert_eq!(res_b.status(), StatusCode::CREATED);
    assert!(res_b.headers().get("idempotent-replayed").is_none());
    let b: Value = res_b.json().await.unwrap();
    assert_ne!(a["id"], b["id"]);
    assert_eq!(b["valor"], 999);
    let ledger = app.ledger().await;
    assert_eq!(ledger.len(), 2);
    let mut merchants: Vec<&str> = ledger
        .iter()
        .map(|r| r["merchant"].as_str().unwrap())
        .collect();
    merchants.sort();
    assert_eq!(merchants, ["loja_a", "loja_b"]);
}

#[apply(stores)]
async fn a_decline_is_stored_and_replayed_as_402_without_a_second_gateway_call(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    for (token, motivo) in [
        ("tok_recusado", "cartao_recusado"),
        ("tok_saldo_insuficiente", "saldo_insuficiente"),
    ] {
        let key = new_key();
        let body = json!({"valor": 100, "cartao": token});
        let (s1, _, b1) = body_of(app.pay(&key, &body).await).await;
        let (s2, replayed, b2) = body_of(app.pay(&key, &body).await).await;
        assert_eq!(
            (s1, s2),
            (StatusCode::PAYMENT_REQUIRED, StatusCode::PAYMENT_REQUIRED)
        );
        assert_eq!(replayed.as_deref(), Some("true"));
        assert_eq!(b1, b2);
        let v: Value = serde_json::from_slice(&b1).unwrap();
        assert_eq!(v["status"], "recusado");
        assert_eq!(v["motivo"], motivo);
        assert!(v["id"].as_str().unwrap().starts_with("pay_"));
    }
    let ledger = app.ledger().await;
    assert_eq!(ledger.len(), 2);
    assert!(ledger.iter().all(|r| r["status"] == "recusado"));
}

/// The article's client, verbatim: `fetch(url + '/pagamentos', {method: 'POST', headers:
/// {'Content-Type': 'application/json', 'Idempotency-Key': crypto.randomUUID()},
/// body: JSON.stringify({valor: 100, cartao: 'tok_aprovado'})})`, plus `Authorization`.
#[apply(stores)]
async fn the_articles_request_shape_works_with_only_an_authorization_header_added(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = uuid::Uuid::new_v4().to_string();
    let auth = format!("Bearer {API_KEY}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Idempotency-Key", key.as_str()),
        ("Authorization", auth.as_str()),
    ];
    let body = r#"{"valor":100,"cartao":"tok_aprovado"}"#;
    let res = app.post_raw(&headers, body).await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["status"], "aprovado");
    assert_eq!(v["valor"], 100);
    let again = app.post_raw(&headers, body).await.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(app.ledger().await.len(), 1);
}

/// The same `fetch` from a page on another origin: the browser's preflight must allow it and the
/// replay header must be readable by the page.
#[apply(stores)]
async fn a_browser_on_another_origin_may_send_the_articles_request(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, format!("{}/pagamentos", app.url))
        .header("Origin", "http://caixa.local")
        .header("Access-Control-Request-Method", "POST")
        .header(
            "Access-Control-Request-Headers",
            "authorization,content-type,idempotency-key",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success());
    let allowed = preflight.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(
        allowed.contains("idempotency-key") && allowed.contains("authorization"),
        "{allowed}"
    );
    let res = app
        .client
        .post(format!("{}/pagamentos", app.url))
        .header("Origin", "http://caixa.local")
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", new_key())
        .json(&approved(100))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let exposed = res.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(exposed.contains("idempotent-replayed"), "{exposed}");
}
