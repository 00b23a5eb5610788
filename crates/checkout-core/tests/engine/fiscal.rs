//! The till's NFC-e at a SEFAZ simulator in its own process: authorized once whatever answer is
//! lost, and a note whose answer was not heard settled by its key, never sent as another note.

use checkout_core::fiscal::{Sefaz, Situacao};
use nfce::{exemplo, Certificado, Emissao, NotaAssinada};
use pagar_testkit::SefazProcess;
use serde_json::json;
use std::time::Duration;

fn signed(numero: u32) -> NotaAssinada {
    let e = exemplo::emitente();
    let cert = Certificado::sandbox(&e.cnpj, &e.razao_social).unwrap();
    exemplo::nota(numero, Emissao::Normal, false)
        .assinar(&cert)
        .unwrap()
}

fn protocol(s: &Situacao) -> String {
    match s {
        Situacao::Autorizada(p) => p.n_prot.clone().expect("a protocol number"),
        other => panic!("not authorized: {other:?}"),
    }
}

#[tokio::test]
async fn an_answer_lost_after_sefaz_authorized_is_settled_by_the_key_and_the_note_is_authorized_once(
) {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let sefaz = SefazProcess::start(dir.path(), 20);
    let till = Sefaz::new(sefaz.url(), 2, Duration::from_secs(1));
    let nota = signed(1);
    sefaz
        .modo(json!({"modo": "perde-resposta", "segundos": 3}))
        .await;
    // Act: the answer comes after the till's timeout; the till asks for the key.
    let first = till.autorizar(&nota, 1).await;
    sefaz.modo(json!({"modo": "normal"})).await;
    // A till that crashed before it stored the protocol sends the same note again.
    let again = till.autorizar(&nota, 2).await;
    // Assert
    assert_eq!(protocol(&first), protocol(&again));
    assert_eq!(sefaz.contagens().await["autorizadas"], 1);
    assert_eq!(sefaz.notas().await[0]["chave"], nota.chave.as_ref());
}

#[tokio::test]
async fn with_sefaz_down_the_note_waits_unsent_and_is_authorized_once_when_it_is_back() {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let mut sefaz = SefazProcess::start(dir.path(), 20);
    let till = Sefaz::new(sefaz.url(), 2, Duration::from_secs(2));
    let nota = signed(2);
    sefaz.modo(json!({"modo": "fora"})).await;
    // Act
    let down = till.autorizar(&nota, 1).await;
    sefaz.restart();
    // As the till's loop does: the same note again while nothing is heard (the first try after
    // the restart may meet the connection the killed process left in the pool).
    let mut back = till.autorizar(&nota, 2).await;
    for lote in 3..6 {
        if !matches!(back, Situacao::SemResposta(_)) {
            break;
        }
        back = till.autorizar(&nota, lote).await;
    }
    // Assert
    assert!(
        matches!(down, Situacao::SemResposta(ref why) if why.contains("503")),
        "{down:?}"
    );
    protocol(&back);
    assert_eq!(sefaz.contagens().await["autorizadas"], 1);
}

#[tokio::test]
async fn a_note_sefaz_refuses_is_rejected_with_its_code_and_nothing_is_authorized() {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let sefaz = SefazProcess::start(dir.path(), 20);
    let till = Sefaz::new(sefaz.url(), 2, Duration::from_secs(5));
    let nota = signed(3);
    let changed = NotaAssinada {
        xml: nota.xml.replace("<vNF>45.38</vNF>", "<vNF>45.39</vNF>"),
        ..nota.clone()
    };
    // Act
    let refused = till.autorizar(&changed, 1).await;
    let unknown = till.consultar(changed.chave.as_ref()).await.unwrap();
    // Assert
    assert!(
        matches!(refused, Situacao::Rejeitada(297, _)),
        "{refused:?}"
    );
    assert_eq!(unknown, None);
    assert_eq!(sefaz.contagens().await["autorizadas"], 0);
}
