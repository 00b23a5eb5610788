//! The gateway simulator's ledger, on SQLite (the server's own database file).

use super::*;
use crate::store::{Clocked, SqliteStore};
use durable_sqlite::exec;
use rusqlite::{params, OptionalExtension, Row};

pub(super) fn ledger_from_row(r: &Row<'_>) -> rusqlite::Result<LedgerColumns> {
    Ok(LedgerColumns {
        cobranca_id: r.get("cobranca_id")?,
        downstream_key: r.get("downstream_key")?,
        merchant: r.get("merchant")?,
        valor: r.get("valor")?,
        status: r.get("status")?,
        motivo: r.get("motivo")?,
        created_at: r.get("created_at")?,
        plano: r.get("plano")?,
        captura: r.get("captura")?,
        captura_expira_em: r.get("captura_expira_em")?,
        metadata: r.get("metadata")?,
    })
}

pub(super) fn refund_ledger_from_row(r: &Row<'_>) -> rusqlite::Result<RefundLedgerColumns> {
    Ok(RefundLedgerColumns {
        estorno_id: r.get("estorno_id")?,
        downstream_key: r.get("downstream_key")?,
        cobranca_id: r.get("cobranca_id")?,
        merchant: r.get("merchant")?,
        valor: r.get("valor")?,
        status: r.get("status")?,
        motivo: r.get("motivo")?,
        created_at: r.get("created_at")?,
    })
}

#[async_trait::async_trait]
impl SimulatorLedger for SqliteStore {
    async fn ledger_charge(&self, charge: LedgerCharge) -> StoreResult<Option<Charged>> {
        let now = self.now_ms();
        // Only an approved charge holds money to capture; a declined one is no authorization.
        let authorization = charge
            .autorizacao_validade
            .filter(|_| charge.status == PaymentStatus::Aprovado);
        self.db().write(move |c| {
            let inserted = exec(
                c,
                "INSERT INTO gateway_ledger (cobranca_id, downstream_key, merchant, valor, status, motivo, created_at, cartao, plano, captura, captura_expira_em, metadata)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT (downstream_key) DO NOTHING",
                params![
                    format!("ch_{}", uuid::Uuid::now_v7().simple()),
                    charge.downstream_key.as_ref(),
                    charge.merchant.as_ref(),
                    charge.valor.get(),
                    charge.status.as_str(),
                    charge.motivo,
                    now,
                    charge.cartao,
                    charge.plano.map(|p| p.as_stored()),
                    authorization.map(|_| CaptureState::Pendente.as_str()),
                    authorization.map(|ttl| now.saturating_add(ttl)),
                    charge.metadata.to_stored()
                ],
            )?;
            let row = c.query_row(
                "SELECT * FROM gateway_ledger WHERE downstream_key = ?1",
                params![charge.downstream_key.as_ref()],
                ledger_from_row,
            )?;
            if row.status == VOID_STATUS {
                return Ok(None);
            }
            Ok(Some(Charged { row: row.parse()?, fresh: inserted == 1 }))
        })
        .await
    }

    async fn ledger_row(&self, charge: ChargeRef<'_>) -> StoreResult<Option<LedgerRow>> {
        let (column, value) = charge.column();
        let value = value.to_string();
        self.db()
            .read(move |c| {
                c.prepare_cached(&format!(
                    "SELECT * FROM gateway_ledger WHERE {column} = ?1 AND status <> ?2"
                ))?
                .query_row(params![value, VOID_STATUS], ledger_from_row)
                .optional()?
                .map(LedgerColumns::parse)
                .transpose()
            })
            .await
    }

