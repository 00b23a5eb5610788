use crate::harness::*;
use serde_json::json;
use std::time::Duration;

/// Records every label the status region shows, so a test can check the sequence afterwards.
async fn record_labels(app: &GuiApp) {
    app.js("window.__labels = [];
         const el = document.getElementById('status-label');
         new MutationObserver(() => window.__labels.push(el.textContent))
           .observe(el, {childList: true, characterData: true, subtree: true});")
        .await;
}

async fn labels(app: &GuiApp) -> Vec<String> {
    serde_json::from_value(app.js("return window.__labels").await).unwrap()
}

async fn pay(app: &GuiApp, valor: &str, cartao: &str) {
    app.type_into("valor", valor).await;
    app.select("cartao", cartao).await;
    app.click("pagar").await;
}

#[tokio::test]
async fn pagar_approves_once_and_double_clicks_bursts_and_held_enter_never_charge_twice() {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    app.screenshot("inicio").await;
    // The window draws without GTK's OpenGL (`gtk_gl_off`), the screenshots are drawn so.
    assert_eq!(
        page_process_env(dir.path(), "GDK_GL").as_deref(),
        Some("disable")
    );
    // And its scripts run without JavaScriptCore's optimizing tiers (`jit_optimizer_off`).
    assert_eq!(
        page_process_env(dir.path(), "JSC_useDFGJIT").as_deref(),
        Some("false")
    );

    // Act + Assert: one press, one approval, one charge.
    pay(&app, "12,34", "tok_aprovado").await;
    app.wait_status("Pagamento aprovado").await;
    assert!(app
        .prop("status-detail", "textContent")
        .await
        .unwrap()
        .contains("R$ 12,34"));
    assert!(
        !app.enabled("pagar").await,
        "an approved sale cannot be paid again"
    );
    assert_eq!(app.ledger_rows(), 1);
    app.screenshot("aprovado").await;

    // A double click in one tick, on a slow card: the button is disabled while pending.
    app.next_sale().await;
    app.type_into("valor", "5,00").await;
    app.select("cartao", "tok_lento").await;
    app.js("const b = document.getElementById('pagar'); b.click(); b.click();")
        .await;
    app.wait_status("Processando pagamento").await;
    assert!(
        !app.enabled("pagar").await,
        "disabled while the attempt is pending"
    );
    app.wait_status("Pagamento aprovado").await;
    assert_eq!(app.ledger_rows(), 2);

    // A burst of five WebDriver clicks.
    app.next_sale().await;
    app.type_into("valor", "7,00").await;
    app.select("cartao", "tok_lento").await;
    for _ in 0..5 {
        app.try_click("pagar").await;
    }
    assert!(!app.enabled("pagar").await);
    app.wait_status("Pagamento aprovado").await;
    assert_eq!(app.ledger_rows(), 3);

    // A held Enter key in the amount field.
    app.next_sale().await;
    app.select("cartao", "tok_lento").await;
    app.type_into("valor", "8,00").await;
    app.send_keys("valor", "\u{E007}\u{E007}\u{E007}\u{E007}\u{E007}")
        .await;
    app.wait_status("Pagamento aprovado").await;
    assert_eq!(app.ledger_rows(), 4);

    // The command itself sent twice for one sale: the second returns the first attempt.
    let sale = app.invoke("new_sale", json!({})).await["ok"]["sale"].clone();
    let args = json!({"saleId": sale, "valor": "9,99", "cartao": "tok_aprovado"});
    let first = app.invoke("pay", args.clone()).await;
    let second = app.invoke("pay", args).await;
    assert_eq!(first["ok"]["existing"], false);
    assert_eq!(second["ok"]["existing"], true);
    assert_eq!(
        first["ok"]["attempt"]["idempotency_key"],
        second["ok"]["attempt"]["idempotency_key"]
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(app.ledger_rows(), 5);
    app.close().await;
}

#[tokio::test]
async fn a_response_dropped_after_the_charge_shows_pending_then_approved_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    app.click("qa-toggle").await;
    app.select("qa-faults", "drop").await;
    app.wait_until("fault profile applied", |a| async move {
        a.prop("qa-result", "textContent")
            .await
            .is_some_and(|t| t.starts_with("Perfil aplicado"))
    })
    .await;
    record_labels(&app).await;
    pay(&app, "25,00", "tok_aprovado").await;
    app.wait_status("Pagamento aprovado").await;
    let seen = labels(&app).await;
    let pending = seen
        .iter()
        .position(|l| l == "Pagamento pendente — não cobre de novo");
    let approved = seen.iter().position(|l| l == "Pagamento aprovado");
    assert!(
        pending.is_some() && pending < approved,
        "labels seen: {seen:?}"
    );
    assert_eq!(
        app.ledger_rows(),
        1,
        "the retry was answered from the stored response"
    );
    app.select("qa-faults", "none").await;
    app.close().await;
}

#[tokio::test]
async fn offline_payments_wait_under_a_banner_and_drain_when_the_network_returns() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    app.click("qa-toggle").await;
    app.click("qa-offline").await;
    for valor in ["10,00", "20,00", "30,00"] {
        pay(&app, valor, "tok_aprovado").await;
        app.wait_status("Pagamento pendente").await;
        assert!(!app.enabled("pagar").await);
        app.next_sale().await;
    }
    app.wait_until("the banner counts three", |a| async move {
        !a.hidden("offline-banner").await
            && a.prop("offline-detail", "textContent")
                .await
                .is_some_and(|t| t.starts_with("3 pagamentos aguardando · R$ 60,00"))
    })
    .await;
    assert_eq!(app.ledger_rows(), 0, "nothing reached the server");
    app.click("qa-toggle").await; // hide the panel for the cashier's view
    app.screenshot("offline-fila").await;
    app.click("qa-toggle").await;
    app.click("qa-offline").await;
    app.wait_until("the queue drained and the banner left", |a| async move {
        a.hidden("offline-banner").await
            && a.js("return [...document.querySelectorAll('#history-rows .pill')].map(p => p.textContent)").await
                == json!(["aprovado", "aprovado", "aprovado"])
    })
    .await;
    assert_eq!(app.ledger_rows(), 3);
    app.close().await;
}

#[tokio::test]
async fn a_decline_shows_its_reason_and_another_card_pays_with_a_new_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    pay(&app, "42,00", "tok_recusado").await;
    app.wait_status("Pagamento recusado: cartão recusado").await;
    assert!(
        app.enabled("pagar").await,
        "a declined sale may be paid with another card"
    );
    app.screenshot("recusado").await;
    app.select("cartao", "tok_aprovado").await;
    app.click("pagar").await;
    app.wait_status("Pagamento aprovado").await;
    assert_eq!(app.ledger_rows(), 2, "one decline, one approval");
    let snapshot = app.invoke("attempts", json!({})).await;
    let attempts = snapshot["ok"]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_ne!(
        attempts[0]["idempotency_key"],
        attempts[1]["idempotency_key"]
    );
    assert_eq!(attempts[0]["sale_id"], attempts[1]["sale_id"]);
    app.click("qa-toggle").await;
    app.wait_until("the QA table lists both attempts", |a| async move {
        a.js("return document.querySelectorAll('#qa-rows tr').length")
            .await
            == json!(2)
    })
    .await;
    app.screenshot("painel-qa").await;
    let exported = app
        .invoke("export_attempts", json!({"format": "csv"}))
        .await;
    let path = exported["ok"].as_str().unwrap();
    let csv = std::fs::read_to_string(path).unwrap();
    assert_eq!(csv.lines().count(), 3);
    app.close().await;
}
