//! The closing's NFC-e: how many notes the day authorized and declared unused, and every note a
//! person must still see whatever day it was issued — a note in contingência with the time left
//! to send it (or past it), one SEFAZ has not answered, one refused, one set aside and not yet
//! settled, one authorized after it was set aside (to cancel). Worded here, drawn by the window
//! and printed as they are.

use crate::domain::{SaleId, UnixMillis};
use crate::outbox::{EstadoNota, NotaRegistro};
use serde::Serialize;
use std::time::Duration;
use time::UtcOffset;

/// The NFC-e part of a closing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotasDoFechamento {
    /// Notes issued that day and authorized.
    pub autorizadas: usize,
    /// Numbers issued that day and declared unused (a note set aside that SEFAZ never had).
    pub inutilizadas: usize,
    /// Notes issued that day and cancelled: their sale paid back, or set aside and authorized
    /// after all (cancelled by substitution).
    pub canceladas: usize,
    /// Every note, of any day, that is not settled yet, oldest first.
    pub atencao: Vec<NotaAtencao>,
}

/// A note a person must see at the closing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotaAtencao {
    /// Its number and série.
    pub numero: u32,
    /// Série.
    pub serie: u16,
    /// Its key.
    pub chave: String,
    /// Its sale.
    pub sale_id: SaleId,
    /// Where it stands.
    pub estado: EstadoNota,
    /// In contingência: by when it must reach SEFAZ.
    pub enviar_ate: Option<UnixMillis>,
    /// What to know of it, pt-BR.
    pub texto: String,
}

fn when(ms: UnixMillis, offset: UtcOffset) -> String {
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .map(|t| t.to_offset(offset))
        .ok()
        .and_then(|t| {
            t.format(time::macros::format_description!(
                "[day]/[month]/[year] [hour]:[minute]"
            ))
            .ok()
        })
        .unwrap_or_default()
}

impl NotasDoFechamento {
    /// From the notes issued that day (`do_dia`) and every note not settled (`abertas`), at
    /// `now`, with the state's deadline for contingência `prazo`.
    pub fn of(
        do_dia: &[NotaRegistro],
        abertas: &[NotaRegistro],
        prazo: Duration,
        now: UnixMillis,
        offset: UtcOffset,
    ) -> Self {
        let count = |estado| do_dia.iter().filter(|n| n.estado == estado).count();
        let atencao = abertas
            .iter()
            .map(|n| {
                let enviar_ate = n.enviar_ate(prazo);
                let numero = format!("NFC-e nº {} série {}", n.numero, n.serie);
                let texto = match (n.estado, enviar_ate) {
                    (EstadoNota::Pendente, Some(ate)) if now > ate => format!(
                        "{numero} em contingência: o prazo para enviar à SEFAZ venceu em {}",
                        when(ate, offset)
                    ),
                    (EstadoNota::Pendente, Some(ate)) => format!(
                        "{numero} em contingência: enviar à SEFAZ até {}",
                        when(ate, offset)
                    ),
                    (EstadoNota::Pendente, None) => {
                        format!("{numero} ainda não autorizada: a SEFAZ não respondeu")
                    }
                    (EstadoNota::Rejeitada, _) => format!(
                        "{numero} rejeitada pela SEFAZ ({} {}): a venda está sem nota válida",
                        n.c_stat.unwrap_or_default(),
                        n.motivo.as_deref().unwrap_or("")
                    ),
                    (EstadoNota::NumeroPerdido, _) => format!(
                        "{numero}: a SEFAZ tem este número com outra chave (539): a venda está sem nota válida"
                    ),
                    (EstadoNota::Substituida, _) => format!(
                        "{numero} substituída pela nota em contingência: a confirmar com a SEFAZ"
                    ),
                    (EstadoNota::CancelamentoRecusado, _) if n.substituta.is_none() => format!(
                        "{numero} da venda devolvida; a SEFAZ recusou o cancelamento ({} {}): a nota segue autorizada, procure o contador",
                        n.c_stat.unwrap_or_default(),
                        n.motivo.as_deref().unwrap_or("")
                    ),
                    (EstadoNota::CancelamentoRecusado, _) => format!(
                        "{numero} autorizada depois de substituída; a SEFAZ recusou o cancelamento por substituição ({} {}): a venda tem duas notas autorizadas, procure o contador",
                        n.c_stat.unwrap_or_default(),
                        n.motivo.as_deref().unwrap_or("")
                    ),
                    (EstadoNota::ACancelar, _) if n.substituta.is_none() => {
                        format!("{numero} da venda devolvida: cancelamento a enviar à SEFAZ")
                    }
                    (EstadoNota::ACancelar, _) => format!(
                        "{numero} autorizada depois de substituída: cancelamento por substituição a enviar à SEFAZ"
                    ),
                    (EstadoNota::Autorizada | EstadoNota::Inutilizada | EstadoNota::Cancelada, _) => {
                        format!("{numero} resolvida")
                    }
                };
                NotaAtencao {
                    numero: n.numero,
                    serie: n.serie,
                    chave: n.chave.clone(),
                    sale_id: n.sale_id.clone(),
                    estado: n.estado,
                    enviar_ate,
                    texto,
                }
            })
            .collect();
        NotasDoFechamento {
            autorizadas: count(EstadoNota::Autorizada),
            inutilizadas: count(EstadoNota::Inutilizada),
            canceladas: count(EstadoNota::Cancelada),
            atencao,
        }
    }
}
