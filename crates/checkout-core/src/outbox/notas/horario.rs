//! When the notes waiting for SEFAZ are due: all at once when SEFAZ is back, and at once when
//! the wall clock they were scheduled by ran ahead and was set right.

use super::*;

impl Outbox {
    /// Makes every note waiting for SEFAZ (to send, to settle, to cancel) due at `now`: SEFAZ
    /// is back, send what waited.
    pub async fn notas_ja(&self, now: UnixMillis) -> Result<()> {
        self.corrigir_horario_fiscal(now, 0, UnixMillis::MAX / 4)
            .await
            .map(|_| ())
    }

    /// Makes due at `now` every note waiting for SEFAZ past `now + folga`, and shortens a block
    /// (656) ending past `now + bloqueio` to end then: the till never sets a wait longer than
    /// those, so only a wall clock that went back (set right by hand or by NTP after running
    /// ahead) leaves one there — and would hold the note as long as the clock had run ahead. How
    /// many notes it moved; nothing is written when there is nothing to move.
    pub async fn corrigir_horario_fiscal(
        &self,
        now: UnixMillis,
        folga: UnixMillis,
        bloqueio: UnixMillis,
    ) -> Result<usize> {
        const ESPERANDO: &str = "estado IN ('pendente', 'substituida', 'a_cancelar')
                                 AND proxima_tentativa > ?1 + ?2";
        let late: bool = self
            .db
            .read(move |c| -> Result<bool> {
                Ok(c.query_row(
                    &format!(
                        "SELECT EXISTS (SELECT 1 FROM notas WHERE {ESPERANDO})
                             OR EXISTS (SELECT 1 FROM fiscal WHERE bloqueada_ate > ?1 + ?3)"
                    ),
                    params![now, folga, bloqueio],
                    |r| r.get(0),
                )?)
            })
            .await?;
        if !late {
            return Ok(0);
        }
        self.db
            .write(move |c| {
                exec(
                    c,
                    "UPDATE fiscal SET bloqueada_ate = ?1 + ?2 WHERE bloqueada_ate > ?1 + ?2",
                    params![now, bloqueio],
                )?;
                Ok(exec(
                    c,
                    &format!("UPDATE notas SET proxima_tentativa = ?1 WHERE {ESPERANDO}"),
                    params![now, folga],
                )?)
            })
            .await
    }
}
