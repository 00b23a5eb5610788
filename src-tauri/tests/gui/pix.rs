//! Pix in the real window, against a separately started `payment-api` and `pix-provider`
//! (its own process and database): the cashier presses F5, the QR drawn on screen decodes (with
//! `zbarimg`, from a screenshot) to the BR Code the server made, and the customer's payment at
//! the simulated bank turns it to "Pix recebido". Charges and Pix received are counted in the
//! simulator's own database.

use crate::harness::*;
use pagar_testkit::{ApiProcess, Fault, FaultProxy, PixProcess, API_KEY};
use serde_json::{json, Value};
use std::time::Duration;

const F5: &str = "\u{E035}";
const ESC: &str = "\u{E00C}";
const F9: &str = "\u{E039}";

/// The simulator, the API pointed at it, and a proxy the app talks to the API through.
struct PixStack {
    pix: PixProcess,
    api: ApiProcess,
    proxy: FaultProxy,
}

impl PixStack {
    async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// With more `payment-api` flags (`--pix-expiry-secs 30`…).
    async fn start_with(extra: &[&str]) -> Self {
        let pix = PixProcess::start();
        let mut flags = pix.api_flags(300);
        flags.extend(extra.iter().map(|s| s.to_string()));
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let api = ApiProcess::start(&flags);
        let proxy = FaultProxy::start(api.addr()).await;
        Self { pix, api, proxy }
    }

    async fn launch(&self, dir: &std::path::Path) -> GuiApp {
        let app = GuiApp::launch_with(
            dir,
            &[
                ("PAGAR_API_URL", &self.proxy.url()),
                ("PAGAR_API_KEY", API_KEY),
            ],
        )
        .await;
        app.wait_until("online", |a| async move { a.badge().await == "Online" })
            .await;
        app
    }
}

/// The Pix on screen: its txid and its "copia e cola".
async fn pix_on_screen(app: &GuiApp) -> (String, String) {
    app.wait_status("Aguardando pagamento do Pix").await;
    let copia = app.prop("pix-copia", "value").await.unwrap();
    let attempts = app.invoke("attempts", json!({})).await;
    let txid = attempts["ok"]["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|a| {
            a["pix"]["txid"]
                .as_str()
                .filter(|_| a["state"] == "pendente")
        })
        .expect("a Pix waiting")
        .to_string();
    (txid, copia)
}

