//! The sale's NFC-e on the cashier's screen, with the embedded sandbox's SEFAZ simulator: a cash
//! sale paid while SEFAZ is down says "EMITIDA EM CONTINGÊNCIA" and by when it must be sent, its
//! DANFE carries a QR Code a tool Pagar did not write reads as the state's consultation address;
//! once SEFAZ is back the same note is authorized and the number first tried declared unused;
//! paid back in full, the sale's note is cancelled.

use crate::harness::*;
use std::process::Command;

/// WebDriver's End key.
const END: &str = "\u{E010}";

/// The sandbox SEFAZ's base: `(notes authorized, numbers declared unused)`.
fn at_sefaz(app: &GuiApp) -> (i64, i64) {
    let db = app.data_dir.join("sandbox").join("sefaz.db");
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    let count = |table: &str| {
        c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    };
    (count("notas"), count("inutilizadas"))
}

/// `xmllint` against the official schema and `xmlsec1 --verify` with the certificate the note
/// carries (the sandbox's is self-signed: it is its own anchor).
fn check_with_tools(xml: &std::path::Path) {
    let xsd = pagar_testkit::nfce_xsd_dir().join("nfe_v4.00.xsd");
    let schema = Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(&xsd)
        .arg(xml)
        .output()
        .expect("xmllint is installed (make test installs it)");
    assert!(
        schema.status.success(),
        "xmllint: {}",
        String::from_utf8_lossy(&schema.stderr)
    );
    let text = std::fs::read_to_string(xml).unwrap();
    let der = text
        .split("<X509Certificate>")
        .nth(1)
        .and_then(|s| s.split("</X509Certificate>").next())
        .expect("the note carries its certificate");
    let pem = xml.with_extension("pem");
    let lines: Vec<String> = der
        .as_bytes()
        .chunks(64)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    std::fs::write(
        &pem,
        format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            lines.join("\n")
        ),
    )
    .unwrap();
    let verify = Command::new("xmlsec1")
        .args(["--verify", "--id-attr:Id", "infNFe", "--trusted-pem"])
        .arg(&pem)
        .arg(xml)
        .output()
        .expect("xmlsec1 is installed (make test installs it)");
    assert!(
        verify.status.success(),
        "xmlsec1: {}",
        String::from_utf8_lossy(&verify.stderr)
    );
}

async fn nfce_label(app: &GuiApp) -> String {
    app.prop("nfce-label", "textContent")
        .await
        .unwrap_or_default()
}

