//! Connectivity: `/health` probed once at start and then, while the server cannot be used, until
//! it answers.

use super::{Connectivity, Inner};
use crate::client::Health;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::watch;

impl Inner {
    /// Probes `/health` once and records what it says.
    pub(super) async fn probe_once(&self) {
        let Health {
            reach,
            problem,
            key_retention,
        } = self.client.health().await;
        if let Some(r) = key_retention {
            self.advertised_retention
                .store(r.as_secs().max(1), Ordering::SeqCst);
        }
        self.observe(Connectivity::of(reach), problem).await;
    }
}

/// Probes `/health` once at start (so the till knows within a probe timeout whether it is online
/// and learns the server's key retention), then, whenever the engine goes offline, probes until
/// the server answers.
pub(super) async fn probe(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    tokio::select! {
        _ = inner.probe_once() => {}
        _ = stop.changed() => return,
    }
    inner.probed.send_replace(true);
    while !inner.stopped() {
        if inner.connectivity().is_down() {
            inner.went_offline.notify_one(); // went down before this loop waited
        }
        tokio::select! {
            _ = inner.went_offline.notified() => {}
            _ = stop.changed() => return,
        }
        while inner.connectivity().is_down() {
            tokio::select! {
                _ = tokio::time::sleep(inner.config.probe_interval) => {}
                _ = stop.changed() => return,
            }
            tokio::select! {
                _ = inner.probe_once() => {}
                _ = stop.changed() => return,
            }
        }
    }
}
