//! Pix charges and the Pix received for them, on SQLite.

use super::*;
use crate::domain::{PixStatus, Txid};

fn pix_from_row(r: &Row<'_>) -> rusqlite::Result<PixColumns> {
    Ok(PixColumns {
        id: r.get("id")?,
        merchant: r.get("merchant")?,
        idempotency_key: r.get("idempotency_key")?,
        txid: r.get("txid")?,
        valor: r.get("valor")?,
        status: r.get("status")?,
        copia_e_cola: r.get("copia_e_cola")?,
        location: r.get("location")?,
        expira_em: r.get("expira_em")?,
        e2eid: r.get("e2eid")?,
        pago_em: r.get("pago_em")?,
        valor_recebido: r.get("valor_recebido")?,
        descricao: r.get("descricao")?,
        referencia: r.get("referencia")?,
        terminal: r.get("terminal")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn collect(rows: Vec<PixColumns>) -> StoreResult<Vec<PixCharge>> {
    rows.into_iter().map(PixColumns::parse).collect()
}

#[async_trait::async_trait]
impl PixStore for SqliteStore {
    async fn finish_pix(&self, done: AwaitedCompletion<PixCharge>) -> StoreResult<FinishOutcome> {
        let now = self.now_ms();
        self.db
            .write(move |c| {
                let p = &done.resource;
                let (m, k) = (p.merchant.as_ref(), p.idempotency_key.as_ref());
                if !complete_key(c, m, k, done.fence, &done.response, p.id.as_ref(), now)? {
                    return Ok(FinishOutcome::LeaseLost);
                }
                c.execute(
                    &format!(
                        "INSERT INTO pix_charges ({PIX_COLUMNS}, fingerprint)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
                    ),
                    params![
                        p.id.as_ref(),
                        m,
                        k,
                        p.txid.as_ref(),
                        p.valor.get(),
                        p.status.as_str(),
                        p.copia_e_cola,
                        p.location,
                        p.expira_em,
                        p.e2eid,
                        p.pago_em,
                        p.valor_recebido,
                        p.descricao,
                        p.referencia,
                        p.terminal.as_ref().map(AsRef::<str>::as_ref),
                        p.created_at,
                        p.updated_at,
                        done.fingerprint.as_ref()
                    ],
                )?;
                Ok(FinishOutcome::Stored)
            })
            .await
    }

    async fn pix_charge(
        &self,
        merchant: &MerchantId,
        id: &PaymentId,
    ) -> StoreResult<Option<PixCharge>> {
        let (m, id) = (merchant.to_string(), id.to_string());
        self.db
            .read(move |c| {
                c.prepare_cached(&format!(
                    "SELECT {PIX_COLUMNS} FROM pix_charges WHERE merchant = ?1 AND id = ?2"
                ))?
                .query_row(params![m, id], pix_from_row)
                .optional()?
                .map(PixColumns::parse)
                .transpose()
            })
            .await
    }

    async fn pix_by_txid(
        &self,
        txid: &Txid,
    ) -> StoreResult<Option<(PixCharge, Option<Fingerprint>)>> {
        let t = txid.to_string();
        self.db
            .read(move |c| {
                let Some((row, fp)) = c
                    .prepare_cached(&format!(
                        "SELECT {PIX_COLUMNS}, fingerprint FROM pix_charges WHERE txid = ?1"
                    ))?
                    .query_row([t], |r| {
                        let fp: Option<String> = r.get("fingerprint")?;
                        Ok((pix_from_row(r)?, fp))
                    })
                    .optional()?
                else {
                    return Ok(None);
                };
                Ok(Some((row.parse()?, fp.map(Fingerprint::from_stored))))
            })
            .await
    }

    async fn pix_by(&self, merchant: &MerchantId, by: Lookup<'_>) -> StoreResult<Vec<PixCharge>> {
        let (field, value) = (by.field, by.value);
        collect(
            self.rows_by(
                format!("{PIX_COLUMNS} FROM pix_charges"),
                merchant,
                field,
                value,
                pix_from_row,
            )
            .await?,
        )
    }

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

    async fn pix_to_poll(
        &self,
        closed_since: Millis,
        after: Option<(Millis, String)>,
        limit: usize,
    ) -> StoreResult<Vec<PixCharge>> {
        let (after_at, after_id) = after.unwrap_or((Millis::MIN, String::new()));
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(&format!(
                    "SELECT {PIX_COLUMNS} FROM pix_charges
                     WHERE (status = 'aguardando'
                            OR (status IN ('expirado', 'cancelado') AND updated_at >= ?1))
                       AND (updated_at, id) > (?2, ?3)
                     ORDER BY updated_at, id LIMIT ?4"
                ))?;
                let rows = st
                    .query_map(
                        params![closed_since, after_at, after_id, limit as i64],
                        pix_from_row,
                    )?
                    .collect::<Result<Vec<_>, _>>()?;
                collect(rows)
            })
            .await
    }
}
