//! Pix paid late: a customer may pay a QR after the till saw it cancelled or expired (some banks
//! let it through, `bacen/pix-api#319`). The server records that money
//! (`recebido_apos_cancelamento`); this loop asks it, for every Pix this till closed unpaid in the
//! last hour (and, every thirtieth check, in the last day), and records what it says beside the
//! attempt, so the screen can tell the cashier to
//! give it back. The attempt itself stays `recusado`: the sale may have been paid another way.

use super::{now_ms, Inner};
use crate::client::Answer;
use crate::domain::{PixStatus, UnixMillis};
use crate::error::Result;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long after it closed a Pix is asked about at every check (the server's own window).
const LATE_PIX_WINDOW_MS: UnixMillis = 60 * 60 * 1000;

/// How far back the wide checks look: the times are this till's, and a clock that was wrong by
/// up to a day when the Pix closed would hide it from the hour's window.
const LATE_PIX_WIDE_WINDOW_MS: UnixMillis = 24 * 60 * 60 * 1000;

/// Every how many checks one is wide.
const WIDE_EVERY: u32 = 30;

pub(super) async fn watch_late_pix(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    let mut pass: u32 = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(inner.config.late_pix_recheck) => {}
            _ = stop.changed() => return,
        }
        if inner.connectivity().is_down() {
            continue;
        }
        pass = pass.wrapping_add(1);
        let window = if pass.is_multiple_of(WIDE_EVERY) {
            LATE_PIX_WIDE_WINDOW_MS
        } else {
            LATE_PIX_WINDOW_MS
        };
        if let Err(e) = check_once(&inner, window).await {
            tracing::warn!(error = %e, "could not read the closed Pix");
        }
    }
}

/// Asks the server about every Pix this till closed in the last day (the wide window: the
/// closing and an explicit check are rare, and must not miss one).
pub(super) async fn check_wide(inner: &Arc<Inner>) -> Result<usize> {
    check_once(inner, LATE_PIX_WIDE_WINDOW_MS).await
}

/// Asks the server once about every Pix this till closed unpaid in the last `window_ms`; records
/// each one it says was paid after all. How many it recorded now (a Pix already recorded as late
/// is not asked about again).
async fn check_once(inner: &Arc<Inner>, window_ms: UnixMillis) -> Result<usize> {
    let closed = inner.outbox.pix_closed_since(now_ms() - window_ms).await?;
    let mut recorded = 0;
    for attempt in closed {
        if inner.stopped() {
            break;
        }
        let Some(pix) = &attempt.pix else { continue };
        let Answer::Final(answer) = inner
            .client
            .pix_status(&pix.payment_id, Duration::from_secs(1))
            .await
        else {
            continue;
        };
        let Some(now) = answer
            .pix
            .filter(|p| p.status == PixStatus::RecebidoAposCancelamento)
        else {
            continue;
        };
        let (attempt, queue) = inner
            .outbox
            .record_late_pix(&attempt.id, &now, now_ms())
            .await?;
        tracing::warn!(attempt = %attempt.id, e2eid = ?now.e2eid, "Pix paid after the till closed it: recorded; give it back");
        inner.announce(attempt, queue);
        recorded += 1;
    }
    Ok(recorded)
}
