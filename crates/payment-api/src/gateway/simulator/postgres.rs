//! The gateway simulator's ledger, on PostgreSQL (the replicas' shared database).

use super::*;
use crate::store::PgStore;
use tokio_postgres::Row;

pub(super) fn ledger_from_row(r: &Row) -> StoreResult<LedgerRow> {
    LedgerColumns {
        cobranca_id: r.try_get("cobranca_id")?,
        downstream_key: r.try_get("downstream_key")?,
        merchant: r.try_get("merchant")?,
        valor: r.try_get("valor")?,
        status: r.try_get("status")?,
        motivo: r.try_get("motivo")?,
        created_at: r.try_get("created_at")?,
        plano: r.try_get("plano")?,
    }
    .parse()
}

pub(super) const LEDGER_COLUMNS: &str =
    "cobranca_id, downstream_key, merchant, valor, status, motivo, created_at, plano";

pub(super) const REFUND_LEDGER_COLUMNS: &str =
    "estorno_id, downstream_key, cobranca_id, merchant, valor, status, motivo, created_at";

pub(super) fn refund_ledger_from_row(r: &Row) -> StoreResult<RefundLedgerRow> {
    RefundLedgerColumns {
        estorno_id: r.try_get("estorno_id")?,
        downstream_key: r.try_get("downstream_key")?,
        cobranca_id: r.try_get("cobranca_id")?,
        merchant: r.try_get("merchant")?,
        valor: r.try_get("valor")?,
        status: r.try_get("status")?,
        motivo: r.try_get("motivo")?,
        created_at: r.try_get("created_at")?,
    }
    .parse()
}

#[async_trait::async_trait]
impl SimulatorLedger for PgStore {
    async fn ledger_charge(&self, charge: LedgerCharge) -> StoreResult<Option<Charged>> {
        let c = self.conn().await?;
        let insert = c
            .prepare_cached(&format!(
                "INSERT INTO gateway_ledger ({LEDGER_COLUMNS}, cartao)
                 VALUES ($1, $2, $3, $4, $5, $6, pagar_now_ms() + $7, $9, $8)
                 ON CONFLICT (downstream_key) DO NOTHING
                 RETURNING {LEDGER_COLUMNS}"
            ))
            .await?;
        let dk = charge.downstream_key.as_ref();
        let inserted = c
            .query_opt(
                &insert,
                &[
                    &format!("ch_{}", uuid::Uuid::now_v7().simple()),
                    &dk,
                    &charge.merchant.as_ref(),
                    &charge.valor.get(),
                    &charge.status.as_str(),
                    &charge.motivo,
                    &self.shift(),
                    &charge.cartao,
                    &charge.plano.map(CardPlan::as_stored),
                ],
            )
            .await?;
        if let Some(row) = inserted {
            return Ok(Some(Charged {
                row: ledger_from_row(&row)?,
                fresh: true,
            }));
        }
        // Charged earlier (or by a concurrent worker that committed first): return that charge;
        // or voided, and then no charge is ever made.
        let select = c
            .prepare_cached(&format!(
                "SELECT {LEDGER_COLUMNS} FROM gateway_ledger WHERE downstream_key = $1"
            ))
            .await?;
        let row = c.query_one(&select, &[&dk]).await?;
        if row.try_get::<_, &str>("status")? == VOID_STATUS {
            return Ok(None);
        }
        Ok(Some(Charged {
            row: ledger_from_row(&row)?,
            fresh: false,
        }))
    }

    async fn ledger_row(&self, downstream_key: &DownstreamKey) -> StoreResult<Option<LedgerRow>> {
        let c = self.conn().await?;
        let select = c
            .prepare_cached(&format!(
                "SELECT {LEDGER_COLUMNS} FROM gateway_ledger WHERE downstream_key = $1 AND status <> $2"
            ))
            .await?;
        c.query_opt(&select, &[&downstream_key.as_ref(), &VOID_STATUS])
            .await?
            .map(|r| ledger_from_row(&r))
            .transpose()
    }

