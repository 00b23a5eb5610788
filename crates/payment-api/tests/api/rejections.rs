use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::json;

/// Each rejected request leaves nothing behind: the same key then succeeds with a good request.
async fn assert_key_still_free(app: &TestApp, key: &str) {
    let res = app.pay(key, &approved(100)).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert!(res.headers().get("idempotent-replayed").is_none());
}

#[apply(stores)]
async fn a_bad_api_key_is_401_and_the_key_stays_free(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    let res = app.pay_as("sk_test_wrong_key", &key, &approved(100)).await;
    assert_problem(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
    let no_auth = app
        .post_raw(
            &[
                ("Idempotency-Key", key.as_str()),
                ("Content-Type", "application/json"),
            ],
            r#"{"valor":1,"cartao":"tok_aprovado"}"#,
        )
        .await
        .unwrap();
    assert_problem(no_auth, StatusCode::UNAUTHORIZED, "unauthorized").await;
    assert_eq!(app.stored_keys().await, 0);
    assert_key_still_free(&app, &key).await;
}

#[apply(stores)]
async fn malformed_json_is_400_and_the_key_stays_free(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    for bad in [
        r#"{"valor": 100, "cartao": "tok_aprovado""#,
        "",
        "valor=100",
        "{\"valor\": 1e}",
    ] {
        let res = app.post_json_text(&key, bad).await;
        assert_problem(res, StatusCode::BAD_REQUEST, "malformed-json").await;
    }
    assert_eq!(app.stored_keys().await, 0);
    assert_key_still_free(&app, &key).await;
}

#[apply(stores)]
async fn invalid_valor_and_unknown_cards_are_422_store_nothing_and_the_key_stays_free(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    let invalid = [
        json!({"valor": 0, "cartao": "tok_aprovado"}),
        json!({"valor": -100, "cartao": "tok_aprovado"}),
        json!({"valor": 10.5, "cartao": "tok_aprovado"}),
        json!({"valor": "100", "cartao": "tok_aprovado"}),
        json!({"valor": 100_000_001, "cartao": "tok_aprovado"}),
        json!({"valor": null, "cartao": "tok_aprovado"}),
        json!({"cartao": "tok_aprovado"}),
        json!({"valor": 100}),
        json!({"valor": 100, "cartao": "tok_desconhecido"}),
        json!({"valor": 100, "cartao": 42}),
        json!({"valor": 100, "cartao": "tok_aprovado", "descricao": "x".repeat(256)}),
        json!({"valor": 100, "cartao": "tok_aprovado", "parcelas": 3}),
        json!([100, "tok_aprovado"]),
    ];
    for body in &invalid {
        let res = app.pay(&key, body).await;
        let p = assert_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
        assert!(!p["errors"].as_array().unwrap().is_empty(), "{body} → {p}");
    }
    assert_eq!(app.stored_keys().await, 0);
    assert!(app.ledger().await.is_empty());
    assert_key_still_free(&app, &key).await;
}

#[apply(stores)]
async fn the_largest_valor_is_accepted(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let res = app.pay(&new_key(), &approved(100_000_000)).await;
    assert_eq!(res.status(), StatusCode::CREATED);
}

#[apply(stores)]
async fn oversized_bodies_and_headers_and_wrong_content_types_are_refused(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    let auth = format!("Bearer {API_KEY}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Idempotency-Key", key.as_str()),
        ("Content-Type", "application/json"),
    ];
    let huge = format!(
        r#"{{"valor":100,"cartao":"tok_aprovado","descricao":"{}"}}"#,
        "x".repeat(20_000)
    );
    let res = app.post_raw(&headers, huge).await.unwrap();
    assert_problem(res, StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large").await;

    let big_header = "y".repeat(9_000);
    let mut with_big = headers.to_vec();
    with_big.push(("X-Junk", big_header.as_str()));
    let res = app
        .post_raw(&with_big, r#"{"valor":100,"cartao":"tok_aprovado"}"#)
        .await
        .unwrap();
    assert_problem(
        res,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "headers-too-large",
    )
    .await;

    let form = [
        ("Authorization", auth.as_str()),
        ("Idempotency-Key", key.as_str()),
        ("Content-Type", "text/plain"),
    ];
    let res = app
        .post_raw(&form, r#"{"valor":100,"cartao":"tok_aprovado"}"#)
        .await
        .unwrap();
    assert_problem(
        res,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported-media-type",
    )
    .await;

    assert_eq!(app.stored_keys().await, 0);
    assert_key_still_free(&app, &key).await;
}
