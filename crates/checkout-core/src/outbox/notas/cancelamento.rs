//! Notes to cancel (`a_cancelar`) — by substitution (110112: a note set aside that SEFAZ
//! authorized after all), or because their sale was paid back in full (110111): their event was
//! signed and stored with them in the write that decided it, and is sent as it is until SEFAZ
//! registers it (`cancelada`). A refusal that sending again
//! would not change stops the sends (`cancelamento_recusado`): a person's, its reason kept.

use super::*;

/// What a send of a note's cancellation came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelamento {
    /// SEFAZ registered it under this protocol (or had registered it: 573).
    Registrado(String),
    /// Not settled: tried again at the time given.
    Adiado(String),
    /// Refused for good (code, reason): a person's.
    Recusado(u16, String),
}

impl Outbox {
    /// Authorized notes whose sale has an approved refund, the oldest first (at most `limit`):
    /// the ones to look at for a sale paid back in full. A sale whose note set aside is still
    /// being settled or cancelled by substitution waits for it (that event names this note).
    pub async fn notas_com_devolucao(&self, limit: u32) -> Result<Vec<NotaRegistro>> {
        self.select_notas(
            "n WHERE n.estado = 'autorizada'
               AND EXISTS (SELECT 1 FROM attempts a WHERE a.sale_id = n.sale_id
                             AND a.kind = 'estorno' AND a.state = 'aprovado')
               AND NOT EXISTS (SELECT 1 FROM notas o WHERE o.sale_id = n.sale_id
                                 AND o.estado IN ('substituida', 'a_cancelar'))
             ORDER BY n.emitida_em, n.numero LIMIT ?1",
            vec![i64::from(limit).into()],
        )
        .await
    }

    /// Records that the authorized note `chave` is to be cancelled with the signed `evento`
    /// (110111), due at once; a note no longer authorized does not move.
    pub async fn cancelar_nota(&self, chave: &str, evento: String) -> Result<NotaRegistro> {
        let chave = chave.to_string();
        self.db
            .write(move |c| {
                exec(
                    c,
                    "UPDATE notas SET estado = 'a_cancelar', evento = ?2, proxima_tentativa = 0
                     WHERE chave = ?1 AND estado = 'autorizada'",
                    params![chave, evento],
                )?;
                note_by_key(c, &chave)
            })
            .await
    }

    /// Notes to cancel whose event is due at `now`, oldest first (at most `limit`).
    pub async fn notas_a_cancelar(&self, now: UnixMillis, limit: u32) -> Result<Vec<NotaRegistro>> {
        self.select_notas(
            "WHERE estado = 'a_cancelar' AND proxima_tentativa <= ?1
             ORDER BY proxima_tentativa, numero LIMIT ?2",
            vec![now.into(), i64::from(limit).into()],
        )
        .await
    }

    /// Records what a send of `chave`'s cancellation came to; `proxima` is when it is due
    /// again if it is still to cancel. A note no longer to cancel does not move.
    pub async fn registrar_cancelamento(
        &self,
        chave: &str,
        desfecho: Cancelamento,
        proxima: UnixMillis,
    ) -> Result<NotaRegistro> {
        let chave = chave.to_string();
        self.db
            .write(move |c| {
                let (estado, cancelamento, c_stat, motivo, proxima) = match desfecho {
                    Cancelamento::Registrado(p) => {
                        (EstadoNota::Cancelada, Some(p), None, None, proxima)
                    }
                    Cancelamento::Adiado(why) => {
                        (EstadoNota::ACancelar, None, None, Some(why), proxima)
                    }
                    Cancelamento::Recusado(code, why) => (
                        EstadoNota::CancelamentoRecusado,
                        None,
                        Some(code),
                        Some(why),
                        proxima,
                    ),
                };
                exec(
                    c,
                    "UPDATE notas SET estado = ?2, cancelamento = ?3, c_stat = COALESCE(?4, c_stat),
                                      motivo = ?5, tentativas = tentativas + 1,
                                      proxima_tentativa = ?6
                     WHERE chave = ?1 AND estado = 'a_cancelar'",
                    params![chave, estado.as_str(), cancelamento, c_stat, motivo, proxima],
                )?;
                note_by_key(c, &chave)
            })
            .await
    }
}
