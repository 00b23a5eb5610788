//! "Débito ou crédito? À vista ou parcelado?" in the real window, with the keyboard: the forma
//! list follows the amount, the plan chosen is the one charged (counted in the sandbox's
//! ledger), printed on the receipt and counted apart in the closing.

use crate::harness::*;

/// The plans the gateway's ledger recorded, oldest first.
fn ledger_plans(app: &GuiApp) -> Vec<Option<String>> {
    let db = app.data_dir.join("sandbox").join("pagar-api.db");
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    let mut st = c
        .prepare("SELECT plano FROM gateway_ledger ORDER BY rowid")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

async fn options(app: &GuiApp) -> Vec<String> {
    serde_json::from_value(
        app.js("return [...document.getElementById('forma').options].map(o => o.textContent)")
            .await,
    )
    .unwrap()
}

#[tokio::test]
async fn a_parcelado_in_3_is_chosen_with_f6_charged_as_chosen_printed_and_counted_by_method() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    app.count_prints().await;

    // The amount first: the list then offers each parcelado with its installments.
    app.press("100,00").await;
    app.wait_until("the installments of R$ 100,00", |a| async move {
        options(a)
            .await
            .iter()
            .any(|o| o == "3× de R$ 33,34 sem juros")
    })
    .await;
    let offered = options(&app).await;
    assert_eq!(offered[0], "Débito");
    assert_eq!(offered[1], "Crédito à vista");
    assert_eq!(offered.last().unwrap(), "Voucher (refeição/alimentação)");

    // F6 opens the list; two down from crédito à vista is 3×; Enter chooses and goes back to
    // the amount, where Enter pays.
    app.press(F6).await;
    assert_eq!(app.focused().await, "forma");
    app.screenshot("forma-de-pagamento").await;
    app.press(&format!("{DOWN}{DOWN}{ENTER}")).await;
    assert_eq!(app.focused().await, "valor");
    assert_eq!(
        app.prop("forma", "value").await.as_deref(),
        Some("parcelado:3")
    );
    assert_eq!(
        app.prop("forma-hint", "textContent").await.as_deref(),
        Some("3× de R$ 33,34 (última de R$ 33,32)")
    );
    app.press(ENTER).await;
    app.wait_status("Pagamento aprovado").await;
    let detail = app.prop("status-detail", "textContent").await.unwrap();
    assert!(
        detail.contains("R$ 100,00 · Crédito 3× sem juros · pay_"),
        "{detail}"
    );
    assert!(
        !app.enabled("forma").await,
        "an approved sale's plan cannot change"
    );
    assert_eq!(ledger_plans(&app), [Some("credito:3:loja".to_string())]);

    // The receipt says how it was paid.
    app.press(F4).await;
    app.wait_until("the receipt", |a| async move {
        !a.hidden("receipt-dialog").await
    })
    .await;
    let receipt = app.prop("receipt-lines", "textContent").await.unwrap();
    for want in [
        "FormaCrédito 3× sem juros",
        "Parcelas3× de R$ 33,34 (última de R$ 33,32)",
    ] {
        assert!(receipt.contains(want), "{want} in {receipt}");
    }
    app.screenshot("comprovante-parcelado").await;
    app.press(ESC).await;

    // Sale 2: a debit-only card asked for crédito is declined and nothing is charged twice;
    // débito on the same card then pays it.
    app.press(F2).await;
    app.wait_until("a new sale", |a| async move {
        a.prop("sale-number", "textContent").await.as_deref() == Some("Venda nº 0002")
    })
    .await;
    app.select("cartao", "tok_somente_debito").await;
    app.press(&format!("25,00{ENTER}")).await;
    app.wait_status("Pagamento recusado: o cartão não aceita esta forma de pagamento")
        .await;
    let detail = app.prop("status-detail", "textContent").await.unwrap();
    assert!(detail.contains("Pedido: Crédito à vista"), "{detail}");
    app.screenshot("metodo-nao-aceito").await;
    app.press(F6).await;
    app.press(&format!("{UP}{ENTER}")).await;
    assert_eq!(
        app.prop("forma", "value").await.as_deref(),
        Some("debito:1")
    );
    app.press(ENTER).await;
    app.wait_status("Pagamento aprovado").await;
    assert_eq!(
        ledger_plans(&app),
        [
            Some("credito:3:loja".to_string()),
            Some("credito".to_string()),
            Some("debito".to_string())
        ]
    );

    // F9: the approved by method.
    app.press(F9).await;
    app.wait_verdict("Tudo confere").await;
    let totals: Vec<String> = serde_json::from_value(
        app.js(
            "return [...document.querySelectorAll('#closing-totals tr')].map(r => r.textContent)",
        )
        .await,
    )
    .unwrap();
    assert_eq!(
        totals[..3],
        [
            "Aprovados2R$ 125,00",
            "Aprovados no débito1R$ 25,00",
            "Aprovados no crédito parcelado1R$ 100,00"
        ]
    );
    app.screenshot("fechamento-por-forma").await;
    app.close().await;
}
