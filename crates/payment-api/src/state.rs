//! State shared by every request of one server.

use crate::config::Config;
use crate::domain::MerchantId;
use crate::faults::Faults;
use crate::gateway::Gateway;
use crate::metrics::Metrics;
use crate::replay_cache::ReplayCache;
use crate::store::Store;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Cheap to clone; every clone sees the same store, faults and metrics.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

struct Shared {
    store: Arc<dyn Store>,
    gateway: Arc<dyn Gateway>,
    api_keys: HashMap<String, MerchantId>,
    admin_token: Option<String>,
    faults: RwLock<Faults>,
    metrics: Metrics,
    replays: ReplayCache,
    lease_ms: i64,
    key_retention_secs: u64,
    max_body_bytes: usize,
    max_header_bytes: usize,
    body_timeout: std::time::Duration,
    embedded: bool,
    cors_origins: String,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The API keys and the admin token are credentials: only their count and presence show.
        f.debug_struct("AppState")
            .field("store", &self.store)
            .field("gateway", &self.gateway)
            .field(
                "api_keys",
                &format_args!("{} keys (***)", self.api_keys.len()),
            )
            .field("admin_token", &self.admin_token.as_ref().map(|_| "***"))
            .field("lease_ms", &self.lease_ms)
            .field("key_retention_secs", &self.key_retention_secs)
            .field("embedded", &self.embedded)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// Builds the state from a configuration and its parts.
    pub fn new(
        config: &Config,
        api_keys: HashMap<String, MerchantId>,
        store: Arc<dyn Store>,
        gateway: Arc<dyn Gateway>,
    ) -> Self {
        Self(Arc::new(Shared {
            store,
            gateway,
            api_keys,
            admin_token: config.admin_token.clone().filter(|t| !t.is_empty()),
            faults: RwLock::new(config.faults.clone()),
            metrics: Metrics::default(),
            replays: ReplayCache::new(config.replay_cache_entries, config.key_retention_ms()),
            lease_ms: i64::try_from(config.lease_ms).unwrap_or(i64::MAX),
            key_retention_secs: config.key_retention_secs,
            max_body_bytes: config.max_body_bytes,
            max_header_bytes: config.max_header_bytes,
            body_timeout: std::time::Duration::from_millis(config.body_timeout_ms),
            embedded: config.embedded,
            cors_origins: config.cors_origins.clone(),
        }))
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.0.store
    }

    /// The gateway.
    pub fn gateway(&self) -> &Arc<dyn Gateway> {
        &self.0.gateway
    }

    /// The merchant an API key belongs to.
    pub fn merchant_for(&self, api_key: &str) -> Option<MerchantId> {
        self.0.api_keys.get(api_key).cloned()
    }

    /// The admin token, when admin routes are on.
    pub fn admin_token(&self) -> Option<&str> {
        self.0.admin_token.as_deref()
    }

    /// A snapshot of the fault profile.
    pub fn faults(&self) -> Faults {
        self.0.faults.read().expect("faults lock").clone()
    }

    /// Replaces the fault profile.
    pub fn set_faults(&self, faults: Faults) {
        *self.0.faults.write().expect("faults lock") = faults;
    }

    /// Metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// Completed responses kept in memory for fast replays.
    pub fn replays(&self) -> &ReplayCache {
        &self.0.replays
    }

    /// Lease length in milliseconds.
    pub fn lease_ms(&self) -> i64 {
        self.0.lease_ms
    }

    /// How long completed keys are kept (advertised in `GET /health` for clients).
    pub fn key_retention_secs(&self) -> u64 {
        self.0.key_retention_secs
    }

    /// Body limit.
    pub fn max_body_bytes(&self) -> usize {
        self.0.max_body_bytes
    }

    /// Longest time to receive a request body.
    pub fn body_timeout(&self) -> std::time::Duration {
        self.0.body_timeout
    }

    /// Web origins allowed by CORS (`*`, a list, or empty).
    pub fn cors_origins(&self) -> &str {
        &self.0.cors_origins
    }

    /// True inside another process (the app's sandbox).
    pub fn embedded(&self) -> bool {
        self.0.embedded
    }

    /// Header limit.
    pub fn max_header_bytes(&self) -> usize {
        self.0.max_header_bytes
    }
}