    async fn ledger_card(&self, cobranca_id: &str) -> StoreResult<Option<String>> {
        let c = self.conn().await?;
        Ok(c.query_opt(
            "SELECT cartao FROM gateway_ledger WHERE cobranca_id = $1",
            &[&cobranca_id],
        )
        .await?
        .and_then(|r| r.get::<_, Option<String>>(0)))
    }

    async fn ledger_refund(&self, refund: LedgerRefund) -> StoreResult<RefundCharged> {
        let c = self.conn().await?;
        let dk = refund.downstream_key.as_ref();
        let inserted = c
            .query_opt(
                &format!(
                    "INSERT INTO gateway_refunds ({REFUND_LEDGER_COLUMNS})
                     VALUES ($1, $2, $3, $4, $5, $6, $7, pagar_now_ms() + $8)
                     ON CONFLICT (downstream_key) DO NOTHING
                     RETURNING {REFUND_LEDGER_COLUMNS}"
                ),
                &[
                    &format!("re_{}", uuid::Uuid::now_v7().simple()),
                    &dk,
                    &refund.cobranca_id,
                    &refund.merchant.as_ref(),
                    &refund.valor.get(),
                    &refund.status.as_str(),
                    &refund.motivo,
                    &self.shift(),
                ],
            )
            .await?;
        if let Some(row) = inserted {
            return Ok(RefundCharged {
                row: refund_ledger_from_row(&row)?,
                fresh: true,
            });
        }
        let row = c
            .query_one(
                &format!(
                    "SELECT {REFUND_LEDGER_COLUMNS} FROM gateway_refunds WHERE downstream_key = $1"
                ),
                &[&dk],
            )
            .await?;
        Ok(RefundCharged {
            row: refund_ledger_from_row(&row)?,
            fresh: false,
        })
    }

    async fn refund_ledger_row(
        &self,
        downstream_key: &DownstreamKey,
    ) -> StoreResult<Option<RefundLedgerRow>> {
        let c = self.conn().await?;
        c.query_opt(
            &format!(
                "SELECT {REFUND_LEDGER_COLUMNS} FROM gateway_refunds WHERE downstream_key = $1"
            ),
            &[&downstream_key.as_ref()],
        )
        .await?
        .as_ref()
        .map(refund_ledger_from_row)
        .transpose()
    }

    async fn refund_ledger(&self) -> StoreResult<Vec<RefundLedgerRow>> {
        let c = self.conn().await?;
        c.query(
            &format!("SELECT {REFUND_LEDGER_COLUMNS} FROM gateway_refunds ORDER BY seq"),
            &[],
        )
        .await?
        .iter()
        .map(refund_ledger_from_row)
        .collect()
    }

    async fn ledger(&self) -> StoreResult<Vec<LedgerRow>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {LEDGER_COLUMNS} FROM gateway_ledger WHERE status <> $1 ORDER BY seq"
                ),
                &[&VOID_STATUS],
            )
            .await?;
        rows.iter().map(ledger_from_row).collect()
    }

    async fn ledger_void(
        &self,
        downstream_key: &DownstreamKey,
        merchant: &MerchantId,
    ) -> StoreResult<Option<LedgerRow>> {
        let c = self.conn().await?;
        let dk = downstream_key.as_ref();
        c.execute(
            "INSERT INTO gateway_ledger (cobranca_id, downstream_key, merchant, valor, status, created_at)
             VALUES ($1, $2, $3, 0, $4, pagar_now_ms() + $5)
             ON CONFLICT (downstream_key) DO NOTHING",
            &[
                &format!("void_{}", uuid::Uuid::now_v7().simple()),
                &dk,
                &merchant.as_ref(),
                &VOID_STATUS,
                &self.shift(),
            ],
        )
        .await?;
        c.query_opt(
            &format!(
                "SELECT {LEDGER_COLUMNS} FROM gateway_ledger WHERE downstream_key = $1 AND status <> $2"
            ),
            &[&dk, &VOID_STATUS],
        )
        .await?
        .map(|r| ledger_from_row(&r))
        .transpose()
    }
}
