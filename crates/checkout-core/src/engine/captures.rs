//! Captures and undos of authorized tenders: each decision was written ahead with its own key
//! (`Outbox::decide_captures`, `Outbox::undo_unconfirmed`); this loop sends the due ones, one at
//! a time, retrying with the same key until the server says where the authorization stands.

use super::dispatch::retry_delay;
use super::{now_ms, Connectivity, Inner};
use crate::client::CaptureAnswer;
use crate::outbox::{CaptureJob, CaptureResult};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How many due steps one pass reads.
const BATCH: usize = 16;

pub(super) async fn settle_authorizations(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    let mut probed = inner.probed.subscribe();
    tokio::select! {
        _ = probed.wait_for(|p| *p) => {}
        _ = stop.changed() => return,
    }
    loop {
        if !inner.connectivity().is_down() {
            match inner.outbox.captures_due(now_ms(), BATCH).await {
                Ok(jobs) => {
                    for job in jobs {
                        if inner.stopped() {
                            return;
                        }
                        step(&inner, job).await;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not read the authorizations due"),
            }
        }
        let sleep = match inner.outbox.next_capture_at().await {
            Ok(Some(at)) if !inner.connectivity().is_down() => {
                Duration::from_millis((at - now_ms()).clamp(0, 60_000) as u64)
            }
            _ => Duration::from_secs(60),
        };
        tokio::select! {
            // Not `inner.wake`: its one permit is the dispatcher's.
            _ = inner.captures_due.notified() => {}
            _ = tokio::time::sleep(sleep) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Sends one capture or undo and records what came of it.
async fn step(inner: &Arc<Inner>, job: CaptureJob) {
    let answer = inner.client.settle_authorization(&job).await;
    let result = match answer {
        CaptureAnswer::Settled(state) => {
            inner.observe(Connectivity::Online, None).await;
            tracing::info!(attempt = %job.id, step = ?job.step, captura = state.as_str(), "authorization settled");
            CaptureResult::Settled(state)
        }
        CaptureAnswer::Retry {
            retry_after,
            error,
            reach,
        } => {
            inner
                .observe(Connectivity::of(reach), Some(error.clone()))
                .await;
            let delay = retry_delay(
                job.tries + 1,
                inner.config.backoff_base,
                inner.config.backoff_cap,
                retry_after,
            );
            tracing::info!(attempt = %job.id, %error, "capture or undo not settled; will retry with the same key");
            CaptureResult::Retry {
                next_try_at: now_ms() + delay.as_millis() as i64,
                error,
            }
        }
    };
    match inner.outbox.record_capture(&job.id, result, now_ms()).await {
        Ok((attempt, queue)) => inner.announce(attempt, queue),
        Err(e) => {
            tracing::error!(error = %e, "could not record a capture or undo; it is sent again with the same key");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}
