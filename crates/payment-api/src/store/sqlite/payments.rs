//! Payments and their listing, on SQLite.

use super::*;
use crate::store::payments::payment_columns;

/// A payment written whole: [`PAYMENT_COLUMNS`] (`?1`–`?12`, `?16` for `meio`), then its
/// request's fingerprint, its capture and the authorization's end (`?13`–`?15`). One string,
/// so each connection prepares it once.
const INSERT_PAYMENT: &str = concat!(
    "INSERT INTO payments (",
    payment_columns!(),
    ", fingerprint, captura, autorizacao_expira_em)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?16, ?13, ?14, ?15)"
);

pub(super) fn payment_from_row(r: &Row<'_>) -> rusqlite::Result<PaymentColumns> {
    Ok(PaymentColumns {
        id: r.get("id")?,
        merchant: r.get("merchant")?,
        idempotency_key: r.get("idempotency_key")?,
        valor: r.get("valor")?,
        status: r.get("status")?,
        motivo: r.get("motivo")?,
        descricao: r.get("descricao")?,
        referencia: r.get("referencia")?,
        cobranca_id: r.get("cobranca_id")?,
        created_at: r.get("created_at")?,
        terminal: r.get("terminal")?,
        plano: r.get("plano")?,
        meio: r.get("meio")?,
        captura: r.get("captura")?,
        autorizacao_expira_em: r.get("autorizacao_expira_em")?,
        apos_cancelamento: r.get("apos_cancelamento")?,
    })
}

#[async_trait::async_trait]
impl PaymentStore for SqliteStore {
    async fn finish(&self, done: Completion) -> StoreResult<FinishOutcome> {
        let now = self.now_ms();
        self.db
            .write(move |c| {
                if !complete_payment_key(c, &done, now)? {
                    return Ok(FinishOutcome::LeaseLost);
                }
                let p = &done.payment;
                exec(
                    c,
                    INSERT_PAYMENT,
                    params![
                        p.id.as_ref(),
                        done.merchant.as_ref(),
                        done.key.as_ref(),
                        p.valor.get(),
                        p.status.as_str(),
                        p.motivo,
                        p.descricao,
                        p.referencia,
                        p.cobranca_id,
                        p.created_at,
                        p.terminal.as_ref().map(AsRef::<str>::as_ref),
                        p.plano.map(|p| p.as_stored()),
                        done.fingerprint.as_ref(),
                        p.captura.map(CaptureState::as_str),
                        p.autorizacao_expira_em,
                        p.meio.as_str()
                    ],
                )?;
                Ok(FinishOutcome::Stored)
            })
            .await
    }

    async fn finish_capture(&self, done: CaptureCompletion) -> StoreResult<FinishOutcome> {
        let now = self.now_ms();
        self.db
            .write(move |c| {
                let (m, k) = (done.merchant.as_ref(), done.key.as_ref());
                let id = done.payment.as_ref();
                if !complete_key(c, m, k, done.fence, &done.response, id, now)? {
                    return Ok(FinishOutcome::LeaseLost);
                }
                move_capture(c, m, id, done.captura)?;
                Ok(FinishOutcome::Stored)
            })
            .await
    }

    async fn record_capture(
        &self,
        merchant: &MerchantId,
        id: &PaymentId,
        captura: CaptureState,
    ) -> StoreResult<()> {
        let (m, id) = (merchant.to_string(), id.to_string());
        self.db
            .write(move |c| move_capture(c, &m, &id, captura))
            .await
    }

    async fn authorizations_due(&self, limit: usize) -> StoreResult<Vec<Payment>> {
        let now = self.now_ms();
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(&format!(
                    "SELECT {PAYMENT_READ} FROM payments
                     WHERE captura = 'pendente' AND autorizacao_expira_em <= ?1
                     ORDER BY autorizacao_expira_em LIMIT ?2"
                ))?;
                let rows = st
                    .query_map(params![now, limit as i64], payment_from_row)?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.into_iter().map(PaymentColumns::parse).collect()
            })
            .await
    }

    async fn payment(&self, merchant: &MerchantId, id: &PaymentId) -> StoreResult<Option<Payment>> {
        let (m, id) = (merchant.to_string(), id.to_string());
        self.db
            .read(move |c| {
                c.query_row(
                    &format!("SELECT {PAYMENT_READ} FROM payments WHERE merchant = ?1 AND id = ?2"),
                    params![m, id],
                    payment_from_row,
                )
                .optional()?
                .map(PaymentColumns::parse)
                .transpose()
            })
            .await
    }

    async fn payments_by(
        &self,
        merchant: &MerchantId,
        by: Lookup<'_>,
    ) -> StoreResult<Vec<Payment>> {
        let (field, value) = (by.field, by.value);
        self.rows_by(
            format!("{PAYMENT_READ} FROM payments"),
            merchant,
            field,
            value,
            payment_from_row,
        )
        .await?
        .into_iter()
        .map(PaymentColumns::parse)
        .collect()
    }

    async fn payments_page(
        &self,
        merchant: &MerchantId,
        query: &PageQuery,
    ) -> StoreResult<Vec<Payment>> {
        let m = merchant.to_string();
        let q = query.clone();
        self.db
            .read(move |c| {
                let (after_at, after_id) = match &q.after {
                    Some((at, id)) => (*at, id.as_ref().to_string()),
                    None => (i64::MIN, String::new()),
                };
                let mut st = c.prepare_cached(&format!(
                    "SELECT {PAYMENT_READ} FROM payments
                     WHERE merchant = ?1 AND created_at >= ?2 AND created_at < ?3
                       AND (created_at, id) > (?4, ?5)
                       AND (?6 IS NULL OR terminal = ?6)
                     ORDER BY created_at, id LIMIT ?7"
                ))?;
                let rows = st
                    .query_map(
                        params![
                            m,
                            q.from,
                            q.to,
                            after_at,
                            after_id,
                            q.terminal.as_ref().map(AsRef::<str>::as_ref),
                            q.limit as i64
                        ],
                        payment_from_row,
                    )?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.into_iter().map(PaymentColumns::parse).collect()
            })
            .await
    }

    async fn payment_by_charge(
        &self,
        cobranca_id: &str,
    ) -> StoreResult<Option<(Payment, Option<Fingerprint>)>> {
        let id = cobranca_id.to_string();
        self.db
            .read(move |c| {
                let Some((row, fp)) = c
                    .prepare_cached(&format!(
                        "SELECT {PAYMENT_READ}, fingerprint FROM payments WHERE cobranca_id = ?1"
                    ))?
                    .query_row([id], |r| {
                        let fp: Option<String> = r.get("fingerprint")?;
                        Ok((payment_from_row(r)?, fp))
                    })
                    .optional()?
                else {
                    return Ok(None);
                };
                Ok(Some((row.parse()?, fp.map(Fingerprint::from_stored))))
            })
            .await
    }
}

/// Moves an authorization out of `pendente` (never out of a final state).
fn move_capture(
    c: &rusqlite::Connection,
    merchant: &str,
    id: &str,
    captura: CaptureState,
) -> StoreResult<()> {
    exec(
        c,
        "UPDATE payments SET captura = ?3
         WHERE merchant = ?1 AND id = ?2 AND captura = 'pendente'",
        params![merchant, id, captura.as_str()],
    )?;
    Ok(())
}
