//! Refunds and the amounts they hold, on SQLite.

use super::*;

pub(super) fn refund_from_row(r: &Row<'_>) -> rusqlite::Result<RefundColumns> {
    Ok(RefundColumns {
        id: r.get("id")?,
        payment_id: r.get("payment_id")?,
        merchant: r.get("merchant")?,
        idempotency_key: r.get("idempotency_key")?,
        valor: r.get("valor")?,
        status: r.get("status")?,
        motivo: r.get("motivo")?,
        referencia: r.get("referencia")?,
        recusa: r.get("recusa")?,
        estorno_gateway: r.get("estorno_gateway")?,
        created_at: r.get("created_at")?,
    })
}

/// The refund a key holds, read inside the caller's transaction.
pub(super) fn refund_by_key(
    c: &rusqlite::Connection,
    merchant: &str,
    key: &str,
) -> StoreResult<Option<Refund>> {
    c.prepare_cached(&format!(
        "SELECT {REFUND_COLUMNS} FROM refunds WHERE merchant = ?1 AND idempotency_key = ?2"
    ))?
    .query_row(params![merchant, key], refund_from_row)
    .optional()?
    .map(RefundColumns::parse)
    .transpose()
}

#[async_trait::async_trait]
impl RefundStore for SqliteStore {
    async fn hold_refund(&self, refund: Refund, fence: i64) -> StoreResult<Hold> {
        let now = self.now_ms();
        self.db
            .write(move |c| {
                let r = &refund;
                let (m, k) = (r.merchant.as_ref(), r.idempotency_key.as_ref());
                if !fence_holds(c, m, k, fence)? {
                    return Ok(Hold::LeaseLost);
                }
                if let Some(held) = refund_by_key(c, m, k)? {
                    return Ok(Hold::Held(Box::new(held)));
                }
                // The database decides: the amount is held only if it still fits.
                let held = exec(
                    c,
                    "UPDATE payments SET estornado = estornado + ?3
                     WHERE merchant = ?1 AND id = ?2 AND status = 'aprovado'
                       AND (captura IS NULL OR captura = 'capturada')
                       AND estornado + ?3 <= valor",
                    params![m, r.payment_id.as_ref(), r.valor.get()],
                )?;
                if held == 0 {
                    let payment: Option<(String, i64, i64, Option<String>)> = c
                        .query_row(
                            "SELECT status, valor, estornado, captura FROM payments WHERE merchant = ?1 AND id = ?2",
                            params![m, r.payment_id.as_ref()],
                            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
                        )
                        .optional()?;
                    return Ok(match payment {
                        None => Hold::NoPayment,
                        Some((status, ..)) if status != "aprovado" => Hold::NotApproved,
                        Some((.., Some(captura))) if captura != "capturada" => Hold::NotCaptured,
                        Some((_, valor, estornado, _)) => Hold::Exceeds {
                            left: valor - estornado,
                        },
                    });
                }
                exec(
                    c,
                    &format!(
                        "INSERT INTO refunds ({REFUND_COLUMNS})
                         VALUES (?1, ?2, ?3, ?4, ?5, 'pendente', ?6, ?7, NULL, NULL, ?8)"
                    ),
                    params![
                        r.id.as_ref(),
                        r.payment_id.as_ref(),
                        m,
                        k,
                        r.valor.get(),
                        r.motivo,
                        r.referencia,
                        now
                    ],
                )?;
                Ok(Hold::Held(Box::new(Refund {
                    created_at: now,
                    status: RefundStatus::Pendente,
                    ..refund
                })))
            })
            .await
    }

    async fn finish_refund(&self, done: RefundCompletion) -> StoreResult<FinishOutcome> {
        let now = self.now_ms();
        self.db
            .write(move |c| {
                let (m, k) = (done.merchant.as_ref(), done.key.as_ref());
                let r = &done.refund;
                // Decided once: only a refund still `pendente`, and only by the key's holder.
                let decided = exec(
                    c,
                    "UPDATE refunds SET status = ?3, recusa = ?4, estorno_gateway = ?5
                     WHERE merchant = ?1 AND idempotency_key = ?2 AND status = 'pendente'
                       AND EXISTS (SELECT 1 FROM idempotency_keys
                                   WHERE merchant = ?1 AND key = ?2 AND fence = ?6 AND completed_at IS NULL)",
                    params![m, k, r.status.as_str(), r.recusa, r.estorno_gateway, done.fence],
                )?;
                if decided != 1
                    || !complete_key(c, m, k, done.fence, &done.response, r.id.as_ref(), now)?
                {
                    return Ok(FinishOutcome::LeaseLost);
                }
                if r.status == RefundStatus::Recusado {
                    exec(
                        c,
                        "UPDATE payments SET estornado = estornado - ?3 WHERE merchant = ?1 AND id = ?2",
                        params![m, r.payment_id.as_ref(), r.valor.get()],
                    )?;
                }
                Ok(FinishOutcome::Stored)
            })
            .await
    }

    async fn refund_by_key(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<Refund>> {
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db.read(move |c| refund_by_key(c, &m, &k)).await
    }

    async fn refunds_of(
        &self,
        merchant: &MerchantId,
        payment: &PaymentId,
    ) -> StoreResult<Vec<Refund>> {
        let (m, p) = (merchant.to_string(), payment.to_string());
        self.db
            .read(move |c| {
                c.prepare_cached(&format!(
                    "SELECT {REFUND_COLUMNS} FROM refunds WHERE merchant = ?1 AND payment_id = ?2
                     ORDER BY created_at, id"
                ))?
                .query_map(params![m, p], refund_from_row)?
                .map(|r| r.map_err(StoreError::from).and_then(RefundColumns::parse))
                .collect()
            })
            .await
    }
}