#[tokio::test]
async fn a_sale_paid_with_sefaz_down_prints_emitida_em_contingencia_and_is_authorized_once_it_is_back(
) {
    let data = tempfile::tempdir().unwrap();
    let app = GuiApp::launch(data.path()).await;
    // QA takes the sandbox's SEFAZ down from the panel.
    app.click("qa-toggle").await;
    app.select("qa-sefaz", "fora").await;
    app.wait_until("SEFAZ down", |a| async move {
        a.prop("qa-result", "textContent")
            .await
            .is_some_and(|t| t == "SEFAZ simulada: Fora do ar (503).")
    })
    .await;
    app.click("qa-toggle").await;

    // A cash sale of R$ 12,50 paid with R$ 20,00.
    app.click("valor").await;
    app.press("12,50").await;
    app.select("forma", "dinheiro:1").await;
    app.click("recebido").await;
    app.press("20,00").await;
    app.press(ENTER).await;
    app.wait_status("Pago em dinheiro — troco R$ 7,50").await;
    app.wait_until("the note in contingência", |a| async move {
        nfce_label(a).await == "NFC-e EMITIDA EM CONTINGÊNCIA"
    })
    .await;
    let detail = app.prop("nfce-detail", "textContent").await.unwrap();
    assert!(
        detail.starts_with("NFC-e nº 2 série 1 · enviar à SEFAZ até ")
            && detail.contains("faltam 23 h"),
        "{detail}"
    );
    app.screenshot("nfce-contingencia").await;

    // Its DANFE, drawn by the window.
    app.click("danfe").await;
    app.wait_until(
        "the DANFE",
        |a| async move { !a.hidden("danfe-dialog").await },
    )
    .await;
    let page = app
        .js("return document.getElementById('danfe-page').shadowRoot.innerHTML")
        .await
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        page.contains("EMITIDA EM CONTINGÊNCIA<br>Pendente de autorização"),
        "{page}"
    );
    assert!(page.contains("NFC-e nº 000000002 Série 001"));
    // The cashier scrolls to its foot, where the QR Code is (End, on the page).
    app.click("danfe-paper").await;
    app.press(END).await;
    // WebKit scrolls smoothly: let it arrive.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let shot = app.screenshot("danfe-contingencia").await;
    let read = Command::new("zbarimg")
        .args(["--quiet", "--raw"])
        .arg(&shot)
        .output()
        .expect("zbarimg is installed (make test installs zbar-tools)");
    let qr = String::from_utf8_lossy(&read.stdout);
    assert!(
        qr.starts_with("https://www.homologacao.nfce.fazenda.sp.gov.br/qrcode?p="),
        "the QR Code on screen: {qr:?}"
    );
    // The note it stands for, saved as SEFAZ got it: valid by the official schema, its
    // signature verified by xmlsec1 with the certificate it carries.
    let saved = app.prop("danfe-file", "textContent").await.unwrap();
    let xml = saved
        .split(" e ")
        .nth(1)
        .and_then(|s| s.strip_suffix(" (a nota assinada)"))
        .unwrap_or_else(|| panic!("{saved}"));
    check_with_tools(std::path::Path::new(xml));
    app.press(ESC).await;
    app.wait_until("the DANFE closed", |a| async move {
        a.hidden("danfe-dialog").await
    })
    .await;
    assert_eq!(
        at_sefaz(&app),
        (0, 0),
        "nothing reached SEFAZ while it was down"
    );

    // The closing lists the notes still open: the number set aside and the one in contingência.
    app.press(F9).await;
    app.wait_until(
        "the closing",
        |a| async move { !a.hidden("closing-nfce").await },
    )
    .await;
    let open = app.prop("closing-nfce-lista", "textContent").await.unwrap();
    assert!(
        open.contains("NFC-e nº 1 série 1 substituída pela nota em contingência")
            && open.contains("NFC-e nº 2 série 1 em contingência: enviar à SEFAZ até "),
        "{open}"
    );
    app.screenshot("fechamento-nfce-contingencia").await;
    app.press(ESC).await;

    // SEFAZ back: the same note goes out and is authorized; number 1 is declared unused.
    app.click("qa-toggle").await;
    app.select("qa-sefaz", "normal").await;
    app.click("qa-toggle").await;
    app.wait_until("the note authorized", |a| async move {
        nfce_label(a).await == "NFC-e nº 2 série 1 autorizada (emitida em contingência)"
    })
    .await;
    app.wait_until("number 1 declared unused", |a| async move {
        at_sefaz(a) == (1, 1)
    })
    .await;
    app.screenshot("nfce-autorizada").await;

    // The customer brings it all back: "Estornar" gives the cash back from the drawer, and the
    // sale's note is cancelled at SEFAZ (110111).
    let till = app.invoke("open_sale", serde_json::json!({})).await;
    let payment = till["ok"]["attempt"]["id"].as_str().unwrap().to_string();
    app.click(&format!("estornar-{payment}")).await;
    app.wait_until("the refund dialog", |a| async move {
        !a.hidden("refund-dialog").await
    })
    .await;
    app.click("refund-review").await;
    app.wait_until("the confirmation", |a| async move {
        !a.hidden("refund-confirm").await
    })
    .await;
    app.click("refund-confirm").await;
    app.wait_until("the refund approved", |a| async move {
        a.prop("refund-status-label", "textContent")
            .await
            .is_some_and(|t| t == "Estorno aprovado")
    })
    .await;
    app.press(ESC).await;
    app.wait_until("the note cancelled", |a| async move {
        nfce_label(a).await == "NFC-e nº 2 série 1 cancelada (venda devolvida)"
    })
    .await;
    app.screenshot("nfce-cancelada-devolucao").await;
    // The closing made anew (the first one's text stays in the dialog until it arrives).
    app.press(F9).await;
    app.wait_until("the closing counting the note cancelled", |a| async move {
        a.prop("closing-nfce-resumo", "textContent")
            .await
            .is_some_and(|t| t.contains("1 cancelada"))
    })
    .await;
    let resumo = app
        .prop("closing-nfce-resumo", "textContent")
        .await
        .unwrap();
    assert_eq!(
        resumo,
        "0 autorizadas no dia · 1 número inutilizado · 1 cancelada. Nenhuma nota pendente."
    );
    app.screenshot("fechamento-nfce-cancelada").await;
    app.close().await;
}
