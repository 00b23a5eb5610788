//! A Pix at its edges, where a waiting charge meets the key's retention, a cancel by key and a
//! sale paid by other means: the real server on both stores, the Pix provider simulator on a port
//! of its own, the server's clock moved by the test. What a sale shows as paid is checked against
//! what the customer paid at the provider.

use crate::helpers::*;
use crate::pix::{cancel_pix, status_becomes, Provider, SECRET};
use crate::refunds::try_refund;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::time::Duration;

/// A tender of `valor` of the sale `venda` (total `total`) at till `caixa-01`, by Pix.
fn pix_tender(valor: i64, venda: &str, total: i64) -> Value {
    json!({
        "valor": valor, "metodo": "pix", "expiracao": 3600, "referencia": new_key(),
        "terminal": "caixa-01", "venda": {"referencia": venda, "total": total},
    })
}

/// The same by card.
fn card_tender(valor: i64, venda: &str, total: i64) -> Value {
    json!({
        "valor": valor, "cartao": "tok_aprovado", "metodo": "debito", "referencia": new_key(),
        "terminal": "caixa-01", "venda": {"referencia": venda, "total": total},
    })
}

/// Pays `body` (a Pix) under a new key: the charge answered `aguardando`, and its id and txid.
async fn waiting_pix(app: &TestApp, body: &Value) -> (Value, String, String) {
    let waiting: Value = app.pay(&new_key(), body).await.json().await.unwrap();
    assert_eq!(waiting["status"], "aguardando", "{waiting}");
    let (id, txid) = (
        waiting["id"].as_str().unwrap().to_string(),
        waiting["pix"]["txid"].as_str().unwrap().to_string(),
    );
    (waiting, id, txid)
}

/// The cashier cancels the Pix `id` ("Cancelar Pix"): removed at the provider, `cancelado`.
async fn cancel_unpaid(app: &TestApp, id: &str) {
    assert_eq!(cancel_pix(app, id).await["status"], "cancelado");
}

async fn sale(app: &TestApp, venda: &str) -> Value {
    app.get_json(&format!("/vendas/{venda}?terminal=caixa-01"))
        .await
}

/// Each tender's status, in the order of the tenders' keys' creation (the test's clock may not
/// move between two tenders, so the order is by status).
fn states(sale: &Value) -> Vec<String> {
    let mut states: Vec<String> = sale["pagamentos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap().to_string())
        .collect();
    states.sort();
    states
}

/// The tender whose payment is `id`.
fn tender<'a>(sale: &'a Value, id: &str) -> &'a Value {
    sale["pagamentos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no tender {id} in {sale}"))
}

fn paid(sale: &Value) -> (i64, i64, i64, i64) {
    (
        sale["pago"].as_i64().unwrap(),
        sale["em_andamento"].as_i64().unwrap(),
        sale["falta"].as_i64().unwrap(),
        sale["a_devolver"].as_i64().unwrap(),
    )
}

