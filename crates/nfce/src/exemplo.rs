//! The sandbox's store and a sale of it: what `make nfce-sample` issues, what the tests sign, and
//! the emitter the app's sandbox will use until a merchant configures its own. In homologação of
//! São Paulo (its consultation addresses), with a CNPJ and CPF valid by their digits only.

use crate::chave::{Cnpj, Cpf, Uf};
use crate::nota::{
    Ambiente, Emissao, Emitente, Endereco, Forma, Item, Nota, Pagamento, ResponsavelTecnico,
    UrlsConsulta,
};
use time::macros::datetime;

/// The sandbox store.
pub fn emitente() -> Emitente {
    Emitente {
        cnpj: Cnpj::parse("11.222.333/0001-81").expect("valid by its digits"),
        ie: "111111111111".to_string(),
        razao_social: "PAGAR SIMULADO COMERCIO LTDA".to_string(),
        nome_fantasia: Some("Mercadinho Pagar".to_string()),
        endereco: Endereco {
            logradouro: "Rua das Flores".to_string(),
            numero: "100".to_string(),
            bairro: "Centro".to_string(),
            codigo_municipio: 3_550_308,
            municipio: "Sao Paulo".to_string(),
            uf: Uf::parse("SP").expect("a state"),
            cep: "01001000".to_string(),
        },
    }
}

/// The sandbox store's certificate: self-signed, of its CNPJ (made anew each time; its key is
/// random, so two are not the same certificate).
pub fn certificado() -> crate::Result<crate::Certificado> {
    let e = emitente();
    crate::Certificado::sandbox(&e.cnpj, &e.razao_social)
}

/// São Paulo's consultation addresses in homologação.
pub fn urls() -> UrlsConsulta {
    UrlsConsulta {
        qrcode: "https://www.homologacao.nfce.fazenda.sp.gov.br/qrcode".to_string(),
        chave: "https://www.homologacao.nfce.fazenda.sp.gov.br/consulta".to_string(),
    }
}

/// A sale of two lines (one weighed) paid part by card and part in cash with change, as note
/// `numero` of série 1, issued as `emissao`, the consumer identified by CPF or not.
pub fn nota(numero: u32, emissao: Emissao, cpf: bool) -> Nota {
    Nota {
        emitente: emitente(),
        ambiente: Ambiente::Homologacao,
        serie: 1,
        numero,
        codigo_numerico: 10_000_000 + numero * 7 % 89_999_999,
        emitida_em: datetime!(2026-12-05 18:50:00 -03:00),
        emissao,
        itens: vec![
            Item {
                codigo: "7891000100103".to_string(),
                descricao: "Cafe torrado e moido 500 g".to_string(),
                ncm: "09012100".to_string(),
                cfop: 5102,
                unidade: "UN".to_string(),
                quantidade_milesimos: 2_000,
                valor_unitario: 1_899,
            },
            Item {
                codigo: "2001".to_string(),
                descricao: "Banana prata".to_string(),
                ncm: "08039000".to_string(),
                cfop: 5102,
                unidade: "KG".to_string(),
                quantidade_milesimos: 1_235,
                valor_unitario: 599,
            },
        ],
        pagamentos: vec![
            Pagamento {
                forma: Forma::Debito,
                valor: 3_000,
            },
            Pagamento {
                forma: Forma::Dinheiro,
                valor: 2_000,
            },
        ],
        consumidor: cpf.then(|| Cpf::parse("529.982.247-25").expect("valid by its digits")),
        urls: urls(),
        responsavel_tecnico: Some(ResponsavelTecnico {
            cnpj: Cnpj::parse("11.444.777/0001-61").expect("valid by its digits"),
            contato: "Equipe Pagar".to_string(),
            email: "fiscal@pagar.example".to_string(),
            fone: "11999990000".to_string(),
        }),
        versao_processo: concat!("Pagar ", env!("CARGO_PKG_VERSION")).to_string(),
    }
}

/// The same sale issued in contingência: another number (a number already sent normally is
/// never sent again in contingência), so another key.
pub fn contingencia(numero: u32) -> Nota {
    nota(
        numero,
        Emissao::Contingencia {
            desde: time::macros::datetime!(2026-12-05 18:45:00 -03:00),
            justificativa: "SEFAZ indisponivel: sem resposta do servico de autorizacao".to_string(),
        },
        true,
    )
}

/// The sandbox store declaring série 1's numbers `inicio` to `fim` unused.
pub fn inutilizacao(inicio: u32, fim: u32) -> crate::inutilizacao::Inutilizacao {
    crate::inutilizacao::Inutilizacao {
        emitente: emitente(),
        ambiente: Ambiente::Homologacao,
        ano: 2026,
        serie: 1,
        inicio,
        fim,
        justificativa: "Numeros nao usados: venda cancelada antes da emissao".to_string(),
    }
}
