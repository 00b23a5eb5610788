//! The SEFAZ simulator as its own process, asked as a till asks it (`nfce::soap`): one
//! authorization per key and per number, a lost answer found by consulta, the reference tools'
//! refusals, 656 after repeated rejections, down and restarted on its own base.

use nfce::soap::{self, Desfecho, DesfechoInutilizacao, Retorno, Servico};
use nfce::{exemplo, Certificado, Emissao, NotaAssinada};
use pagar_testkit::SefazProcess;
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn cert() -> Certificado {
    exemplo::certificado().unwrap()
}

fn normal(numero: u32, cert: &Certificado) -> NotaAssinada {
    exemplo::nota(numero, Emissao::Normal, false)
        .assinar(cert)
        .unwrap()
}

async fn autorizar(s: &SefazProcess, nota: &NotaAssinada) -> Retorno {
    let pedido = soap::pedido_autorizacao(1, &nota.xml);
    s.call(Servico::Autorizacao, pedido, WAIT).await.unwrap()
}

async fn consultar(s: &SefazProcess, nota: &NotaAssinada) -> Retorno {
    let pedido = soap::pedido_consulta(2, nota.chave.as_ref());
    s.call(Servico::Consulta, pedido, WAIT).await.unwrap()
}

fn protocol(r: &Retorno) -> String {
    r.protocolo
        .as_ref()
        .and_then(|p| p.n_prot.clone())
        .unwrap_or_else(|| panic!("no protocol: {r:?}"))
}

#[tokio::test]
async fn a_note_is_authorized_once_and_sent_again_is_204_whose_consulta_gives_the_same_protocol() {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let s = SefazProcess::start(dir.path(), 20);
    let c = cert();
    let nota = normal(1, &c);
    // Act
    let first = autorizar(&s, &nota).await;
    let again = autorizar(&s, &nota).await;
    let consulta = consultar(&s, &nota).await;
    // Assert
    let Desfecho::Autorizada(p) = Desfecho::of(&first) else {
        panic!("{first:?}")
    };
    assert_eq!(p.chave, nota.chave.as_ref());
    assert_eq!(Desfecho::of(&again), Desfecho::JaAutorizada, "{again:?}");
    assert_eq!(consulta.c_stat, 100);
    assert_eq!(protocol(&consulta), protocol(&first));
    assert_eq!(s.contagens().await["autorizadas"], 1);
}

#[tokio::test]
async fn the_same_number_under_another_key_is_539_and_only_the_first_key_is_authorized() {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let s = SefazProcess::start(dir.path(), 20);
    let c = cert();
    let first = normal(7, &c);
    // The same number issued again with another code (a rebuilt note: another key).
    let mut rebuilt = exemplo::nota(7, Emissao::Normal, false);
    rebuilt.codigo_numerico += 1;
    let rebuilt = rebuilt.assinar(&c).unwrap();
    assert_ne!(first.chave, rebuilt.chave);
    // Act
    autorizar(&s, &first).await;
    let second = autorizar(&s, &rebuilt).await;
    // Assert
    let Desfecho::NumeroComOutraChave(why) = Desfecho::of(&second) else {
        panic!("{second:?}")
    };
    assert!(why.contains(first.chave.as_ref()), "{why}");
    assert_eq!(consultar(&s, &rebuilt).await.c_stat, 217);
    let notas = s.notas().await;
    assert_eq!(notas.len(), 1);
    assert_eq!(notas[0]["chave"], first.chave.as_ref());
}

#[tokio::test]
async fn a_note_changed_after_signing_or_out_of_the_schema_or_signed_by_another_cnpj_is_refused() {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let s = SefazProcess::start(dir.path(), 20);
    let c = cert();
    let nota = normal(3, &c);
    let changed = NotaAssinada {
        xml: nota.xml.replace("<vNF>45.38</vNF>", "<vNF>45.39</vNF>"),
        ..nota.clone()
    };
    let out_of_schema = NotaAssinada {
        xml: nota.xml.replace("<CRT>1</CRT>", ""),
        ..nota.clone()
    };
    let other = Certificado::sandbox(
        &nfce::Cnpj::parse("11.444.777/0001-61").unwrap(),
        "OUTRA EMPRESA LTDA",
    )
    .unwrap();
    let foreign = normal(3, &other);
    // Act / Assert
    let r = autorizar(&s, &changed).await;
    assert!(
        matches!(Desfecho::of(&r), Desfecho::Rejeitada(297, _)),
        "{r:?}"
    );
    let r = autorizar(&s, &out_of_schema).await;
    assert!(
        matches!(Desfecho::of(&r), Desfecho::Rejeitada(225, _)),
        "{r:?}"
    );
    let r = autorizar(&s, &foreign).await;
    assert!(
        matches!(Desfecho::of(&r), Desfecho::Rejeitada(213, _)),
        "{r:?}"
    );
    // None of them took the number: the note as signed still gets it.
    let r = autorizar(&s, &nota).await;
    assert!(matches!(Desfecho::of(&r), Desfecho::Autorizada(_)), "{r:?}");
    assert_eq!(
        s.contagens().await,
        json!({"autorizadas": 1, "rejeicoes": 3, "inutilizacoes": 0, "cancelamentos": 0})
    );
}

