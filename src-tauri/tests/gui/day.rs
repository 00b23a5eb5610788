//! A day at the till in the real window: numbered sales made with the keyboard alone, the
//! receipt, and the closing — clean on an honest day, and finding every discrepancy planted on
//! purpose through the API (and, for what no API can do, the server's own database).

use crate::harness::*;
use pagar_testkit::{ApiProcess, Fault, FaultProxy, API_KEY};
use serde_json::json;
use std::time::Duration;

async fn sale_title(app: &GuiApp) -> String {
    app.prop("sale-number", "textContent")
        .await
        .unwrap_or_default()
}

async fn dialog_open(app: &GuiApp, id: &str) -> bool {
    !app.hidden(id).await
}

#[tokio::test]
async fn a_cashier_runs_a_day_with_the_keyboard_alone() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch_with(dir.path(), &[("PAGAR_LOJA", "Padaria Pão Quente")]).await;
    app.count_prints().await;
    assert_eq!(
        app.focused().await,
        "valor",
        "the amount has the focus at start"
    );
    assert_eq!(sale_title(&app).await, "Venda nº 0001");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("config.json")).unwrap()).unwrap();
    let terminal = config["terminal"]
        .as_str()
        .expect("a terminal name was made and kept");
    assert!(terminal.starts_with("caixa-"), "{terminal}");

    // Sale 1: the amount, Enter.
    app.press(&format!("12,34{ENTER}")).await;
    app.wait_status("Pagamento aprovado").await;

    // F4: the receipt, printed and saved.
    app.press(F4).await;
    app.wait_until("the receipt", |a| async move {
        dialog_open(a, "receipt-dialog").await
    })
    .await;
    let lines = app
        .js("return [...document.querySelectorAll('#receipt-lines tr')].map(r => r.textContent)")
        .await;
    let text = lines.to_string();
    for want in [
        "Padaria Pão Quente",
        terminal,
        "nº 0001",
        "R$ 12,34",
        "pay_",
        "tok_…vado",
        "APROVADO",
    ] {
        assert!(text.contains(want), "the receipt shows {want}: {text}");
    }
    assert_eq!(
        app.prop("receipt-via", "textContent").await.as_deref(),
        Some("Via do cliente")
    );
    assert_eq!(app.prints().await, 1, "the print was asked for");
    let saved: Vec<_> = std::fs::read_dir(dir.path().join("comprovantes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 1);
    let html = std::fs::read_to_string(&saved[0]).unwrap();
    assert!(
        html.contains("Via do cliente") && html.contains("R$ 12,34") && html.contains(terminal)
    );
    app.screenshot("comprovante").await;
    app.press(ESC).await;
    app.wait_until("the receipt closes", |a| async move {
        !dialog_open(a, "receipt-dialog").await
    })
    .await;

    // F2: the next sale, numbered, with the amount focused again.
    app.press(F2).await;
    app.wait_until("sale 2", |a| async move {
        sale_title(a).await == "Venda nº 0002"
    })
    .await;
    assert_eq!(app.focused().await, "valor");

    // Sale 2: F3 opens the cards, arrows choose "Recusado", Enter goes back, Enter pays.
    app.press("5,00").await;
    app.press(F3).await;
    assert_eq!(app.focused().await, "cartao");
    assert!(
        app.js("return document.getElementById('cartao').size")
            .await
            .as_i64()
            > Some(1)
    );
    app.press(&format!("{DOWN}{ENTER}")).await;
    assert_eq!(
        app.prop("cartao", "value").await.as_deref(),
        Some("tok_recusado")
    );
    assert_eq!(app.focused().await, "valor");
    app.press(ENTER).await;
    app.wait_status("Pagamento recusado").await;
    // A decline has no receipt: F4 does nothing and the button is not there.
    app.press(F4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!dialog_open(&app, "receipt-dialog").await);
    assert!(app.hidden("comprovante").await);
    // Another card, the same way.
    app.press(F3).await;
    app.press(&format!("{UP}{ENTER}{ENTER}")).await;
    app.wait_status("Pagamento aprovado").await;
    assert_eq!(
        sale_title(&app).await,
        "Venda nº 0002",
        "a retry keeps the sale's number"
    );

    // F9: the day closes clean.
    app.press(F9).await;
    app.wait_verdict("Tudo confere").await;
    let totals = app
        .js("return [...document.querySelectorAll('#closing-totals tr')].map(r => r.textContent)")
        .await;
    assert_eq!(totals[0], "Aprovados2R$ 17,34");
    // Enter pays on the forma the list starts on: crédito à vista.
    assert_eq!(totals[1], "Aprovados no crédito à vista2R$ 17,34");
    assert_eq!(totals[2], "Recusados1R$ 5,00");
    assert_eq!(
        app.ledger_rows(),
        3,
        "two approvals and one decline at the gateway"
    );
    let files: Vec<String> = std::fs::read_dir(dir.path().join("fechamentos"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files.len(),
        3,
        "CSV, JSON and the printable summary: {files:?}"
    );
    app.screenshot("fechamento-sem-divergencias").await;
    app.press(ESC).await;
    app.close().await;
}

/// The attempt ids, keys and request bytes of each sale number, read from the app's outbox.
fn attempts_by_sale(data: &std::path::Path) -> Vec<(u32, String, String, Vec<u8>, String)> {
    let c = rusqlite::Connection::open(data.join("outbox.db")).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    let mut st = c
        .prepare(
            "SELECT s.number, a.id, a.idempotency_key, a.request_body, a.state
             FROM attempts a JOIN sales s ON s.sale_id = a.sale_id ORDER BY a.seq",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// Sale `n`'s latest attempt as the outbox has it now.
fn of_now(data: &std::path::Path, n: u32) -> (u32, String, String, Vec<u8>, String) {
    attempts_by_sale(data)
        .into_iter()
        .rfind(|a| a.0 == n)
        .unwrap()
}

async fn post(url: &str, key: &str, body: &[u8]) -> reqwest::StatusCode {
    reqwest::Client::new()
        .post(format!("{url}/pagamentos"))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(body.to_vec())
        .send()
        .await
        .unwrap()
        .status()
}

async fn sell(app: &GuiApp, valor: &str, card: &str) {
    app.type_into("valor", valor).await;
    app.select("cartao", card).await;
    app.press(ENTER).await;
}

#[tokio::test]
async fn closing_the_till_finds_every_planted_discrepancy() {
    let api = ApiProcess::start(&[]);
    let proxy = FaultProxy::start(api.addr()).await;
    let url = proxy.url();
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch_with(
        dir.path(),
        &[
            ("PAGAR_API_URL", &url),
            ("PAGAR_API_KEY", API_KEY),
            ("PAGAR_TERMINAL", "caixa-teste"),
        ],
    )
    .await;

    // Five sales: 1–3 approved, 4 refused by a middlebox before reaching the server (so it ends
    // in review after the server said it has nothing), 5 declined.
    for (n, (valor, card)) in [
        ("10,00", "tok_aprovado"),
        ("20,00", "tok_aprovado"),
        ("30,00", "tok_aprovado"),
        ("40,00", "tok_aprovado"),
        ("5,00", "tok_recusado"),
    ]
    .into_iter()
    .enumerate()
    {
        if n > 0 {
            app.next_sale().await;
        }
        if n == 3 {
            proxy.set(Fault::RejectNextPost(422)).await;
        }
        sell(&app, valor, card).await;
        let want = match n {
            3 => "Requer revisão — nenhuma cobrança encontrada",
            4 => "Pagamento recusado",
            _ => "Pagamento aprovado",
        };
        app.wait_status(want).await;
        proxy.set(Fault::Pass).await;
    }
    let attempts = attempts_by_sale(dir.path());
    let of = |n: u32| attempts.iter().find(|a| a.0 == n).unwrap().clone();

    // Sale 4 was in doubt when "Nova venda" was pressed: the app cancelled its key on the
    // server first (it never charged), so nothing can ever charge under it.
    let (_, _, s4_key, s4_body, s4_state) = of(4);
    assert_eq!(s4_state, "recusado", "settled as never charged");
    assert_eq!(post(&api.url(), &s4_key, &s4_body).await, 422);

    // Planted. Through the API: a second charge for sale 3 and a payment sent as this till that
    // it never made.
    let (_, s3, _, _, _) = of(3);
    let second = json!({"valor": 3000, "cartao": "tok_aprovado", "referencia": s3, "terminal": "caixa-teste"});
    assert_eq!(
        post(
            &api.url(),
            "plantada-segunda",
            second.to_string().as_bytes()
        )
        .await,
        201
    );
    let stranger = json!({"valor": 777, "cartao": "tok_aprovado", "referencia": "att_alheia", "terminal": "caixa-teste"});
    assert_eq!(
        post(
            &api.url(),
            "plantada-alheia",
            stranger.to_string().as_bytes()
        )
        .await,
        201
    );
    // In the server's database (no API deletes or edits a payment): sale 1's payment gone,
    // sale 2's amount changed, sale 5's decline turned into an approval.
    let db = rusqlite::Connection::open(api.sqlite_path().unwrap()).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let (_, s1, _, _, _) = of(1);
    let (_, s2, _, _, _) = of(2);
    let (_, s5, _, _, _) = of(5);
    assert_eq!(
        db.execute("DELETE FROM payments WHERE referencia = ?1", [&s1])
            .unwrap(),
        1
    );
    assert_eq!(
        db.execute(
            "UPDATE payments SET valor = 2500 WHERE referencia = ?1",
            [&s2]
        )
        .unwrap(),
        1
    );
    assert_eq!(
        db.execute(
            "UPDATE payments SET status = 'aprovado' WHERE referencia = ?1",
            [&s5]
        )
        .unwrap(),
        1
    );

    // A sixth sale stays pending: the server answers 503 to every payment. Its charge is planted
    // in the server's database, as if an earlier try had charged and the till never heard.
    api.set_faults(json!({"error_5xx_probability": 1.0})).await;
    app.next_sale().await;
    sell(&app, "6,00", "tok_aprovado").await;
    app.wait_status("Pagamento pendente").await;
    let (_, s6, s6_key, _, _) = of_now(dir.path(), 6);
    assert_eq!(
        db.execute(
            "INSERT INTO payments (id, merchant, idempotency_key, valor, status, referencia, cobranca_id, created_at, terminal)
             VALUES ('pay_plantado6', ?1, ?2, 600, 'aprovado', ?3, 'ch_plantado6', ?4, 'caixa-teste')",
            rusqlite::params![pagar_testkit::MERCHANT, s6_key, s6, time::OffsetDateTime::now_utc().unix_timestamp() * 1000],
        )
        .unwrap(),
        1
    );

    // F9: refused while a payment is pending, with the choice to close listing it.
    app.press(F9).await;
    app.wait_verdict("pendente").await;
    let refused = app.prop("closing-verdict", "textContent").await.unwrap();
    assert!(
        refused.starts_with("1 pagamento ainda pendente (R$ 6,00)"),
        "{refused}"
    );
    app.screenshot("fechamento-pendente").await;
    assert_eq!(app.focused().await, "closing-anyway");
    app.press(ENTER).await;
    app.wait_verdict("divergências").await;
    let kinds = app
        .js("return [...document.querySelectorAll('#closing-discrepancies section')].map(s => s.dataset.kind)")
        .await;
    assert_eq!(
        kinds,
        json!([
            "two_charges_for_one_sale",
            "charged_not_final_locally",
            "approved_missing_on_server",
            "amount_mismatch",
            "state_mismatch",
            "unknown_on_server"
        ])
    );
    let text = app.prop("closing", "textContent").await.unwrap();
    for want in [
        "Venda nº 0003",
        "Venda nº 0006",
        "Venda nº 0001",
        "Venda nº 0002",
        "Venda nº 0005",
        "R$ 7,77",
    ] {
        assert!(text.contains(want), "the closing names {want}: {text}");
    }
    let pending = app.prop("closing-pending", "textContent").await.unwrap();
    assert!(
        pending.starts_with("Fechado com 1 pagamento pendente listado"),
        "{pending}"
    );
    app.screenshot("fechamento-divergencias").await;
    let json_file = dir.path().join("fechamentos").join(format!(
        "fechamento-{}.json",
        time::OffsetDateTime::now_utc()
            .to_offset(time::macros::offset!(-3))
            .date()
    ));
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json_file).unwrap()).unwrap();
    assert_eq!(saved["discrepancies"].as_array().unwrap().len(), 6);
    app.close().await;
}
