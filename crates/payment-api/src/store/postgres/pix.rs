//! Pix charges and the Pix received for them, on PostgreSQL.

use super::*;
use crate::domain::{PixStatus, Txid};

#[async_trait::async_trait]
impl PixStore for PgStore {
    async fn record_received(&self, r: &PixReceived) -> StoreResult<bool> {
        let now = self.now_ms();
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let charge: Option<String> = tx
            .query_opt(
                "SELECT id FROM pix_charges WHERE txid = $1",
                &[&r.txid.as_ref()],
            )
            .await?
            .map(|row| row.get(0));
        let inserted = tx
            .execute(
                "INSERT INTO pix_received (end_to_end_id, txid, charge_id, valor, horario, via, recorded_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (end_to_end_id) DO NOTHING",
                &[
                    &r.end_to_end_id,
                    &r.txid.as_ref(),
                    &charge,
                    &r.valor,
                    &r.horario,
                    &r.via.as_str(),
                    &now,
                ],
            )
            .await?;
        // A Pix seen before its charge was stored is applied when it is seen again (see the
        // SQLite store).
        let Some(charge) = charge else {
            tx.commit().await?;
            return Ok(inserted > 0);
        };
        tx.execute(
            "UPDATE pix_received SET charge_id = $2 WHERE end_to_end_id = $1 AND charge_id IS NULL",
            &[&r.end_to_end_id, &charge],
        )
        .await?;
        let applied = tx
            .execute(
                "UPDATE pix_charges SET
                     status = CASE status WHEN 'aguardando' THEN 'aprovado'
                                          WHEN 'expirado' THEN 'recebido_apos_cancelamento'
                                          WHEN 'cancelado' THEN 'recebido_apos_cancelamento'
                                          ELSE status END,
                     e2eid = $2, pago_em = $3, valor_recebido = $4, updated_at = $5
                 WHERE id = $1 AND e2eid IS NULL",
                &[&charge, &r.end_to_end_id, &r.horario, &r.valor, &now],
            )
            .await?;
        // The charge's first Pix makes it a payment like any other (see the SQLite store).
        tx.execute(
            &received_pix_insert("$1", "$2", "$3", "$4"),
            &[&r.end_to_end_id, &r.valor, &now, &charge],
        )
        .await?;
        tx.commit().await?;
        Ok(inserted > 0 || applied > 0)
    }

    async fn close_pix(&self, txid: &Txid, to: PixStatus) -> StoreResult<bool> {
        let c = self.conn().await?;
        let n = c
            .execute(
                "UPDATE pix_charges SET status = $2, updated_at = $3
                 WHERE txid = $1 AND status = 'aguardando'",
                &[&txid.as_ref(), &to.as_str(), &self.now_ms()],
            )
            .await?;
        Ok(n == 1)
    }
}
