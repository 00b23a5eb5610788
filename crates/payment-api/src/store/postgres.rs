//! PostgreSQL store: several server processes share one database and still charge each key once.
//!
//! Claims are an `INSERT … ON CONFLICT DO NOTHING` under `UNIQUE (merchant, key)` at READ
//! COMMITTED: PostgreSQL makes a concurrent duplicate wait for the first insert and then do
//! nothing, so exactly one request starts processing. A conflicting claim then reads the row
//! `FOR UPDATE` and decides (replay, in progress, fingerprint mismatch, takeover) while it holds
//! the row lock, so two takeovers of an expired lease cannot both win. Completion is one
//! statement: the fenced `UPDATE` of the key and the `INSERT` of the payment commit together or
//! not at all.
//!
//! Every lease and retention time is computed in SQL from `pagar_now_ms()` (the database clock);
//! a replica whose own clock is wrong still agrees with the others. [`PgStore::now_ms`] (used for
//! `criado_em` and the replay cache) is the replica's clock corrected by the offset to the
//! database clock, measured at start and every [`OFFSET_REFRESH`].

use super::*;
use crate::clock::Clock;
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::{NoTls, Row};

mod embedded {
    refinery::embed_migrations!("migrations/postgres");
}

/// How often a replica re-measures its offset to the database clock.
pub const OFFSET_REFRESH: Duration = Duration::from_secs(30);

/// Migrations of concurrent replicas run one at a time under this advisory lock.
const MIGRATION_LOCK: i64 = 0x7061_6761_7200; // "pagar\0"

/// How a [`PgStore`] connects.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Most connections this process opens.
    pub max_connections: usize,
    /// Longest wait to connect, or for a free pooled connection.
    pub connect_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// The PostgreSQL store. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    local: Arc<dyn Clock>,
    /// Database clock minus this replica's clock, in ms.
    db_offset: Arc<AtomicI64>,
    /// Added to the database clock by every statement; only tests move it ([`Self::advance_clock`]).
    shift: Arc<AtomicI64>,
    _offset_task: Arc<AbortOnDrop>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("db_offset_ms", &self.db_offset.load(Ordering::Relaxed))
            .field("pool", &self.pool.status())
            .finish()
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://…`), runs the migrations (one replica at a time) and
    /// measures the offset to the database clock. Fails when the database cannot be reached.
    pub async fn connect(
        url: &str,
        options: PgOptions,
        local: Arc<dyn Clock>,
    ) -> StoreResult<Self> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Unavailable(format!("DATABASE_URL inválida: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("payment-api");
        }
        migrate(&config).await?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        let db_offset = Arc::new(AtomicI64::new(0));
        measure_offset(&pool, local.as_ref(), &db_offset).await?;
        let task = tokio::spawn({
            let (pool, local, db_offset) = (pool.clone(), local.clone(), db_offset.clone());
            async move {
                loop {
                    tokio::time::sleep(OFFSET_REFRESH).await;
                    if let Err(e) = measure_offset(&pool, local.as_ref(), &db_offset).await {
                        tracing::warn!(error = %e, "could not read the database clock; keeping the last offset");
                    }
                }
            }
        });
        Ok(Self {
            pool,
            local,
            db_offset,
            shift: Arc::new(AtomicI64::new(0)),
            _offset_task: Arc::new(AbortOnDrop(task)),
        })
    }

    /// This replica's clock minus the database clock, as last measured (ms).
    pub fn offset_to_database_ms(&self) -> Millis {
        -self.db_offset.load(Ordering::Relaxed)
    }

    /// Moves this store's view of the database clock forward (tests of leases and retention;
    /// the database's own clock cannot be moved).
    pub fn advance_clock(&self, by: Duration) {
        self.shift
            .fetch_add(by.as_millis() as Millis, Ordering::SeqCst);
    }

    fn shift(&self) -> Millis {
        self.shift.load(Ordering::SeqCst)
    }

    async fn conn(&self) -> StoreResult<Object> {
        get(&self.pool).await
    }
}

async fn migrate(config: &tokio_postgres::Config) -> StoreResult<()> {
    let (mut client, connection) = config.connect(NoTls).await?;
    let driver = tokio::spawn(connection);
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let ran = embedded::migrations::runner()
        .run_async(&mut client)
        .await
        .map_err(|e| match e.kind() {
            refinery::error::Kind::Connection(_, source) => StoreError::Unavailable(format!(
                "migração: {}",
                source
                    .downcast_ref::<tokio_postgres::Error>()
                    .map(crate::error::describe_postgres)
                    .unwrap_or_else(|| source.to_string())
            )),
            _ => StoreError::Unavailable(format!("migração: {e}")),
        });
    client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await?;
    drop(client);
    let _ = driver.await;
    ran.map(|_| ())
}

