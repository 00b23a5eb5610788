use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;

const BODY: &str = r#"{"valor": 100, "cartao": "tok_aprovado"}"#;

async fn assert_rejected_key(app: &TestApp, headers: &[(&str, &str)]) {
    let auth = format!("Bearer {API_KEY}");
    let mut all = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    all.extend_from_slice(headers);
    let res = app.post_raw(&all, BODY).await.unwrap();
    assert_problem(res, StatusCode::BAD_REQUEST, "invalid-idempotency-key").await;
}

#[apply(stores)]
async fn missing_empty_too_long_bad_character_and_duplicate_keys_are_400_and_store_nothing(
    #[case] backend: Backend,
) {
    // Arrange
    let app = TestApp::spawn(backend).await;
    let long = "a".repeat(256);
    // Act + Assert
    assert_rejected_key(&app, &[]).await;
    assert_rejected_key(&app, &[("Idempotency-Key", "")]).await;
    assert_rejected_key(&app, &[("Idempotency-Key", "\"\"")]).await;
    assert_rejected_key(&app, &[("Idempotency-Key", &long)]).await;
    assert_rejected_key(&app, &[("Idempotency-Key", "chave com espaço")]).await;
    assert_rejected_key(&app, &[("Idempotency-Key", "\"aberta")]).await;
    assert_rejected_key(&app, &[("Idempotency-Key", "a"), ("Idempotency-Key", "b")]).await;
    assert_eq!(app.stored_keys().await, 0);
    assert!(app.ledger().await.is_empty());
}

#[apply(stores)]
async fn a_key_of_exactly_255_characters_is_accepted(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let res = app.pay(&"k".repeat(255), &approved(100)).await;
    assert_eq!(res.status(), StatusCode::CREATED);
}

#[apply(stores)]
async fn the_quoted_and_bare_forms_of_a_key_are_the_same_key(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (s1, _, b1) = body_of(app.pay("pedido-42", &approved(100)).await).await;
    let (s2, replayed, b2) = body_of(app.pay("\"pedido-42\"", &approved(100)).await).await;
    assert_eq!((s1, s2), (StatusCode::CREATED, StatusCode::CREATED));
    assert_eq!(replayed.as_deref(), Some("true"));
    assert_eq!(b1, b2);
    assert_eq!(app.ledger().await.len(), 1);
}
