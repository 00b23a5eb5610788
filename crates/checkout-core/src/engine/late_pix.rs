//! Pix paid late: a customer may pay a QR after the till saw it cancelled or expired (some banks
//! let it through, `bacen/pix-api#319`). The server records that money
//! (`recebido_apos_cancelamento`); this loop asks it, for every Pix this till closed unpaid in the
//! last hour (and, every thirtieth check, in the last day), and records what it says beside the
//! attempt, so the screen can tell the cashier to
//! give it back. The attempt itself stays `recusado`: the sale may have been paid another way.

use super::{now_ms, Inner};
use crate::client::Answer;
use crate::domain::{PixStatus, UnixMillis};
use crate::error::{CoreError, Result};
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
        // A Pix that could not be asked now is asked at the next pass.
        if let Err(e) = check_once(&inner, window).await {
            tracing::warn!(error = %e, "could not read the closed Pix");
        }
    }
}

/// Asks the server about every Pix this till closed in the last day (the wide window: the
/// closing and an explicit check are rare, and must not miss one). How many it recorded; a
/// check that could not ask about every one fails with [`CoreError::Unreachable`] (after
/// recording those it could), so its caller never takes "none recorded" for "none paid".
pub(super) async fn check_wide(inner: &Arc<Inner>) -> Result<usize> {
    let checked = check_once(inner, LATE_PIX_WIDE_WINDOW_MS).await?;
    if checked.unasked > 0 {
        return Err(CoreError::Unreachable(format!(
            "não foi possível consultar {} Pix encerrado(s) no servidor agora ({} pago(s) após o cancelamento registrado(s)); tente de novo",
            checked.unasked, checked.recorded
        )));
    }
    Ok(checked.recorded)
}

/// What one check came to.
#[derive(Debug, Clone, Copy)]
struct Checked {
    /// Pix it recorded as paid after the till closed them.
    recorded: usize,
    /// Pix the server could not be asked about (no answer, or not a final one).
    unasked: usize,
}

/// Asks the server once about every Pix this till closed unpaid in the last `window_ms`; records
/// each one it says was paid after all (a Pix already recorded as late is not asked about again).
async fn check_once(inner: &Arc<Inner>, window_ms: UnixMillis) -> Result<Checked> {
    let closed = inner.outbox.pix_closed_since(now_ms() - window_ms).await?;
    let mut checked = Checked {
        recorded: 0,
        unasked: 0,
    };
    for attempt in closed {
        if inner.stopped() {
            checked.unasked += 1;
            continue;
        }
        let Some(pix) = &attempt.pix else { continue };
        let Answer::Final(answer) = inner
            .client
            .waiting_status(&pix.payment_id, Duration::from_secs(1))
            .await
        else {
            checked.unasked += 1;
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
        checked.recorded += 1;
    }
    Ok(checked)
}