/// A pooled connection, or why there is none.
async fn get(pool: &Pool) -> StoreResult<Object> {
    pool.get().await.map_err(|e| match e {
        PoolError::Backend(pg) => StoreError::Postgres(pg),
        PoolError::Timeout(_) => {
            StoreError::Unavailable("nenhuma conexão livre no pool a tempo".into())
        }
        other => StoreError::Unavailable(other.to_string()),
    })
}

async fn measure_offset(pool: &Pool, local: &dyn Clock, offset: &AtomicI64) -> StoreResult<()> {
    let c = get(pool).await?;
    let before = local.now_ms();
    let db: i64 = c.query_one("SELECT pagar_now_ms()", &[]).await?.get(0);
    let after = local.now_ms();
    offset.store(db - (before + after) / 2, Ordering::Relaxed);
    Ok(())
}

fn payment_from_row(r: &Row) -> StoreResult<Payment> {
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
    }
    .parse()
}

fn ledger_from_row(r: &Row) -> StoreResult<LedgerRow> {
    LedgerColumns {
        cobranca_id: r.try_get("cobranca_id")?,
        downstream_key: r.try_get("downstream_key")?,
        merchant: r.try_get("merchant")?,
        valor: r.try_get("valor")?,
        status: r.try_get("status")?,
        motivo: r.try_get("motivo")?,
        created_at: r.try_get("created_at")?,
    }
    .parse()
}

fn held_from_row(r: &Row) -> StoreResult<claim::HeldKey> {
    HeldColumns {
        fingerprint: r.try_get("fingerprint")?,
        locked_until: r.try_get("locked_until")?,
        fence: r.try_get("fence")?,
        status: r
            .try_get::<_, Option<i32>>("response_status")?
            .map(i64::from),
        body: r.try_get("response_body")?,
        completed_at: r.try_get("completed_at")?,
        operation: r.try_get("operation")?,
        cancelled_at: r.try_get("cancelled_at")?,
        payment_id: r.try_get("payment_id")?,
        request: if r.columns().iter().any(|c| c.name() == "request_body") {
            r.try_get("request_body")?
        } else {
            None
        },
    }
    .parse()
}

const LEDGER_COLUMNS: &str =
    "cobranca_id, downstream_key, merchant, valor, status, motivo, created_at";

const REFUND_LEDGER_COLUMNS: &str =
    "estorno_id, downstream_key, cobranca_id, merchant, valor, status, motivo, created_at";

