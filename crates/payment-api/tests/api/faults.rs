use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// With the faults off again, the same key executes and charges once.
async fn assert_retry_without_faults_charges_once(app: &TestApp, key: &str) {
    app.set_faults(json!({})).await;
    assert_eq!(
        app.pay(key, &approved(100)).await.status(),
        StatusCode::CREATED
    );
    assert_eq!(app.ledger().await.len(), 1);
}

#[apply(stores)]
async fn a_response_dropped_after_commit_is_replayed_on_retry_with_one_charge(
    #[case] backend: Backend,
) {
    // Arrange: the server charges and commits, then cuts the connection.
    let app = TestApp::spawn(backend).await;
    app.set_faults(json!({"drop_response_probability": 1.0}))
        .await;
    let key = new_key();
    // Act
    let lost = try_pay(&app.client, &app.url, &key, &approved(2500)).await;
    // Assert: the client heard nothing, but the charge happened exactly once.
    assert!(lost.is_err(), "the response must be lost, got {lost:?}");
    assert_eq!(app.ledger().await.len(), 1);
    app.set_faults(json!({})).await;
    let retry = app.pay(&key, &approved(2500)).await;
    assert_eq!(retry.status(), StatusCode::CREATED);
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    let payment: Value = retry.json().await.unwrap();
    let by_key: Value = app
        .get_json(&format!("/pagamentos?idempotency_key={key}"))
        .await;
    assert_eq!(by_key["pagamentos"][0]["id"], payment["id"]);
    assert_eq!(app.ledger().await.len(), 1);
}

#[apply(stores)]
async fn an_injected_5xx_stores_nothing_and_the_retry_executes(#[case] backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| c.faults.error_5xx_probability = 1.0).await;
    let key = new_key();
    let res = app.pay(&key, &approved(100)).await;
    assert!(res.headers().contains_key("retry-after"));
    let p = assert_problem(res, StatusCode::SERVICE_UNAVAILABLE, "injected-fault").await;
    assert_eq!(p["retryable"], true);
    assert_eq!(app.stored_keys().await, 0);
    assert!(app.ledger().await.is_empty());
    assert_retry_without_faults_charges_once(&app, &key).await;
}

#[apply(stores)]
async fn a_connection_reset_before_the_body_stores_nothing(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.set_faults(json!({"reset_before_body_probability": 1.0}))
        .await;
    let key = new_key();
    let res = try_pay(&app.client, &app.url, &key, &approved(100)).await;
    assert!(res.is_err(), "the connection must be reset, got {res:?}");
    assert_eq!(app.stored_keys().await, 0);
    assert_retry_without_faults_charges_once(&app, &key).await;
}

#[apply(stores)]
async fn injected_latency_delays_the_answer(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.set_faults(json!({"latency_ms": 300})).await;
    let start = Instant::now();
    assert_eq!(
        app.pay(&new_key(), &approved(100)).await.status(),
        StatusCode::CREATED
    );
    assert!(start.elapsed() >= Duration::from_millis(300));
}

#[apply(stores)]
async fn fault_probabilities_outside_zero_to_one_are_refused_and_change_nothing(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let res = app
        .put_faults(&json!({"drop_response_probability": 1.5}))
        .await;
    assert_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
    let res = app.put_faults(&json!({"no_such_fault": 1})).await;
    assert_problem(res, StatusCode::BAD_REQUEST, "malformed-json").await;
    let now = admin_get(&app.client, &app.url, "/admin/faults").await;
    assert_eq!(now["drop_response_probability"], 0.0);
}

#[apply(stores)]
async fn admin_routes_need_the_admin_token_and_do_not_exist_without_one(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let wrong = app
        .client
        .get(format!("{}/admin/ledger", app.url))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert_problem(wrong, StatusCode::UNAUTHORIZED, "admin-unauthorized").await;
    let closed = TestApp::spawn_with(backend, |c| c.admin_token = None).await;
    let res = closed
        .client
        .get(format!("{}/admin/ledger", closed.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_problem(res, StatusCode::NOT_FOUND, "not-found").await;
}
