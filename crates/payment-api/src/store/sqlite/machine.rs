//! Card-machine orders, on SQLite.

use super::*;

#[async_trait::async_trait]
impl MachineStore for SqliteStore {
    async fn settle_machine(&self, order_id: &str, u: &MachineUpdate) -> StoreResult<bool> {
        let now = self.now_ms();
        let (o, u) = (order_id.to_string(), u.clone());
        self.db
            .write(move |c| {
                let changed = exec(
                    c,
                    "UPDATE machine_orders SET status = ?2, estado = ?3, motivo = ?4,
                         plano_pago = ?5, updated_at = ?6
                     WHERE order_id = ?1 AND status = 'aguardando'
                       AND (?2 <> 'aguardando' OR estado <> ?3)",
                    params![
                        o,
                        u.status.as_str(),
                        u.estado,
                        u.motivo,
                        u.plano_pago.map(|p| p.as_stored()),
                        now
                    ],
                )?;
                // A paid order is a payment like any other (listings, the closing, refunds).
                exec(
                    c,
                    &paid_machine_insert("?1", "?2", "?3"),
                    params![u.plano_pago.map(|p| p.as_stored()), now, o],
                )?;
                Ok(changed > 0)
            })
            .await
    }
}
