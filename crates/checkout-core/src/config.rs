//! Engine configuration, with defaults a store can run on.

use std::time::Duration;

/// How the engine reaches the payment API and how patient it is.
#[derive(Debug, Clone)]
pub struct Config {
    /// Base URL of the payment API, e.g. `http://127.0.0.1:8080`.
    pub api_url: String,
    /// Bearer API key of this store's merchant.
    pub api_key: String,
    /// Time to establish a TCP connection before the try counts as offline. Default 3 s.
    pub connect_timeout: Duration,
    /// Time for a whole request before it is abandoned and retried with the same key. Default 15 s.
    pub request_timeout: Duration,
    /// First retry delay ceiling; doubles per try (full jitter). Default 500 ms.
    pub backoff_base: Duration,
    /// Largest retry delay ceiling. Default 30 s.
    pub backoff_cap: Duration,
    /// How often `/health` is probed while offline. Default 2 s.
    pub probe_interval: Duration,
    /// Requests in flight at once across attempts (one per key, always). Default 8.
    pub max_in_flight: usize,
    /// While offline, refuse a payment above this many centavos. Default R$ 1.000,00.
    pub offline_max_per_payment: Option<i64>,
    /// While offline, refuse a payment that would make the waiting total pass this. Default R$ 5.000,00.
    pub offline_max_total: Option<i64>,
    /// How long the server keeps idempotency keys (its `--key-retention-secs`). Default 24 h.
    pub server_key_retention: Duration,
    /// Safety margin: attempts older than retention minus this are looked up by `referencia` before
    /// being sent again. Default 1 h.
    pub retention_margin: Duration,
    /// How long a write waits for another process's lock before `pay` fails. Default 2 s.
    pub busy_timeout: Duration,
    /// Cap on the outbox's size in bytes: past it new payments are refused as "disk full", while
    /// up to as much again stays free to record the outcomes of stored attempts. `None`: no cap.
    pub max_outbox_bytes: Option<u64>,
}

impl Config {
    /// Defaults for an API at `api_url` with `api_key`.
    pub fn new(api_url: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self {
            api_url: api_url.into().trim_end_matches('/').to_string(),
            api_key: api_key.into(),
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(15),
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(30),
            probe_interval: Duration::from_secs(2),
            max_in_flight: 8,
            offline_max_per_payment: Some(100_000),
            offline_max_total: Some(500_000),
            server_key_retention: Duration::from_secs(24 * 3600),
            retention_margin: Duration::from_secs(3600),
            busy_timeout: Duration::from_secs(2),
            max_outbox_bytes: None,
        }
    }

    /// Age after which an attempt is looked up before it is sent again.
    pub fn lookup_after(&self) -> Duration {
        self.server_key_retention
            .saturating_sub(self.retention_margin)
    }
}
