//! A sale paid in parts ("pagamento misto"): each tender names its sale and total, and the
//! database refuses a tender that would take the sale's tenders above the total — under
//! concurrent tenders, retries, declines, refunds, and across replicas.

use crate::helpers::*;
use crate::refunds::try_refund;
use crate::stores;
use futures::stream::{self, StreamExt};
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::time::Duration;

/// A tender of `valor` of the sale `venda` (total `total`) at till `caixa-01`.
fn tender(valor: i64, cartao: &str, venda: &str, total: i64) -> Value {
    json!({
        "valor": valor,
        "cartao": cartao,
        "metodo": "debito",
        "referencia": new_key(),
        "terminal": "caixa-01",
        "venda": {"referencia": venda, "total": total},
    })
}

async fn sale(client: &reqwest::Client, base: &str, venda: &str) -> Value {
    merchant_get(client, base, &format!("/vendas/{venda}?terminal=caixa-01")).await
}

#[apply(stores)]
async fn a_hundred_concurrent_tenders_never_take_a_sale_above_its_total(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // A hundred tenders of R$ 10,00 at once, each with its own key, for a sale of R$ 150,00.
    let answers: Vec<(StatusCode, Value)> = stream::iter(0..100)
        .map(|_| {
            let (client, url) = (app.client.clone(), app.url.clone());
            async move {
                let res = try_pay(
                    &client,
                    &url,
                    &new_key(),
                    &tender(1_000, "tok_aprovado", "venda-150", 15_000),
                )
                .await
                .unwrap();
                (res.status(), res.json::<Value>().await.unwrap())
            }
        })
        .buffer_unordered(100)
        .collect()
        .await;
    let approved = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    for (status, body) in answers.iter().filter(|(s, _)| *s != StatusCode::CREATED) {
        assert_eq!(*status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["type"], "urn:pagar:problem:venda-excedida", "{body}");
    }
    assert_eq!(approved, 15, "exactly the total, not a centavo more");
    assert_eq!(
        app.ledger().await.len(),
        15,
        "a refused tender never reaches the gateway"
    );
    assert_eq!(
        app.stored_keys().await,
        15,
        "nothing is stored for a refused tender"
    );
    let s = sale(&app.client, &app.url, "venda-150").await;
    assert_eq!(
        (s["total"].as_i64(), s["pago"].as_i64(), s["falta"].as_i64()),
        (Some(15_000), Some(15_000), Some(0))
    );
    assert_eq!(s["pagamentos"].as_array().unwrap().len(), 15);
}

