//! "Débito ou crédito? À vista ou parcelado?" in the real window, with the keyboard: the forma
//! list follows the amount, the plan chosen is the one charged (counted in the sandbox's
//! acquirer's ledger), printed on the receipt and counted apart in the closing.

use crate::harness::*;

/// The plans the gateway's ledger recorded, oldest first.
fn ledger_plans(app: &GuiApp) -> Vec<Option<String>> {
    let c = app.acquirer_ledger();
    let mut st = c
        .prepare("SELECT plano FROM gateway_ledger ORDER BY rowid")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// `F7`, the sale's total, `Enter`, this part's amount and forma, `Enter`: the first part of a
/// divided sale.
async fn pay_first_part(app: &GuiApp, total: &str, part: &str, forma: &str) {
    app.press(F7).await;
    app.press(&format!("{total}{ENTER}{part}")).await;
    app.select("forma", forma).await;
    app.press(ENTER).await;
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
    assert_eq!(offered[..3], ["Dinheiro", "Débito", "Crédito à vista"]);
    // The card formas end with the voucher; the sandbox's card machine offers them again.
    let voucher = offered
        .iter()
        .position(|o| o == "Voucher (refeição/alimentação)")
        .expect("a voucher");
    assert_eq!(
        offered[voucher + 1],
        "Cartão na maquininha (cliente escolhe)"
    );
    assert_eq!(
        offered.last().unwrap(),
        "Voucher (refeição/alimentação) na maquininha"
    );

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

#[tokio::test]
async fn a_sale_of_150_is_paid_50_by_debit_and_100_in_2x_with_the_keyboard_and_survives_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;

    // F7: the sale is paid in parts; its total, Enter, then this payment's amount and forma.
    app.press(F7).await;
    assert_eq!(app.focused().await, "total");
    app.press(&format!("150,00{ENTER}")).await;
    assert_eq!(app.focused().await, "valor");
    assert_eq!(
        app.prop("valor-label", "textContent").await.as_deref(),
        Some("Valor deste pagamento")
    );
    app.press("50,00").await;
    app.press(F6).await;
    app.press(&format!("{UP}{ENTER}")).await;
    assert_eq!(
        app.prop("forma", "value").await.as_deref(),
        Some("debito:1")
    );
    assert!(app.enabled("pix").await, "a part may be a Pix too");
    app.press(ENTER).await;
    app.wait_status("Pagamento aprovado — falta R$ 100,00")
        .await;
    let detail = app.prop("status-detail", "textContent").await.unwrap();
    assert!(
        detail.starts_with("Total R$ 150,00 · pago R$ 50,00 (Débito R$ 50,00) · falta R$ 100,00"),
        "{detail}"
    );
    assert_eq!(
        app.prop("valor", "value").await.as_deref(),
        Some("100,00"),
        "what is missing is offered"
    );
    assert!(
        app.hidden("nova-venda").await,
        "a half-paid sale is not left"
    );
    assert!(!app.enabled("dividir").await && !app.enabled("total").await);
    app.screenshot("venda-dividida-falta").await;

    // kill -9 with one tender authorized: the sale comes back, and since it was not finished
    // the till undoes that authorization (never captures it by itself): the whole total is
    // missing again, nothing was taken.
    let app = app.kill_and_relaunch().await;
    app.wait_status("Autorização desfeita ao reiniciar — falta R$ 150,00")
        .await;
    let detail = app.prop("status-detail", "textContent").await.unwrap();
    assert!(
        detail.starts_with("R$ 50,00 liberados no cartão do cliente, nada cobrado."),
        "{detail}"
    );
    assert_eq!(app.prop("total", "value").await.as_deref(), Some("150,00"));
    assert_eq!(
        app.prop("sale-number", "textContent").await.as_deref(),
        Some("Venda nº 0001")
    );
    assert_eq!(app.authorizations(), [(5_000, "desfeita".to_string())]);
    app.screenshot("venda-dividida-reiniciada").await;

    // The whole sale in 2× sem juros.
    app.wait_until("the total offered", |a| async move {
        a.prop("valor", "value").await.as_deref() == Some("150,00")
    })
    .await;
    app.press(F6).await;
    app.press(&format!("{DOWN}{DOWN}{ENTER}")).await;
    assert_eq!(
        app.prop("forma", "value").await.as_deref(),
        Some("parcelado:2")
    );
    app.press(ENTER).await;
    app.wait_status("Venda paga").await;
    app.wait_until("the card part captured", |a| async move {
        a.prop("status-detail", "textContent").await.as_deref()
            == Some("Total R$ 150,00 · pago R$ 150,00 (Crédito 2× sem juros R$ 150,00) · falta R$ 0,00 · cartão capturado")
    })
    .await;
    assert_eq!(
        app.authorizations(),
        [
            (5_000, "desfeita".to_string()),
            (15_000, "capturada".to_string())
        ]
    );
    assert!(!app.enabled("pagar").await);
    assert!(!app.hidden("nova-venda").await);
    assert_eq!(
        ledger_plans(&app),
        [
            Some("debito".to_string()),
            Some("credito:2:loja".to_string())
        ]
    );
    app.screenshot("venda-dividida-paga").await;

    // The closing: two approved payments for one sale is no double charge.
    app.press(F9).await;
    app.wait_verdict("Tudo confere").await;
    app.close().await;
}

#[tokio::test]
async fn the_drawer_opens_a_cash_sale_gives_change_and_a_sale_splits_debit_plus_cash_to_a_counted_close(
) {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;

    // F8: the drawer opens with R$ 100,00 of change.
    app.press(F8).await;
    app.wait_until(
        "the drawer",
        |a| async move { !a.hidden("drawer-dialog").await },
    )
    .await;
    assert_eq!(app.focused().await, "drawer-valor");
    app.press(&format!("100,00{ENTER}")).await;
    app.wait_until("the opening recorded", |a| async move {
        a.prop("drawer-result", "textContent").await.as_deref() == Some("Registrado.")
    })
    .await;
    // A sangria of more than the drawer holds: refused, with why, nothing recorded.
    app.select("drawer-kind", "sangria").await;
    app.press(&format!("500,00{ENTER}")).await;
    app.wait_until("the refusal", |a| async move {
        a.prop("drawer-result", "textContent")
            .await
            .is_some_and(|t| t.contains("passaria disso"))
    })
    .await;
    app.press(ESC).await;

    // A cash sale: R$ 80,00 paid with R$ 100,00.
    app.press("80,00").await;
    app.select("forma", "dinheiro:1").await;
    assert!(!app.hidden("cash-fields").await && app.hidden("cartao").await);
    app.click("recebido").await;
    app.press("100,00").await;
    assert_eq!(
        app.prop("troco", "textContent").await.as_deref(),
        Some("Troco R$ 20,00")
    );
    app.screenshot("dinheiro-troco").await;
    app.press(ENTER).await;
    app.wait_status("Pago em dinheiro — troco R$ 20,00").await;
    assert_eq!(app.ledger_rows(), 0, "cash reaches no gateway");
    app.press(F4).await;
    app.wait_until("the receipt", |a| async move {
        !a.hidden("receipt-dialog").await
    })
    .await;
    let receipt = app.prop("receipt-lines", "textContent").await.unwrap();
    for want in ["FormaDinheiro", "RecebidoR$ 100,00", "TrocoR$ 20,00"] {
        assert!(receipt.contains(want), "{want} in {receipt}");
    }
    app.press(ESC).await;

    // Sale 2 split: R$ 50,00 by débito, the rest in cash with R$ 5,00 change.
    app.press(F2).await;
    app.wait_until("a new sale", |a| async move {
        a.prop("sale-number", "textContent").await.as_deref() == Some("Venda nº 0002")
    })
    .await;
    pay_first_part(&app, "150,00", "50,00", "debito:1").await;
    app.wait_status("Pagamento aprovado — falta R$ 100,00")
        .await;
    app.select("forma", "dinheiro:1").await;
    app.click("recebido").await;
    app.press(&format!("105,00{ENTER}")).await;
    app.wait_status("Venda paga — troco R$ 5,00").await;
    let detail = app.prop("status-detail", "textContent").await.unwrap();
    assert!(
        detail.contains("(Débito R$ 50,00 + Dinheiro R$ 100,00) · falta R$ 0,00"),
        "{detail}"
    );
    app.screenshot("venda-debito-mais-dinheiro").await;
    assert_eq!(app.ledger_rows(), 1, "only the débito was charged");

    // Counted R$ 279,00 where R$ 280,00 should be: the closing says R$ 1,00 is missing.
    app.press(F8).await;
    app.wait_until(
        "the drawer",
        |a| async move { !a.hidden("drawer-dialog").await },
    )
    .await;
    let summary = app.prop("drawer-summary", "textContent").await.unwrap();
    assert!(
        summary.contains("Deve haver na gavetaR$ 280,00"),
        "{summary}"
    );
    app.select("drawer-kind", "contagem").await;
    app.press(&format!("279,00{ENTER}")).await;
    app.wait_until("the count recorded", |a| async move {
        a.prop("drawer-summary", "textContent")
            .await
            .is_some_and(|t| t.contains("Diferença-R$ 1,00"))
    })
    .await;
    app.screenshot("gaveta-contagem").await;
    app.press(ESC).await;
    app.press(F9).await;
    app.wait_verdict("divergência encontrada").await;
    let kinds = app
        .js("return [...document.querySelectorAll('#closing-discrepancies section')].map(s => s.dataset.kind)")
        .await;
    assert_eq!(kinds, serde_json::json!(["drawer_difference"]));
    let totals = app.prop("closing-totals", "textContent").await.unwrap();
    for want in [
        "Aprovados em dinheiro2R$ 180,00",
        "Dinheiro esperado na gavetaR$ 280,00",
        "Dinheiro contado na gavetaR$ 279,00",
        "Diferença na gaveta-R$ 1,00",
    ] {
        assert!(totals.contains(want), "{want} in {totals}");
    }
    app.screenshot("fechamento-gaveta").await;
    app.close().await;
}

#[tokio::test]
async fn a_divided_sale_the_customer_gives_up_is_cancelled_and_its_paid_part_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(dir.path()).await;
    pay_first_part(&app, "150,00", "50,00", "debito:1").await;
    app.wait_status("Pagamento aprovado — falta R$ 100,00")
        .await;
    assert!(!app.hidden("cancelar-venda").await);
    // The first click says what goes back; Esc takes it back; the second click gives it back.
    app.click("cancelar-venda").await;
    assert_eq!(
        app.prop("cancelar-venda", "textContent").await.as_deref(),
        Some("Confirmar: devolver R$ 50,00 (Débito) e cancelar a venda")
    );
    app.screenshot("cancelar-venda-confirmar").await;
    app.press(ESC).await;
    assert_eq!(
        app.prop("cancelar-venda", "textContent").await.as_deref(),
        Some("Cancelar venda (devolver o que foi pago)")
    );
    assert!(app.refund_ledger().is_empty());
    app.click("cancelar-venda").await;
    app.click("cancelar-venda").await;
    // The card part was only authorized: it is undone, nothing was taken, nothing refunded.
    app.wait_status("Venda cancelada — R$ 50,00 liberados no cartão do cliente")
        .await;
    assert!(app.refund_ledger().is_empty());
    assert_eq!(app.authorizations(), [(5_000, "desfeita".to_string())]);
    assert!(!app.enabled("pagar").await, "nothing more is charged on it");
    assert!(!app.hidden("nova-venda").await);
    app.screenshot("venda-cancelada").await;
    app.press(F9).await;
    app.wait_verdict("Tudo confere").await;
    app.close().await;
}

#[tokio::test]
async fn with_confirmar_apos_o_comprovante_a_card_payment_is_captured_once_its_receipt_is_on_screen(
) {
    let dir = tempfile::tempdir().unwrap();
    let app = GuiApp::launch_with(dir.path(), &[("PAGAR_CONFIRMAR_APOS_COMPROVANTE", "1")]).await;
    app.press("25,00").await;
    app.select("forma", "debito:1").await;
    app.press(ENTER).await;
    app.wait_status("Pagamento aprovado").await;
    // Authorized first; on screen, the payment is confirmed and captured.
    app.wait_until("the payment captured", |a| async move {
        a.prop("status-detail", "textContent")
            .await
            .is_some_and(|d| d.ends_with(" · cartão capturado"))
    })
    .await;
    assert_eq!(app.authorizations(), [(2_500, "capturada".to_string())]);
    assert!(!app.hidden("comprovante").await);
    app.screenshot("confirmar-apos-comprovante").await;
    app.press(F9).await;
    app.wait_verdict("Tudo confere").await;
    app.close().await;
}
