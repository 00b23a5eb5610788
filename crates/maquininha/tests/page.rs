//! The machine's web page in a real browser (headless Chromium through `chromedriver`): what the
//! person at the till sees and does, checked against the simulator's own ledger. Screenshots
//! go to `target/screenshots/maquininha-*.png`.

use pagar_testkit::webdriver::Chromium;
use serde_json::{json, Value};
use std::path::PathBuf;

const TOKEN: &str = "token_for_tests";
const POS: &str = "PAGAR_SIM__POS-1";

fn shot(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/screenshots")
        .join(format!("maquininha-{name}.png"))
}

async fn create(http: &reqwest::Client, url: &str, key: &str, body: Value) -> Value {
    let res = http
        .post(format!("{url}/v1/orders"))
        .bearer_auth(TOKEN)
        .header("X-Idempotency-Key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    res.json().await.unwrap()
}

async fn status(http: &reqwest::Client, url: &str, id: &str) -> Value {
    http.get(format!("{url}/v1/orders/{id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn order(valor: &str, reference: &str, kind: &str, installments: u8) -> Value {
    json!({
        "type": "point",
        "external_reference": reference,
        "transactions": {"payments": [{"amount": valor}]},
        "config": {
            "point": {"terminal_id": POS},
            "payment_method": {"default_type": kind, "default_installments": installments},
        },
    })
}

#[tokio::test]
async fn the_person_at_the_till_sees_the_amount_and_plays_the_customer_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let running = maquininha::start(maquininha::Config::sandbox(
        dir.path().join("maq.db"),
        TOKEN,
        "secret",
    ))
    .await
    .unwrap();
    let url = running.url();
    let http = reqwest::Client::new();
    let browser = Chromium::start(420, 720).await;
    let page = &browser.session;
    page.goto(&format!("{url}/terminais/{POS}")).await;
    page.wait_text("#mensagem", "Aguardando um pedido do caixa")
        .await;
    assert!(
        !page.enabled("[data-acao=aprovar]").await,
        "nothing to approve yet"
    );

    // An order arrives: the page takes it and shows the amount and the plan.
    let paid = create(
        &http,
        &url,
        "k-1",
        order("1234.50", "venda-1", "credit_card", 3),
    )
    .await;
    page.wait_text("#mensagem", "Aproxime, insira ou passe o cartão")
        .await;
    assert_eq!(page.text("#valor").await, "R$ 1.234,50");
    assert_eq!(page.text("#tipo").await, "Crédito 3x");
    let id = paid["id"].as_str().unwrap();
    assert_eq!(status(&http, &url, id).await["status"], "at_terminal");
    page.screenshot(&shot("aguardando")).await;

    // The card comes out mid-way: nothing charged, the machine asks again.
    page.click("[data-acao=retirar_cartao]").await;
    page.wait_text("#mensagem", "Cartão retirado antes do fim")
        .await;
    assert_eq!(status(&http, &url, id).await["status"], "at_terminal");

    // Approved on credit.
    page.click("[data-acao=aprovar][data-cartao=credit_card]")
        .await;
    page.wait_text("#mensagem", "Aprovado").await;
    let now = status(&http, &url, id).await;
    assert_eq!(now["status"], "processed");
    assert_eq!(
        now["transactions"]["payments"][0]["payment_method"]["type"],
        "credit_card"
    );
    page.screenshot(&shot("aprovado")).await;

    // The next one is declined for its balance.
    let declined = create(
        &http,
        &url,
        "k-2",
        order("10.00", "venda-2", "debit_card", 1),
    )
    .await;
    page.wait_text("#tipo", "Débito").await;
    page.click("[data-acao=saldo_insuficiente]").await;
    page.wait_text("#mensagem", "Recusado: saldo insuficiente")
        .await;
    let declined = status(&http, &url, declined["id"].as_str().unwrap()).await;
    assert_eq!(
        (&declined["status"], &declined["status_detail"]),
        (&json!("failed"), &json!("insufficient_amount"))
    );
    page.screenshot(&shot("recusado")).await;

    // The customer gives up on the machine.
    let given_up = create(
        &http,
        &url,
        "k-3",
        order("5.00", "venda-3", "debit_card", 1),
    )
    .await;
    page.wait_text("#valor", "R$ 5,00").await;
    page.wait_text("#mensagem", "Aproxime").await;
    page.click("[data-acao=desistir]").await;
    page.wait_text("#mensagem", "Cancelado na maquininha").await;
    assert_eq!(
        status(&http, &url, given_up["id"].as_str().unwrap()).await["status"],
        "canceled"
    );

    // A machine that stops answering leaves the next order where the till may cancel it.
    page.click("[data-acao=sem_resposta]").await;
    page.wait_text("#mensagem", "Sem resposta").await;
    let silent = create(
        &http,
        &url,
        "k-4",
        order("2.00", "venda-4", "debit_card", 1),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_eq!(
        status(&http, &url, silent["id"].as_str().unwrap()).await["status"],
        "created"
    );
    assert!(!page.enabled("[data-acao=aprovar]").await);
    page.screenshot(&shot("sem-resposta")).await;
    page.click("[data-acao=sem_resposta]").await; // "Voltar a responder"
    page.wait_text("#mensagem", "Aproxime").await;

    let counts = running.counts();
    assert_eq!(
        (counts.orders, counts.paid, counts.failed, counts.canceled),
        (4, 1, 1, 1)
    );
    browser.session.close().await;
    running.shutdown().await;
}
