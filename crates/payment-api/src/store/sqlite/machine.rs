//! Card-machine orders, on SQLite.

use super::*;

fn machine_from_row(r: &Row<'_>) -> rusqlite::Result<MachineColumns> {
    Ok(MachineColumns {
        id: r.get("id")?,
        merchant: r.get("merchant")?,
        idempotency_key: r.get("idempotency_key")?,
        order_id: r.get("order_id")?,
        maquininha: r.get("maquininha")?,
        valor: r.get("valor")?,
        plano: r.get("plano")?,
        status: r.get("status")?,
        estado: r.get("estado")?,
        motivo: r.get("motivo")?,
        plano_pago: r.get("plano_pago")?,
        descricao: r.get("descricao")?,
        referencia: r.get("referencia")?,
        terminal: r.get("terminal")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn collect(rows: Vec<MachineColumns>) -> StoreResult<Vec<MachineOrder>> {
    rows.into_iter().map(MachineColumns::parse).collect()
}

#[async_trait::async_trait]
impl MachineStore for SqliteStore {
    async fn finish_machine(
        &self,
        done: AwaitedCompletion<MachineOrder>,
    ) -> StoreResult<FinishOutcome> {
        let now = self.now_ms();
        self.db
            .write(move |c| {
                let o = &done.resource;
                let (m, k) = (o.merchant.as_ref(), o.idempotency_key.as_ref());
                if !complete_key(c, m, k, done.fence, &done.response, o.id.as_ref(), now)? {
                    return Ok(FinishOutcome::LeaseLost);
                }
                c.execute(
                    &format!(
                        "INSERT INTO machine_orders ({MACHINE_COLUMNS}, fingerprint)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
                    ),
                    params![
                        o.id.as_ref(),
                        m,
                        k,
                        o.order_id,
                        o.maquininha.as_ref(),
                        o.valor.get(),
                        o.plano.map(|p| p.as_stored()),
                        o.status.as_str(),
                        o.estado,
                        o.motivo,
                        o.plano_pago.map(|p| p.as_stored()),
                        o.descricao,
                        o.referencia,
                        o.terminal.as_ref().map(AsRef::<str>::as_ref),
                        o.created_at,
                        o.updated_at,
                        done.fingerprint.as_ref()
                    ],
                )?;
                Ok(FinishOutcome::Stored)
            })
            .await
    }

    async fn machine_order(
        &self,
        merchant: &MerchantId,
        id: &PaymentId,
    ) -> StoreResult<Option<MachineOrder>> {
        let (m, id) = (merchant.to_string(), id.to_string());
        self.db
            .read(move |c| {
                c.prepare_cached(&format!(
                    "SELECT {MACHINE_COLUMNS} FROM machine_orders WHERE merchant = ?1 AND id = ?2"
                ))?
                .query_row(params![m, id], machine_from_row)
                .optional()?
                .map(MachineColumns::parse)
                .transpose()
            })
            .await
    }

    async fn machine_by_order(
        &self,
        order_id: &str,
    ) -> StoreResult<Option<(MachineOrder, Option<Fingerprint>)>> {
        let o = order_id.to_string();
        self.db
            .read(move |c| {
                let Some((row, fp)) = c
                    .prepare_cached(&format!(
                        "SELECT {MACHINE_COLUMNS}, fingerprint FROM machine_orders WHERE order_id = ?1"
                    ))?
                    .query_row([o], |r| {
                        let fp: Option<String> = r.get("fingerprint")?;
                        Ok((machine_from_row(r)?, fp))
                    })
                    .optional()?
                else {
                    return Ok(None);
                };
                Ok(Some((row.parse()?, fp.map(Fingerprint::from_stored))))
            })
            .await
    }

    async fn machine_by(
        &self,
        merchant: &MerchantId,
        by: Lookup<'_>,
    ) -> StoreResult<Vec<MachineOrder>> {
        let (field, value) = (by.field, by.value);
        collect(
            self.rows_by(
                format!("{MACHINE_COLUMNS} FROM machine_orders"),
                merchant,
                field,
                value,
                machine_from_row,
            )
            .await?,
        )
    }

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

    async fn machines_waiting(&self, limit: usize) -> StoreResult<Vec<MachineOrder>> {
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(&format!(
                    "SELECT {MACHINE_COLUMNS} FROM machine_orders WHERE status = 'aguardando'
                     ORDER BY updated_at, id LIMIT ?1"
                ))?;
                let rows = st
                    .query_map([limit as i64], machine_from_row)?
                    .collect::<Result<Vec<_>, _>>()?;
                collect(rows)
            })
            .await
    }
}
