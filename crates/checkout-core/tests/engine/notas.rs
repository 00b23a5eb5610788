//! The engine issues each paid sale's NFC-e and sends it to a SEFAZ simulator in its own
//! process: authorized once; with SEFAZ down, issued in contingência under a new number and
//! sent with the same bytes when SEFAZ is back, the number first tried declared unused; a note
//! SEFAZ authorized while the till heard nothing is found by its key and cancelled by
//! substitution, once, whatever answers are lost.

use crate::helpers::*;
use checkout_core::fiscal::Emissor;
use checkout_core::outbox::{EstadoNota, NotaRegistro};
use checkout_core::{Centavos, Checkout, SaleId};
use pagar_testkit::SefazProcess;
use serde_json::json;
use std::time::Duration;

fn c(v: i64) -> Centavos {
    Centavos::new(v).unwrap()
}

/// The sandbox store at `sefaz`, with waits short enough for a test.
fn emissor(sefaz: &SefazProcess) -> Emissor {
    let mut e = Emissor::sandbox(sefaz.url()).unwrap();
    e.espera = Duration::from_secs(2);
    e.sondagem = Duration::from_millis(200);
    e.reenvio = Duration::from_millis(200);
    e
}

/// Waits (at most 30 s) until the sale's notes satisfy `pred`; returns them.
async fn notas_until(
    checkout: &Checkout,
    sale: &SaleId,
    pred: impl Fn(&[NotaRegistro]) -> bool,
) -> Vec<NotaRegistro> {
    let mut last = Vec::new();
    for _ in 0..300 {
        last = checkout.notas_da_venda(sale).await.unwrap();
        if pred(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the sale's notes never got there: {last:#?}");
}

/// A till issuing notes to a SEFAZ simulator of its own, paying against a payment API of its own.
struct FiscalTill {
    _api: Api,
    _dir: tempfile::TempDir,
    sefaz: SefazProcess,
    engine: Engine,
}

async fn fiscal_till() -> FiscalTill {
    let api = Api::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sefaz = SefazProcess::start(dir.path(), 20);
    let mut config = fast_config(&api.url());
    config.fiscal = Some(emissor(&sefaz));
    let engine = Engine::open(config).await;
    FiscalTill {
        _api: api,
        _dir: dir,
        sefaz,
        engine,
    }
}

fn estados(notas: &[NotaRegistro]) -> Vec<(u32, u8, EstadoNota)> {
    notas
        .iter()
        .map(|n| (n.numero, n.tp_emis, n.estado))
        .collect()
}

#[tokio::test]
async fn a_sale_paid_in_cash_gets_one_note_authorized_with_its_payment_and_change() {
    // Arrange
    let till = fiscal_till().await;
    let (sefaz, engine) = (&till.sefaz, &till.engine);
    let sale = SaleId::parse("venda-nota-1").unwrap();
    // Act
    engine
        .checkout
        .pay_cash(sale.clone(), c(4_990), c(5_000), None)
        .await
        .unwrap();
    let notas = notas_until(&engine.checkout, &sale, |n| {
        n.iter().any(|n| n.estado == EstadoNota::Autorizada)
    })
    .await;
    // Assert
    assert_eq!(estados(&notas), vec![(1, 1, EstadoNota::Autorizada)]);
    let nota = &notas[0];
    assert!(nota.protocolo.is_some());
    assert_eq!(nota.total, 4_990);
    assert!(
        nota.xml.contains("<tPag>01</tPag><vPag>50.00</vPag>"),
        "{}",
        nota.xml
    );
    assert!(nota.xml.contains("<vTroco>0.10</vTroco>"), "{}", nota.xml);
    assert!(
        nota.qrcode.contains(&format!("?p={}|3|2", nota.chave)),
        "{}",
        nota.qrcode
    );
    let at_sefaz = sefaz.notas().await;
    assert_eq!(at_sefaz.len(), 1);
    assert_eq!(at_sefaz[0]["chave"], nota.chave.as_str());
    let danfe = engine.checkout.danfe(&sale).await.unwrap().unwrap();
    assert!(danfe.contains("NFC-e nº 000000001 Série 001"), "{danfe}");
    assert!(
        danfe.contains(&format!(
            "Protocolo de autorização: {}",
            nota.protocolo.as_deref().unwrap()
        )),
        "{danfe}"
    );
    assert!(!danfe.contains("CONTINGÊNCIA"));
}

#[tokio::test]
async fn with_sefaz_down_sales_get_notes_in_contingencia_sent_with_the_same_bytes_when_it_is_back()
{
    // Arrange
    let till = fiscal_till().await;
    let (sefaz, engine) = (&till.sefaz, &till.engine);
    let (one, two) = (
        SaleId::parse("venda-fora-1").unwrap(),
        SaleId::parse("venda-fora-2").unwrap(),
    );
    sefaz.modo(json!({"modo": "fora"})).await;
    // Act: the first sale's note is sent normally and unanswered; the till enters contingência.
    engine
        .checkout
        .pay_cash(one.clone(), c(1_000), c(1_000), None)
        .await
        .unwrap();
    let first = notas_until(&engine.checkout, &one, |n| n.len() == 2).await;
    engine
        .checkout
        .pay_cash(two.clone(), c(2_500), c(3_000), None)
        .await
        .unwrap();
    let second = notas_until(&engine.checkout, &two, |n| n.len() == 1).await;
    let while_down = sefaz.contagens().await;
    let closing = engine.checkout.close_day(None, false).await.unwrap();
    sefaz.modo(json!({"modo": "normal"})).await;
    let first_after = notas_until(&engine.checkout, &one, |n| {
        n[0].estado == EstadoNota::Inutilizada && n[1].estado == EstadoNota::Autorizada
    })
    .await;
    let second_after = notas_until(&engine.checkout, &two, |n| {
        n[0].estado == EstadoNota::Autorizada
    })
    .await;
    // Assert: number 1 tried normally and set aside, 2 and 3 in contingência; nothing at SEFAZ
    // while it was down.
    assert_eq!(
        estados(&first),
        vec![
            (1, 1, EstadoNota::Substituida),
            (2, 9, EstadoNota::Pendente)
        ]
    );
    assert_eq!(
        first[0].substituta.as_deref(),
        Some(first[1].chave.as_str())
    );
    assert_eq!(estados(&second), vec![(3, 9, EstadoNota::Pendente)]);
    assert!(second[0].xml.contains("<tpEmis>9</tpEmis>"));
    let offline = engine.checkout.danfe(&two).await.unwrap().unwrap();
    assert!(offline.contains("EMITIDA EM CONTINGÊNCIA<br>Pendente de autorização"));
    assert!(second[0]
        .xml
        .contains("<xJust>Contingencia offline: SEFAZ sem resposta"));
    assert_eq!(while_down["autorizadas"], 0);
    // The closing while SEFAZ was down lists every note still open, with what to do.
    let notas = closing
        .notas
        .expect("a till that issues notes closes with them");
    let textos: Vec<&str> = notas.atencao.iter().map(|n| n.texto.as_str()).collect();
    assert_eq!(notas.autorizadas, 0);
    assert_eq!(textos.len(), 3, "{textos:?}");
    assert_eq!(
        textos[0],
        "NFC-e nº 1 série 1 substituída pela nota em contingência: a confirmar com a SEFAZ"
    );
    for t in &textos[1..] {
        assert!(t.contains("em contingência: enviar à SEFAZ até "), "{t}");
    }
    // Back: the contingência notes authorized with the bytes signed offline, number 1 declared
    // unused; every number of the série accounted for.
    assert_eq!(first_after[1].xml, first[1].xml);
    assert_eq!(second_after[0].xml, second[0].xml);
    assert!(first_after[0].protocolo.is_some());
    let counts = sefaz.contagens().await;
    assert_eq!(
        (
            counts["autorizadas"].as_u64(),
            counts["inutilizacoes"].as_u64()
        ),
        (Some(2), Some(1))
    );
    let mut at_sefaz: Vec<String> = sefaz
        .notas()
        .await
        .iter()
        .map(|n| n["chave"].as_str().unwrap().to_string())
        .collect();
    at_sefaz.sort();
    let mut ours = vec![first_after[1].chave.clone(), second_after[0].chave.clone()];
    ours.sort();
    assert_eq!(at_sefaz, ours);
}

#[tokio::test]
async fn a_note_sefaz_authorized_while_the_till_heard_nothing_is_cancelled_by_substitution_once() {
    // Arrange
    let till = fiscal_till().await;
    let (sefaz, engine) = (&till.sefaz, &till.engine);
    let sale = SaleId::parse("venda-duvida").unwrap();
    sefaz
        .modo(json!({"modo": "perde-resposta", "segundos": 5}))
        .await;
    // Act: SEFAZ authorizes the note and its answer is late; before the till asks by the key,
    // SEFAZ goes down, so the customer gets a note in contingência.
    engine
        .checkout
        .pay_cash(sale.clone(), c(700), c(700), None)
        .await
        .unwrap();
    for _ in 0..100 {
        if sefaz.contagens().await["autorizadas"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sefaz.modo(json!({"modo": "fora"})).await;
    let replaced = notas_until(&engine.checkout, &sale, |n| n.len() == 2).await;
    // SEFAZ is back, but every answer comes after the till stopped waiting: the note in
    // contingência is settled by its key, and the cancellation's answer is lost too.
    sefaz
        .modo(json!({"modo": "perde-resposta", "segundos": 3}))
        .await;
    let to_cancel = notas_until(&engine.checkout, &sale, |n| {
        n[0].estado == EstadoNota::ACancelar
            && n[0]
                .motivo
                .as_deref()
                .is_some_and(|m| m.contains("sem resposta"))
            && n[1].estado == EstadoNota::Autorizada
    })
    .await;
    sefaz.modo(json!({"modo": "normal"})).await;
    let settled = notas_until(&engine.checkout, &sale, |n| {
        n[0].estado == EstadoNota::Cancelada
    })
    .await;
    // Assert: the first note is cancelled at SEFAZ by one event naming the note that replaced
    // it, sent as it was signed; the sale keeps one authorized note.
    assert_eq!(
        estados(&replaced),
        vec![
            (1, 1, EstadoNota::Substituida),
            (2, 9, EstadoNota::Pendente)
        ]
    );
    assert_eq!(settled[0].chave, replaced[0].chave);
    assert_eq!(settled[0].evento, to_cancel[0].evento);
    let evento = settled[0].evento.as_deref().unwrap();
    assert!(evento.contains("<tpEvento>110112</tpEvento>"));
    assert!(evento.contains(&format!("<chNFeRef>{}</chNFeRef>", settled[1].chave)));
    assert_eq!(settled[1].estado, EstadoNota::Autorizada);
    let counts = sefaz.contagens().await;
    assert_eq!(
        (
            counts["autorizadas"].as_u64(),
            counts["inutilizacoes"].as_u64(),
            counts["cancelamentos"].as_u64()
        ),
        (Some(2), Some(0), Some(1))
    );
    let at_sefaz = sefaz.notas().await;
    let cancelled: Vec<_> = at_sefaz
        .iter()
        .filter(|n| !n["cancelamento"].is_null())
        .map(|n| n["chave"].as_str().unwrap())
        .collect();
    assert_eq!(cancelled, vec![settled[0].chave.as_str()]);
    assert_eq!(
        settled[0].cancelamento.as_deref(),
        at_sefaz
            .iter()
            .find(|n| n["chave"] == settled[0].chave.as_str())
            .and_then(|n| n["cancelamento"].as_str()),
        "the event sent again is the one SEFAZ registered (573), its protocol asked for by key (101)"
    );
}

#[tokio::test]
async fn the_note_of_a_sale_paid_back_in_full_is_cancelled_and_a_sale_paid_back_in_part_keeps_it() {
    // Arrange
    let till = fiscal_till().await;
    let (sefaz, engine) = (&till.sefaz, &till.engine);
    let sale = SaleId::parse("venda-devolvida").unwrap();
    let paid = attempt_of(
        engine
            .checkout
            .pay_cash(sale.clone(), c(2_000), c(2_000), None)
            .await
            .unwrap(),
    );
    notas_until(&engine.checkout, &sale, |n| {
        n.iter().any(|n| n.estado == EstadoNota::Autorizada)
    })
    .await;
    // Act: R$ 5,00 given back, then, a round later, the rest.
    engine.refund(&paid, Some(500)).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let in_part = engine.checkout.notas_da_venda(&sale).await.unwrap();
    engine.refund(&paid, None).await;
    let cancelled = notas_until(&engine.checkout, &sale, |n| {
        n[0].estado == EstadoNota::Cancelada
    })
    .await;
    // Assert: one note, kept while the sale was paid in part, then cancelled by one 110111.
    assert_eq!(estados(&in_part), vec![(1, 1, EstadoNota::Autorizada)]);
    assert_eq!(estados(&cancelled), vec![(1, 1, EstadoNota::Cancelada)]);
    let evento = cancelled[0].evento.as_deref().unwrap();
    assert!(evento.contains("<tpEvento>110111</tpEvento>"), "{evento}");
    assert!(cancelled[0].cancelamento.is_some());
    let counts = sefaz.contagens().await;
    assert_eq!(
        (
            counts["autorizadas"].as_u64(),
            counts["cancelamentos"].as_u64()
        ),
        (Some(1), Some(1))
    );
    let closing = engine.checkout.close_day(None, false).await.unwrap();
    let notas = closing.notas.unwrap();
    assert_eq!((notas.autorizadas, notas.canceladas), (0, 1));
    assert!(notas.atencao.is_empty(), "{:?}", notas.atencao);
}

#[tokio::test]
async fn sales_paid_before_the_till_issued_notes_get_none_and_every_sale_after_gets_one() {
    // Arrange: a till that issued no notes sells once.
    let api = Api::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sefaz = SefazProcess::start(dir.path(), 20);
    let db = dir.path().join("outbox.db");
    let (before, after) = (
        SaleId::parse("venda-antes").unwrap(),
        SaleId::parse("venda-depois").unwrap(),
    );
    let checkout = Checkout::open(&db, fast_config(&api.url())).await.unwrap();
    checkout
        .pay_cash(before.clone(), c(300), c(300), None)
        .await
        .unwrap();
    checkout.shutdown().await;
    // Act: the same till, now issuing notes, sells again.
    let mut config = fast_config(&api.url());
    config.fiscal = Some(emissor(&sefaz));
    let checkout = Checkout::open(&db, config).await.unwrap();
    checkout
        .pay_cash(after.clone(), c(400), c(400), None)
        .await
        .unwrap();
    let noted = notas_until(&checkout, &after, |n| {
        n.iter().any(|n| n.estado == EstadoNota::Autorizada)
    })
    .await;
    // Assert
    assert_eq!(estados(&noted), vec![(1, 1, EstadoNota::Autorizada)]);
    assert!(checkout.notas_da_venda(&before).await.unwrap().is_empty());
    assert_eq!(sefaz.contagens().await["autorizadas"], 1);
}

#[tokio::test]
async fn notes_a_clock_running_ahead_scheduled_are_sent_once_the_clock_is_set_right() {
    // Arrange: SEFAZ down, a sale's note set aside and another issued in contingência; then the
    // till stops, and its notes wait an hour longer, as a till whose clock ran an hour ahead
    // leaves them once its clock is set right.
    let api = Api::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sefaz = SefazProcess::start(dir.path(), 20);
    let config = || {
        let mut config = fast_config(&api.url());
        config.fiscal = Some(emissor(&sefaz));
        config
    };
    let engine = Engine::open(config()).await;
    let sale = SaleId::parse("venda-relogio").unwrap();
    sefaz.modo(json!({"modo": "fora"})).await;
    engine
        .checkout
        .pay_cash(sale.clone(), c(1_500), c(2_000), None)
        .await
        .unwrap();
    notas_until(&engine.checkout, &sale, |n| n.len() == 2).await;
    let Engine { checkout, db, _dir } = engine;
    checkout.shutdown().await;
    let ahead = rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE notas SET proxima_tentativa = proxima_tentativa + 3600000",
            [],
        )
        .unwrap();
    sefaz.modo(json!({"modo": "normal"})).await;
    // Act
    let checkout = Checkout::open(&db, config()).await.unwrap();
    let settled = notas_until(&checkout, &sale, |n| {
        n[0].estado == EstadoNota::Inutilizada && n[1].estado == EstadoNota::Autorizada
    })
    .await;
    // Assert: both settled in seconds, not in an hour.
    assert_eq!(ahead, 2);
    assert_eq!(
        estados(&settled),
        vec![
            (1, 1, EstadoNota::Inutilizada),
            (2, 9, EstadoNota::Autorizada)
        ]
    );
    checkout.shutdown().await;
}
