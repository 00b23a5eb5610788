//! SQLite store: WAL, `synchronous=FULL`, `BEGIN IMMEDIATE`, and group commit through
//! [`durable_sqlite::Db`]: concurrent requests share one fsync, and no caller hears "done" before
//! its write is durable.

use super::*;
use crate::clock::Clock;
use durable_sqlite::{exec, Db, Options};
use rusqlite::{params, OptionalExtension, Row};
use rusqlite_migration::{Migrations, M};
use std::path::Path;
use std::sync::Arc;

/// The schema, one file per version under `migrations/sqlite/` (PostgreSQL's are beside it).
/// Applied versions are tracked in `PRAGMA user_version`; a file is never edited once released.
fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(include_str!("../../migrations/sqlite/V1__init.sql")),
        M::up(include_str!("../../migrations/sqlite/V2__recovery.sql")),
        M::up(include_str!(
            "../../migrations/sqlite/V3__terminal_and_range.sql"
        )),
        M::up(include_str!("../../migrations/sqlite/V4__refunds.sql")),
        M::up(include_str!(
            "../../migrations/sqlite/V5__operations_and_cancel.sql"
        )),
    ])
}

/// The SQLite store. Cheap to clone; clones share the writer and the read pool.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    db: Db,
    clock: Arc<dyn Clock>,
}

impl SqliteStore {
    /// Opens (creating and migrating if needed) the database at `path` and starts its writer.
    pub fn open(path: impl AsRef<Path>, clock: Arc<dyn Clock>) -> StoreResult<Self> {
        Self::open_with_cache(path, clock, None)
    }

    /// [`SqliteStore::open`] with at most `reader_cache_kib` of page cache per pooled reader
    /// (`None`: SQLite's default). The app's embedded sandbox keeps a small one.
    pub fn open_with_cache(
        path: impl AsRef<Path>,
        clock: Arc<dyn Clock>,
        reader_cache_kib: Option<u32>,
    ) -> StoreResult<Self> {
        let options = Options {
            reader_cache_kib,
            ..Options::default()
        };
        let db = Db::open(path, options, |c| {
            migrations().to_latest(c).map_err(StoreError::from)
        })?;
        Ok(Self { db, clock })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// Stops the writer after the writes already queued.
    pub fn close(&self) {
        self.db.close();
    }
}

/// Stores the answer of a key and marks it finished, if `fence` still holds it. True when it did.
fn complete_key(
    c: &rusqlite::Connection,
    merchant: &str,
    key: &str,
    fence: i64,
    response: &StoredResponse,
    payment_id: &str,
    now: Millis,
) -> rusqlite::Result<bool> {
    let updated = exec(
        c,
        "UPDATE idempotency_keys
         SET recovery_point = 'finished', response_status = ?4, response_body = ?5,
             payment_id = ?6, completed_at = ?7, locked_until = 0
         WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL",
        params![
            merchant,
            key,
            fence,
            response.status,
            response.body,
            payment_id,
            now
        ],
    )?;
    Ok(updated == 1)
}

fn payment_from_row(r: &Row<'_>) -> rusqlite::Result<PaymentColumns> {
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
    })
}

fn ledger_from_row(r: &Row<'_>) -> rusqlite::Result<LedgerColumns> {
    Ok(LedgerColumns {
        cobranca_id: r.get("cobranca_id")?,
        downstream_key: r.get("downstream_key")?,
        merchant: r.get("merchant")?,
        valor: r.get("valor")?,
        status: r.get("status")?,
        motivo: r.get("motivo")?,
        created_at: r.get("created_at")?,
    })
}

