use crate::harness::*;
use serde_json::json;

#[tokio::test]
async fn killing_the_app_while_a_payment_is_pending_completes_it_after_restart() {
    // Arrange: the network is cut, so the payment is stored and pending.
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    app.click("qa-toggle").await;
    app.click("qa-offline").await;
    app.type_into("valor", "99,90").await;
    app.click("pagar").await;
    app.wait_status("Pagamento pendente").await;
    assert_eq!(app.ledger_rows(), 0);
    // Act: SIGKILL the app, start it again.
    let app = app.kill_and_relaunch().await;
    // Assert: nobody presses anything; the stored attempt completes by itself.
    app.wait_until("the pending payment completed", |a| async move {
        let snap = a.invoke("attempts", json!({})).await;
        snap["ok"]["attempts"][0]["state"] == "aprovado"
    })
    .await;
    assert_eq!(app.ledger_rows(), 1);
    let snap = app.invoke("attempts", json!({})).await;
    assert_eq!(snap["ok"]["attempts"].as_array().unwrap().len(), 1);
    app.screenshot("recuperado-apos-kill").await;
    app.close().await;
}
