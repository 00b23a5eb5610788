//! Pix paid late: a customer may pay a QR after the till saw it cancelled or expired (some banks
//! let it through, `bacen/pix-api#319`). The server records that money
//! (`recebido_apos_cancelamento`); this loop asks it, for every Pix this till closed unpaid in the
//! last hour, and records what it says beside the attempt, so the screen can tell the cashier to
//! give it back. The attempt itself stays `recusado`: the sale may have been paid another way.

use super::{now_ms, Inner};
use crate::client::Answer;
use crate::domain::{PixStatus, UnixMillis};
use crate::error::Result;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long after it closed a Pix is still asked about (the server's own window).
const LATE_PIX_WINDOW_MS: UnixMillis = 60 * 60 * 1000;

pub(super) async fn watch_late_pix(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(inner.config.late_pix_recheck) => {}
            _ = stop.changed() => return,
        }
        if inner.connectivity().is_down() {
            continue;
        }
        if let Err(e) = check_once(&inner).await {
            tracing::warn!(error = %e, "could not read the closed Pix");
        }
    }
}

/// Asks the server once about every Pix this till closed unpaid in the last hour; records each
/// one it says was paid after all. How many it recorded now (a Pix already recorded as late is
/// not counted again).
pub(super) async fn check_once(inner: &Arc<Inner>) -> Result<usize> {
    let closed = inner
        .outbox
        .pix_closed_since(now_ms() - LATE_PIX_WINDOW_MS)
        .await?;
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
