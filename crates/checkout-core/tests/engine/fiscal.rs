//! The till's NFC-e at a SEFAZ simulator in its own process: authorized once whatever answer is
//! lost, and a note whose answer was not heard settled by its key, never sent as another note.

use checkout_core::fiscal::{Sefaz, Situacao};
use checkout_core::outbox::{EstadoNota, Outbox};
use checkout_core::SaleId;
use nfce::{exemplo, Certificado, Emissao, NotaAssinada};
use pagar_testkit::SefazProcess;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn signed(numero: u32) -> NotaAssinada {
    let cert = exemplo::certificado().unwrap();
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
    let first = till.autorizar(nota.chave.as_ref(), &nota.xml, 1).await;
    sefaz.modo(json!({"modo": "normal"})).await;
    // A till that crashed before it stored the protocol sends the same note again.
    let again = till.autorizar(nota.chave.as_ref(), &nota.xml, 2).await;
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
    let down = till.autorizar(nota.chave.as_ref(), &nota.xml, 1).await;
    sefaz.restart();
    // As the till's loop does: the same note again while nothing is heard (the first try after
    // the restart may meet the connection the killed process left in the pool).
    let mut back = till.autorizar(nota.chave.as_ref(), &nota.xml, 2).await;
    for lote in 3..6 {
        if !matches!(back, Situacao::SemResposta(_)) {
            break;
        }
        back = till.autorizar(nota.chave.as_ref(), &nota.xml, lote).await;
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
    let refused = till
        .autorizar(changed.chave.as_ref(), &changed.xml, 1)
        .await;
    let unknown = till.consultar(changed.chave.as_ref()).await.unwrap();
    // Assert
    assert!(
        matches!(refused, Situacao::Rejeitada(297, _)),
        "{refused:?}"
    );
    assert_eq!(unknown, None);
    assert_eq!(sefaz.contagens().await["autorizadas"], 0);
}

fn outbox(dir: &std::path::Path) -> Outbox {
    Outbox::open(&dir.join("outbox.db"), Duration::from_secs(5), None).unwrap()
}

fn sale(id: &str) -> SaleId {
    SaleId::parse(id).unwrap()
}

/// Signs the sandbox sale as note `numero`, with `cert`.
fn signer(
    cert: &Arc<Certificado>,
) -> impl FnOnce(u32) -> Result<NotaAssinada, nfce::NfceError> + Send + 'static {
    let cert = cert.clone();
    move |numero| exemplo::nota(numero, Emissao::Normal, false).assinar(&cert)
}

fn sandbox_cert() -> Arc<Certificado> {
    Arc::new(exemplo::certificado().unwrap())
}

#[tokio::test]
async fn a_sale_gets_one_note_however_often_it_asks_and_numbers_follow_without_gaps_across_a_restart(
) {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let cert = sandbox_cert();
    let o = outbox(dir.path());
    // Act
    let first = o
        .emitir_nota(sale("venda-1"), 1, 1_000, None, signer(&cert))
        .await
        .unwrap();
    let asked_again = o
        .emitir_nota(sale("venda-1"), 1, 2_000, None, signer(&cert))
        .await
        .unwrap();
    let second = o
        .emitir_nota(sale("venda-2"), 1, 3_000, None, signer(&cert))
        .await
        .unwrap();
    let refused = o
        .emitir_nota(sale("venda-3"), 1, 4_000, None, |_| {
            Err(nfce::NfceError::Sale("sem itens".into()))
        })
        .await;
    o.close();
    drop(o);
    let o = outbox(dir.path());
    let pending = o.notas_pendentes().await.unwrap();
    let third = o
        .emitir_nota(sale("venda-3"), 1, 5_000, None, signer(&cert))
        .await
        .unwrap();
    // Assert
    assert_eq!(asked_again, first, "the same note, not a second number");
    assert_eq!((first.numero, second.numero, third.numero), (1, 2, 3));
    assert!(
        refused.is_err(),
        "a note that cannot be signed takes no number"
    );
    assert_eq!(
        pending,
        vec![first.clone(), second],
        "kept as signed, through a restart"
    );
    assert_eq!(first.estado, EstadoNota::Pendente);
    assert!(first.xml.contains(&format!("Id=\"NFe{}\"", first.chave)));
}

#[tokio::test]
async fn pending_notes_are_sent_after_a_restart_authorized_once_and_never_moved_back() {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let sefaz = SefazProcess::start(dir.path(), 20);
    let till = Sefaz::new(sefaz.url(), 2, Duration::from_secs(1));
    let cert = sandbox_cert();
    let o = outbox(dir.path());
    let a = o
        .emitir_nota(sale("venda-a"), 1, 1_000, None, signer(&cert))
        .await
        .unwrap();
    o.emitir_nota(sale("venda-b"), 1, 2_000, None, signer(&cert))
        .await
        .unwrap();
    sefaz
        .modo(json!({"modo": "perde-resposta", "segundos": 3}))
        .await;
    // Act: the first note's answer is lost (settled by its key); then the till restarts.
    let sent = till.autorizar(&a.chave, &a.xml, 1).await;
    let recorded = o.registrar_envio(&a.chave, sent, 0).await.unwrap();
    sefaz.modo(json!({"modo": "normal"})).await;
    o.close();
    drop(o);
    let o = outbox(dir.path());
    for nota in o.notas_pendentes().await.unwrap() {
        let sent = till.autorizar(&nota.chave, &nota.xml, 2).await;
        o.registrar_envio(&nota.chave, sent, 0).await.unwrap();
    }
    let late = o
        .registrar_envio(&a.chave, Situacao::SemResposta("atrasada".into()), 0)
        .await
        .unwrap();
    // Assert
    assert_eq!(recorded.estado, EstadoNota::Autorizada);
    assert!(recorded.protocolo.is_some());
    assert!(o.notas_pendentes().await.unwrap().is_empty());
    assert_eq!(
        late, recorded,
        "an authorized note never goes back to pending"
    );
    assert_eq!(sefaz.contagens().await["autorizadas"], 2);
    let b = o.nota_da_venda(&sale("venda-b")).await.unwrap().unwrap();
    assert_eq!((b.estado, b.numero), (EstadoNota::Autorizada, 2));
}
