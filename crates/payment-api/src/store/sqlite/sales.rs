//! Sales paid in parts and their tenders' holds, on SQLite: the single writer serialises every
//! hold, and the decision reads the sale's tenders inside the writing transaction.

use super::*;

/// The tenders of a sale with what each holds now.
fn tenders(c: &rusqlite::Connection, venda: &str) -> rusqlite::Result<Vec<SaleTender>> {
    c.prepare_cached(&format!(
        "SELECT h.idempotency_key, p.id, h.valor, {TENDER_HELD} AS retido, {TENDER_STATE} AS estado,
                {TENDER_TO_GIVE_BACK} AS a_devolver
         {TENDER_FROM}
         WHERE h.venda_id = ?1 ORDER BY h.created_at, h.idempotency_key"
    ))?
    .query_map([venda], |r| {
        Ok(SaleTender {
            idempotency_key: r.get(0)?,
            payment_id: r.get(1)?,
            valor: Centavos::new(r.get(2)?).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    2,
                    rusqlite::types::Type::Integer,
                    e.into(),
                )
            })?,
            retido: r.get(3)?,
            status: r.get(4)?,
            a_devolver: r.get(5)?,
        })
    })?
    .collect()
}

#[async_trait::async_trait]
impl SaleStore for SqliteStore {
    async fn hold_tender(&self, ask: &TenderAsk) -> StoreResult<TenderHold> {
        let (merchant, terminal, key) = (&ask.merchant, ask.terminal.as_ref(), &ask.key);
        let (fence, venda, valor) = (ask.fence, &ask.venda, ask.valor);
        let now = self.now_ms();
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        let terminal = terminal.map(ToString::to_string).unwrap_or_default();
        let venda = venda.clone();
        self.db
            .write(move |c| {
                if !fence_holds(c, &m, &k, fence)? {
                    return Ok(TenderHold::LeaseLost);
                }
                exec(
                    c,
                    "INSERT INTO vendas (id, merchant, terminal, referencia, total, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (merchant, terminal, referencia) DO NOTHING",
                    params![
                        format!("ven_{}", uuid::Uuid::now_v7().simple()),
                        m,
                        terminal,
                        venda.referencia,
                        venda.total.get(),
                        now
                    ],
                )?;
                let (id, total): (String, i64) = c.query_row(
                    "SELECT id, total FROM vendas WHERE merchant = ?1 AND terminal = ?2 AND referencia = ?3",
                    params![m, terminal, venda.referencia],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                if total != venda.total.get() {
                    return Ok(TenderHold::TotalMismatch {
                        total: Centavos::new(total).map_err(|e| corrupt("total", e))?,
                    });
                }
                let held_by_all: i64 = c.query_row(
                    &format!("SELECT COALESCE(SUM({TENDER_HELD}), 0) {TENDER_FROM} WHERE h.venda_id = ?1"),
                    [&id],
                    |r| r.get(0),
                )?;
                let mine: Option<i64> = c
                    .query_row(
                        "SELECT valor FROM venda_tenders WHERE merchant = ?1 AND idempotency_key = ?2",
                        params![m, k],
                        |r| r.get(0),
                    )
                    .optional()?;
                if let Some(refused) = TenderHold::exceeding(venda.total, held_by_all, mine, valor) {
                    return Ok(refused);
                }
                if mine.is_none() {
                    exec(
                        c,
                        "INSERT INTO venda_tenders (merchant, idempotency_key, venda_id, valor, created_at)
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![m, k, id, valor.get(), now],
                    )?;
                }
                Ok(TenderHold::Held)
            })
            .await
    }

    async fn sale(
        &self,
        merchant: &MerchantId,
        terminal: Option<&TerminalId>,
        referencia: &str,
    ) -> StoreResult<Option<Sale>> {
        let m = merchant.to_string();
        let terminal = terminal.map(ToString::to_string).unwrap_or_default();
        let referencia = referencia.to_string();
        self.db
            .read(move |c| {
                let Some((id, total)) = c
                    .query_row(
                        "SELECT id, total FROM vendas WHERE merchant = ?1 AND terminal = ?2 AND referencia = ?3",
                        params![m, terminal, referencia],
                        |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
                    )
                    .optional()?
                else {
                    return Ok(None);
                };
                Ok(Some(Sale {
                    tenders: tenders(c, &id)?,
                    id,
                    referencia,
                    terminal,
                    total: Centavos::new(total).map_err(|e| corrupt("total", e))?,
                }))
            })
            .await
    }
}
