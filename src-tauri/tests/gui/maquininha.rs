//! A card at the card machine in the real window, on the embedded sandbox (`make run`'s default):
//! F6 offers "Cartão na maquininha", the screen follows the order to the machine ("Aguardando a
//! maquininha…", then "Na maquininha: aproxime…"), its cancel works only until the machine takes
//! the order, and the customer's card at the simulated machine pays the sale. Orders and payments
//! are counted in the machine simulator's own ledger.

use crate::harness::*;
use serde_json::{json, Value};

/// The simulated machine's page, as the app says it.
async fn machine_page(app: &GuiApp) -> String {
    let info = app.invoke("app_info", json!({})).await;
    info["ok"]["maquininha_pagina"]
        .as_str()
        .expect("the sandbox runs a simulated machine")
        .to_string()
}

/// The machine looks for its order (what moves it to the machine's screen).
/// Chooses `forma` (`maq:debito:1`, …) once F6's list offers the machine's formas.
async fn choose_at_machine(app: &GuiApp, forma: &'static str) {
    let offered = format!(
        "return [...document.getElementById('forma').options].some(o => o.value === '{forma}')"
    );
    app.wait_until("the machine's formas listed", |a| {
        let offered = offered.clone();
        async move { a.js(&offered).await == json!(true) }
    })
    .await;
    app.select("forma", forma).await;
}