/// What `zbarimg` reads from a screenshot: the QR codes' texts.
fn decode_qr(png: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("zbarimg")
        .args(["--raw", "-q", "-Sdisable", "-Sqrcode.enable"])
        .arg(png)
        .output()
        .expect("zbarimg runs (Debian package zbar-tools; make deps-gui installs it)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

async fn counts(pix: &PixProcess) -> (i64, i64) {
    let c: Value = pix.counts().await;
    (c["cobrancas"].as_i64().unwrap(), c["pix"].as_i64().unwrap())
}

#[tokio::test]
async fn f5_shows_a_pix_qr_that_decodes_to_its_br_code_and_the_customers_payment_turns_it_to_received(
) {
    // Arrange
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    // Act: the amount, then F5.
    app.type_into("valor", "12,34").await;
    app.press(F5).await;
    let (txid, copia) = pix_on_screen(&app).await;
    // Assert: the QR on screen is the BR Code the server made, with the amount.
    let shot = app.screenshot("pix-aguardando").await;
    assert_eq!(decode_qr(&shot), std::slice::from_ref(&copia));
    assert!(copia.starts_with("000201") && copia.contains("br.gov.bcb.pix"));
    assert!(copia.contains("540512.34"), "{copia}");
    assert!(!app.enabled("pagar").await && !app.enabled("pix").await);
    let countdown = app.prop("pix-countdown", "textContent").await.unwrap();
    assert!(
        countdown == "Expira em 10:00" || countdown.starts_with("Expira em 09:"),
        "{countdown}"
    );
    assert!(
        app.hidden("pay-form").await,
        "the QR takes the form's place"
    );
    assert_eq!(counts(&stack.pix).await, (1, 0));

    // Act: the customer pays at the bank; the webhook reaches the API.
    let (status, _) = stack.pix.customer_pays(&txid, json!({})).await;
    assert_eq!(status, 201);
    // Assert
    app.wait_status("Pix recebido").await;
    assert!(app.hidden("pix-panel").await);
    let detail = app.prop("status-detail", "textContent").await.unwrap();
    assert!(
        detail.contains("R$ 12,34") && detail.contains("E2E E"),
        "{detail}"
    );
    app.screenshot("pix-recebido").await;
    let receipt = app
        .invoke("receipt", json!({"attemptId": current_attempt(&app).await}))
        .await;
    let text = receipt["ok"].to_string();
    assert!(
        text.contains("Pix") && text.contains("ID Pix (E2E)"),
        "{text}"
    );
    assert_eq!(counts(&stack.pix).await, (1, 1));
    app.close().await;
}

/// "Estornar" on the Pix `payment` in the history, then "Revisar" with the amount it offers:
/// that amount and the confirmation the dialog shows (not yet confirmed).
async fn ask_devolucao(app: &GuiApp, payment: &str) -> (Option<String>, String) {
    app.click(&format!("estornar-{payment}")).await;
    app.wait_until("the refund dialog", |a| async move {
        !a.hidden("refund-dialog").await
    })
    .await;
    let offered = app.prop("refund-valor", "value").await;
    app.click("refund-review").await;
    app.wait_until("the confirmation", |a| async move {
        !a.hidden("refund-confirm").await
    })
    .await;
    let confirm = app
        .prop("refund-confirm-text", "textContent")
        .await
        .unwrap();
    (offered, confirm)
}

async fn wait_refund_approved(app: &GuiApp) {
    app.wait_until("the refund approved", |a| async move {
        a.prop("refund-status-label", "textContent")
            .await
            .is_some_and(|t| t == "Estorno aprovado")
    })
    .await;
}

async fn current_attempt(app: &GuiApp) -> String {
    let till = app.invoke("open_sale", json!({})).await;
    till["ok"]["attempt"]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_pix_killed_during_its_countdown_comes_back_with_the_same_qr_and_is_never_made_twice() {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    app.type_into("valor", "45,00").await;
    app.press(F5).await;
    let (txid, copia) = pix_on_screen(&app).await;
    // Act: kill -9, start again.
    let app = app.kill_and_relaunch().await;
    // Assert: the open sale is the Pix, same QR, same charge.
    let (txid_after, copia_after) = pix_on_screen(&app).await;
    assert_eq!(
        (txid_after.as_str(), copia_after.as_str()),
        (txid.as_str(), copia.as_str())
    );
    let shot = app.screenshot("pix-apos-kill").await;
    assert_eq!(decode_qr(&shot), [copia]);
    assert_eq!(counts(&stack.pix).await, (1, 0));
    stack.pix.customer_pays(&txid, json!({})).await;
    app.wait_status("Pix recebido").await;
    assert_eq!(counts(&stack.pix).await, (1, 1));
    app.close().await;
}

#[tokio::test]
async fn esc_cancels_the_pix_at_the_bank_and_the_sale_can_be_paid_by_card() {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    app.type_into("valor", "30,00").await;
    app.press(F5).await;
    let (txid, _) = pix_on_screen(&app).await;
    // Act
    app.press(ESC).await;
    // Assert
    app.wait_status("Pix cancelado").await;
    assert_eq!(
        stack.pix.cob(&txid).await["status"],
        "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    );
    let (refused, _) = stack.pix.customer_pays(&txid, json!({})).await;
    assert_eq!(refused, 409, "the bank refuses a removed charge");
    assert!(app.enabled("pagar").await, "the card is offered");
    app.screenshot("pix-cancelado").await;
    app.click("pagar").await;
    app.wait_status("Pagamento aprovado").await;
    assert_eq!(counts(&stack.pix).await, (1, 0));
    app.close().await;
}

/// Waits until F5 may make a Pix (a fault switched resets the till's connections: it may be
/// offline for a moment).
async fn pix_offered(app: &GuiApp) {
    app.wait_until("Pix offered", |a| async move { a.enabled("pix").await })
        .await;
}

/// "Cancelar Pix" whose answer never comes: the till asks the server and shows the truth, and
/// the main screen follows the Pix to its end once the server answers again.
#[tokio::test]
async fn a_pix_cancel_whose_answer_is_lost_shows_the_truth_and_the_screen_follows_the_pix() {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;

    // (a) The server cancels; its answer is cut on the way back. The till asks: cancelled.
    app.type_into("valor", "9,00").await;
    app.press(F5).await;
    let (txid, _) = pix_on_screen(&app).await;
    stack.proxy.set(Fault::CutNextPostAnswer).await;
    app.press(ESC).await;
    app.wait_status("Pix cancelado — nada foi recebido").await;
    assert_eq!(
        stack.pix.cob(&txid).await["status"],
        "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    );
    app.screenshot("pix-cancelamento-sem-resposta-cancelado")
        .await;
    stack.proxy.set(Fault::Pass).await;

    // (b) The cancel never reaches the server (a middlebox answers 503): the Pix still waits,
    // and says so; the customer pays and the screen says received.
    app.next_sale().await;
    pix_offered(&app).await;
    app.type_into("valor", "11,00").await;
    app.press(F5).await;
    let (txid, _) = pix_on_screen(&app).await;
    stack.proxy.set(Fault::RejectNextPost(503)).await;
    app.press(ESC).await;
    app.wait_status("Pix não cancelado — ainda pode ser pago")
        .await;
    app.screenshot("pix-nao-cancelado").await;
    stack.proxy.set(Fault::Pass).await;
    stack.pix.customer_pays(&txid, json!({})).await;
    app.wait_status("Pix recebido às").await;

    // (c) The network is down: neither the cancel nor the question after it is answered. The
    // screen says the Pix may still be paid; the customer pays; when the network is back the
    // main screen shows it received.
    app.next_sale().await;
    pix_offered(&app).await;
    app.type_into("valor", "13,00").await;
    app.press(F5).await;
    let (txid, _) = pix_on_screen(&app).await;
    stack.proxy.set(Fault::Refuse).await;
    app.press(ESC).await;
    app.wait_status("Cancelamento do Pix não confirmado — ele ainda pode ser pago")
        .await;
    app.screenshot("pix-cancelamento-nao-confirmado").await;
    // The till is killed and started again, still without the network: the open sale comes back
    // with its Pix waiting (nothing says it was cancelled), and nothing offers to charge it again.
    let app = app.kill_and_relaunch().await;
    app.wait_status("Aguardando pagamento do Pix — sem conexão")
        .await;
    assert!(!app.enabled("pagar").await, "no second charge offered");
    app.screenshot("pix-cancelamento-nao-confirmado-reiniciado")
        .await;
    stack
        .pix
        .customer_pays(&txid, json!({"webhook": "perdido"}))
        .await;
    stack.proxy.set(Fault::Pass).await;
    app.wait_status("Pix recebido às").await;
    app.screenshot("pix-recebido-apos-cancelamento-nao-confirmado")
        .await;
    let c = stack.pix.counts().await;
    assert_eq!(
        (c["cobrancas"].as_i64(), c["pix"].as_i64()),
        (Some(3), Some(2))
    );
    app.close().await;
}

#[tokio::test]
async fn a_lost_webhook_and_a_dropped_connection_still_end_in_pix_received_once() {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    app.type_into("valor", "7,50").await;
    app.press(F5).await;
    let (txid, _) = pix_on_screen(&app).await;
    // Act: the till loses the API; the customer pays and the bank's webhook is lost too.
    stack.proxy.set(Fault::Refuse).await;
    app.wait_until("offline", |a| async move { a.badge().await == "Offline" })
        .await;
    app.wait_status("Aguardando pagamento do Pix — sem conexão")
        .await;
    assert!(!app.enabled("pix").await);
    app.screenshot("pix-offline").await;
    stack
        .pix
        .customer_pays(&txid, json!({"webhook": "perdido"}))
        .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    stack.proxy.set(Fault::Pass).await;
    // Assert: the API's poll found the Pix; the till reads it when it is back.
    app.wait_status("Pix recebido").await;
    let c = stack.pix.counts().await;
    assert_eq!(
        (
            c["cobrancas"].as_i64(),
            c["pix"].as_i64(),
            c["entregas"].as_i64()
        ),
        (Some(1), Some(1), Some(0))
    );
    app.close().await;
}

#[tokio::test]
async fn pix_is_not_offered_while_the_api_is_unreachable() {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    stack.proxy.set(Fault::Refuse).await;
    // Act: the till still thinks it is online; F5 asks the server first.
    app.type_into("valor", "9,90").await;
    app.press(F5).await;
    // Assert: refused with the reason, the till now offline, nothing stored or charged.
    app.wait_status("Pagamento não registrado").await;
    let detail = app.prop("status-detail", "textContent").await.unwrap();
    assert!(detail.contains("Pix não pode ser gerado"), "{detail}");
    app.wait_until("offline", |a| async move { a.badge().await == "Offline" })
        .await;
    app.press(F5).await;
    assert!(!app.enabled("pix").await);
    let why = app.prop("pix-why", "textContent").await.unwrap();
    assert!(why.contains("cobre no cartão"), "{why}");
    assert!(!app.hidden("pix-why").await);
    app.screenshot("pix-indisponivel-offline").await;
    assert_eq!(counts(&stack.pix).await, (0, 0));
    app.close().await;
}

#[tokio::test]
async fn a_pix_is_given_back_from_the_history_once_even_when_the_answer_is_lost() {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    app.type_into("valor", "12,00").await;
    app.press(F5).await;
    let (txid, _) = pix_on_screen(&app).await;
    stack.pix.customer_pays(&txid, json!({})).await;
    app.wait_status("Pix recebido").await;
    let payment = current_attempt(&app).await;
    // Act: "Estornar" on the Pix, confirmed while the answer will be cut after the server acted.
    let (offered, confirm) = ask_devolucao(&app, &payment).await;
    assert_eq!(offered.as_deref(), Some("12,00"));
    assert_eq!(
        confirm,
        "Devolver R$ 12,00 da venda nº 0001 ao pagador do Pix?"
    );
    stack.proxy.set(Fault::CutAfterAnswer).await;
    app.click("refund-confirm").await;
    app.wait_until("the refund pending", |a| async move {
        a.prop("refund-status-label", "textContent")
            .await
            .is_some_and(|t| t.starts_with("Estorno pendente"))
    })
    .await;
    app.screenshot("pix-devolucao-pendente").await;
    stack.proxy.set(Fault::Pass).await;
    // Assert: approved once the till hears the replay; one devolução at the bank.
    wait_refund_approved(&app).await;
    let detail = app
        .prop("refund-status-detail", "textContent")
        .await
        .unwrap();
    assert!(detail.contains("ao pagador do Pix"), "{detail}");
    app.screenshot("pix-devolucao-aprovada").await;
    let c = stack.pix.counts().await;
    assert_eq!(
        (c["devolucoes"].as_i64(), c["devolvido"].as_i64()),
        (Some(1), Some(1200))
    );
    app.close().await;
}

/// A Pix of `valor` shown, cancelled with Esc, then paid by the customer at a bank that lets a
/// removed charge through (`bacen/pix-api#319`); returns its attempt once the till shows it paid
/// after the cancel.
async fn cancelled_then_paid_anyway(stack: &PixStack, app: &GuiApp, valor: &str) -> String {
    app.type_into("valor", valor).await;
    app.press(F5).await;
    let (txid, _) = pix_on_screen(app).await;
    app.press(ESC).await;
    app.wait_status("Pix cancelado").await;
    let payment = current_attempt(app).await;
    let (status, _) = stack
        .pix
        .customer_pays(&txid, json!({"aceitar_inativa": true}))
        .await;
    assert_eq!(status, 201);
    app.wait_status("Pix recebido após cancelamento").await;
    payment
}

#[tokio::test]
async fn a_pix_paid_after_the_cashier_cancelled_it_is_shown_and_given_back() {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    // Act: the customer pays the cancelled QR at a bank that lets it through (bacen/pix-api#319).
    let payment = cancelled_then_paid_anyway(&stack, &app, "25,00").await;
    // Assert: the till learns of it and says to give it back; nothing is lost.
    assert!(!app.hidden("unfinished").await);
    app.screenshot("pix-pago-apos-cancelar").await;
    // The closing lists it, with the Pix counted apart.
    app.press(F9).await;
    app.wait_verdict("divergência encontrada").await;
    let kinds = app
        .js("return [...document.querySelectorAll('#closing-discrepancies section')].map(s => s.dataset.kind)")
        .await;
    assert_eq!(kinds, json!(["pix_received_after_cancel"]));
    let totals = app.prop("closing-totals", "textContent").await.unwrap();
    assert!(
        totals.contains("Pix recebidos após cancelamento"),
        "{totals}"
    );
    app.screenshot("fechamento-pix-a-devolver").await;
    app.press(ESC).await;
    // Given back from the history: one devolução at the bank, and nothing owed any more.
    ask_devolucao(&app, &payment).await;
    app.click("refund-confirm").await;
    wait_refund_approved(&app).await;
    app.press(ESC).await;
    app.wait_until(
        "nothing owed",
        |a| async move { a.hidden("unfinished").await },
    )
    .await;
    let c = stack.pix.counts().await;
    assert_eq!(
        (
            c["pix"].as_i64(),
            c["devolucoes"].as_i64(),
            c["devolvido"].as_i64()
        ),
        (Some(1), Some(1), Some(2500))
    );
    app.close().await;
}

#[tokio::test]
async fn a_pix_paid_after_the_cashier_cancelled_it_is_kept_as_the_payment_of_a_sale_paid_no_other_way(
) {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    let payment = cancelled_then_paid_anyway(&stack, &app, "18,90").await;
    let keep = format!("manter-{payment}");
    app.wait_until("Manter is offered", |a| {
        let keep = keep.clone();
        async move {
            a.js(&format!("return !!document.getElementById('{keep}')"))
                .await
                == Value::Bool(true)
        }
    })
    .await;
    // Act: one click arms it (Esc takes it back), the confirming click keeps the Pix.
    app.click(&keep).await;
    assert_eq!(
        app.prop(&keep, "textContent").await.as_deref(),
        Some("Confirmar: R$ 18,90 como pagamento")
    );
    app.screenshot("pix-manter-confirmar").await;
    app.press(ESC).await;
    assert_eq!(
        app.prop(&keep, "textContent").await.as_deref(),
        Some("Manter")
    );
    app.click(&keep).await;
    app.click(&keep).await;
    // Assert: the sale is paid by that Pix; nothing to give back; the day reconciles.
    app.wait_until("the sale is paid", |a| async move {
        a.hidden("unfinished").await
    })
    .await;
    let detail = app
        .prop("status-detail", "textContent")
        .await
        .unwrap_or_default();
    assert!(
        detail.contains("fica como pagamento desta venda"),
        "{detail}"
    );
    app.screenshot("pix-mantido-como-pagamento").await;
    app.press(F9).await;
    app.wait_verdict("Tudo confere").await;
    app.press(ESC).await;
    let attempts = app.invoke("attempts", json!({})).await;
    let states: Vec<&str> = attempts["ok"]["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, vec!["aprovado"]);
    let c = stack.pix.counts().await;
    assert_eq!(
        (c["pix"].as_i64(), c["devolucoes"].as_i64()),
        (Some(1), Some(0))
    );
    app.close().await;
}

#[tokio::test]
async fn a_webhook_sent_three_times_turns_the_screen_once_and_records_one_pix() {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    app.type_into("valor", "3,33").await;
    app.press(F5).await;
    let (txid, _) = pix_on_screen(&app).await;
    stack
        .pix
        .customer_pays(&txid, json!({"webhook": "triplicado"}))
        .await;
    app.wait_status("Pix recebido").await;
    // Every delivery reached the API and was accepted; the Pix counted once everywhere.
    for _ in 0..50 {
        if stack.pix.counts().await["entregas_aceitas"] == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let c = stack.pix.counts().await;
    assert_eq!(
        (c["entregas_aceitas"].as_i64(), c["pix"].as_i64()),
        (Some(3), Some(1))
    );
    let attempts = app.invoke("attempts", json!({})).await;
    let paid: Vec<&Value> = attempts["ok"]["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["state"] == "aprovado")
        .collect();
    assert_eq!(paid.len(), 1);
    app.close().await;
}

#[tokio::test]
async fn a_pix_that_expires_on_screen_and_is_paid_anyway_is_shown_to_give_back() {
    // A 30-second Pix (the shortest the API takes).
    let stack = PixStack::start_with(&["--pix-expiry-secs", "30"]).await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    app.type_into("valor", "18,00").await;
    app.press(F5).await;
    let (txid, _) = pix_on_screen(&app).await;
    let countdown = app.prop("pix-countdown", "textContent").await.unwrap();
    assert!(
        countdown == "Expira em 00:30" || countdown.starts_with("Expira em 00:2"),
        "{countdown}"
    );
    // Act: the time runs out (plus the server's grace); the server removes it at the bank.
    app.wait_until("the Pix expired", |a| async move {
        a.status().await.starts_with("Pix expirado")
    })
    .await;
    assert_eq!(
        stack.pix.cob(&txid).await["status"],
        "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    );
    app.screenshot("pix-expirado").await;
    // The customer pays the stale QR at a bank that lets it through.
    let (status, _) = stack
        .pix
        .customer_pays(&txid, json!({"aceitar_inativa": true}))
        .await;
    assert_eq!(status, 201);
    app.wait_status("Pix recebido após cancelamento").await;
    let detail = app.prop("status-detail", "textContent").await.unwrap();
    assert!(detail.contains("expirado"), "{detail}");
    app.close().await;
}

/// `make run`'s embedded default: the Pix simulator runs inside the app, and the QA button plays
/// the customer.
#[tokio::test]
async fn on_the_embedded_sandbox_the_qa_button_pays_the_pix_on_screen() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    app.wait_until("online", |a| async move { a.badge().await == "Online" })
        .await;
    app.type_into("valor", "4,20").await;
    app.press(F5).await;
    let (_, copia) = pix_on_screen(&app).await;
    let shot = app.screenshot("pix-sandbox").await;
    assert_eq!(decode_qr(&shot), std::slice::from_ref(&copia));
    assert!(
        !app.hidden("qa-pix-pay").await,
        "the sandbox offers the QA payment"
    );
    app.click("qa-pix-pay").await;
    app.wait_status("Pix recebido").await;
    app.close().await;
}

/// The Pix's first answer is lost after the server made the charge (the server drops it), and the
/// app is killed while the sale waits: on restart the sale comes back, the same charge is
/// answered again (a replay of its key), and the bank has one charge.
#[tokio::test]
async fn a_pix_whose_answer_was_lost_and_whose_app_was_killed_comes_back_as_the_same_charge() {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    app.type_into("valor", "61,00").await;
    // The server drops its answer after committing (the health probe still answers).
    stack
        .api
        .set_faults(json!({"drop_response_probability": 1.0}))
        .await;
    app.press(F5).await;
    app.wait_status("Pix pendente — não cobre de novo").await;
    for _ in 0..50 {
        if counts(&stack.pix).await.0 == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        counts(&stack.pix).await,
        (1, 0),
        "the server made the charge"
    );
    app.screenshot("pix-resposta-perdida").await;
    // Act: kill -9 with the sale in doubt, the network back, start again.
    let app = app.kill_and_relaunch().await;
    stack.api.set_faults(json!({})).await;
    // Assert: the same charge on screen; still one at the bank; paid once.
    let (txid, copia) = pix_on_screen(&app).await;
    let shot = app.screenshot("pix-resposta-perdida-apos-kill").await;
    assert_eq!(decode_qr(&shot), std::slice::from_ref(&copia));
    assert!(!app.enabled("pagar").await && !app.enabled("pix").await);
    assert_eq!(counts(&stack.pix).await, (1, 0));
    stack.pix.customer_pays(&txid, json!({})).await;
    app.wait_status("Pix recebido").await;
    assert_eq!(counts(&stack.pix).await, (1, 1));
    app.close().await;
}

#[tokio::test]
async fn the_rest_of_a_divided_sale_is_paid_by_pix_and_the_sale_is_paid() {
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = stack.launch(dir.path()).await;
    // R$ 150,00: R$ 50,00 by débito, the rest by Pix.
    app.press("\u{E037}").await; // F7
    app.press(&format!("150,00{ENTER}50,00")).await;
    app.select("forma", "debito:1").await;
    app.press(ENTER).await;
    app.wait_status("Pagamento aprovado — falta R$ 100,00")
        .await;
    assert!(app.enabled("pix").await, "the rest may be a Pix");
    app.press(F5).await;
    let (txid, copia) = pix_on_screen(&app).await;
    assert!(
        copia.contains("5406100.00"),
        "the QR asks for the rest: {copia}"
    );
    let (status, _) = stack.pix.customer_pays(&txid, json!({})).await;
    assert_eq!(status, 201);
    app.wait_status("Venda paga").await;
    let detail = app.prop("status-detail", "textContent").await.unwrap();
    assert!(
        detail.contains("(Débito R$ 50,00 + Pix R$ 100,00) · falta R$ 0,00"),
        "{detail}"
    );
    assert!(!app.hidden("nova-venda").await);
    app.screenshot("venda-dividida-pix").await;
    assert_eq!(counts(&stack.pix).await, (1, 1));
    app.close().await;
}
