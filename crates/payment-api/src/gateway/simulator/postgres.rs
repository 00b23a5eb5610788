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
        captura: r.try_get("captura")?,
        captura_expira_em: r.try_get("captura_expira_em")?,
        metadata: r.try_get("metadata")?,
    }
    .parse()
}

pub(super) const LEDGER_COLUMNS: &str =
    "cobranca_id, downstream_key, merchant, valor, status, motivo, created_at, plano, captura, captura_expira_em, metadata";

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
        // Only an approved charge holds money to capture; a declined one is no authorization.
        let authorization = charge
            .autorizacao_validade
            .filter(|_| charge.status == PaymentStatus::Aprovado);
        let insert = c
            .prepare_cached(&format!(
                "INSERT INTO gateway_ledger ({LEDGER_COLUMNS}, cartao)
                 VALUES ($1, $2, $3, $4, $5, $6, pagar_now_ms() + $7, $9, $10,
                         pagar_now_ms() + $7 + $11, $12, $8)
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
                    &charge.plano.map(|p| p.as_stored()),
                    &authorization.map(|_| CaptureState::Pendente.as_str()),
                    &authorization,
                    &charge.metadata.to_stored(),
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

    async fn ledger_row(&self, charge: ChargeRef<'_>) -> StoreResult<Option<LedgerRow>> {
        let (column, value) = charge.column();
        let c = self.conn().await?;
        let select = c
            .prepare_cached(&format!(
                "SELECT {LEDGER_COLUMNS} FROM gateway_ledger WHERE {column} = $1 AND status <> $2"
            ))
            .await?;
        c.query_opt(&select, &[&value, &VOID_STATUS])
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

    async fn ledger_settle(
        &self,
        cobranca_id: &str,
        target: Option<CaptureState>,
    ) -> StoreResult<Option<CaptureState>> {
        let c = self.conn().await?;
        // Under READ COMMITTED a concurrent step waits for this row and re-checks
        // `captura = 'pendente'` on the version it committed: only the first step moves it.
        c.execute(
            "UPDATE gateway_ledger
             SET captura = CASE WHEN captura_expira_em <= pagar_now_ms() + $2 THEN 'expirada'
                                ELSE $3::text END
             WHERE cobranca_id = $1 AND captura = 'pendente'
               AND ($3::text IS NOT NULL OR captura_expira_em <= pagar_now_ms() + $2)",
            &[
                &cobranca_id,
                &self.shift(),
                &target.map(CaptureState::as_str),
            ],
        )
        .await?;
        c.query_opt(
            "SELECT captura FROM gateway_ledger WHERE cobranca_id = $1",
            &[&cobranca_id],
        )
        .await?
        .and_then(|r| r.get::<_, Option<String>>(0))
        .map(|s| CaptureState::parse(&s).map_err(|e| corrupt("captura", e)))
        .transpose()
    }
}
