//! Pix charges and the Pix received for them, on SQLite.

use super::*;
use crate::domain::{PixStatus, Txid};

#[async_trait::async_trait]
impl PixStore for SqliteStore {
    async fn record_received(&self, received: &PixReceived) -> StoreResult<bool> {
        let now = self.now_ms();
        let r = received.clone();
        self.db
            .write(move |c| {
                let charge: Option<String> = c
                    .prepare_cached("SELECT id FROM pix_charges WHERE txid = ?1")?
                    .query_row([r.txid.as_ref()], |row| row.get(0))
                    .optional()?;
                let inserted = exec(
                    c,
                    "INSERT INTO pix_received (end_to_end_id, txid, charge_id, valor, horario, via, recorded_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (end_to_end_id) DO NOTHING",
                    params![r.end_to_end_id, r.txid.as_ref(), charge, r.valor, r.horario, r.via.as_str(), now],
                )?;
                // A Pix seen before its charge was stored (recorded with no charge) is applied
                // when it is seen again: by the poll, which reads every waiting charge.
                let Some(charge) = charge else {
                    return Ok(inserted > 0);
                };
                exec(
                    c,
                    "UPDATE pix_received SET charge_id = ?2 WHERE end_to_end_id = ?1 AND charge_id IS NULL",
                    params![r.end_to_end_id, charge],
                )?;
                let applied = exec(
                    c,
                    "UPDATE pix_charges SET
                         status = CASE status WHEN 'aguardando' THEN 'aprovado'
                                              WHEN 'expirado' THEN 'recebido_apos_cancelamento'
                                              WHEN 'cancelado' THEN 'recebido_apos_cancelamento'
                                              ELSE status END,
                         e2eid = ?2, pago_em = ?3, valor_recebido = ?4, updated_at = ?5
                     WHERE id = ?1 AND e2eid IS NULL",
                    params![charge, r.end_to_end_id, r.horario, r.valor, now],
                )?;
                // The charge's first Pix makes it a payment like any other (listings, the
                // closing, refunds see it): same id, `cobranca_id` its endToEndId, `meio` `pix`.
                exec(
                    c,
                    &received_pix_insert("?1", "?2", "?3", "?4"),
                    params![r.end_to_end_id, r.valor, now, charge],
                )?;
                Ok(inserted > 0 || applied > 0)
            })
            .await
    }

    async fn close_pix(&self, txid: &Txid, to: PixStatus) -> StoreResult<bool> {
        let now = self.now_ms();
        let t = txid.to_string();
        self.db
            .write(move |c| {
                Ok(exec(
                    c,
                    "UPDATE pix_charges SET status = ?2, updated_at = ?3
                     WHERE txid = ?1 AND status = 'aguardando'",
                    params![t, to.as_str(), now],
                )? == 1)
            })
            .await
    }
}
