//! Sales paid in parts and their tenders' holds, on PostgreSQL: concurrent holds of one sale
//! serialise on its row (`FOR UPDATE`), and each statement after the lock reads what the holds
//! before it committed.

use super::*;

async fn tenders(
    c: &impl deadpool_postgres::GenericClient,
    venda: &str,
) -> StoreResult<Vec<SaleTender>> {
    let rows = c
        .query(
            &format!(
                "SELECT h.idempotency_key, p.id, h.valor, ({TENDER_HELD})::bigint AS retido,
                        ({TENDER_STATE})::text AS estado,
                        ({TENDER_TO_GIVE_BACK})::bigint AS a_devolver
                 {TENDER_FROM}
                 WHERE h.venda_id = $1 ORDER BY h.created_at, h.idempotency_key"
            ),
            &[&venda],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(SaleTender {
                idempotency_key: r.try_get(0)?,
                payment_id: r.try_get(1)?,
                valor: Centavos::new(r.try_get(2)?).map_err(|e| corrupt("valor", e))?,
                retido: r.try_get(3)?,
                status: r.try_get(4)?,
                a_devolver: r.try_get(5)?,
            })
        })
        .collect()
}

#[async_trait::async_trait]
impl SaleStore for PgStore {
    async fn hold_tender(&self, ask: &TenderAsk) -> StoreResult<TenderHold> {
        let (merchant, terminal, key) = (&ask.merchant, ask.terminal.as_ref(), &ask.key);
        let (fence, venda, valor) = (ask.fence, &ask.venda, ask.valor);
        let mut c = self.conn().await?;
        let (m, k) = (merchant.as_ref(), key.as_ref());
        let terminal = terminal.map_or("", AsRef::as_ref);
        for _ in 0..CLAIM_ATTEMPTS {
            let tx = c.transaction().await?;
            // The key's row lock (shared) keeps a takeover from changing the fence until this
            // hold commits: a worker whose key was taken over holds nothing.
            if !fence_holds(&tx, m, k, fence).await? {
                return Ok(TenderHold::LeaseLost);
            }
            tx.execute(
                "INSERT INTO vendas (id, merchant, terminal, referencia, total, created_at)
                 VALUES ($1, $2, $3, $4, $5, pagar_now_ms() + $6)
                 ON CONFLICT (merchant, terminal, referencia) DO NOTHING",
                &[
                    &format!("ven_{}", uuid::Uuid::now_v7().simple()),
                    &m,
                    &terminal,
                    &venda.referencia,
                    &venda.total.get(),
                    &self.shift(),
                ],
            )
            .await?;
            // Every hold of this sale waits here for the one before it to commit.
            let sale = tx
                .query_one(
                    "SELECT id, total FROM vendas
                     WHERE merchant = $1 AND terminal = $2 AND referencia = $3 FOR UPDATE",
                    &[&m, &terminal, &venda.referencia],
                )
                .await?;
            let (id, total): (String, i64) = (sale.try_get(0)?, sale.try_get(1)?);
            if total != venda.total.get() {
                return Ok(TenderHold::TotalMismatch {
                    total: Centavos::new(total).map_err(|e| corrupt("total", e))?,
                });
            }
            let held_by_all: i64 = tx
                .query_one(
                    &format!(
                        "SELECT COALESCE(SUM({TENDER_HELD}), 0)::bigint {TENDER_FROM} WHERE h.venda_id = $1"
                    ),
                    &[&id],
                )
                .await?
                .try_get(0)?;
            let mine: Option<i64> = tx
                .query_opt(
                    "SELECT valor FROM venda_tenders WHERE merchant = $1 AND idempotency_key = $2",
                    &[&m, &k],
                )
                .await?
                .map(|r| r.try_get(0))
                .transpose()?;
            if let Some(refused) = TenderHold::exceeding(venda.total, held_by_all, mine, valor) {
                return Ok(refused);
            }
            if mine.is_none() {
                let inserted = tx
                    .execute(
                        "INSERT INTO venda_tenders (merchant, idempotency_key, venda_id, valor, created_at)
                         VALUES ($1, $2, $3, $4, pagar_now_ms() + $5)",
                        &[&m, &k, &id, &valor.get(), &self.shift()],
                    )
                    .await;
                match inserted {
                    Ok(_) => {}
                    // A late worker of the same key held it first: decide again on the next turn.
                    Err(e)
                        if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) =>
                    {
                        drop(tx);
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            tx.commit().await?;
            return Ok(TenderHold::Held);
        }
        Err(StoreError::Unavailable(
            "a reserva do pagamento na venda não se decidiu; tente de novo".into(),
        ))
    }

    async fn sale(
        &self,
        merchant: &MerchantId,
        terminal: Option<&TerminalId>,
        referencia: &str,
    ) -> StoreResult<Option<Sale>> {
        let c = self.conn().await?;
        let terminal = terminal.map_or("", AsRef::as_ref);
        let Some(row) = c
            .query_opt(
                "SELECT id, total FROM vendas WHERE merchant = $1 AND terminal = $2 AND referencia = $3",
                &[&merchant.as_ref(), &terminal, &referencia],
            )
            .await?
        else {
            return Ok(None);
        };
        let id: String = row.try_get(0)?;
        Ok(Some(Sale {
            tenders: tenders(&c, &id).await?,
            total: Centavos::new(row.try_get(1)?).map_err(|e| corrupt("total", e))?,
            id,
            referencia: referencia.to_string(),
            terminal: terminal.to_string(),
        }))
    }
}
