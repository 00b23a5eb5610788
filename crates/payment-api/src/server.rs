//! Starting and stopping a server: bind, serve, reap expired keys, shut down gracefully.

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::conn::{ConnHandle, CuttableListener};
use crate::error::{ApiError, Result};
use crate::gateway::http::HttpGateway;
use crate::gateway::simulator::{SimulatedGateway, SimulatorLedger};
use crate::gateway::Gateway;
#[cfg(feature = "postgres")]
use crate::redact::redact_url as redact;
use crate::state::AppState;
#[cfg(feature = "postgres")]
use crate::store::{PgOptions, PgStore};
use crate::store::{SqliteStore, Store};

/// A database that keeps the server's store and the gateway simulator's ledger (both
/// dialects): what the embedded default and the tests serve on.
pub trait Database: Store + SimulatorLedger {}

impl<T: Store + SimulatorLedger> Database for T {}
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A server running on this process's tokio runtime. Dropping it stops it.
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    state: AppState,
    stop: Option<oneshot::Sender<()>>,
    serve: Option<JoinHandle<std::io::Result<()>>>,
    reaper: JoinHandle<()>,
    settlements: Vec<JoinHandle<()>>,
}

impl RunningServer {
    /// The address it listens on (the real port when configured with port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Its state (store, faults, metrics).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The gateway simulator's ledger: a server started here always charges through the
    /// simulator (the tests and the benches count charges in it).
    pub fn simulator_ledger(&self) -> &Arc<dyn SimulatorLedger> {
        self.state
            .ledger()
            .expect("a server started by this module charges through the simulator")
    }

    /// Stops accepting, lets requests in flight finish, and waits for it.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(serve) = self.serve.take() {
            let _ = serve.await;
        }
    }

    /// Waits until the server stops by itself (it only does on an I/O error).
    pub async fn wait(mut self) -> Result<()> {
        match self.serve.take() {
            Some(serve) => serve
                .await
                .map_err(|e| ApiError::Startup(e.to_string()))?
                .map_err(|e| ApiError::Startup(e.to_string())),
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.reaper.abort();
        for s in &self.settlements {
            s.abort();
        }
    }
}

/// Opens the configured store (PostgreSQL when `database_url` is set, SQLite otherwise) and
/// starts serving.
pub async fn start(config: Config) -> Result<RunningServer> {
    let store = open_store(&config).await?;
    start_with_store(config, store).await
}

/// The store the configuration names, migrated and answering; a clear error when it cannot be.
pub async fn open_store(config: &Config) -> Result<Arc<dyn Database>> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::with_offset(config.clock_offset_ms));
    match &config.database_url {
        #[cfg(feature = "postgres")]
        Some(url) => open_postgres(url, config, clock).await,
        #[cfg(not(feature = "postgres"))]
        Some(_) => Err(ApiError::Startup(
            "este binário foi construído sem PostgreSQL (feature `postgres` de payment-api)".into(),
        )),
        None => {
            // An embedded sandbox holds one till's sales.
            let cache = config
                .embedded
                .then_some(durable_sqlite::SMALL_READER_CACHE_KIB);
            let store =
                SqliteStore::open_with_cache(&config.database, clock, cache).map_err(|e| {
                    ApiError::Startup(format!("banco {}: {e}", config.database.display()))
                })?;
            Ok(Arc::new(store))
        }
    }
}

/// The PostgreSQL store at `url`, migrated and answering.
#[cfg(feature = "postgres")]
async fn open_postgres(
    url: &str,
    config: &Config,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn Database>> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(ApiError::Startup(format!(
            "DATABASE_URL deve começar com postgres:// (recebido {})",
            redact(url)
        )));
    }
    let options = PgOptions {
        max_connections: config.pg_max_connections,
        ..PgOptions::default()
    };
    let store = PgStore::connect(url, options, clock)
        .await
        .map_err(|e| ApiError::Startup(format!("PostgreSQL {} inacessível: {e}", redact(url))))?;
    tracing::info!(
        url = %redact(url),
        offset_to_database_ms = store.offset_to_database_ms(),
        "store: PostgreSQL"
    );
    Ok(Arc::new(store))
}

/// The gateway the server charges through, and the simulator's ledger when it is the simulator
/// in this process (the admin routes read it; an acquirer keeps its own).
type GatewayParts = (Arc<dyn Gateway>, Option<Arc<dyn SimulatorLedger>>);

fn gateway_of(config: &Config, db: &Arc<dyn Database>) -> Result<GatewayParts> {
    if let Some(url) = &config.gateway_url {
        tracing::info!(url = %url, "gateway: the acquirer over HTTP");
        return Ok((Arc::new(HttpGateway::new(url, &config.gateway_token)), None));
    }
    let ledger: Arc<dyn SimulatorLedger> = match &config.gateway_database {
        Some(path) => {
            let clock: Arc<dyn Clock> = Arc::new(SystemClock::with_offset(config.clock_offset_ms));
            Arc::new(SqliteStore::open(path, clock).map_err(|e| {
                ApiError::Startup(format!("banco do gateway {}: {e}", path.display()))
            })?)
        }
        None => db.clone(),
    };
    let gateway = SimulatedGateway::new(
        ledger.clone(),
        Duration::from_millis(config.slow_gateway_ms),
    )
    .with_authorization_ttl(Duration::from_millis(config.authorization_ttl_ms));
    Ok((Arc::new(gateway), Some(ledger)))
}

