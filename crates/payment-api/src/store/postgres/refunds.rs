//! Refunds and the amounts they hold, on PostgreSQL.

use super::*;

pub(super) fn refund_from_row(r: &Row) -> StoreResult<Refund> {
    RefundColumns {
        id: r.try_get("id")?,
        payment_id: r.try_get("payment_id")?,
        merchant: r.try_get("merchant")?,
        idempotency_key: r.try_get("idempotency_key")?,
        valor: r.try_get("valor")?,
        status: r.try_get("status")?,
        motivo: r.try_get("motivo")?,
        referencia: r.try_get("referencia")?,
        recusa: r.try_get("recusa")?,
        estorno_gateway: r.try_get("estorno_gateway")?,
        created_at: r.try_get("created_at")?,
    }
    .parse()
}

/// The refund a key holds, on a connection or inside a transaction.
pub(super) async fn pg_refund_by_key(
    c: &impl deadpool_postgres::GenericClient,
    merchant: &str,
    key: &str,
) -> StoreResult<Option<Refund>> {
    c.query_opt(
        &format!(
            "SELECT {REFUND_COLUMNS} FROM refunds WHERE merchant = $1 AND idempotency_key = $2"
        ),
        &[&merchant, &key],
    )
    .await?
    .as_ref()
    .map(refund_from_row)
    .transpose()
}

#[async_trait::async_trait]
impl RefundStore for PgStore {
    async fn hold_refund(&self, refund: Refund, fence: i64) -> StoreResult<Hold> {
        let mut c = self.conn().await?;
        let r = &refund;
        let (m, k) = (r.merchant.as_ref(), r.idempotency_key.as_ref());
        for _ in 0..CLAIM_ATTEMPTS {
            let tx = c.transaction().await?;
            // The key's row lock (shared) keeps a takeover from changing the fence until this
            // hold commits: a worker whose key was taken over holds nothing.
            if !fence_holds(&tx, m, k, fence).await? {
                return Ok(Hold::LeaseLost);
            }
            if let Some(held) = pg_refund_by_key(&tx, m, k).await? {
                return Ok(Hold::Held(Box::new(held)));
            }
            // The database decides: under concurrent refunds the UPDATE waits on the payment's
            // row lock and checks its WHERE again on the newest version of the row.
            let held = tx
                .execute(
                    "UPDATE payments SET estornado = estornado + $3
                     WHERE merchant = $1 AND id = $2 AND status = 'aprovado'
                       AND (captura IS NULL OR captura = 'capturada')
                       AND estornado + $3 <= valor",
                    &[&m, &r.payment_id.as_ref(), &r.valor.get()],
                )
                .await?;
            if held == 0 {
                let payment = tx
                    .query_opt(
                        "SELECT status, valor, estornado, captura FROM payments WHERE merchant = $1 AND id = $2",
                        &[&m, &r.payment_id.as_ref()],
                    )
                    .await?;
                return Ok(match payment {
                    None => Hold::NoPayment,
                    Some(p) if p.try_get::<_, String>(0)? != "aprovado" => Hold::NotApproved,
                    Some(p)
                        if p.try_get::<_, Option<String>>(3)?
                            .is_some_and(|c| c != "capturada") =>
                    {
                        Hold::NotCaptured
                    }
                    Some(p) => Hold::Exceeds {
                        left: p.try_get::<_, i64>(1)? - p.try_get::<_, i64>(2)?,
                    },
                });
            }
            let inserted = tx
                .query_one(
                    &format!(
                        "INSERT INTO refunds ({REFUND_COLUMNS})
                         VALUES ($1, $2, $3, $4, $5, 'pendente', $6, $7, NULL, NULL, pagar_now_ms() + $8)
                         RETURNING created_at"
                    ),
                    &[
                        &r.id.as_ref(),
                        &r.payment_id.as_ref(),
                        &m,
                        &k,
                        &r.valor.get(),
                        &r.motivo,
                        &r.referencia,
                        &self.shift(),
                    ],
                )
                .await;
            match inserted {
                Ok(row) => {
                    let created_at: Millis = row.try_get(0)?;
                    tx.commit().await?;
                    return Ok(Hold::Held(Box::new(Refund {
                        created_at,
                        status: RefundStatus::Pendente,
                        ..refund
                    })));
                }
                // A late worker of the same key held it first: read its refund on the next turn.
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                    drop(tx);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::Unavailable(
            "a reserva do estorno não se decidiu; tente de novo".into(),
        ))
    }

    async fn finish_refund(&self, done: RefundCompletion) -> StoreResult<FinishOutcome> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let (m, k) = (done.merchant.as_ref(), done.key.as_ref());
        let r = &done.refund;
        // Decided once: only a refund still `pendente`, and only by the key's holder.
        let decided = tx
            .execute(
                "UPDATE refunds SET status = $3, recusa = $4, estorno_gateway = $5
                 WHERE merchant = $1 AND idempotency_key = $2 AND status = 'pendente'
                   AND EXISTS (SELECT 1 FROM idempotency_keys
                               WHERE merchant = $1 AND key = $2 AND fence = $6 AND completed_at IS NULL)",
                &[&m, &k, &r.status.as_str(), &r.recusa, &r.estorno_gateway, &done.fence],
            )
            .await?;
        if decided != 1 {
            return Ok(FinishOutcome::LeaseLost);
        }
        let completed = tx
            .execute(
                COMPLETE_KEY,
                &[
                    &m,
                    &k,
                    &done.fence,
                    &i32::from(done.response.status),
                    &done.response.body,
                    &r.id.as_ref(),
                    &self.shift(),
                ],
            )
            .await?;
        if completed != 1 {
            return Ok(FinishOutcome::LeaseLost);
        }
        if r.status == RefundStatus::Recusado {
            tx.execute(
                "UPDATE payments SET estornado = estornado - $3 WHERE merchant = $1 AND id = $2",
                &[&m, &r.payment_id.as_ref(), &r.valor.get()],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(FinishOutcome::Stored)
    }

    async fn refund_by_key(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<Refund>> {
        let c = self.conn().await?;
        pg_refund_by_key(&c, merchant.as_ref(), key.as_ref()).await
    }

    async fn refunds_of(
        &self,
        merchant: &MerchantId,
        payment: &PaymentId,
    ) -> StoreResult<Vec<Refund>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT {REFUND_COLUMNS} FROM refunds WHERE merchant = $1 AND payment_id = $2
                 ORDER BY created_at, id"
            ))
            .await?;
        c.query(&st, &[&merchant.as_ref(), &payment.as_ref()])
            .await?
            .iter()
            .map(refund_from_row)
            .collect()
    }
}