fn refund_from_row(r: &Row) -> StoreResult<Refund> {
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

fn refund_ledger_from_row(r: &Row) -> StoreResult<RefundLedgerRow> {
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

/// The refund a key holds, on a connection or inside a transaction.
async fn pg_refund_by_key(
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

/// A conflicting claim finds the row gone only if the reaper purged it in between; try again.
const CLAIM_ATTEMPTS: usize = 3;

#[async_trait::async_trait]
impl Store for PgStore {
    async fn lookup_key(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<KeyRecord>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "SELECT fingerprint, response_status, response_body, completed_at, cancelled_at
                 FROM idempotency_keys WHERE merchant = $1 AND key = $2",
            )
            .await?;
        let row = c
            .query_opt(&st, &[&merchant.as_ref(), &key.as_ref()])
            .await?;
        row.map(|r| {
            Ok(KeyRecord {
                fingerprint: Fingerprint::from_stored(r.get(0)),
                cancelled: r.get::<_, Option<i64>>(4).is_some(),
                response: stored_response(r.get::<_, Option<i32>>(1).map(i64::from), r.get(2))?,
                completed_at: r.get(3),
            })
        })
        .transpose()
    }

    async fn claim(&self, claim: Claim) -> StoreResult<NextAction> {
        let mut c = self.conn().await?;
        let (m, k, fp) = (
            claim.merchant.as_ref(),
            claim.key.as_ref(),
            claim.fingerprint.as_ref(),
        );
        let shift = self.shift();
        for _ in 0..CLAIM_ATTEMPTS {
            let insert = c
                .prepare_cached(
                    "INSERT INTO idempotency_keys
                         (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point,
                          request_body, operation, referencia)
                     SELECT $1::text, $2::text, $3::text, now_ms, now_ms + $4, $7::bigint, 'started', $6::bytea,
                            $8::text, $9::text
                     FROM (SELECT pagar_now_ms() + $5 AS now_ms) AS t
                     ON CONFLICT (merchant, key) DO NOTHING
                     RETURNING fence",
                )
                .await?;
            if c.query_opt(
                &insert,
                &[
                    &m,
                    &k,
                    &fp,
                    &claim.lease_ms,
                    &shift,
                    &claim.request,
                    &claim::FIRST_FENCE,
                    &claim.operation.as_str(),
                    &claim.referencia,
                ],
            )
            .await?
            .is_some()
            {
                return Ok(claim::inserted());
            }
            // The key exists. A completed key never changes, so a replay (or a mismatch) is
            // decided from a plain read, without the row lock every other replica would queue on.
            let completed = c
                .prepare_cached(&format!(
                    "SELECT {HELD_COLUMNS} FROM idempotency_keys
                     WHERE merchant = $1 AND key = $2 AND completed_at IS NOT NULL"
                ))
                .await?;
            if let Some(row) = c.query_opt(&completed, &[&m, &k]).await? {
                let held = held_from_row(&row)?;
                if held.response.is_some() || held.cancelled {
                    return Ok(claim::decide(held, &claim.fingerprint, 0, claim.lease_ms).action());
                }
            }
            // Not completed: decide under its row lock.
            let tx = c.transaction().await?;
            let select = tx
                .prepare_cached(&format!(
                    "SELECT {HELD_COLUMNS}, pagar_now_ms() + $3 AS now_ms
                     FROM idempotency_keys WHERE merchant = $1 AND key = $2 FOR UPDATE"
                ))
                .await?;
            let Some(row) = tx.query_opt(&select, &[&m, &k, &shift]).await? else {
                tx.rollback().await?;
                continue;
            };
            let held = held_from_row(&row)?;
            let decision = claim::decide(
                held,
                &claim.fingerprint,
                row.try_get("now_ms")?,
                claim.lease_ms,
            );
            if let claim::Decision::TakeOver {
                fence,
                locked_until,
            } = decision
            {
                let takeover = tx
                    .prepare_cached(
                        "UPDATE idempotency_keys SET fence = $3, locked_until = $4
                         WHERE merchant = $1 AND key = $2",
                    )
                    .await?;
                tx.execute(&takeover, &[&m, &k, &fence, &locked_until])
                    .await?;
            }
            let action = decision.action();
            tx.commit().await?;
            return Ok(action);
        }
        Err(StoreError::Unavailable(format!(
            "a chave {k:?} mudou {CLAIM_ATTEMPTS} vezes durante a reserva"
        )))
    }

    fn lookup_before_claim(&self) -> bool {
        false
    }

    async fn finish(&self, done: Completion) -> StoreResult<FinishOutcome> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "WITH done AS (
                     UPDATE idempotency_keys
                     SET recovery_point = 'finished', response_status = $4, response_body = $5,
                         payment_id = $6, completed_at = pagar_now_ms() + $14, locked_until = 0
                     WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL
                     RETURNING 1
                 )
                 INSERT INTO payments ({PAYMENT_COLUMNS}, fingerprint)
                 SELECT $6::text, $1::text, $2::text, $7::bigint, $8::text, $9::text, $10::text,
                        $11::text, $12::text, $13::bigint, $16::text, $15::text
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
                ],
            )
            .await?;
        Ok(if inserted == 1 {
            FinishOutcome::Stored
        } else {
            FinishOutcome::LeaseLost
        })
    }

    async fn release(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<()> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "UPDATE idempotency_keys SET locked_until = 0
                 WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL",
            )
            .await?;
        c.execute(&st, &[&merchant.as_ref(), &key.as_ref(), &fence])
            .await?;
        Ok(())
    }

    async fn payment(&self, merchant: &MerchantId, id: &PaymentId) -> StoreResult<Option<Payment>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT {PAYMENT_COLUMNS} FROM payments WHERE merchant = $1 AND id = $2"
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
        field: PaymentField,
        value: &str,
    ) -> StoreResult<Vec<Payment>> {
        let column = field.column();
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT {PAYMENT_COLUMNS} FROM payments WHERE merchant = $1 AND {column} = $2
                 ORDER BY created_at, id"
            ))
            .await?;
        let rows = c.query(&st, &[&merchant.as_ref(), &value]).await?;
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
                "SELECT {PAYMENT_COLUMNS} FROM payments
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

    async fn purge_keys(&self, retention_ms: Millis) -> StoreResult<u64> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "DELETE FROM idempotency_keys
                 WHERE completed_at IS NOT NULL AND completed_at < pagar_now_ms() + $2 - $1",
            )
            .await?;
        Ok(c.execute(&st, &[&retention_ms, &self.shift()]).await?)
    }

    async fn ledger_charge(&self, charge: LedgerCharge) -> StoreResult<Option<Charged>> {
        let c = self.conn().await?;
        let insert = c
            .prepare_cached(&format!(
                "INSERT INTO gateway_ledger ({LEDGER_COLUMNS}, cartao)
                 VALUES ($1, $2, $3, $4, $5, $6, pagar_now_ms() + $7, $8)
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

    async fn payment_by_charge(
        &self,
        cobranca_id: &str,
    ) -> StoreResult<Option<(Payment, Option<Fingerprint>)>> {
        let c = self.conn().await?;
        let select = c
            .prepare_cached(&format!(
                "SELECT {PAYMENT_COLUMNS}, fingerprint FROM payments WHERE cobranca_id = $1"
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

    async fn finish_existing(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
        resource: &str,
        response: StoredResponse,
    ) -> StoreResult<FinishOutcome> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "UPDATE idempotency_keys
                 SET recovery_point = 'finished', response_status = $4, response_body = $5,
                     payment_id = $6, completed_at = pagar_now_ms() + $7, locked_until = 0
                 WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL",
            )
            .await?;
        let updated = c
            .execute(
                &st,
                &[
                    &merchant.as_ref(),
                    &key.as_ref(),
                    &fence,
                    &i32::from(response.status),
                    &response.body,
                    &resource,
                    &self.shift(),
                ],
            )
            .await?;
        Ok(if updated == 1 {
            FinishOutcome::Stored
        } else {
            FinishOutcome::LeaseLost
        })
    }

    async fn forget(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "DELETE FROM idempotency_keys
                 WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL",
            )
            .await?;
        Ok(c.execute(&st, &[&merchant.as_ref(), &key.as_ref(), &fence])
            .await?
            == 1)
    }

    async fn abandoned(&self, stale_ms: Millis, limit: usize) -> StoreResult<Vec<Abandoned>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "SELECT merchant, key, fence, fingerprint, request_body, operation, created_at FROM idempotency_keys
                 WHERE completed_at IS NULL AND locked_until < pagar_now_ms() + $1 - $2
                 ORDER BY locked_until LIMIT $3",
            )
            .await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        c.query(&st, &[&self.shift(), &stale_ms, &limit])
            .await?
            .into_iter()
            .map(|r| {
                abandoned_from(
                    r.get(0),
                    r.get(1),
                    r.get(2),
                    r.get(3),
                    r.get(4),
                    r.get(5),
                    r.get(6),
                )
            })
            .collect()
    }

    async fn take_over(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
        lease_ms: Millis,
    ) -> StoreResult<Option<i64>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "UPDATE idempotency_keys SET fence = fence + 1, locked_until = now_ms + $4
                 FROM (SELECT pagar_now_ms() + $5 AS now_ms) AS t
                 WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL
                   AND locked_until <= now_ms
                 RETURNING fence",
            )
            .await?;
        Ok(c.query_opt(
            &st,
            &[
                &merchant.as_ref(),
                &key.as_ref(),
                &fence,
                &lease_ms,
                &self.shift(),
            ],
        )
        .await?
        .map(|r| r.get(0)))
    }

    async fn hold_refund(&self, refund: Refund, fence: i64) -> StoreResult<Hold> {
        let mut c = self.conn().await?;
        let r = &refund;
        let (m, k) = (r.merchant.as_ref(), r.idempotency_key.as_ref());
        for _ in 0..CLAIM_ATTEMPTS {
            let tx = c.transaction().await?;
            // The key's row lock (shared) keeps a takeover from changing the fence until this
            // hold commits: a worker whose key was taken over holds nothing.
            let holds = tx
                .query_opt(
                    "SELECT 1 FROM idempotency_keys
                     WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL
                     FOR SHARE",
                    &[&m, &k, &fence],
                )
                .await?;
            if holds.is_none() {
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
                       AND estornado + $3 <= valor",
                    &[&m, &r.payment_id.as_ref(), &r.valor.get()],
                )
                .await?;
            if held == 0 {
                let payment = tx
                    .query_opt(
                        "SELECT status, valor, estornado FROM payments WHERE merchant = $1 AND id = $2",
                        &[&m, &r.payment_id.as_ref()],
                    )
                    .await?;
                return Ok(match payment {
                    None => Hold::NoPayment,
                    Some(p) if p.try_get::<_, String>(0)? != "aprovado" => Hold::NotApproved,
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
                "UPDATE idempotency_keys
                 SET recovery_point = 'finished', response_status = $4, response_body = $5,
                     payment_id = $6, completed_at = pagar_now_ms() + $7, locked_until = 0
                 WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL",
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
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT key, created_at FROM idempotency_keys
                 WHERE merchant = $1 AND {column} = $2 AND completed_at IS NULL AND locked_until <> 0
                 ORDER BY created_at, key"
            ))
            .await?;
        c.query(&st, &[&merchant.as_ref(), &value])
            .await?
            .iter()
            .map(|r| {
                let key: String = r.try_get(0)?;
                Ok(InProgressKey {
                    key: IdempotencyKey::parse(key.as_bytes()).map_err(|e| corrupt("key", e))?,
                    since: r.try_get(1)?,
                })
            })
            .collect()
    }

    async fn claim_for_cancel(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        lease_ms: Millis,
    ) -> StoreResult<CancelClaim> {
        let mut c = self.conn().await?;
        let (m, k) = (merchant.as_ref(), key.as_ref());
        let shift = self.shift();
        for _ in 0..CLAIM_ATTEMPTS {
            let inserted = c
                .query_opt(
                    "INSERT INTO idempotency_keys
                         (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point, operation)
                     SELECT $1::text, $2::text, $3::text, now_ms, now_ms + $4, $6::bigint, 'started', 'cancelamento'
                     FROM (SELECT pagar_now_ms() + $5 AS now_ms) AS t
                     ON CONFLICT (merchant, key) DO NOTHING
                     RETURNING fence",
                    &[
                        &m,
                        &k,
                        &claim::cancelling_fingerprint().as_ref(),
                        &lease_ms,
                        &shift,
                        &claim::FIRST_FENCE,
                    ],
                )
                .await?;
            if inserted.is_some() {
                return Ok(claim::cancel_inserted());
            }
            let tx = c.transaction().await?;
            let Some(row) = tx
                .query_opt(
                    &format!(
                        "SELECT {HELD_COLUMNS_AND_REQUEST}, pagar_now_ms() + $3 AS now_ms
                         FROM idempotency_keys WHERE merchant = $1 AND key = $2 FOR UPDATE"
                    ),
                    &[&m, &k, &shift],
                )
                .await?
            else {
                tx.rollback().await?;
                continue;
            };
            let (answer, takeover) =
                claim::decide_cancel(held_from_row(&row)?, row.try_get("now_ms")?, lease_ms);
            if let Some((fence, locked_until)) = takeover {
                tx.execute(
                    "UPDATE idempotency_keys SET fence = $3, locked_until = $4
                     WHERE merchant = $1 AND key = $2",
                    &[&m, &k, &fence, &locked_until],
                )
                .await?;
            }
            tx.commit().await?;
            return Ok(answer);
        }
        Err(StoreError::Unavailable(format!(
            "a chave {k:?} mudou {CLAIM_ATTEMPTS} vezes durante o cancelamento"
        )))
    }

    async fn mark_cancelled(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool> {
        let c = self.conn().await?;
        Ok(c.execute(
            "UPDATE idempotency_keys
             SET recovery_point = 'finished', cancelled_at = now_ms, completed_at = now_ms, locked_until = 0
             FROM (SELECT pagar_now_ms() + $4 AS now_ms) AS t
             WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL",
            &[&merchant.as_ref(), &key.as_ref(), &fence, &self.shift()],
        )
        .await?
            == 1)
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

    async fn health(&self) -> StoreResult<()> {
        self.conn().await?.query_one("SELECT 1", &[]).await?;
        Ok(())
    }

    fn now_ms(&self) -> Millis {
        self.local.now_ms() + self.db_offset.load(Ordering::Relaxed) + self.shift()
    }
}
