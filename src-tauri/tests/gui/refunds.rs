//! Refunds (estornos) in the real window: "Estornar" from the history, the amount defaulting to
//! what is left, a confirmation in R$, the honest states, the network cut in between, and a
//! kill -9 with a refund pending. Counted in the sandbox gateway's refund ledger.

use crate::harness::*;
use serde_json::{json, Value};

/// The attempts the window's snapshot holds.
async fn attempts(app: &GuiApp) -> Vec<Value> {
    app.invoke("attempts", json!({})).await["ok"]["attempts"]
        .as_array()
        .unwrap()
        .clone()
}

/// Pays `valor` with an approving card and returns the attempt's id.
async fn paid(app: &GuiApp, valor: &str) -> String {
    app.type_into("valor", valor).await;
    app.select("cartao", "tok_aprovado").await;
    app.click("pagar").await;
    app.wait_status("Pagamento aprovado").await;
    attempts(app).await.last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn refund_status(app: &GuiApp) -> String {
    app.prop("refund-status-label", "textContent")
        .await
        .unwrap_or_default()
}

async fn wait_refund_status(app: &GuiApp, prefix: &str) {
    app.wait_until(&format!("refund status '{prefix}'"), |a| async move {
        refund_status(a).await.starts_with(prefix)
    })
    .await;
}

/// Opens "Estornar" for `payment`, checks the amount it offers, asks for `valor`, and returns
/// the confirmation the dialog shows (not yet confirmed).
async fn ask_refund(app: &GuiApp, payment: &str, offered: &str, valor: &str) -> String {
    app.click(&format!("estornar-{payment}")).await;
    app.wait_until("the refund dialog", |a| async move {
        !a.hidden("refund-dialog").await
    })
    .await;
    assert_eq!(
        app.prop("refund-valor", "value").await.as_deref(),
        Some(offered),
        "the amount defaults to what is left"
    );
    app.type_into("refund-valor", valor).await;
    app.type_into("refund-motivo", "devolução").await;
    app.click("refund-review").await;
    app.wait_until("the confirmation", |a| async move {
        !a.hidden("refund-confirm").await
    })
    .await;
    app.prop("refund-confirm-text", "textContent")
        .await
        .unwrap()
}

#[tokio::test]
async fn a_cashier_refunds_part_of_a_sale_then_the_rest_with_the_network_cut_in_between() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    let payment = paid(&app, "100,00").await;

    // Part: R$ 30,00, confirmed in R$, approved.
    let confirm = ask_refund(&app, &payment, "100,00", "30,00").await;
    assert_eq!(
        confirm,
        "Estornar R$ 30,00 da venda nº 0001 para o cartão tok_…vado?"
    );
    assert!(app
        .prop("refund-meta", "textContent")
        .await
        .unwrap()
        .contains("pode estornar até R$ 100,00"));
    app.screenshot("estorno-confirmacao").await;
    // A burst of clicks on "Confirmar": one refund.
    for _ in 0..4 {
        app.try_click("refund-confirm").await;
    }
    wait_refund_status(&app, "Estorno aprovado").await;
    assert!(
        app.hidden("refund-confirm").await,
        "cannot be confirmed again"
    );
    app.screenshot("estorno-aprovado").await;
    assert_eq!(app.refund_ledger(), [(3_000, "aprovado".to_string())]);
    app.click("refund-close").await;
    app.wait_until("the history says what was refunded", |a| async move {
        a.js("return document.querySelector('#history-rows').textContent")
            .await
            .as_str()
            .is_some_and(|t| t.contains("estornado R$ 30,00"))
    })
    .await;
    assert!(app
        .prop("status-detail", "textContent")
        .await
        .unwrap()
        .contains("estornado R$ 30,00"));

    // A bad amount is refused before anything is stored: more than is left.
    app.click(&format!("estornar-{payment}")).await;
    app.type_into("refund-valor", "80,00").await;
    app.click("refund-review").await;
    wait_refund_status(&app, "Estorno não registrado").await;
    assert!(app
        .prop("refund-status-detail", "textContent")
        .await
        .unwrap()
        .contains("R$ 70,00"));
    assert!(app.hidden("refund-confirm").await);
    app.click("refund-close").await;

    // The network drops: the rest is written ahead and waits, pending, counted in the banner.
    app.click("qa-toggle").await;
    app.click("qa-offline").await;
    let confirm = ask_refund(&app, &payment, "70,00", "70,00").await;
    assert!(confirm.starts_with("Estornar R$ 70,00"), "{confirm}");
    app.click("refund-confirm").await;
    wait_refund_status(&app, "Estorno pendente — não estorne de novo").await;
    app.wait_until("the banner counts the refund", |a| async move {
        a.prop("offline-detail", "textContent")
            .await
            .is_some_and(|t| t.starts_with("1 estorno aguardando · R$ 70,00"))
    })
    .await;
    app.screenshot("estorno-pendente-offline").await;
    assert_eq!(app.refund_ledger().len(), 1, "nothing reached the gateway");
    // Closing the dialog keeps the refund in sight: the strip says not to refund it again.
    app.click("refund-close").await;
    app.wait_until("the strip lists the pending refund", |a| async move {
        a.prop("unfinished-list", "textContent")
            .await
            .is_some_and(|t| t.contains("estorno pendente — não estorne de novo"))
    })
    .await;
    assert!(
        app.js(&format!(
            "return document.getElementById('estornar-{payment}') === null"
        ))
        .await
            == Value::Bool(true),
        "no second refund is offered while one is undecided"
    );
    app.screenshot("estorno-pendente-faixa").await;

    // The network comes back: the refund goes by itself with its stored key.
    app.click("qa-offline").await;
    app.wait_until("the refund approved", |a| async move {
        attempts(a)
            .await
            .iter()
            .any(|x| x["kind"] == "estorno" && x["valor"] == 7_000 && x["state"] == "aprovado")
    })
    .await;
    app.wait_until("the strip is gone", |a| async move {
        a.hidden("unfinished").await
    })
    .await;
    let ledger = app.refund_ledger();
    println!("gateway refund ledger: {ledger:?}");
    assert_eq!(
        ledger,
        [
            (3_000, "aprovado".to_string()),
            (7_000, "aprovado".to_string())
        ],
        "exactly the refunds asked for"
    );
    assert_eq!(app.ledger_rows(), 1, "one charge");

    // The receipt and the closing include the refunds.
    app.count_prints().await;
    app.click("comprovante").await;
    app.wait_until("the receipt", |a| async move {
        !a.hidden("receipt-dialog").await
    })
    .await;
    let receipt = app.prop("receipt-lines", "textContent").await.unwrap();
    assert!(
        receipt.contains("Total estornadoR$ 100,00") && receipt.contains("APROVADO · ESTORNADO"),
        "{receipt}"
    );
    app.screenshot("comprovante-com-estornos").await;
    app.press("\u{E00C}").await; // Esc
    app.click("fechar-caixa").await;
    app.wait_verdict("Tudo confere").await;
    let totals = app.prop("closing-totals", "textContent").await.unwrap();
    assert!(
        totals.contains("Estornos aprovados2R$ 100,00") && totals.contains("Líquido do diaR$ 0,00"),
        "{totals}"
    );
    app.screenshot("fechamento-com-estornos").await;
    app.close().await;
}

