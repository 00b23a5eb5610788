//! Pix charges and the Pix received for them, on PostgreSQL.

use super::*;
use crate::domain::{PixStatus, Txid};

fn pix_from_row(r: &Row) -> StoreResult<PixCharge> {
    PixColumns {
        id: r.try_get("id")?,
        merchant: r.try_get("merchant")?,
        idempotency_key: r.try_get("idempotency_key")?,
        txid: r.try_get("txid")?,
        valor: r.try_get("valor")?,
        status: r.try_get("status")?,
        copia_e_cola: r.try_get("copia_e_cola")?,
        location: r.try_get("location")?,
        expira_em: r.try_get("expira_em")?,
        e2eid: r.try_get("e2eid")?,
        pago_em: r.try_get("pago_em")?,
        valor_recebido: r.try_get("valor_recebido")?,
        descricao: r.try_get("descricao")?,
        referencia: r.try_get("referencia")?,
        terminal: r.try_get("terminal")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    }
    .parse()
}

#[async_trait::async_trait]
impl PixStore for PgStore {
    async fn finish_pix(&self, done: AwaitedCompletion<PixCharge>) -> StoreResult<FinishOutcome> {
        let c = self.conn().await?;
        let p = &done.resource;
        let st = c
            .prepare_cached(&format!(
                "WITH done AS (
                     UPDATE idempotency_keys
                     SET recovery_point = 'finished', response_status = $4, response_body = $5,
                         payment_id = $6, completed_at = pagar_now_ms() + $20, locked_until = 0
                     WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL
                     RETURNING 1
                 )
                 INSERT INTO pix_charges ({PIX_COLUMNS}, fingerprint)
                 SELECT $6::text, $1::text, $2::text, $7::text, $8::bigint, $9::text, $10::text,
                        $11::text, $12::bigint, $13::text, $14::bigint, $15::bigint, $16::text,
                        $17::text, $18::text, $19::bigint, $19::bigint, $21::text
                 FROM done"
            ))
            .await?;
        let inserted = c
            .execute(
                &st,
                &[
                    &p.merchant.as_ref(),
                    &p.idempotency_key.as_ref(),
                    &done.fence,
                    &i32::from(done.response.status),
                    &done.response.body,
                    &p.id.as_ref(),
                    &p.txid.as_ref(),
                    &p.valor.get(),
                    &p.status.as_str(),
                    &p.copia_e_cola,
                    &p.location,
                    &p.expira_em,
                    &p.e2eid,
                    &p.pago_em,
                    &p.valor_recebido,
                    &p.descricao,
                    &p.referencia,
                    &p.terminal.as_ref().map(AsRef::<str>::as_ref),
                    &p.created_at,
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

    async fn pix_charge(
        &self,
        merchant: &MerchantId,
        id: &PaymentId,
    ) -> StoreResult<Option<PixCharge>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT {PIX_COLUMNS} FROM pix_charges WHERE merchant = $1 AND id = $2"
            ))
            .await?;
        c.query_opt(&st, &[&merchant.as_ref(), &id.as_ref()])
            .await?
            .as_ref()
            .map(pix_from_row)
            .transpose()
    }

    async fn pix_by_txid(
        &self,
        txid: &Txid,
    ) -> StoreResult<Option<(PixCharge, Option<Fingerprint>)>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT {PIX_COLUMNS}, fingerprint FROM pix_charges WHERE txid = $1"
            ))
            .await?;
        let Some(row) = c.query_opt(&st, &[&txid.as_ref()]).await? else {
            return Ok(None);
        };
        let fp: Option<String> = row.try_get("fingerprint")?;
        Ok(Some((
            pix_from_row(&row)?,
            fp.map(Fingerprint::from_stored),
        )))
    }

    async fn pix_by(&self, merchant: &MerchantId, by: Lookup<'_>) -> StoreResult<Vec<PixCharge>> {
        let (field, value) = (by.field, by.value);
        let from = format!("{PIX_COLUMNS} FROM pix_charges");
        let rows = self.rows_by(&from, merchant, field, value).await?;
        rows.iter().map(pix_from_row).collect()
    }

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

    async fn pix_to_poll(
        &self,
        closed_since: Millis,
        after: Option<(Millis, String)>,
        limit: usize,
    ) -> StoreResult<Vec<PixCharge>> {
        let (after_at, after_id) = after.unwrap_or((Millis::MIN, String::new()));
        let c = self.conn().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {PIX_COLUMNS} FROM pix_charges
                     WHERE (status = 'aguardando'
                            OR (status IN ('expirado', 'cancelado') AND updated_at >= $1))
                       AND (updated_at, id) > ($2, $3)
                     ORDER BY updated_at, id LIMIT $4"
                ),
                &[&closed_since, &after_at, &after_id, &(limit as i64)],
            )
            .await?;
        rows.iter().map(pix_from_row).collect()
    }
}
