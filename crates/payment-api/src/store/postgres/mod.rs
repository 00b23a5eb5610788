//! PostgreSQL store: several server processes share one database and still charge each key once.
//!
//! Claims are an `INSERT … ON CONFLICT DO NOTHING` under `UNIQUE (merchant, key)` at READ
//! COMMITTED: PostgreSQL makes a concurrent duplicate wait for the first insert and then do
//! nothing, so exactly one request starts processing. The claim's transaction commits without
//! waiting for the WAL flush (`synchronous_commit` off for it alone, `keys::CLAIM_INSERT`): the
//! completion's durable commit, later in the same WAL, makes it durable. A conflicting claim
//! then reads the row `FOR UPDATE` and decides (replay, in progress, fingerprint mismatch,
//! takeover) while it holds the row lock, so two takeovers of an expired lease cannot both win.
//! Completion is one statement: the fenced `UPDATE` of the key and the `INSERT` of the payment
//! commit together or not at all.
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

mod awaited;
mod keys;
mod machine;
mod payments;
mod pix;
mod refunds;
mod sales;

use keys::*;

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
    /// A merchant's rows of `from` (`"<columns> FROM <table>"`) whose `field` is `value`, oldest
    /// first: what every look-up by `referencia` or key reads.
    async fn rows_by(
        &self,
        from: &str,
        merchant: &MerchantId,
        field: PaymentField,
        value: &str,
    ) -> StoreResult<Vec<Row>> {
        let column = field.column();
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT {from} WHERE merchant = $1 AND {column} = $2 ORDER BY created_at, id"
            ))
            .await?;
        Ok(c.query(&st, &[&merchant.as_ref(), &value]).await?)
    }

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

    pub(crate) fn shift(&self) -> Millis {
        self.shift.load(Ordering::SeqCst)
    }

    pub(crate) async fn conn(&self) -> StoreResult<Object> {
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
                    .map(super::describe_postgres)
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

#[async_trait::async_trait]
impl Store for PgStore {
    async fn health(&self) -> StoreResult<()> {
        self.conn().await?.query_one("SELECT 1", &[]).await?;
        Ok(())
    }
}

impl Clocked for PgStore {
    fn now_ms(&self) -> Millis {
        self.local.now_ms() + self.db_offset.load(Ordering::Relaxed) + self.shift()
    }
}
