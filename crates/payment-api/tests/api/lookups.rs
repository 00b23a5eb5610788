use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};

#[apply(stores)]
async fn payments_are_found_by_id_referencia_and_key_only_by_their_merchant(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    let paid: Value = app
        .pay(&key, &json!({"valor": 990, "cartao": "tok_aprovado", "referencia": "att-1", "descricao": "café"}))
        .await
        .json()
        .await
        .unwrap();
    let id = paid["id"].as_str().unwrap();

    // By id: the payment as it was answered, with what was refunded and what is left.
    let mut by_id: Value = app.get_json(&format!("/pagamentos/{id}")).await;
    let detail = by_id.as_object_mut().unwrap();
    let refunds = ["estornado", "saldo_estornavel", "estornos"].map(|f| detail.remove(f).unwrap());
    assert_eq!(refunds, [json!(0), json!(990), json!([])]);
    assert_eq!(by_id, paid);
    let by_ref: Value = app.get_json("/pagamentos?referencia=att-1").await;
    assert_eq!(by_ref["pagamentos"], json!([paid]));
    let by_key: Value = app
        .get_json(&format!("/pagamentos?idempotency_key={key}"))
        .await;
    assert_eq!(by_key["pagamentos"], json!([paid]));
    let none: Value = app.get_json("/pagamentos?referencia=nada").await;
    assert_eq!(none["pagamentos"], json!([]));

    let other = |path: String| {
        let app = &app;
        async move {
            app.client
                .get(format!("{}{path}", app.url))
                .bearer_auth(OTHER_API_KEY)
                .send()
                .await
                .unwrap()
        }
    };
    assert_problem(
        other(format!("/pagamentos/{id}")).await,
        StatusCode::NOT_FOUND,
        "not-found",
    )
    .await;
    let theirs: Value = other("/pagamentos?referencia=att-1".into())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(theirs["pagamentos"], json!([]));
}

#[apply(stores)]
async fn a_lookup_needs_exactly_one_parameter_and_credentials(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    assert_problem(
        app.get("/pagamentos").await,
        StatusCode::BAD_REQUEST,
        "bad-query",
    )
    .await;
    assert_problem(
        app.get("/pagamentos?referencia=a&idempotency_key=b").await,
        StatusCode::BAD_REQUEST,
        "bad-query",
    )
    .await;
    let anon = app
        .client
        .get(format!("{}/pagamentos/pay_x", app.url))
        .send()
        .await
        .unwrap();
    assert_problem(anon, StatusCode::UNAUTHORIZED, "unauthorized").await;
}

#[apply(stores)]
async fn health_openapi_and_metrics_describe_the_running_server(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    assert_eq!(app.get("/health").await.status(), StatusCode::OK);
    let key = new_key();
    app.pay(&key, &approved(100)).await;
    app.pay(&key, &approved(100)).await;
    app.pay(&key, &approved(101)).await;

    let doc: Value = app.get_json("/openapi.json").await;
    assert_eq!(doc["openapi"], "3.1.0");
    let post = &doc["paths"]["/pagamentos"]["post"];
    assert!(post["responses"]["201"].is_object() && post["responses"]["409"].is_object());
    assert!(doc["components"]["schemas"]["Payment"]["properties"]["valor"].is_object());

    let metrics = app.get("/metrics").await.text().await.unwrap();
    for line in [
        "pagar_payment_requests_total{outcome=\"first\"} 1",
        "pagar_payment_requests_total{outcome=\"replay\"} 1",
        "pagar_payment_requests_total{outcome=\"mismatch\"} 1",
        "pagar_gateway_charges_total{status=\"aprovado\"} 1",
    ] {
        assert!(metrics.contains(line), "missing {line} in\n{metrics}");
    }
    assert!(metrics.contains("pagar_store_seconds_count{op=\"claim\"}"));
}