fn refund_from_row(r: &Row<'_>) -> rusqlite::Result<RefundColumns> {
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

fn refund_ledger_from_row(r: &Row<'_>) -> rusqlite::Result<RefundLedgerColumns> {
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

fn held_from_row(r: &Row<'_>) -> rusqlite::Result<HeldColumns> {
    Ok(HeldColumns {
        fingerprint: r.get("fingerprint")?,
        locked_until: r.get("locked_until")?,
        fence: r.get("fence")?,
        status: r.get("response_status")?,
        body: r.get("response_body")?,
        completed_at: r.get("completed_at")?,
        operation: r.get("operation")?,
        cancelled_at: r.get("cancelled_at")?,
        payment_id: r.get("payment_id")?,
        request: match r.as_ref().column_index("request_body") {
            Ok(i) => r.get(i)?,
            Err(_) => None,
        },
    })
}

/// A key's row as the claim (`columns` = [`HELD_COLUMNS`]) or the cancellation
/// ([`HELD_COLUMNS_AND_REQUEST`]) decides from it, inside the caller's transaction.
fn held_key(
    c: &rusqlite::Connection,
    columns: &str,
    merchant: &str,
    key: &str,
) -> StoreResult<claim::HeldKey> {
    c.prepare_cached(&format!(
        "SELECT {columns} FROM idempotency_keys WHERE merchant = ?1 AND key = ?2"
    ))?
    .query_row(params![merchant, key], held_from_row)?
    .parse()
}

/// The refund a key holds, read inside the caller's transaction.
fn refund_by_key(
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
impl Store for SqliteStore {
    async fn lookup_key(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<KeyRecord>> {
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db
            .read(move |c| {
                let row = c
                .prepare_cached(
                    "SELECT fingerprint, response_status, response_body, completed_at, cancelled_at
                     FROM idempotency_keys WHERE merchant = ?1 AND key = ?2",
                )?
                .query_row(params![m, k], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get::<_, Option<i64>>(4)?,
                    ))
                })
                .optional()?;
                row.map(|(fp, status, body, completed_at, cancelled_at)| {
                    Ok(KeyRecord {
                        fingerprint: Fingerprint::from_stored(fp),
                        cancelled: cancelled_at.is_some(),
                        response: stored_response(status, body)?,
                        completed_at,
                    })
                })
                .transpose()
            })
            .await
    }

    async fn claim(&self, claim: Claim) -> StoreResult<NextAction> {
        let now = self.now_ms();
        // Relaxed (see `durable_sqlite`): the claim is visible to every other request at once and
        // survives a crash of this process; only a power cut can take it, and then no charge of
        // it survived either: the gateway's record of a charge is a durable commit, which makes
        // every commit before it durable too (the WAL is appended in order). The retry then
        // claims the free key anew and charges under the same downstream key.
        self.db
            .write_relaxed(move |c| {
                let (m, k) = (claim.merchant.as_ref(), claim.key.as_ref());
                let inserted = exec(
                    c,
                    "INSERT INTO idempotency_keys
                     (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point, request_body,
                      operation, referencia)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?7, 'started', ?6, ?8, ?9)
                 ON CONFLICT (merchant, key) DO NOTHING",
                    params![
                        m,
                        k,
                        claim.fingerprint.as_ref(),
                        now,
                        now + claim.lease_ms,
                        claim.request,
                        claim::FIRST_FENCE,
                        claim.operation.as_str(),
                        claim.referencia
                    ],
                )?;
                if inserted == 1 {
                    return Ok(claim::inserted());
                }
                let held = held_key(c, HELD_COLUMNS, m, k)?;
                let decision = claim::decide(held, &claim.fingerprint, now, claim.lease_ms);
                if let claim::Decision::TakeOver { fence, locked_until } = decision {
                    exec(
                        c,
                        "UPDATE idempotency_keys SET fence = ?3, locked_until = ?4
                         WHERE merchant = ?1 AND key = ?2",
                        params![m, k, fence, locked_until],
                    )?;
                }
                Ok(decision.action())
            })
            .await
    }

    async fn finish(&self, done: Completion) -> StoreResult<FinishOutcome> {
        let now = self.now_ms();
        self.db.write(move |c| {
            let (m, k) = (done.merchant.as_ref(), done.key.as_ref());
            if !complete_key(c, m, k, done.fence, &done.response, done.payment.id.as_ref(), now)? {
                return Ok(FinishOutcome::LeaseLost);
            }
            let p = &done.payment;
            c.execute(
                &format!("INSERT INTO payments ({PAYMENT_COLUMNS}, fingerprint) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"),
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
                    done.fingerprint.as_ref()
                ],
            )?;
            Ok(FinishOutcome::Stored)
        })
        .await
    }

    async fn release(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<()> {
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db
            .write(move |c| {
                exec(
                    c,
                    "UPDATE idempotency_keys SET locked_until = 0
                 WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL",
                    params![m, k, fence],
                )?;
                Ok(())
            })
            .await
    }

    async fn payment(&self, merchant: &MerchantId, id: &PaymentId) -> StoreResult<Option<Payment>> {
        let (m, id) = (merchant.to_string(), id.to_string());
        self.db
            .read(move |c| {
                c.query_row(
                    &format!(
                        "SELECT {PAYMENT_COLUMNS} FROM payments WHERE merchant = ?1 AND id = ?2"
                    ),
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
        field: PaymentField,
        value: &str,
    ) -> StoreResult<Vec<Payment>> {
        let column = field.column();
        let (m, v) = (merchant.to_string(), value.to_string());
        self.db.read(move |c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {PAYMENT_COLUMNS} FROM payments WHERE merchant = ?1 AND {column} = ?2 ORDER BY created_at, id"
            ))?;
            let rows = st.query_map(params![m, v], payment_from_row)?.collect::<Result<Vec<_>, _>>()?;
            rows.into_iter().map(PaymentColumns::parse).collect()
        })
        .await
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
                    "SELECT {PAYMENT_COLUMNS} FROM payments
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

    async fn purge_keys(&self, retention_ms: Millis) -> StoreResult<u64> {
        let cutoff = self.now_ms() - retention_ms;
        self.db
            .write(move |c| {
                Ok(exec(
                c,
                "DELETE FROM idempotency_keys WHERE completed_at IS NOT NULL AND completed_at < ?1",
                params![cutoff],
            )? as u64)
            })
            .await
    }

    async fn ledger_charge(&self, charge: LedgerCharge) -> StoreResult<Option<Charged>> {
        let now = self.now_ms();
        self.db.write(move |c| {
            let inserted = exec(
                c,
                "INSERT INTO gateway_ledger (cobranca_id, downstream_key, merchant, valor, status, motivo, created_at, cartao)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (downstream_key) DO NOTHING",
                params![
                    format!("ch_{}", uuid::Uuid::now_v7().simple()),
                    charge.downstream_key.as_ref(),
                    charge.merchant.as_ref(),
                    charge.valor.get(),
                    charge.status.as_str(),
                    charge.motivo,
                    now,
                    charge.cartao
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

    async fn ledger_row(&self, downstream_key: &DownstreamKey) -> StoreResult<Option<LedgerRow>> {
        let dk = downstream_key.as_ref().to_string();
        self.db
            .read(move |c| {
                c.prepare_cached(
                    "SELECT * FROM gateway_ledger WHERE downstream_key = ?1 AND status <> ?2",
                )?
                .query_row(params![dk, VOID_STATUS], ledger_from_row)
                .optional()?
                .map(LedgerColumns::parse)
                .transpose()
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
                        "SELECT {PAYMENT_COLUMNS}, fingerprint FROM payments WHERE cobranca_id = ?1"
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

    async fn finish_existing(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
        resource: &str,
        response: StoredResponse,
    ) -> StoreResult<FinishOutcome> {
        let now = self.now_ms();
        let (m, k, id) = (
            merchant.to_string(),
            key.as_ref().to_string(),
            resource.to_string(),
        );
        self.db
            .write(move |c| {
                Ok(if complete_key(c, &m, &k, fence, &response, &id, now)? {
                    FinishOutcome::Stored
                } else {
                    FinishOutcome::LeaseLost
                })
            })
            .await
    }

    async fn forget(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool> {
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db
            .write(move |c| {
                Ok(exec(
                    c,
                    "DELETE FROM idempotency_keys
                     WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL",
                    params![m, k, fence],
                )? == 1)
            })
            .await
    }

    async fn abandoned(&self, stale_ms: Millis, limit: usize) -> StoreResult<Vec<Abandoned>> {
        let cutoff = self.now_ms() - stale_ms;
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT merchant, key, fence, fingerprint, request_body, operation, created_at FROM idempotency_keys
                     WHERE completed_at IS NULL AND locked_until < ?1 ORDER BY locked_until LIMIT ?2",
                )?;
                let rows = st
                    .query_map(params![cutoff, limit as i64], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get(2)?,
                            r.get::<_, String>(3)?,
                            r.get(4)?,
                            r.get(5)?,
                            r.get(6)?,
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.into_iter()
                    .map(|(m, k, fence, fp, request, op, at)| {
                        abandoned_from(m, k, fence, fp, request, op, at)
                    })
                    .collect()
            })
            .await
    }

    async fn take_over(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
        lease_ms: Millis,
    ) -> StoreResult<Option<i64>> {
        let now = self.now_ms();
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db
            .write(move |c| {
                let updated = exec(
                    c,
                    "UPDATE idempotency_keys SET fence = fence + 1, locked_until = ?4
                     WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL
                       AND locked_until <= ?5",
                    params![m, k, fence, now + lease_ms, now],
                )?;
                Ok((updated == 1).then_some(fence + 1))
            })
            .await
    }

    async fn hold_refund(&self, refund: Refund, fence: i64) -> StoreResult<Hold> {
        let now = self.now_ms();
        self.db
            .write(move |c| {
                let r = &refund;
                let (m, k) = (r.merchant.as_ref(), r.idempotency_key.as_ref());
                let holds: Option<i64> = c
                    .prepare_cached(
                        "SELECT 1 FROM idempotency_keys
                         WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL",
                    )?
                    .query_row(params![m, k, fence], |row| row.get(0))
                    .optional()?;
                if holds.is_none() {
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
                       AND estornado + ?3 <= valor",
                    params![m, r.payment_id.as_ref(), r.valor.get()],
                )?;
                if held == 0 {
                    let payment: Option<(String, i64, i64)> = c
                        .query_row(
                            "SELECT status, valor, estornado FROM payments WHERE merchant = ?1 AND id = ?2",
                            params![m, r.payment_id.as_ref()],
                            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                        )
                        .optional()?;
                    return Ok(match payment {
                        None => Hold::NoPayment,
                        Some((status, _, _)) if status != "aprovado" => Hold::NotApproved,
                        Some((_, valor, estornado)) => Hold::Exceeds {
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

    async fn ledger_card(&self, cobranca_id: &str) -> StoreResult<Option<String>> {
        let id = cobranca_id.to_string();
        self.db
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
        self.db
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
        self.db
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
        self.db
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
        self.db
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

    async fn keys_in_progress(
        &self,
        merchant: &MerchantId,
        field: PaymentField,
        value: &str,
    ) -> StoreResult<Vec<InProgressKey>> {
        let column = match field {
            PaymentField::Referencia => "referencia",
            PaymentField::IdempotencyKey => "key",
        };
        let (m, v) = (merchant.to_string(), value.to_string());
        self.db
            .read(move |c| {
                let rows = c
                    .prepare_cached(&format!(
                        "SELECT key, created_at FROM idempotency_keys
                         WHERE merchant = ?1 AND {column} = ?2 AND completed_at IS NULL AND locked_until <> 0
                         ORDER BY created_at, key"
                    ))?
                    .query_map(params![m, v], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, Millis>(1)?))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.into_iter()
                    .map(|(key, since)| {
                        Ok(InProgressKey {
                            key: IdempotencyKey::parse(key.as_bytes())
                                .map_err(|e| corrupt("key", e))?,
                            since,
                        })
                    })
                    .collect()
            })
            .await
    }

    async fn claim_for_cancel(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        lease_ms: Millis,
    ) -> StoreResult<CancelClaim> {
        let now = self.now_ms();
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db
            .write(move |c| {
                let inserted = exec(
                    c,
                    "INSERT INTO idempotency_keys
                     (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point, operation)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'started', 'cancelamento')
                     ON CONFLICT (merchant, key) DO NOTHING",
                    params![
                        m,
                        k,
                        claim::cancelling_fingerprint().as_ref(),
                        now,
                        now + lease_ms,
                        claim::FIRST_FENCE
                    ],
                )?;
                if inserted == 1 {
                    return Ok(claim::cancel_inserted());
                }
                let (answer, takeover) = claim::decide_cancel(held_key(c, HELD_COLUMNS_AND_REQUEST, &m, &k)?, now, lease_ms);
                if let Some((fence, locked_until)) = takeover {
                    exec(
                        c,
                        "UPDATE idempotency_keys SET fence = ?3, locked_until = ?4
                         WHERE merchant = ?1 AND key = ?2",
                        params![m, k, fence, locked_until],
                    )?;
                }
                Ok(answer)
            })
            .await
    }

    async fn mark_cancelled(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool> {
        let now = self.now_ms();
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db
            .write(move |c| {
                Ok(exec(
                    c,
                    "UPDATE idempotency_keys
                     SET recovery_point = 'finished', cancelled_at = ?4, completed_at = ?4, locked_until = 0
                     WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL",
                    params![m, k, fence, now],
                )? == 1)
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
        self.db
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

    async fn health(&self) -> StoreResult<()> {
        self.db
            .read(|c| Ok(c.query_row("SELECT 1", [], |_| Ok(()))?))
            .await
    }

    async fn ready(&self) -> StoreResult<()> {
        // Through the writer: a stopped writer thread or a database that cannot take its write
        // lock fails here, where a read would still succeed.
        self.db.write(|_| Ok(())).await
    }

    fn now_ms(&self) -> Millis {
        self.clock.now_ms()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_claimed_before_operations_were_recorded_get_theirs_from_the_migration() {
        let mut c = rusqlite::Connection::open_in_memory().unwrap();
        migrations().to_version(&mut c, 4).unwrap();
        for (key, body) in [
            ("k-pagamento", r#"{"valor":100,"cartao":"tok_aprovado"}"#),
            (
                "k-estorno",
                r#"{"estorno":{"pagamento":"pay_1","corpo":{"valor":1}}}"#,
            ),
        ] {
            c.execute(
                "INSERT INTO idempotency_keys (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point, request_body)
                 VALUES ('loja', ?1, 'fp', 0, 0, 1, 'started', ?2)",
                params![key, body.as_bytes()],
            )
            .unwrap();
        }
        migrations().to_latest(&mut c).unwrap();
        let ops: Vec<(String, String)> = c
            .prepare("SELECT key, operation FROM idempotency_keys ORDER BY key")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            ops,
            [
                ("k-estorno".to_string(), "estorno".to_string()),
                ("k-pagamento".to_string(), "pagamento".to_string())
            ]
        );
    }

    use super::*;
    use crate::clock::ManualClock;
    use std::time::Duration;

    fn claim(key: &str, fp: &str) -> Claim {
        Claim {
            merchant: MerchantId::parse("loja").unwrap(),
            key: IdempotencyKey::parse(key.as_bytes()).unwrap(),
            fingerprint: Fingerprint::from_stored(fp.into()),
            request: Vec::new(),
            lease_ms: 1_000,
            operation: KeyOperation::Pagamento,
            referencia: None,
        }
    }

    #[tokio::test]
    async fn a_second_claim_of_a_live_key_is_in_progress_and_after_the_lease_is_a_takeover() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let store = SqliteStore::open(dir.path().join("t.db"), clock.clone()).unwrap();
        assert_eq!(
            store.claim(claim("k", "f")).await.unwrap(),
            NextAction::StartProcessing {
                fence: 1,
                takeover: false
            }
        );
        assert!(matches!(
            store.claim(claim("k", "f")).await.unwrap(),
            NextAction::InProgress { .. }
        ));
        assert_eq!(
            store.claim(claim("k", "other")).await.unwrap(),
            NextAction::FingerprintMismatch
        );
        clock.advance(Duration::from_millis(1_001));
        assert_eq!(
            store.claim(claim("k", "f")).await.unwrap(),
            NextAction::StartProcessing {
                fence: 2,
                takeover: true
            }
        );
    }

    #[tokio::test]
    async fn reopening_a_database_keeps_its_rows_and_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = SqliteStore::open(&path, ManualClock::new()).unwrap();
        store.claim(claim("k", "f")).await.unwrap();
        store.close();
        let again = SqliteStore::open(&path, ManualClock::new()).unwrap();
        assert!(again
            .lookup_key(
                &MerchantId::parse("loja").unwrap(),
                &IdempotencyKey::parse(b"k").unwrap()
            )
            .await
            .unwrap()
            .is_some());
    }
}
