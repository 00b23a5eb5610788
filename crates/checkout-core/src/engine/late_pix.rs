//! Pix paid late: a customer may pay a QR after the till saw it cancelled or expired (some banks
//! let it through, `bacen/pix-api#319`). The server records that money
//! (`recebido_apos_cancelamento`); this loop asks it, for every Pix this till closed unpaid in the
//! last hour, and records what it says beside the attempt, so the screen can tell the cashier to
//! give it back. The attempt itself stays `recusado`: the sale may have been paid another way.

use super::{now_ms, Inner};
use crate::client::Answer;
use crate::domain::{PixStatus, UnixMillis};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often closed Pix are asked about.
const LATE_PIX_RECHECK: Duration = Duration::from_secs(10);

/// How long after it closed a Pix is still asked about (the server's own window).
const LATE_PIX_WINDOW_MS: UnixMillis = 60 * 60 * 1000;

pub(super) async fn watch_late_pix(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(LATE_PIX_RECHECK) => {}
            _ = stop.changed() => return,
        }
        if inner.connectivity().is_down() {
            continue;
        }
        let closed = match inner
            .outbox
            .pix_closed_since(now_ms() - LATE_PIX_WINDOW_MS)
            .await
        {
            Ok(closed) => closed,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the closed Pix");
                continue;
            }
        };
        for attempt in closed {
            if inner.stopped() {
                return;
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
            match inner
                .outbox
                .record_late_pix(&attempt.id, &now, now_ms())
                .await
            {
                Ok((attempt, queue)) => {
                    tracing::warn!(attempt = %attempt.id, e2eid = ?now.e2eid, "Pix paid after the till closed it: recorded; give it back");
                    inner.announce(attempt, queue);
                }
                Err(e) => tracing::warn!(error = %e, "could not record a late Pix"),
            }
        }
    }
}
