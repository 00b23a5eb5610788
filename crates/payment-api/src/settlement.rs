//! Later settlement: what moves a resource after its key's first answer, when no request asks
//! (a Pix paid while its webhook was lost, an authorization past its time). Each operation whose
//! resource settles later registers a [`Settlement`] (`AppState::settlements`); the server runs
//! every one on its own timer, and knows none of them by name.

use crate::error::Result;
use crate::metrics::Metrics;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A pass an operation's resources need from time to time, whoever asks.
#[async_trait::async_trait]
pub trait Settlement: Send + Sync + std::fmt::Debug + 'static {
    /// Its name in the logs (`pix`, `autorizacoes`).
    fn name(&self) -> &'static str;

    /// How long from the end of one pass to the next.
    fn every(&self) -> Duration;

    /// Once, when the server listens on `addr`, before and beside the first passes (telling a
    /// provider where to send webhooks, say). A failure here is the settlement's to log: the
    /// passes settle everything anyway.
    async fn begin(&self, _addr: SocketAddr) {}

    /// One pass. An error is logged and the next pass tries again.
    async fn settle_once(&self) -> Result<()>;
}

/// Starts `settlement` on this runtime: [`Settlement::begin`] beside its passes, one pass every
/// [`Settlement::every`] (the first at once), each counted in `metrics`. Aborting the handle
/// stops it.
pub fn spawn(
    settlement: Arc<dyn Settlement>,
    metrics: Arc<Metrics>,
    addr: SocketAddr,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // In the background: a slow provider never delays the first pass.
        let begin = {
            let s = settlement.clone();
            tokio::spawn(async move { s.begin(addr).await })
        };
        let mut tick = tokio::time::interval(settlement.every());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let _begin = AbortOnDrop(begin);
        loop {
            tick.tick().await;
            let pass = settlement.settle_once().await;
            metrics.settlement_pass(settlement.name(), pass.is_ok());
            if let Err(e) = pass {
                tracing::warn!(settlement = settlement.name(), error = %e, "settlement pass failed; will try again");
            }
        }
    })
}

/// Stops a task when the loop that started it stops.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
