//! Attempts in `revisao`: looked up by `referencia` until something settles them, and, before a
//! sale in doubt gets a new key or is given up, their key cancelled on the server.

use super::{now_ms, Inner};
use crate::client::{Answer, Cancelled};
use crate::outbox::Attempt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What a lookup by `referencia` said of an attempt in `revisao`.
pub(super) enum ReviewCheck {
    /// The server has a payment for it: the attempt now carries that result.
    Settled(Box<Attempt>),
    /// The server has none (recorded), and nothing of it in progress.
    NoPayment,
    /// The server cancelled its key: it never charged (recorded as `recusado`).
    Cancelled,
    /// The server could not be asked or did not say.
    Unknown(String),
}

/// What the outbox recorded for an attempt in review, with what to tell the caller.
type Recorded = crate::error::Result<(ReviewCheck, Attempt, crate::outbox::QueueSummary)>;

impl Inner {
    /// Settles an attempt in review with the payment the server has for it.
    async fn settle_from(&self, attempt: &Attempt, found: crate::outbox::FinalAnswer) -> Recorded {
        self.outbox
            .settle_review(&attempt.id, found, now_ms())
            .await
            .map(|(a, q)| (ReviewCheck::Settled(Box::new(a.clone())), a, q))
    }

    /// Announces what was recorded, and says what it came to.
    fn told(&self, recorded: Recorded) -> ReviewCheck {
        match recorded {
            Ok((check, a, q)) => {
                self.announce(a, q);
                check
            }
            Err(e) => ReviewCheck::Unknown(e.to_string()),
        }
    }

    /// Asks the server whether it has a payment for an attempt in `revisao` and records the
    /// answer: a payment found settles the attempt, none found marks it checked.
    pub(super) async fn resolve_review(&self, attempt: &Attempt) -> ReviewCheck {
        let recorded = match self
            .client
            .find(&attempt.target(), attempt.id.as_ref())
            .await
        {
            Ok(Some(Answer::Final(found))) => {
                tracing::warn!(attempt = %attempt.id, payment = ?found.payment_id, "attempt in review did reach the server: settled from its payment");
                self.settle_from(attempt, found).await
            }
            // Checked before: nothing to record again.
            Ok(None) if attempt.review_checked_at.is_some() => return ReviewCheck::NoPayment,
            Ok(None) => self
                .outbox
                .mark_review_checked(&attempt.id, now_ms())
                .await
                .map(|(a, q)| (ReviewCheck::NoPayment, a, q)),
            Ok(Some(Answer::Retry { error, .. } | Answer::Review { reason: error, .. }))
            | Err(Answer::Retry { error, .. } | Answer::Review { reason: error, .. }) => {
                return ReviewCheck::Unknown(error)
            }
            Ok(Some(Answer::PixWaiting(_))) | Err(Answer::PixWaiting(_)) => {
                return ReviewCheck::Unknown(
                    "o Pix desta tentativa ainda aguarda o pagamento do cliente".into(),
                )
            }
            Ok(Some(Answer::MachineWaiting(_))) | Err(Answer::MachineWaiting(_)) => {
                return ReviewCheck::Unknown(
                    "o pedido desta tentativa ainda está na maquininha".into(),
                )
            }
            Err(Answer::Final(_)) => return ReviewCheck::Unknown("resposta inesperada".into()),
        };
        self.told(recorded)
    }

    /// Settles a payment attempt in `revisao` for good before its sale is paid another way or
    /// given up: looked up first (a payment found settles it), then, with no payment and nothing
    /// in progress on the server, its key is cancelled there, so the old key can never charge
    /// once a new one exists. A refund in review is only looked up.
    pub(super) async fn settle_doubt(&self, attempt: &Attempt) -> ReviewCheck {
        match self.resolve_review(attempt).await {
            ReviewCheck::NoPayment if !attempt.is_refund() => {}
            other => return other,
        }
        let recorded = match self
            .client
            .cancel(&attempt.idempotency_key, attempt.id.as_ref(), attempt.valor)
            .await
        {
            Ok(Cancelled::NeverCharged) => {
                tracing::info!(attempt = %attempt.id, "key cancelled on the server: it never charged");
                self.outbox
                    .record_key_cancelled(&attempt.id, now_ms())
                    .await
                    .map(|(a, q)| (ReviewCheck::Cancelled, a, q))
            }
            Ok(Cancelled::Charged(found)) => {
                tracing::warn!(attempt = %attempt.id, payment = ?found.payment_id, "cancelling the key found its payment: settled from it");
                self.settle_from(attempt, *found).await
            }
            Err(Answer::Retry { error, .. } | Answer::Review { reason: error, .. }) => {
                return ReviewCheck::Unknown(format!("cancelamento da chave: {error}"))
            }
            Err(Answer::Final(_) | Answer::PixWaiting(_) | Answer::MachineWaiting(_)) => {
                return ReviewCheck::Unknown("resposta inesperada".into())
            }
        };
        self.told(recorded)
    }
}

/// How often attempts in `revisao` that could not be checked are looked up again.
const REVIEW_RECHECK: Duration = Duration::from_secs(5);

/// Checks attempts in `revisao` against the server by `referencia`, every one of them, at start,
/// whenever one is added, the server comes back, and every [`REVIEW_RECHECK`], until a payment
/// found or a cancelled key settles it: "no payment" is true only until something charges, so a
/// review is never checked once and forgotten.
pub(super) async fn check_reviews(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    loop {
        if !inner.connectivity().is_down() {
            match inner.outbox.reviews(false).await {
                Ok(reviews) => {
                    for review in reviews {
                        if inner.stopped() {
                            return;
                        }
                        if let ReviewCheck::Unknown(why) = inner.resolve_review(&review).await {
                            tracing::info!(attempt = %review.id, %why, "review not checked yet");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not read the reviews"),
            }
        }
        tokio::select! {
            _ = inner.reviews_due.notified() => {}
            _ = tokio::time::sleep(REVIEW_RECHECK) => {}
            _ = stop.changed() => return,
        }
    }
}