#[tokio::test]
async fn killing_the_app_while_a_refund_is_pending_completes_it_once_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    let payment = paid(&app, "45,00").await;
    app.click("qa-toggle").await;
    app.click("qa-offline").await;
    ask_refund(&app, &payment, "45,00", "45,00").await;
    app.click("refund-confirm").await;
    wait_refund_status(&app, "Estorno pendente").await;
    assert!(app.refund_ledger().is_empty());
    // SIGKILL with the refund pending, then start again: nobody presses anything.
    let app = app.kill_and_relaunch().await;
    app.wait_until("the pending refund completed", |a| async move {
        attempts(a)
            .await
            .iter()
            .any(|x| x["kind"] == "estorno" && x["state"] == "aprovado")
    })
    .await;
    assert_eq!(app.refund_ledger(), [(4_500, "aprovado".to_string())]);
    let refunds: Vec<Value> = attempts(&app)
        .await
        .into_iter()
        .filter(|x| x["kind"] == "estorno")
        .collect();
    assert_eq!(refunds.len(), 1, "one refund attempt, one key");
    app.wait_until("the history says it was refunded", |a| async move {
        a.js("return document.querySelector('#history-rows').textContent")
            .await
            .as_str()
            .is_some_and(|t| t.contains("estorno aprovado"))
    })
    .await;
    app.screenshot("estorno-recuperado-apos-kill").await;
    app.close().await;
}