async fn machine_looks(page: &str) -> Value {
    reqwest::get(format!("{page}/pedido"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The customer does `act` at the machine.
async fn customer(page: &str, act: Value) {
    let res = reqwest::Client::new()
        .post(format!("{page}/acao"))
        .json(&act)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
}

/// The simulator's own counts.
async fn counts(page: &str) -> Value {
    let base = page.split("/terminais/").next().unwrap();
    reqwest::get(format!("{base}/qa/contagens"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_cashier_takes_a_card_at_the_machine_and_can_cancel_only_until_the_machine_takes_the_order(
) {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    app.wait_until("online", |a| async move { a.badge().await == "Online" })
        .await;
    let page = machine_page(&app).await;

    // A sale of R$ 45,90 on débito at the machine.
    app.type_into("valor", "45,90").await;
    choose_at_machine(&app, "maq:debito:1").await;
    assert!(app.hidden("cartao").await, "no card token at the machine");
    app.press(ENTER).await;
    app.wait_status("Aguardando a maquininha PAGAR_SIM__POS-1")
        .await;
    assert!(!app.hidden("machine-panel").await);
    assert!(
        app.hidden("pay-form").await,
        "nothing else is charged meanwhile"
    );
    app.screenshot("maquininha-enviado").await;

    // The machine takes it: the cancel is off, and says where to cancel now.
    assert_eq!(machine_looks(&page).await["pedido"]["centavos"], 4590);
    app.wait_status("Na maquininha PAGAR_SIM__POS-1: aproxime, insira ou passe o cartão")
        .await;
    assert!(!app.enabled("machine-cancel").await);
    assert_eq!(
        app.prop("machine-cancel-label", "textContent")
            .await
            .as_deref(),
        Some("Cancele na maquininha")
    );
    app.press(ESC).await;
    app.screenshot("maquininha-na-maquininha").await;
    assert!(
        app.status().await.starts_with("Na maquininha"),
        "Esc did not cancel"
    );

    // The customer pays: the sale is paid, once.
    customer(&page, json!({"acao": "aprovar"})).await;
    app.wait_status("Pago na maquininha no débito").await;
    app.screenshot("maquininha-pago").await;

    // The next sale: the order is cancelled before the machine takes it.
    app.next_sale().await;
    app.type_into("valor", "12,00").await;
    app.select("forma", "maq:").await;
    app.press(ENTER).await;
    app.wait_status("Aguardando a maquininha PAGAR_SIM__POS-1")
        .await;
    app.wait_until("the cancel on", |a| async move {
        a.enabled("machine-cancel").await
    })
    .await;
    app.press(ESC).await;
    app.wait_status("Pedido na maquininha cancelado — nada foi cobrado")
        .await;
    assert!(machine_looks(&page).await["pedido"].is_null());

    let c = counts(&page).await;
    assert_eq!(
        (&c["orders"], &c["paid"], &c["canceled"]),
        (&json!(2), &json!(1), &json!(1))
    );
    app.close().await;
}

/// The till is killed (`kill -9`) while the card is at the machine; the customer pays while no
/// till runs; the relaunched till comes back to that sale as paid, once — never offering to
/// charge it again. The API and the machine's simulator run apart from the app, as deployed: the
/// API as its own process, the machine in this test's.
#[tokio::test]
async fn a_till_killed_while_the_card_is_at_the_machine_comes_back_to_the_sale_the_customer_paid_meanwhile(
) {
    let machine_dir = tempfile::tempdir().unwrap();
    let secret = "mqs_gui_kill";
    let machine = maquininha::start(maquininha::Config::sandbox(
        machine_dir.path().join("maquininha.db"),
        "mq_gui_kill",
        secret,
    ))
    .await
    .unwrap();
    let api = pagar_testkit::ApiProcess::start(&[
        "--maquininha-url",
        &machine.url(),
        "--maquininha-token",
        "mq_gui_kill",
        "--maquininha-secret",
        secret,
        "--maquininha-poll-ms",
        "500",
    ]);
    let res = reqwest::Client::new()
        .put(format!("{}/qa/notificacoes", machine.url()))
        .json(&json!({"url": format!("{}/webhooks/maquininha", api.url())}))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success());
    let page = format!("{}/terminais/PAGAR_SIM__POS-1", machine.url());

    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch_with(
        dir.path(),
        &[
            ("PAGAR_API_URL", &api.url()),
            ("PAGAR_API_KEY", pagar_testkit::API_KEY),
            ("PAGAR_MAQUININHA", "PAGAR_SIM__POS-1"),
        ],
    )
    .await;
    app.wait_until("online", |a| async move { a.badge().await == "Online" })
        .await;
    app.type_into("valor", "45,90").await;
    choose_at_machine(&app, "maq:credito:1").await;
    app.press(ENTER).await;
    app.wait_status("Aguardando a maquininha PAGAR_SIM__POS-1")
        .await;
    assert_eq!(machine_looks(&page).await["pedido"]["centavos"], 4590);
    app.wait_status("Na maquininha PAGAR_SIM__POS-1").await;
    let sale = app.sale_id().await;

    // Killed with the card at the machine; the customer pays while no till runs.
    let app = app
        .kill_and_relaunch_after(async {
            customer(&page, json!({"acao": "aprovar"})).await;
        })
        .await;
    app.wait_status("Pago na maquininha no crédito").await;
    app.screenshot("maquininha-pago-com-o-caixa-fora").await;
    assert_eq!(app.sale_id().await, sale, "the same sale came back");
    assert_eq!(
        app.prop("forma", "value").await.as_deref(),
        Some("maq:credito:1"),
        "with the forma it was paid with"
    );
    assert!(app.hidden("cartao").await, "no card token at the machine");

    // Once: one order, one payment at the machine, and the sale not offered to be charged again.
    let c = machine.counts();
    assert_eq!((c.orders, c.paid), (1, 1), "{c:?}");
    assert!(app.hidden("pay-form").await || !app.enabled("pagar").await);
    app.close().await;
    drop(api);
    machine.shutdown().await;
}

/// A divided sale takes one part at the machine: R$ 40,00 by débito on the machine, the rest in
/// cash; the sale is paid once the machine says so, and the machine charged that part once.
#[tokio::test]
async fn a_divided_sale_takes_one_part_at_the_machine_and_the_rest_in_cash() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    app.wait_until("online", |a| async move { a.badge().await == "Online" })
        .await;
    let page = machine_page(&app).await;

    app.press(F7).await;
    app.press(&format!("100,00{ENTER}40,00")).await;
    choose_at_machine(&app, "maq:debito:1").await;
    app.press(ENTER).await;
    app.wait_status("Aguardando a maquininha PAGAR_SIM__POS-1")
        .await;
    assert_eq!(machine_looks(&page).await["pedido"]["centavos"], 4000);
    customer(&page, json!({"acao": "aprovar"})).await;
    app.wait_status("Pagamento aprovado — falta R$ 60,00").await;

    app.select("forma", "dinheiro:1").await;
    app.click("recebido").await;
    app.press(&format!("100,00{ENTER}")).await;
    app.wait_status("Venda paga — troco R$ 40,00").await;
    let detail = app.prop("status-detail", "textContent").await.unwrap();
    assert!(
        detail.contains("R$ 40,00 + Dinheiro R$ 60,00) · falta R$ 0,00"),
        "{detail}"
    );
    app.screenshot("venda-maquininha-mais-dinheiro").await;
    let c = counts(&page).await;
    assert_eq!((&c["orders"], &c["paid"]), (&json!(1), &json!(1)), "{c}");
    app.close().await;
}
