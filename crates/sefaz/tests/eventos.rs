//! Cancelling an authorized note at the SEFAZ simulator, asked as a till asks it
//! (`nfce::evento`): the cancellation by substitution registered once (573 for the same event
//! again, 218 for another on a cancelled note; a consulta of the note then answers 101 with the
//! event), and refused for what SEFAZ refuses — a protocol
//! not the note's, a note it does not have, a substitute it did not authorize, another
//! emitter's certificate, an event changed after signing.

use nfce::evento::{DesfechoEvento, Evento, TipoEvento};
use nfce::soap::{self, Desfecho, Servico};
use nfce::{exemplo, Certificado, Chave, Emissao, NotaAssinada};
use pagar_testkit::SefazProcess;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn cert() -> Certificado {
    exemplo::certificado().unwrap()
}

/// Authorizes `nota` and gives its protocol.
async fn autorizada(s: &SefazProcess, nota: &NotaAssinada) -> String {
    let r = s
        .call(
            Servico::Autorizacao,
            soap::pedido_autorizacao(1, &nota.xml),
            WAIT,
        )
        .await
        .unwrap();
    match Desfecho::of(&r) {
        Desfecho::Autorizada(p) => p.n_prot.unwrap(),
        other => panic!("{other:?}"),
    }
}

fn substituicao(chave: &Chave, protocolo: &str, substituta: &Chave) -> Evento {
    Evento {
        tipo: TipoEvento::CancelamentoPorSubstituicao {
            substituta: substituta.clone(),
        },
        chave: chave.clone(),
        cnpj: exemplo::emitente().cnpj,
        ambiente: nfce::Ambiente::Homologacao,
        protocolo: protocolo.to_string(),
        justificativa: "Nota sem resposta, substituida pela emitida em contingencia".into(),
        quando: "2026-12-06T10:00:00-03:00".into(),
        aplicativo: "Pagar testes".into(),
    }
}

async fn enviar(s: &SefazProcess, evento: &str) -> DesfechoEvento {
    DesfechoEvento::of(&s.call_evento(evento, WAIT).await.unwrap())
}

/// A SEFAZ with note 1 (sent normally) and note 2 (the same sale in contingência) authorized.
async fn two_notes() -> (tempfile::TempDir, SefazProcess, [(NotaAssinada, String); 2]) {
    let dir = tempfile::tempdir().unwrap();
    let s = SefazProcess::start(dir.path(), 20);
    let c = cert();
    let first = exemplo::nota(1, Emissao::Normal, false)
        .assinar(&c)
        .unwrap();
    let second = exemplo::contingencia(2).assinar(&c).unwrap();
    let p1 = autorizada(&s, &first).await;
    let p2 = autorizada(&s, &second).await;
    (dir, s, [(first, p1), (second, p2)])
}

#[tokio::test]
async fn a_substitution_is_registered_once_the_same_event_again_is_573_and_a_consulta_answers_101()
{
    // Arrange
    let (_dir, s, [(first, p1), (second, _)]) = two_notes().await;
    let evento = substituicao(&first.chave, &p1, &second.chave)
        .assinar(&cert())
        .unwrap();
    // Act
    let registered = enviar(&s, &evento).await;
    let again = enviar(&s, &evento).await;
    let mut cancel = substituicao(&first.chave, &p1, &second.chave);
    cancel.tipo = TipoEvento::Cancelamento;
    let other = enviar(&s, &cancel.assinar(&cert()).unwrap()).await;
    let consulta = s
        .call(
            Servico::Consulta,
            soap::pedido_consulta(2, first.chave.as_ref()),
            WAIT,
        )
        .await
        .unwrap();
    // Assert
    let DesfechoEvento::Registrado(protocolo) = &registered else {
        panic!("{registered:?}");
    };
    assert_eq!(consulta.c_stat, 101, "{}", consulta.x_motivo);
    assert_eq!(consulta.protocolo.unwrap().n_prot, Some(p1.clone()));
    assert_eq!(consulta.cancelamento.as_ref(), Some(protocolo));
    assert_eq!(again, DesfechoEvento::JaRegistrado(573));
    assert_eq!(other, DesfechoEvento::JaRegistrado(218));
    assert_eq!(s.contagens().await["cancelamentos"], 1);
    let notas = s.notas().await;
    let cancelled: Vec<_> = notas
        .iter()
        .filter(|n| !n["cancelamento"].is_null())
        .map(|n| n["chave"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(cancelled, vec![first.chave.as_ref().to_string()]);
}

#[tokio::test]
async fn a_substitution_is_refused_for_a_wrong_protocol_an_unknown_note_or_substitute_and_a_changed_event(
) {
    // Arrange
    let (_dir, s, [(first, p1), (second, p2)]) = two_notes().await;
    let c = cert();
    let unknown = exemplo::nota(9, Emissao::Normal, false).chave().unwrap();
    // Act
    let wrong_protocol = enviar(
        &s,
        &substituicao(&first.chave, &p2, &second.chave)
            .assinar(&c)
            .unwrap(),
    )
    .await;
    let no_note = enviar(
        &s,
        &substituicao(&unknown, &p1, &second.chave)
            .assinar(&c)
            .unwrap(),
    )
    .await;
    let no_substitute = enviar(
        &s,
        &substituicao(&first.chave, &p1, &unknown)
            .assinar(&c)
            .unwrap(),
    )
    .await;
    let changed = substituicao(&first.chave, &p1, &second.chave)
        .assinar(&c)
        .unwrap()
        .replace("substituida pela", "trocada pela");
    let changed = enviar(&s, &changed).await;
    // Assert
    let code = |d: &DesfechoEvento| match d {
        DesfechoEvento::Rejeitado(code, _) => *code,
        other => panic!("{other:?}"),
    };
    assert_eq!(code(&wrong_protocol), 222);
    assert_eq!(code(&no_note), 494);
    assert_eq!(code(&no_substitute), 694);
    assert_eq!(code(&changed), 297);
    assert_eq!(s.contagens().await["cancelamentos"], 0);
}