/// The refunds a separately started server's gateway executed: `(valor, status)`.
async fn external_refunds(api: &pagar_testkit::ApiProcess) -> Vec<(i64, String)> {
    api.refund_ledger()
        .await
        .iter()
        .map(|r| {
            (
                r["valor"].as_i64().unwrap(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn part_then_the_rest_through_a_failing_network_to_a_separate_server_refunds_exactly_that() {
    use pagar_testkit::{ApiProcess, Fault, FaultProxy, API_KEY};
    // The API as its own process, and a TCP fault proxy of ours between it and the app.
    let api = ApiProcess::start(&[]);
    let proxy = FaultProxy::start(api.addr()).await;
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch_with(
        dir.path(),
        &[("PAGAR_API_URL", &proxy.url()), ("PAGAR_API_KEY", API_KEY)],
    )
    .await;
    let payment = paid(&app, "100,00").await;

    // Part, R$ 40,00: the server refunds, the proxy cuts the answer; then the network drops.
    proxy.set(Fault::CutAfterAnswer).await;
    ask_refund(&app, &payment, "100,00", "40,00").await;
    app.click("refund-confirm").await;
    let server = &api;
    app.wait_until("the server refunded", |_| async move {
        external_refunds(server).await.len() == 1
    })
    .await;
    proxy.set(Fault::Refuse).await;
    wait_refund_status(&app, "Estorno pendente — não estorne de novo").await;
    app.wait_until("the banner counts the refund", |a| async move {
        a.prop("offline-detail", "textContent")
            .await
            .is_some_and(|t| t.starts_with("1 estorno aguardando · R$ 40,00"))
    })
    .await;
    app.screenshot("estorno-resposta-perdida-offline").await;
    // The network comes back: the same key is replayed and answered from what the server kept.
    proxy.set(Fault::Pass).await;
    wait_refund_status(&app, "Estorno aprovado").await;
    assert_eq!(
        external_refunds(&api).await,
        [(4_000, "aprovado".to_string())]
    );
    app.click("refund-close").await;

    // The rest: its answer is lost too, then something in the path refuses the retry with a
    // 401. Before saying "review" the app looks the refund up among the payment's refunds,
    // finds it, and shows it approved.
    proxy.set(Fault::CutAfterAnswer).await;
    ask_refund(&app, &payment, "60,00", "60,00").await;
    app.click("refund-confirm").await;
    app.wait_until("the server refunded the rest", |_| async move {
        external_refunds(server).await.len() == 2
    })
    .await;
    proxy.set(Fault::RejectNextPost(401)).await;
    wait_refund_status(&app, "Estorno aprovado").await;
    app.screenshot("estorno-resto-aprovado").await;
    let ledger = api.refund_ledger().await;
    println!(
        "gateway refund ledger: {}",
        serde_json::to_string_pretty(&ledger).unwrap()
    );
    assert_eq!(
        external_refunds(&api).await,
        [
            (4_000, "aprovado".to_string()),
            (6_000, "aprovado".to_string())
        ],
        "exactly the refunds asked for, each once"
    );
    assert_eq!(api.ledger().await.len(), 1, "one charge");
    app.close().await;
}