#[tokio::test]
async fn an_answer_lost_after_authorizing_is_found_by_consulta_and_sending_again_never_authorizes_twice(
) {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let s = SefazProcess::start(dir.path(), 20);
    let c = cert();
    let nota = normal(4, &c);
    s.modo(json!({"modo": "perde-resposta", "segundos": 3}))
        .await;
    // Act: the till gives up after one second.
    let pedido = soap::pedido_autorizacao(1, &nota.xml);
    let lost = s
        .call(Servico::Autorizacao, pedido, Duration::from_secs(1))
        .await;
    s.modo(json!({"modo": "normal"})).await;
    let consulta = consultar(&s, &nota).await;
    let again = autorizar(&s, &nota).await;
    // Assert
    assert!(lost.is_err(), "{lost:?}");
    assert_eq!(consulta.c_stat, 100, "{consulta:?}");
    assert_eq!(Desfecho::of(&again), Desfecho::JaAutorizada);
    assert_eq!(s.contagens().await["autorizadas"], 1);
}

#[tokio::test]
async fn repeated_rejections_block_the_emitter_with_656() {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let s = SefazProcess::start(dir.path(), 3);
    let c = cert();
    let nota = normal(5, &c);
    autorizar(&s, &nota).await;
    // Act: a till that does not read 204 and sends the same note again and again.
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(Desfecho::of(&autorizar(&s, &nota).await));
    }
    // Assert
    assert_eq!(
        seen[..3],
        [
            Desfecho::JaAutorizada,
            Desfecho::JaAutorizada,
            Desfecho::JaAutorizada
        ]
    );
    assert_eq!(seen[3], Desfecho::ConsumoIndevido);
    let next = autorizar(&s, &normal(6, &c)).await;
    assert_eq!(
        Desfecho::of(&next),
        Desfecho::ConsumoIndevido,
        "the emitter is blocked"
    );
}

#[tokio::test]
async fn down_it_answers_503_and_killed_and_started_again_it_keeps_its_notes() {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let mut s = SefazProcess::start(dir.path(), 20);
    let c = cert();
    let nota = normal(8, &c);
    let first = autorizar(&s, &nota).await;
    s.modo(json!({"modo": "fora"})).await;
    // Act
    let down = s
        .call(Servico::Status, soap::pedido_status(2, 35), WAIT)
        .await;
    s.restart();
    let status = s
        .call(Servico::Status, soap::pedido_status(2, 35), WAIT)
        .await
        .unwrap();
    let consulta = consultar(&s, &nota).await;
    // Assert
    assert_eq!(down.unwrap_err(), "HTTP 503 Service Unavailable");
    assert_eq!(status.c_stat, 107);
    assert_eq!(protocol(&consulta), protocol(&first));
}

async fn inutilizar(
    s: &SefazProcess,
    c: &Certificado,
    inicio: u32,
    fim: u32,
) -> DesfechoInutilizacao {
    let inut = exemplo::inutilizacao(inicio, fim).assinar(c).unwrap();
    let r = s
        .call_inutilizacao(soap::pedido_inutilizacao(&inut), WAIT)
        .await
        .unwrap();
    DesfechoInutilizacao::of(&r)
}

#[tokio::test]
async fn a_gap_declared_unused_is_homologated_once_and_its_numbers_never_become_notes() {
    // Arrange
    let dir = tempfile::tempdir().unwrap();
    let s = SefazProcess::start(dir.path(), 20);
    let c = cert();
    autorizar(&s, &normal(1, &c)).await;
    // Act
    let first = inutilizar(&s, &c, 3, 5).await;
    let again = inutilizar(&s, &c, 3, 5).await;
    let overlapping = inutilizar(&s, &c, 5, 6).await;
    let with_a_note = inutilizar(&s, &c, 1, 2).await;
    let note_in_gap = autorizar(&s, &normal(4, &c)).await;
    // Assert
    assert!(
        matches!(first, DesfechoInutilizacao::Homologada(_)),
        "{first:?}"
    );
    assert_eq!(
        again,
        DesfechoInutilizacao::JaPedida,
        "a resend after a lost answer is done"
    );
    assert_eq!(overlapping, DesfechoInutilizacao::Sobreposta);
    assert_eq!(with_a_note, DesfechoInutilizacao::NumeroUsado);
    assert!(
        matches!(Desfecho::of(&note_in_gap), Desfecho::Rejeitada(206, _)),
        "{note_in_gap:?}"
    );
    let counts = s.contagens().await;
    assert_eq!(
        (
            counts["autorizadas"].as_u64(),
            counts["inutilizacoes"].as_u64()
        ),
        (Some(1), Some(1))
    );
}