/// Starts serving on a given database, charging through the acquirer at `--gateway-url`, or
/// else through the gateway simulator whose ledger it keeps, or keeps in a SQLite file of its own
/// with `--gateway-database` (tests pass a store with a manual clock).
pub async fn start_with_store(config: Config, db: Arc<dyn Database>) -> Result<RunningServer> {
    config.validate().map_err(ApiError::Startup)?;
    let api_keys = config.load_api_keys().map_err(ApiError::Startup)?;
    let (gateway, ledger) = gateway_of(&config, &db)?;
    let state = AppState::new(&config, api_keys, db, gateway, ledger);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| {
            ApiError::Startup(format!(
                "não foi possível escutar em {}: {e}",
                config.listen
            ))
        })?;
    let addr = listener
        .local_addr()
        .map_err(|e| ApiError::Startup(e.to_string()))?;
    let app = crate::http::app(state.clone()).into_make_service_with_connect_info::<ConnHandle>();
    let (stop, stopped) = oneshot::channel::<()>();
    let serve = tokio::spawn(async move {
        axum::serve(CuttableListener::new(listener), app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    let reaper = tokio::spawn(reap(
        state.clone(),
        Duration::from_secs(config.reaper_interval_secs.max(1)),
        config.key_retention_ms(),
        config.reaper_batch.max(1),
        i64::try_from(config.recovery_after_ms).unwrap_or(i64::MAX),
    ));
    let settlements = state
        .settlements()
        .iter()
        .map(|s| crate::settlement::spawn(s.clone(), state.metrics().clone(), addr))
        .collect();
    tracing::info!(%addr, admin = state.admin_token().is_some(), pix = state.pix().is_some(), "payment API listening");
    Ok(RunningServer {
        addr,
        state,
        stop: Some(stop),
        serve: Some(serve),
        reaper,
        settlements,
    })
}

/// Every `every`: finishes or releases executions abandoned more than `recovery_after_ms` after
/// their lease ended, and purges completed keys past their retention (what settles resources
/// later is each operation's [`crate::settlement::Settlement`]).
async fn reap(
    state: AppState,
    every: Duration,
    retention_ms: i64,
    batch: u32,
    recovery_after_ms: i64,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match state
            .runner()
            .recover_abandoned(&state.recoverers(), recovery_after_ms)
            .await
        {
            Ok(r) if r == Default::default() => {}
            Ok(r) => tracing::info!(
                completed = r.completed,
                released = r.released,
                cancelled = r.cancelled,
                failed = r.failed,
                "recovery settled abandoned executions"
            ),
            Err(e) => tracing::warn!(error = %e, "recovery failed; will try again"),
        }
        match purge_expired(&state, retention_ms, batch).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(purged = n, "reaper purged expired idempotency keys"),
            Err(e) => tracing::warn!(error = %e, "reaper failed; will try again"),
        }
    }
}

/// After each batch the reaper leaves the store to payments for this many times as long as the
/// batch took (its wait for the writer included): a backlog is purged at a tenth of the store's
/// pace at most, slower when it is busy, and a payment never queues behind more than one short
/// batch. At half (a pause as long as the batch), a purge beside replays on two busy cores took
/// its share out of theirs: their p99 went from 2 ms to 19–30 ms with every page in memory.
const REAPER_PAUSE_PER_BATCH: u32 = 9;

/// Deletes every expired key, `batch` a write (`--reaper-batch`); returns how many. On a
/// store of millions of keys each key deleted dirties a page of its own (keys are random, their
/// index entries far apart): deleted in one statement, a minute's expiry held the store's one
/// writer (SQLite) or a long transaction (PostgreSQL) for seconds while every first execution
/// waited behind it (`make bench`, the grown store); in short writes, paced, the executions'
/// own writes take turns with them (on SQLite each a background write, which the writer runs
/// only when no other write waits).
async fn purge_expired(
    state: &AppState,
    retention_ms: i64,
    batch: u32,
) -> crate::store::StoreResult<u64> {
    let mut purged = 0;
    loop {
        let asked = std::time::Instant::now();
        let n = state.store().purge_keys(retention_ms, batch).await?;
        state.metrics().purged(n);
        purged += n;
        if n == 0 {
            return Ok(purged);
        }
        tokio::time::sleep(asked.elapsed() * REAPER_PAUSE_PER_BATCH).await;
    }
}

#[cfg(all(test, not(feature = "postgres")))]
mod without_postgres {
    use super::*;

    #[tokio::test]
    async fn a_database_url_is_refused_by_a_build_without_postgres() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::sandbox(
            dir.path().join("api.db"),
            "sk_test_without_pg",
            "loja",
            "adm-token",
        );
        config.database_url = Some("postgres://postgres@127.0.0.1/pagar".into());

        let Err(refused) = open_store(&config).await else {
            panic!("a build without PostgreSQL opened a PostgreSQL store");
        };

        assert!(refused.to_string().contains("sem PostgreSQL"), "{refused}");
        assert!(
            !dir.path().join("api.db").exists(),
            "no SQLite file instead"
        );
    }
}
