use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::time::Duration;

#[apply(stores)]
async fn the_reaper_purges_expired_keys_but_never_payments_or_keys_in_progress(
    #[case] backend: Backend,
) {
    // Arrange: retention 1 h, reaper every second, a long lease so the slow key stays in progress.
    let app = TestApp::spawn_with_clock(backend, |c| {
        c.key_retention_secs = 3_600;
        c.reaper_interval_secs = 1;
        c.lease_ms = 48 * 3_600 * 1_000;
        c.slow_gateway_ms = 3_000;
    })
    .await;
    let done_key = new_key();
    let body = json!({"valor": 800, "cartao": "tok_aprovado", "referencia": "venda-77"});
    let paid: Value = app.pay(&done_key, &body).await.json().await.unwrap();
    let slow_key = new_key();
    let slow = {
        let (client, url, key) = (app.client.clone(), app.url.clone(), slow_key.clone());
        tokio::spawn(async move {
            try_pay(
                &client,
                &url,
                &key,
                &json!({"valor": 5, "cartao": "tok_lento"}),
            )
            .await
            .unwrap()
        })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            app.stored_keys().await == 2
        })
        .await
    );

    // Act: two hours pass; the reaper runs.
    app.advance_clock(Duration::from_secs(2 * 3_600));
    let purged = eventually(Duration::from_secs(5), || async {
        app.stored_keys().await == 1
    })
    .await;

    // Assert
    assert!(purged, "the completed key is purged after retention");
    assert_eq!(
        app.db.count("payments").await,
        1,
        "payments are kept forever"
    );
    let found: Value = app.get_json("/pagamentos?referencia=venda-77").await;
    assert_eq!(found["pagamentos"][0]["id"], paid["id"]);
    let in_progress = app
        .pay(&slow_key, &json!({"valor": 5, "cartao": "tok_lento"}))
        .await;
    assert_eq!(
        in_progress.status(),
        StatusCode::CONFLICT,
        "the key in progress survived the reaper"
    );
    assert_eq!(slow.await.unwrap().status(), StatusCode::CREATED);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains("pagar_purged_keys_total 1"), "{metrics}");
}