#[apply(stores)]
async fn a_waiting_pix_keeps_its_key_and_its_part_of_the_sale_past_a_short_key_retention(
    #[case] backend: Backend,
) {
    // Arrange: keys kept 2 s, the reaper every second; a Pix for the whole R$ 10,00 (its QR
    // valid for an hour), and a card payment elsewhere whose key is there to be purged.
    let psp = Provider::start(SECRET).await;
    let app = TestApp::spawn_with_clock(backend, |c| {
        psp.configure(c, SECRET, 60_000);
        c.key_retention_secs = 2;
        c.reaper_interval_secs = 1;
    })
    .await;
    psp.webhook_registered().await;
    let pix_key = new_key();
    let waiting: Value = app
        .pay(&pix_key, &pix_tender(1_000, "venda-retida", 1_000))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(waiting["status"], "aguardando");
    let (id, txid) = (
        waiting["id"].as_str().unwrap(),
        waiting["pix"]["txid"].as_str().unwrap(),
    );
    assert_eq!(app.pay(&new_key(), &approved(500)).await.status(), 201);

    // Act: the retention passes; the reaper purges what it may.
    app.advance_clock(Duration::from_secs(10));
    app.keys_become(
        1,
        "the card payment's key is purged, the waiting Pix's is kept",
    )
    .await;

    // Assert: the Pix still holds the whole sale: a card tender for it is refused before it
    // charges, and a cancel by key does not promise what it cannot keep.
    let s = sale(&app, "venda-retida").await;
    assert_eq!(states(&s), ["em_andamento"]);
    assert_eq!(paid(&s), (0, 1_000, 0, 0));
    let ledger_before = app.ledger().await.len();
    let card = app
        .pay(&new_key(), &card_tender(1_000, "venda-retida", 1_000))
        .await;
    assert_problem(card, StatusCode::UNPROCESSABLE_ENTITY, "venda-excedida").await;
    assert_eq!(app.ledger().await.len(), ledger_before, "no card charged");
    let cancel = app.cancel(&pix_key).await;
    assert_problem(cancel, StatusCode::CONFLICT, "pix-aguardando").await;

    // The customer pays the QR: the sale is paid once, by the Pix.
    assert_eq!(
        psp.customer_pays(txid, json!({})).await.status(),
        StatusCode::CREATED
    );
    status_becomes(&app, id, "aprovado").await;
    let s = sale(&app, "venda-retida").await;
    assert_eq!(states(&s), ["aprovado"]);
    assert_eq!(paid(&s), (1_000, 0, 0, 0));
    // Paid, its key may go now, and a cancel by key answers the payment it made.
    app.keys_become(0, "the paid Pix's key is purged after its retention")
        .await;
    let cancelled: Value = app.cancel(&pix_key).await.json().await.unwrap();
    assert_eq!(cancelled["resultado"], "pagamento");
    assert_eq!(cancelled["pagamento"]["id"], id);
}

#[apply(stores)]
async fn a_pix_paid_after_its_sale_was_paid_by_card_is_money_to_give_back_never_the_sales(
    #[case] backend: Backend,
) {
    // Arrange: the default retention; a Pix for R$ 6,00 of a R$ 10,00 sale is cancelled by the
    // cashier, and the sale is paid by card in full.
    let psp = Provider::start(SECRET).await;
    let app = TestApp::spawn_with_clock(backend, |c| psp.configure(c, SECRET, 100)).await;
    let (_, id, txid) = waiting_pix(&app, &pix_tender(600, "venda-tardia", 1_000)).await;
    cancel_unpaid(&app, &id).await;
    let card = app
        .pay(&new_key(), &card_tender(1_000, "venda-tardia", 1_000))
        .await;
    assert_eq!(card.status(), StatusCode::CREATED);

    // Act: the customer pays the old QR anyway, at a PSP that takes an inactive charge, and its
    // webhook is lost: the poll finds it.
    let late = psp
        .customer_pays(
            &txid,
            json!({"aceitar_inativa": true, "webhook": "perdido"}),
        )
        .await;
    assert_eq!(late.status(), StatusCode::CREATED);
    status_becomes(&app, &id, "recebido_apos_cancelamento").await;

    // Assert: the sale is paid by the card alone; the R$ 6,00 are the customer's to get back.
    let s = sale(&app, "venda-tardia").await;
    assert_eq!(states(&s), ["aprovado", "recebido_apos_cancelamento"]);
    assert_eq!(paid(&s), (1_000, 0, 0, 600));
    assert_eq!(tender(&s, &id)["a_devolver"], 600);
    assert_eq!(tender(&s, &id)["retido"], 0);
    // Nothing more fits in the sale, the late Pix notwithstanding.
    let more = app
        .pay(&new_key(), &card_tender(1, "venda-tardia", 1_000))
        .await;
    assert_problem(more, StatusCode::UNPROCESSABLE_ENTITY, "venda-excedida").await;

    // The devolução is made from it: nothing left to give back, the sale still paid.
    let back = try_refund(
        &app.client,
        &app.url,
        &id,
        &new_key(),
        &json!({"valor": 600}),
    )
    .await
    .unwrap();
    assert_eq!(
        back.status(),
        StatusCode::CREATED,
        "{:?}",
        back.text().await
    );
    let s = sale(&app, "venda-tardia").await;
    assert_eq!(paid(&s), (1_000, 0, 0, 0));
    assert_eq!(psp.counts().devolucoes, 1);
}

