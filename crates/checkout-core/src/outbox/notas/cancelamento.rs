//! Notes to cancel by substitution (`a_cancelar`): their event was signed and stored with them,
//! and is sent as it is until SEFAZ registers it (`cancelada`). A refusal that sending again
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
