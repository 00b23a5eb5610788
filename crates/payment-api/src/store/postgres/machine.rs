//! Card-machine orders, on PostgreSQL.

use super::*;

#[async_trait::async_trait]
impl MachineStore for PgStore {
    async fn settle_machine(&self, order_id: &str, u: &MachineUpdate) -> StoreResult<bool> {
        let now = self.now_ms();
        let plano_pago = u.plano_pago.map(|p| p.as_stored());
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let changed = tx
            .execute(
                "UPDATE machine_orders SET status = $2, estado = $3, motivo = $4,
                     plano_pago = $5, updated_at = $6
                 WHERE order_id = $1 AND status = 'aguardando'
                   AND ($2 <> 'aguardando' OR estado <> $3)",
                &[
                    &order_id,
                    &u.status.as_str(),
                    &u.estado,
                    &u.motivo,
                    &plano_pago,
                    &now,
                ],
            )
            .await?;
        // A paid order is a payment like any other (see the SQLite store).
        tx.execute(
            &paid_machine_insert("$1::text", "$2::bigint", "$3::text"),
            &[&plano_pago, &now, &order_id],
        )
        .await?;
        tx.commit().await?;
        Ok(changed > 0)
    }
}
