//! The Pix charges' later settlement, run by the server like every operation's
//! ([`crate::settlement`]): every `every`, waiting charges are read from the provider (a lost
//! webhook is found here) and those past their time expired; at start and every
//! `reconcile_every`, the Pix the provider received in the last day are listed and any nobody
//! recorded is settled (paid long after its charge was closed, its webhook lost).

use super::Settler;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::settlement::Settlement;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How soon a reconciliation that failed is tried again (at most).
const RECONCILE_RETRY: Duration = Duration::from_secs(30);

/// The Pix settlement: poll, expiry, reconciliation, and the webhook's registration.
#[derive(Debug)]
pub struct PixPoll {
    settler: Arc<Settler>,
    metrics: Arc<Metrics>,
    every: Duration,
    reconcile_every: Duration,
    /// Where to ask the provider to send webhooks (`auto`: this server), if anywhere.
    webhook_url: Option<String>,
    next_reconcile: Mutex<Option<Instant>>,
}

impl PixPoll {
    /// The settlement of `settler`'s charges.
    pub fn new(
        settler: Arc<Settler>,
        metrics: Arc<Metrics>,
        every: Duration,
        reconcile_every: Duration,
        webhook_url: Option<String>,
    ) -> Self {
        Self {
            settler,
            metrics,
            every,
            reconcile_every,
            webhook_url,
            next_reconcile: Mutex::new(None),
        }
    }

    /// Reconciles when it is due; a failure is tried again sooner than the next pass, so a
    /// start while the provider is down still reconciles soon after it answers.
    async fn reconcile_if_due(&self) {
        let due = self
            .next_reconcile
            .lock()
            .expect("reconcile lock")
            .is_none_or(|at| Instant::now() >= at);
        if !due {
            return;
        }
        let next = match self.settler.reconcile().await {
            Ok(r) => {
                self.metrics.reconciled(true, r.recorded);
                if r.recorded > 0 {
                    tracing::info!(
                        listed = r.listed,
                        recorded = r.recorded,
                        "Pix reconciliation"
                    );
                }
                Instant::now() + self.reconcile_every
            }
            Err(e) => {
                self.metrics.reconciled(false, 0);
                tracing::warn!(error = %e, "Pix reconciliation failed; will try again");
                Instant::now() + self.reconcile_every.min(RECONCILE_RETRY)
            }
        };
        *self.next_reconcile.lock().expect("reconcile lock") = Some(next);
    }
}

#[async_trait::async_trait]
impl Settlement for PixPoll {
    fn name(&self) -> &'static str {
        "pix"
    }

    fn every(&self) -> Duration {
        self.every
    }

    /// Tells the provider where to send webhooks, when configured to. A provider that does not
    /// answer now is not fatal: the poll settles every charge anyway.
    async fn begin(&self, addr: SocketAddr) {
        let Some(url) = self.webhook_url.as_deref() else {
            return;
        };
        let url = if url == "auto" {
            format!("http://{addr}/webhooks")
        } else {
            url.to_string()
        };
        match self.settler.register_webhook(&url).await {
            Ok(()) => tracing::info!(%url, "Pix webhook registered at the provider"),
            Err(e) => {
                tracing::warn!(%url, error = %e, "Pix webhook not registered; the poll settles charges")
            }
        }
    }

    async fn settle_once(&self) -> Result<()> {
        self.reconcile_if_due().await;
        let r = self.settler.poll_once().await?;
        if r.recorded + r.expired + r.failed > 0 {
            tracing::info!(
                polled = r.polled,
                recorded = r.recorded,
                expired = r.expired,
                failed = r.failed,
                "Pix poll"
            );
        }
        Ok(())
    }
}