    async fn ledger_card(&self, cobranca_id: &str) -> StoreResult<Option<String>> {
        let id = cobranca_id.to_string();
        self.db()
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT cartao FROM gateway_ledger WHERE cobranca_id = ?1",
                    [id],
                    |r| r.get::<_, Option<String>>(0),
                )
                .optional()?
                .flatten())
            })
            .await
    }

    async fn ledger_refund(&self, refund: LedgerRefund) -> StoreResult<RefundCharged> {
        let now = self.now_ms();
        self.db()
            .write(move |c| {
                let inserted = exec(
                    c,
                    "INSERT INTO gateway_refunds
                     (estorno_id, downstream_key, cobranca_id, merchant, valor, status, motivo, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT (downstream_key) DO NOTHING",
                    params![
                        format!("re_{}", uuid::Uuid::now_v7().simple()),
                        refund.downstream_key.as_ref(),
                        refund.cobranca_id,
                        refund.merchant.as_ref(),
                        refund.valor.get(),
                        refund.status.as_str(),
                        refund.motivo,
                        now
                    ],
                )?;
                let row = c
                    .query_row(
                        "SELECT * FROM gateway_refunds WHERE downstream_key = ?1",
                        [refund.downstream_key.as_ref()],
                        refund_ledger_from_row,
                    )?
                    .parse()?;
                Ok(RefundCharged {
                    row,
                    fresh: inserted == 1,
                })
            })
            .await
    }

    async fn refund_ledger_row(
        &self,
        downstream_key: &DownstreamKey,
    ) -> StoreResult<Option<RefundLedgerRow>> {
        let dk = downstream_key.as_ref().to_string();
        self.db()
            .read(move |c| {
                c.prepare_cached("SELECT * FROM gateway_refunds WHERE downstream_key = ?1")?
                    .query_row([dk], refund_ledger_from_row)
                    .optional()?
                    .map(RefundLedgerColumns::parse)
                    .transpose()
            })
            .await
    }

    async fn refund_ledger(&self) -> StoreResult<Vec<RefundLedgerRow>> {
        self.db()
            .read(|c| {
                c.prepare("SELECT * FROM gateway_refunds ORDER BY seq")?
                    .query_map([], refund_ledger_from_row)?
                    .map(|r| {
                        r.map_err(StoreError::from)
                            .and_then(RefundLedgerColumns::parse)
                    })
                    .collect()
            })
            .await
    }

    async fn ledger(&self) -> StoreResult<Vec<LedgerRow>> {
        self.db()
            .read(|c| {
                let mut st =
                    c.prepare("SELECT * FROM gateway_ledger WHERE status <> ?1 ORDER BY seq")?;
                let rows = st
                    .query_map([VOID_STATUS], ledger_from_row)?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.into_iter().map(LedgerColumns::parse).collect()
            })
            .await
    }

    async fn ledger_void(
        &self,
        downstream_key: &DownstreamKey,
        merchant: &MerchantId,
    ) -> StoreResult<Option<LedgerRow>> {
        let now = self.now_ms();
        let (dk, m) = (downstream_key.as_ref().to_string(), merchant.to_string());
        self.db()
            .write(move |c| {
                exec(
                    c,
                    "INSERT INTO gateway_ledger (cobranca_id, downstream_key, merchant, valor, status, created_at)
                     VALUES (?1, ?2, ?3, 0, ?4, ?5)
                     ON CONFLICT (downstream_key) DO NOTHING",
                    params![
                        format!("void_{}", uuid::Uuid::now_v7().simple()),
                        dk,
                        m,
                        VOID_STATUS,
                        now
                    ],
                )?;
                c.prepare_cached("SELECT * FROM gateway_ledger WHERE downstream_key = ?1 AND status <> ?2")?
                    .query_row(params![dk, VOID_STATUS], ledger_from_row)
                    .optional()?
                    .map(LedgerColumns::parse)
                    .transpose()
            })
            .await
    }

    async fn ledger_settle(
        &self,
        cobranca_id: &str,
        target: Option<CaptureState>,
    ) -> StoreResult<Option<CaptureState>> {
        let now = self.now_ms();
        let id = cobranca_id.to_string();
        self.db()
            .write(move |c| {
                exec(
                    c,
                    "UPDATE gateway_ledger
                     SET captura = CASE WHEN captura_expira_em <= ?2 THEN 'expirada' ELSE ?3 END
                     WHERE cobranca_id = ?1 AND captura = 'pendente'
                       AND (?3 IS NOT NULL OR captura_expira_em <= ?2)",
                    params![id, now, target.map(CaptureState::as_str)],
                )?;
                let state: Option<String> = c
                    .query_row(
                        "SELECT captura FROM gateway_ledger WHERE cobranca_id = ?1",
                        [&id],
                        |r| r.get(0),
                    )
                    .optional()?
                    .flatten();
                state
                    .map(|s| CaptureState::parse(&s).map_err(|e| corrupt("captura", e)))
                    .transpose()
            })
            .await
    }
}