#[apply(stores)]
async fn a_declined_tender_frees_its_share_and_an_approved_refund_frees_what_it_paid_back(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let (c, u) = (&app.client, app.url.as_str());
    let pay = |valor, cartao| {
        let body = tender(valor, cartao, "venda-100", 10_000);
        async move { try_pay(c, u, &new_key(), &body).await.unwrap().status() }
    };
    assert_eq!(
        pay(6_000, "tok_recusado").await,
        StatusCode::PAYMENT_REQUIRED
    );
    // The declined R$ 60,00 holds nothing: the whole R$ 100,00 can still be paid.
    let key = new_key();
    let whole = tender(10_000, "tok_aprovado", "venda-100", 10_000);
    let res = try_pay(c, u, &key, &whole).await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let payment: Value = res.json().await.unwrap();
    // Its replay holds nothing twice.
    for _ in 0..3 {
        assert_eq!(
            try_pay(c, u, &key, &whole).await.unwrap().status(),
            StatusCode::CREATED
        );
    }
    let refused = try_pay(
        c,
        u,
        &new_key(),
        &tender(1, "tok_aprovado", "venda-100", 10_000),
    )
    .await
    .unwrap();
    let problem = assert_problem(refused, StatusCode::UNPROCESSABLE_ENTITY, "venda-excedida").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("falta R$ 0,00"),
        "{problem}"
    );
    // R$ 40,00 given back to the customer: R$ 40,00 may be paid again, not a centavo more.
    let id = payment["id"].as_str().unwrap();
    let refund = try_refund(c, u, id, &new_key(), &json!({"valor": 4_000}))
        .await
        .unwrap();
    assert_eq!(refund.status(), StatusCode::CREATED);
    assert_eq!(sale(c, u, "venda-100").await["falta"], 4_000);
    assert_eq!(
        pay(4_001, "tok_aprovado").await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(pay(4_000, "tok_aprovado").await, StatusCode::CREATED);
    let s = sale(c, u, "venda-100").await;
    assert_eq!(
        (s["pago"].as_i64(), s["falta"].as_i64()),
        (Some(10_000), Some(0))
    );
    let states: Vec<&str> = s["pagamentos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["recusado", "aprovado", "aprovado"]);
    assert_eq!(
        s["pagamentos"][1]["retido"], 6_000,
        "the tender less its refund"
    );
}

#[apply(stores)]
async fn a_tender_naming_another_total_is_refused_and_its_key_stays_free(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (c, u) = (&app.client, app.url.as_str());
    assert_eq!(
        try_pay(
            c,
            u,
            &new_key(),
            &tender(2_000, "tok_aprovado", "venda-x", 10_000)
        )
        .await
        .unwrap()
        .status(),
        StatusCode::CREATED
    );
    let key = new_key();
    let wrong = try_pay(
        c,
        u,
        &key,
        &tender(2_000, "tok_aprovado", "venda-x", 12_000),
    )
    .await
    .unwrap();
    let problem = assert_problem(
        wrong,
        StatusCode::UNPROCESSABLE_ENTITY,
        "venda-total-diferente",
    )
    .await;
    assert!(
        problem["detail"].as_str().unwrap().contains("R$ 100,00"),
        "{problem}"
    );
    // Nothing stored under the key: the corrected tender pays with it.
    assert_eq!(
        try_pay(
            c,
            u,
            &key,
            &tender(2_000, "tok_aprovado", "venda-x", 10_000)
        )
        .await
        .unwrap()
        .status(),
        StatusCode::CREATED
    );
    assert_eq!(app.ledger().await.len(), 2);
    // A tender above its own sale's total is a validation error, before anything.
    let over = try_pay(
        c,
        u,
        &new_key(),
        &tender(20_000, "tok_aprovado", "venda-y", 10_000),
    )
    .await
    .unwrap();
    let problem = assert_problem(over, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
    assert_eq!(problem["errors"][0]["campo"], "valor");
    // The same reference at another till, or for another merchant, is another sale.
    let mut elsewhere = tender(10_000, "tok_aprovado", "venda-x", 10_000);
    elsewhere["terminal"] = json!("caixa-02");
    assert_eq!(
        try_pay(c, u, &new_key(), &elsewhere)
            .await
            .unwrap()
            .status(),
        StatusCode::CREATED
    );
    assert_eq!(sale(c, u, "venda-x").await["pago"], 4_000);
    let missing = c
        .get(format!("{u}/vendas/venda-nenhuma?terminal=caixa-01"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert_problem(missing, StatusCode::NOT_FOUND, "not-found").await;
}

#[tokio::test]
async fn tenders_from_two_tills_across_three_replicas_never_take_a_sale_above_its_total() {
    let db = TestDb::new(Backend::Postgres).await;
    let replicas: Vec<ServerProcess> = (0..3).map(|_| ServerProcess::start(&db, &[])).collect();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    // Sixty tenders of R$ 7,00 to R$ 29,00 for a sale of R$ 300,00, round-robin over the
    // replicas, some declined.
    let amounts: Vec<(i64, &str)> = (0..60)
        .map(|i| {
            (
                700 + (i * 397) % 2_200,
                if i % 7 == 3 {
                    "tok_recusado"
                } else {
                    "tok_aprovado"
                },
            )
        })
        .collect();
    let answers: Vec<(i64, StatusCode)> = stream::iter(amounts.iter().enumerate())
        .map(|(i, &(valor, cartao))| {
            let (client, url) = (client.clone(), replicas[i % 3].url.clone());
            async move {
                let res = try_pay(
                    &client,
                    &url,
                    &new_key(),
                    &tender(valor, cartao, "venda-300", 30_000),
                )
                .await
                .unwrap();
                (valor, res.status())
            }
        })
        .buffer_unordered(60)
        .collect()
        .await;
    let paid: i64 = answers
        .iter()
        .filter(|(_, s)| *s == StatusCode::CREATED)
        .map(|(v, _)| v)
        .sum();
    for (_, s) in &answers {
        assert!(
            [
                StatusCode::CREATED,
                StatusCode::PAYMENT_REQUIRED,
                StatusCode::UNPROCESSABLE_ENTITY
            ]
            .contains(s),
            "{s}"
        );
    }
    assert!(
        paid <= 30_000,
        "approved tenders sum to {paid}, above the total"
    );
    assert!(
        answers
            .iter()
            .any(|(_, s)| *s == StatusCode::UNPROCESSABLE_ENTITY),
        "the total was reached: some tender was refused"
    );
    // Every replica reads the same sale, and the gateway charged exactly what was approved.
    let charged: i64 = ledger_at(&client, &replicas[0].url)
        .await
        .iter()
        .filter(|r| r["status"] == "aprovado")
        .map(|r| r["valor"].as_i64().unwrap())
        .sum();
    assert_eq!(charged, paid);
    for r in &replicas {
        let s = sale(&client, &r.url, "venda-300").await;
        assert_eq!(s["pago"], paid);
        assert_eq!(s["falta"], 30_000 - paid);
    }
}

#[apply(stores)]
async fn a_pix_tender_holds_its_part_while_it_waits_and_frees_it_when_cancelled(
    #[case] backend: Backend,
) {
    let psp = crate::pix::Provider::start(crate::pix::SECRET).await;
    let app = TestApp::spawn_with(backend, |c| psp.configure(c, crate::pix::SECRET, 60_000)).await;
    psp.webhook_registered().await;
    let (c, u) = (&app.client, app.url.as_str());
    let pix_tender = |valor: i64| {
        json!({
            "valor": valor, "metodo": "pix", "referencia": new_key(), "terminal": "caixa-01",
            "venda": {"referencia": "venda-pix", "total": 10_000},
        })
    };
    let waiting: Value = try_pay(c, u, &new_key(), &pix_tender(6_000))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(waiting["status"], "aguardando");
    // While the customer has the QR, its R$ 60,00 are held: R$ 50,00 by card does not fit.
    let refused = try_pay(
        c,
        u,
        &new_key(),
        &tender(5_000, "tok_aprovado", "venda-pix", 10_000),
    )
    .await
    .unwrap();
    assert_problem(refused, StatusCode::UNPROCESSABLE_ENTITY, "venda-excedida").await;
    let s = sale(c, u, "venda-pix").await;
    assert_eq!(
        (s["em_andamento"].as_i64(), s["falta"].as_i64()),
        (Some(6_000), Some(4_000))
    );
    // Cancelled unpaid: it holds nothing, and the card pays what the Pix would have.
    let id = waiting["id"].as_str().unwrap();
    let cancelled = c
        .post(format!("{u}/pagamentos/{id}/cancelamento"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), StatusCode::OK);
    let card = try_pay(
        c,
        u,
        &new_key(),
        &tender(10_000, "tok_aprovado", "venda-pix", 10_000),
    )
    .await
    .unwrap();
    assert_eq!(card.status(), StatusCode::CREATED);
    let s = sale(c, u, "venda-pix").await;
    let states: Vec<&str> = s["pagamentos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["liberado", "aprovado"]);
    assert_eq!(
        (s["pago"].as_i64(), s["falta"].as_i64()),
        (Some(10_000), Some(0))
    );
    // A Pix tender above what is missing is refused before any charge exists at the provider.
    let before = psp.counts();
    let late = try_pay(c, u, &new_key(), &pix_tender(1)).await.unwrap();
    assert_problem(late, StatusCode::UNPROCESSABLE_ENTITY, "venda-excedida").await;
    assert_eq!(psp.counts(), before);
}