#[apply(stores)]
async fn a_pix_left_to_expire_frees_its_part_under_the_default_retention_and_a_late_payment_is_not_the_sales(
    #[case] backend: Backend,
) {
    // Arrange: the default retention (24 h); a Pix for the whole R$ 10,00, valid for an hour.
    let psp = Provider::start(SECRET).await;
    let app = TestApp::spawn_with_clock(backend, |c| {
        psp.configure(c, SECRET, 100);
        c.reaper_interval_secs = 1;
    })
    .await;
    let (_, id, txid) = waiting_pix(&app, &pix_tender(1_000, "venda-expirada", 1_000)).await;

    // Act: a day passes: the Pix expires (removed at the provider), then its key's retention.
    app.advance_clock(Duration::from_secs(3_700));
    status_becomes(&app, &id, "expirado").await;
    app.advance_clock(Duration::from_secs(25 * 3_600));
    app.keys_become(0, "the closed Pix's key is purged after its retention")
        .await;

    // Assert: the sale's part is free and the card pays it; the old QR paid anyway is not the
    // sale's payment.
    let s = sale(&app, "venda-expirada").await;
    assert_eq!(states(&s), ["liberado"]);
    assert_eq!(paid(&s), (0, 0, 1_000, 0));
    let card = app
        .pay(&new_key(), &card_tender(1_000, "venda-expirada", 1_000))
        .await;
    assert_eq!(card.status(), StatusCode::CREATED);
    psp.customer_pays(&txid, json!({"aceitar_inativa": true}))
        .await;
    status_becomes(&app, &id, "recebido_apos_cancelamento").await;
    let s = sale(&app, "venda-expirada").await;
    assert_eq!(states(&s), ["aprovado", "recebido_apos_cancelamento"]);
    assert_eq!(paid(&s), (1_000, 0, 0, 1_000));
}

#[apply(stores)]
async fn a_pix_paid_hours_after_its_cancel_with_its_webhook_lost_is_found_by_the_reconciliation(
    #[case] backend: Backend,
) {
    // Arrange: a Pix cancelled by the cashier; the poll asks about a closed charge for an hour
    // only, the reconciliation lists the Pix received every second.
    let psp = Provider::start(SECRET).await;
    let app = TestApp::spawn_with_clock(backend, |c| {
        psp.configure(c, SECRET, 100);
        c.pix.pix_reconcile_secs = 1;
    })
    .await;
    let (waiting, id, txid) = waiting_pix(
        &app,
        &json!({"valor": 850, "metodo": "pix", "referencia": "venda-esquecida"}),
    )
    .await;
    cancel_unpaid(&app, &id).await;

    // Act: two hours later the customer pays the old QR at a PSP that takes it; its webhook is
    // lost.
    app.advance_clock(Duration::from_secs(2 * 3_600));
    let late = psp
        .customer_pays(
            &txid,
            json!({"aceitar_inativa": true, "webhook": "perdido"}),
        )
        .await;
    assert_eq!(late.status(), StatusCode::CREATED);

    // Assert: recorded, once, as received after cancellation; the day's listing shows it so.
    let now = status_becomes(&app, &id, "recebido_apos_cancelamento").await;
    assert!(now["pix"]["e2eid"].is_string());
    assert_eq!(app.db.count("pix_received").await, 1);
    let listed = app.get_json("/pagamentos?referencia=venda-esquecida").await;
    assert_eq!(listed["pagamentos"][0]["id"], id.as_str());
    assert_eq!(
        listed["pagamentos"][0]["status"],
        "recebido_apos_cancelamento"
    );
    let day = app.get_json(&day_around(&waiting["criado_em"])).await;
    assert_eq!(day["pagamentos"][0]["status"], "recebido_apos_cancelamento");
    assert_eq!(psp.counts().pix, 1);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("pagar_pix_reconciled_total 1"),
        "found by the reconciliation: {metrics}"
    );
}

/// The range listing of the day around `at` (an RFC 3339 time), as a closing reads it.
fn day_around(at: &Value) -> String {
    use time::format_description::well_known::Rfc3339;
    let at = time::OffsetDateTime::parse(at.as_str().unwrap(), &Rfc3339).unwrap();
    let (desde, ate) = (at - time::Duration::DAY, at + time::Duration::DAY);
    format!(
        "/pagamentos?desde={}&ate={}",
        desde.format(&Rfc3339).unwrap(),
        ate.format(&Rfc3339).unwrap()
    )
}
