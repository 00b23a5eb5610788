//! Payments and their listing, on PostgreSQL.

use super::*;

pub(super) fn payment_from_row(r: &Row) -> StoreResult<Payment> {
    PaymentColumns {
        id: r.try_get("id")?,
        merchant: r.try_get("merchant")?,
        idempotency_key: r.try_get("idempotency_key")?,
        valor: r.try_get("valor")?,
        status: r.try_get("status")?,
        motivo: r.try_get("motivo")?,
        descricao: r.try_get("descricao")?,
        referencia: r.try_get("referencia")?,
        cobranca_id: r.try_get("cobranca_id")?,
        created_at: r.try_get("created_at")?,
        terminal: r.try_get("terminal")?,
        plano: r.try_get("plano")?,
        meio: r.try_get("meio")?,
        captura: r.try_get("captura")?,
        autorizacao_expira_em: r.try_get("autorizacao_expira_em")?,
        apos_cancelamento: r.try_get("apos_cancelamento")?,
    }
    .parse()
}

#[async_trait::async_trait]
impl PaymentStore for PgStore {
    async fn finish(&self, done: Completion) -> StoreResult<FinishOutcome> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "WITH done AS (
                     UPDATE idempotency_keys
                     SET recovery_point = 'finished', response_status = $4, response_body = $5,
                         payment_id = $6, completed_at = pagar_now_ms() + $14, locked_until = 0,
                         -- a key a cancellation claimed becomes the key of the payment it made
                         fingerprint = CASE WHEN operation = 'cancelamento' THEN $15
                                            ELSE fingerprint END,
                         operation = CASE WHEN operation = 'cancelamento' THEN 'pagamento'
                                          ELSE operation END
                     WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL
                     RETURNING 1
                 )
                 INSERT INTO payments ({PAYMENT_COLUMNS}, fingerprint, captura, autorizacao_expira_em)
                 SELECT $6::text, $1::text, $2::text, $7::bigint, $8::text, $9::text, $10::text,
                        $11::text, $12::text, $13::bigint, $16::text, $17::text, $20::text,
                        $15::text, $18::text, $19::bigint
                 FROM done"
            ))
            .await?;
        let p = &done.payment;
        let inserted = c
            .execute(
                &st,
                &[
                    &done.merchant.as_ref(),
                    &done.key.as_ref(),
                    &done.fence,
                    &i32::from(done.response.status),
                    &done.response.body,
                    &p.id.as_ref(),
                    &p.valor.get(),
                    &p.status.as_str(),
                    &p.motivo,
                    &p.descricao,
                    &p.referencia,
                    &p.cobranca_id,
                    &p.created_at,
                    &self.shift(),
                    &done.fingerprint.as_ref(),
                    &p.terminal.as_ref().map(AsRef::<str>::as_ref),
                    &p.plano.map(|p| p.as_stored()),
                    &p.captura.map(CaptureState::as_str),
                    &p.autorizacao_expira_em,
                    &p.meio.as_str(),
                ],
            )
            .await?;
        Ok(if inserted == 1 {
            FinishOutcome::Stored
        } else {
            FinishOutcome::LeaseLost
        })
    }

    async fn finish_capture(&self, done: CaptureCompletion) -> StoreResult<FinishOutcome> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "WITH done AS ({COMPLETE_KEY} RETURNING 1), moved AS (
                     UPDATE payments SET captura = $8
                     WHERE merchant = $1 AND id = $6 AND captura = 'pendente'
                       AND EXISTS (SELECT 1 FROM done)
                     RETURNING 1
                 )
                 SELECT count(*) FROM done"
            ))
            .await?;
        let row = c
            .query_one(
                &st,
                &[
                    &done.merchant.as_ref(),
                    &done.key.as_ref(),
                    &done.fence,
                    &i32::from(done.response.status),
                    &done.response.body,
                    &done.payment.as_ref(),
                    &self.shift(),
                    &done.captura.as_str(),
                ],
            )
            .await?;
        Ok(if row.try_get::<_, i64>(0)? == 1 {
            FinishOutcome::Stored
        } else {
            FinishOutcome::LeaseLost
        })
    }

    async fn record_capture(
        &self,
        merchant: &MerchantId,
        id: &PaymentId,
        captura: CaptureState,
    ) -> StoreResult<()> {
        let c = self.conn().await?;
        c.execute(
            "UPDATE payments SET captura = $3
             WHERE merchant = $1 AND id = $2 AND captura = 'pendente'",
            &[&merchant.as_ref(), &id.as_ref(), &captura.as_str()],
        )
        .await?;
        Ok(())
    }

    async fn authorizations_due(&self, limit: usize) -> StoreResult<Vec<Payment>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {PAYMENT_READ} FROM payments
                     WHERE captura = 'pendente' AND autorizacao_expira_em <= pagar_now_ms() + $1
                     ORDER BY autorizacao_expira_em LIMIT $2"
                ),
                &[&self.shift(), &(limit as i64)],
            )
            .await?;
        rows.iter().map(payment_from_row).collect()
    }

    async fn payment(&self, merchant: &MerchantId, id: &PaymentId) -> StoreResult<Option<Payment>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT {PAYMENT_READ} FROM payments WHERE merchant = $1 AND id = $2"
            ))
            .await?;
        c.query_opt(&st, &[&merchant.as_ref(), &id.as_ref()])
            .await?
            .as_ref()
            .map(payment_from_row)
            .transpose()
    }

    async fn payments_by(
        &self,
        merchant: &MerchantId,
        by: Lookup<'_>,
    ) -> StoreResult<Vec<Payment>> {
        let (field, value) = (by.field, by.value);
        let from = format!("{PAYMENT_READ} FROM payments");
        let rows = self.rows_by(&from, merchant, field, value).await?;
        rows.iter().map(payment_from_row).collect()
    }

    async fn payments_page(
        &self,
        merchant: &MerchantId,
        query: &PageQuery,
    ) -> StoreResult<Vec<Payment>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT {PAYMENT_READ} FROM payments
                 WHERE merchant = $1 AND created_at >= $2 AND created_at < $3
                   AND (created_at, id) > ($4, $5)
                   AND ($6::text IS NULL OR terminal = $6)
                 ORDER BY created_at, id LIMIT $7"
            ))
            .await?;
        let (after_at, after_id) = match &query.after {
            Some((at, id)) => (*at, id.as_ref().to_string()),
            None => (i64::MIN, String::new()),
        };
        let rows = c
            .query(
                &st,
                &[
                    &merchant.as_ref(),
                    &query.from,
                    &query.to,
                    &after_at,
                    &after_id,
                    &query.terminal.as_ref().map(AsRef::<str>::as_ref),
                    &(query.limit as i64),
                ],
            )
            .await?;
        rows.iter().map(payment_from_row).collect()
    }

    async fn payment_by_charge(
        &self,
        cobranca_id: &str,
    ) -> StoreResult<Option<(Payment, Option<Fingerprint>)>> {
        let c = self.conn().await?;
        let select = c
            .prepare_cached(&format!(
                "SELECT {PAYMENT_READ}, fingerprint FROM payments WHERE cobranca_id = $1"
            ))
            .await?;
        c.query_opt(&select, &[&cobranca_id])
            .await?
            .map(|r| {
                let fp: Option<String> = r.try_get("fingerprint")?;
                Ok((payment_from_row(&r)?, fp.map(Fingerprint::from_stored)))
            })
            .transpose()
    }
}
