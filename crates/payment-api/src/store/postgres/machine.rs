//! Card-machine orders, on PostgreSQL.

use super::*;

fn machine_from_row(r: &Row) -> StoreResult<MachineOrder> {
    MachineColumns {
        id: r.try_get("id")?,
        merchant: r.try_get("merchant")?,
        idempotency_key: r.try_get("idempotency_key")?,
        order_id: r.try_get("order_id")?,
        maquininha: r.try_get("maquininha")?,
        valor: r.try_get("valor")?,
        plano: r.try_get("plano")?,
        status: r.try_get("status")?,
        estado: r.try_get("estado")?,
        motivo: r.try_get("motivo")?,
        plano_pago: r.try_get("plano_pago")?,
        descricao: r.try_get("descricao")?,
        referencia: r.try_get("referencia")?,
        terminal: r.try_get("terminal")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    }
    .parse()
}

#[async_trait::async_trait]
impl MachineStore for PgStore {
    async fn finish_machine(
        &self,
        done: AwaitedCompletion<MachineOrder>,
    ) -> StoreResult<FinishOutcome> {
        let c = self.conn().await?;
        let o = &done.resource;
        let st = c
            .prepare_cached(&format!(
                "WITH done AS (
                     UPDATE idempotency_keys
                     SET recovery_point = 'finished', response_status = $4, response_body = $5,
                         payment_id = $6, completed_at = pagar_now_ms() + $19, locked_until = 0
                     WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL
                     RETURNING 1
                 )
                 INSERT INTO machine_orders ({MACHINE_COLUMNS}, fingerprint)
                 SELECT $6::text, $1::text, $2::text, $7::text, $8::text, $9::bigint, $10::text,
                        $11::text, $12::text, $13::text, $14::text, $15::text, $16::text,
                        $17::text, $18::bigint, $18::bigint, $20::text
                 FROM done"
            ))
            .await?;
        let inserted = c
            .execute(
                &st,
                &[
                    &o.merchant.as_ref(),
                    &o.idempotency_key.as_ref(),
                    &done.fence,
                    &i32::from(done.response.status),
                    &done.response.body,
                    &o.id.as_ref(),
                    &o.order_id,
                    &o.maquininha.as_ref(),
                    &o.valor.get(),
                    &o.plano.map(|p| p.as_stored()),
                    &o.status.as_str(),
                    &o.estado,
                    &o.motivo,
                    &o.plano_pago.map(|p| p.as_stored()),
                    &o.descricao,
                    &o.referencia,
                    &o.terminal.as_ref().map(AsRef::<str>::as_ref),
                    &o.created_at,
                    &self.shift(),
                    &done.fingerprint.as_ref(),
                ],
            )
            .await?;
        Ok(if inserted == 1 {
            FinishOutcome::Stored
        } else {
            FinishOutcome::LeaseLost
        })
    }

    async fn machine_order(
        &self,
        merchant: &MerchantId,
        id: &PaymentId,
    ) -> StoreResult<Option<MachineOrder>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT {MACHINE_COLUMNS} FROM machine_orders WHERE merchant = $1 AND id = $2"
            ))
            .await?;
        c.query_opt(&st, &[&merchant.as_ref(), &id.as_ref()])
            .await?
            .as_ref()
            .map(machine_from_row)
            .transpose()
    }

    async fn machine_by_order(
        &self,
        order_id: &str,
    ) -> StoreResult<Option<(MachineOrder, Option<Fingerprint>)>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT {MACHINE_COLUMNS}, fingerprint FROM machine_orders WHERE order_id = $1"
            ))
            .await?;
        let Some(row) = c.query_opt(&st, &[&order_id]).await? else {
            return Ok(None);
        };
        let fp: Option<String> = row.try_get("fingerprint")?;
        Ok(Some((
            machine_from_row(&row)?,
            fp.map(Fingerprint::from_stored),
        )))
    }

    async fn machine_by(
        &self,
        merchant: &MerchantId,
        by: Lookup<'_>,
    ) -> StoreResult<Vec<MachineOrder>> {
        let (field, value) = (by.field, by.value);
        let from = format!("{MACHINE_COLUMNS} FROM machine_orders");
        let rows = self.rows_by(&from, merchant, field, value).await?;
        rows.iter().map(machine_from_row).collect()
    }

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

    async fn machines_waiting(&self, limit: usize) -> StoreResult<Vec<MachineOrder>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {MACHINE_COLUMNS} FROM machine_orders WHERE status = 'aguardando'
                     ORDER BY updated_at, id LIMIT $1"
                ),
                &[&(limit as i64)],
            )
            .await?;
        rows.iter().map(machine_from_row).collect()
    }
}
