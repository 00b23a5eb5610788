use super::*;

fn resposta(c_stat: u16, protocolo: Option<Protocolo>) -> Resposta {
    Resposta {
        tp_amb: 2,
        c_uf: 35,
        ver_aplic: "SIM_1.0".into(),
        dh_recbto: "2026-12-05T18:50:01-03:00".into(),
        c_stat,
        x_motivo: "Lote processado".into(),
        protocolo,
    }
}

fn prot(c_stat: u16, n_prot: Option<&str>) -> Protocolo {
    Protocolo {
        chave: "35261211222333000181650010000000011100000071".into(),
        c_stat,
        x_motivo: "Autorizado o uso da NF-e".into(),
        n_prot: n_prot.map(str::to_string),
        dh_recbto: "2026-12-05T18:50:01-03:00".into(),
        dig_val: Some("abc=".into()),
    }
}

#[test]
fn a_request_reads_back_with_the_note_byte_for_byte() {
    let nfe = "<NFe xmlns=\"http://www.portalfiscal.inf.br/nfe\"><infNFe Id=\"NFe1\" versao=\"4.00\"><x>a &amp; b</x></infNFe></NFe>";
    let pedido = ler_pedido(&pedido_autorizacao(7, nfe)).unwrap();
    assert_eq!(
        pedido,
        Pedido::Autorizacao {
            id_lote: "7".into(),
            sincrono: true,
            nfe: nfe.into()
        }
    );
    assert_eq!(
        ler_pedido(&pedido_consulta(2, "35abc")).unwrap(),
        Pedido::Consulta {
            tp_amb: 2,
            chave: "35abc".into()
        }
    );
    assert_eq!(
        ler_pedido(&pedido_status(2, 35)).unwrap(),
        Pedido::Status { tp_amb: 2 }
    );
}

#[test]
fn an_inutilizacao_and_its_answer_read_back_and_a_repeated_range_is_done() {
    let inut = "<inutNFe xmlns=\"http://www.portalfiscal.inf.br/nfe\" versao=\"4.00\"><infInut Id=\"ID1\"></infInut></inutNFe>";
    assert_eq!(
        ler_pedido(&pedido_inutilizacao(inut)).unwrap(),
        Pedido::Inutilizacao { inut: inut.into() }
    );
    let r = resposta(102, None);
    let back = ler_retorno_inutilizacao(&resposta_inutilizacao(&r, Some("135"))).unwrap();
    assert_eq!(
        DesfechoInutilizacao::of(&back),
        DesfechoInutilizacao::Homologada("135".into())
    );
    let again = ler_retorno_inutilizacao(&resposta_inutilizacao(&resposta(563, None), None));
    assert_eq!(
        DesfechoInutilizacao::of(&again.unwrap()),
        DesfechoInutilizacao::JaPedida
    );
}

#[test]
fn an_answer_reads_back_as_it_was_written() {
    let r = resposta(104, Some(prot(100, Some("135260000000001"))));
    let back = ler_retorno(&resposta_autorizacao(&r)).unwrap();
    assert_eq!(back.c_stat, 104);
    assert_eq!(back.protocolo, r.protocolo);
    let c = ler_retorno(&resposta_consulta(
        &r,
        "35261211222333000181650010000000011100000071",
        &[],
    ))
    .unwrap();
    assert_eq!(c.protocolo, r.protocolo);
    assert_eq!(c.cancelamento, None);
    let s = ler_retorno(&resposta_status(&resposta(107, None))).unwrap();
    assert_eq!((s.c_stat, s.protocolo), (107, None));
}

// Through the wire, as a till reads it.
fn lido(r: Resposta) -> Retorno {
    ler_retorno(&resposta_autorizacao(&r)).unwrap()
}

#[test]
fn a_duplicate_is_already_authorized_and_is_never_a_failure() {
    let dup = resposta(104, Some(prot(204, None)));
    assert_eq!(Desfecho::of(&lido(dup)), Desfecho::JaAutorizada);
    let ok = resposta(104, Some(prot(100, Some("1"))));
    assert!(matches!(Desfecho::of(&lido(ok)), Desfecho::Autorizada(_)));
    assert!(matches!(
        Desfecho::of(&lido(resposta(104, Some(prot(539, None))))),
        Desfecho::NumeroComOutraChave(_)
    ));
    assert_eq!(
        Desfecho::of(&lido(resposta(656, None))),
        Desfecho::ConsumoIndevido
    );
    assert!(matches!(
        Desfecho::of(&lido(resposta(225, None))),
        Desfecho::Rejeitada(225, _)
    ));
    assert!(matches!(
        Desfecho::of(&lido(resposta(104, Some(prot(297, None))))),
        Desfecho::Rejeitada(297, _)
    ));
}

#[test]
fn a_consulta_of_a_cancelled_note_reads_its_cancellation_s_protocol() {
    let chave = "35261211222333000181650010000000011100000071";
    let cancelada = Resposta {
        x_motivo: "Cancelamento de NF-e homologado".into(),
        ..resposta(101, Some(prot(100, Some("135260000000001"))))
    };
    let evento = EventoRegistrado {
        evento: "<evento xmlns=\"http://www.portalfiscal.inf.br/nfe\" versao=\"1.00\"><infEvento Id=\"x\"><nProt>0</nProt></infEvento></evento>".into(),
        tp_evento: "110111".into(),
        n_seq: 1,
        n_prot: "135260000000002".into(),
        dh_reg: "2026-12-05T19:00:00-03:00".into(),
    };
    let back = ler_retorno(&resposta_consulta(&cancelada, chave, &[evento])).unwrap();
    assert_eq!(back.c_stat, 101);
    assert_eq!(
        back.protocolo, cancelada.protocolo,
        "the authorization, not the event's"
    );
    assert_eq!(back.cancelamento.as_deref(), Some("135260000000002"));
}
