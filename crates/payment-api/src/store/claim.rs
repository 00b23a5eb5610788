//! The claim decision: what a request does when the INSERT of its key found the key already
//! there. One pure function over the stored row and the store's clock, called by both stores
//! inside the transaction that holds the row, so SQLite and PostgreSQL cannot decide differently.

use super::{CancelClaim, NextAction, StoredResponse};
use crate::clock::Millis;
use crate::domain::{CancelByKey, CancelRules, Fingerprint, KeyOperation, PaymentId};

/// The fence a key gets when its INSERT wins: the first worker's token.
pub(super) const FIRST_FENCE: i64 = 1;

/// What the first claim of a key does: it executes.
pub(super) fn inserted() -> NextAction {
    NextAction::StartProcessing {
        fence: FIRST_FENCE,
        takeover: false,
    }
}

/// The stored row of a key, as the claim that lost the INSERT reads it (under its lock).
#[derive(Debug, Clone)]
pub(super) struct HeldKey {
    /// Fingerprint of the request that first claimed the key.
    pub fingerprint: Fingerprint,
    /// When the holder's lease ends (store clock).
    pub locked_until: Millis,
    /// The holder's fencing token.
    pub fence: i64,
    /// The completed answer and when it completed, if the key completed with one.
    pub response: Option<(StoredResponse, Millis)>,
    /// What the key executes.
    pub operation: KeyOperation,
    /// The key was cancelled (completed with no answer).
    pub cancelled: bool,
    /// The id a completed key's answer was stored with.
    pub payment_id: Option<PaymentId>,
    /// The request kept with the key.
    pub request: Option<Vec<u8>>,
}

/// The decision, with the write a takeover needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    /// Answer without writing anything.
    Answer(NextAction),
    /// The holder's lease ran out (it crashed or stalled): write this fence and lease, then
    /// execute. The stale worker's fence no longer matches, so it can no longer write.
    TakeOver {
        /// The new fence.
        fence: i64,
        /// The new lease's end.
        locked_until: Millis,
    },
}

impl Decision {
    /// What the caller of `claim` is told, once a takeover's write is done.
    pub fn action(&self) -> NextAction {
        match self {
            Decision::Answer(action) => action.clone(),
            Decision::TakeOver { fence, .. } => NextAction::StartProcessing {
                fence: *fence,
                takeover: true,
            },
        }
    }
}

/// How long a request is told to wait for a cancellation in progress whose lease has ended: its
/// completion is the recovery worker's, not the request's.
const CANCELLING_RETRY_MS: Millis = 1_000;

/// Decides for a request with `fingerprint`, at `now`, that would hold the key for `lease_ms`.
/// In order: a cancelled key is refused for good; a key being cancelled (not yet completed) is
/// waited for; another
/// request's key is refused (whatever its state); a completed key is replayed; a live lease is
/// waited for; an expired one is taken over.
pub(super) fn decide(
    held: HeldKey,
    fingerprint: &Fingerprint,
    now: Millis,
    lease_ms: Millis,
) -> Decision {
    if held.cancelled {
        return Decision::Answer(NextAction::Cancelled);
    }
    if held.operation == KeyOperation::CANCELAMENTO && held.response.is_none() {
        return Decision::Answer(NextAction::InProgress {
            retry_after_ms: (held.locked_until - now).max(CANCELLING_RETRY_MS),
        });
    }
    if held.fingerprint != *fingerprint {
        return Decision::Answer(NextAction::FingerprintMismatch);
    }
    if let Some((response, completed_at)) = held.response {
        return Decision::Answer(NextAction::ReturnSavedResponse {
            response,
            completed_at,
        });
    }
    if held.locked_until > now {
        return Decision::Answer(NextAction::InProgress {
            retry_after_ms: held.locked_until - now,
        });
    }
    Decision::TakeOver {
        fence: held.fence + 1,
        locked_until: now + lease_ms,
    }
}

/// What a cancellation of a key that exists does, and the takeover write it needs: the same
/// order as [`decide`], with a completed key answered by what it made and an abandoned execution
/// taken over so the gateway can be asked whether it charged.
pub(super) fn decide_cancel(
    held: HeldKey,
    now: Millis,
    lease_ms: Millis,
    rules: &CancelRules,
) -> (CancelClaim, Option<(i64, Millis)>) {
    if held.cancelled {
        return (CancelClaim::Cancelled, None);
    }
    match rules.of(&held.operation) {
        CancelByKey::NotAPayment => return (CancelClaim::NotAPayment, None),
        // Its resource was asked before the claim: a completed key answered there. Still
        // executing (or abandoned, for the recovery worker to finish), it may yet make it.
        CancelByKey::AskResource if held.response.is_none() => {
            return (
                CancelClaim::InProgress {
                    retry_after_ms: (held.locked_until - now).max(ASK_AGAIN_MS),
                },
                None,
            );
        }
        CancelByKey::AskResource => return (CancelClaim::NotAPayment, None),
        CancelByKey::VoidDownstream => {}
    }
    if held.response.is_some() {
        return (
            CancelClaim::Completed {
                payment_id: held.payment_id,
            },
            None,
        );
    }
    if held.locked_until > now {
        return (
            CancelClaim::InProgress {
                retry_after_ms: held.locked_until - now,
            },
            None,
        );
    }
    let fence = held.fence + 1;
    (
        CancelClaim::Hold {
            fence,
            operation: held.operation,
            fingerprint: held.fingerprint,
            request: held.request,
        },
        Some((fence, now + lease_ms)),
    )
}

/// How soon a cancellation of a key whose resource is still being made is worth asking again.
const ASK_AGAIN_MS: Millis = 1_000;

/// The claim of a cancellation whose INSERT won: nothing had claimed the key.
pub(super) fn cancel_inserted() -> CancelClaim {
    CancelClaim::Hold {
        fence: FIRST_FENCE,
        operation: KeyOperation::CANCELAMENTO,
        fingerprint: cancelling_fingerprint(),
        request: None,
    }
}

/// The fingerprint stored on a key a cancellation inserted: no request has it.
pub(super) fn cancelling_fingerprint() -> Fingerprint {
    Fingerprint::from_stored(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(s: &str) -> Fingerprint {
        Fingerprint::from_stored(s.into())
    }

    fn held(locked_until: Millis, response: Option<(StoredResponse, Millis)>) -> HeldKey {
        HeldKey {
            fingerprint: fp("a"),
            locked_until,
            fence: 3,
            response,
            operation: KeyOperation::PAGAMENTO,
            cancelled: false,
            payment_id: None,
            request: None,
        }
    }

    fn cancelled() -> HeldKey {
        HeldKey {
            cancelled: true,
            ..held(0, None)
        }
    }

    #[test]
    fn a_cancelled_key_refuses_every_request_whatever_its_fingerprint() {
        for f in ["a", "b", ""] {
            assert_eq!(
                decide(cancelled(), &fp(f), 1_000, 500),
                Decision::Answer(NextAction::Cancelled)
            );
        }
    }

    #[test]
    fn a_key_being_cancelled_is_waited_for_even_after_its_lease() {
        for locked_until in [5_000, 0] {
            let h = HeldKey {
                operation: KeyOperation::CANCELAMENTO,
                ..held(locked_until, None)
            };
            assert!(matches!(
                decide(h, &fp("a"), 1_000, 500),
                Decision::Answer(NextAction::InProgress { retry_after_ms }) if retry_after_ms >= 1_000
            ));
        }
    }

    #[test]
    fn a_key_a_cancellation_completed_with_a_payment_is_answered_not_waited_for() {
        let h = HeldKey {
            operation: KeyOperation::CANCELAMENTO,
            ..held(0, Some((saved(), 7)))
        };
        assert!(matches!(
            decide(h.clone(), &fp("a"), 1_000, 500),
            Decision::Answer(NextAction::ReturnSavedResponse { .. })
        ));
        assert_eq!(
            decide(h, &fp("b"), 1_000, 500),
            Decision::Answer(NextAction::FingerprintMismatch)
        );
    }

    #[test]
    fn a_cancellation_answers_what_the_key_became_and_takes_over_only_an_abandoned_one() {
        let rules = card_rules();
        assert_eq!(
            decide_cancel(cancelled(), 1_000, 500, &rules),
            (CancelClaim::Cancelled, None)
        );
        let refund = HeldKey {
            operation: KeyOperation::ESTORNO,
            ..held(0, None)
        };
        assert_eq!(
            decide_cancel(refund, 1_000, 500, &rules),
            (CancelClaim::NotAPayment, None)
        );
        let done = HeldKey {
            payment_id: Some(PaymentId::from_stored("pay_1".into())),
            ..held(0, Some((saved(), 7)))
        };
        assert_eq!(
            decide_cancel(done, 1_000, 500, &rules),
            (
                CancelClaim::Completed {
                    payment_id: Some(PaymentId::from_stored("pay_1".into()))
                },
                None
            )
        );
        assert_eq!(
            decide_cancel(held(1_300, None), 1_000, 500, &rules),
            (
                CancelClaim::InProgress {
                    retry_after_ms: 300
                },
                None
            )
        );
        let (claim, write) = decide_cancel(held(900, None), 1_000, 500, &rules);
        assert_eq!(write, Some((4, 1_500)));
        assert!(matches!(
            claim,
            CancelClaim::Hold {
                fence: 4,
                ref operation,
                ..
            } if *operation == KeyOperation::PAGAMENTO
        ));
    }

    fn card_rules() -> CancelRules {
        CancelRules::default().with(KeyOperation::PAGAMENTO, CancelByKey::VoidDownstream)
    }

    #[test]
    fn a_cancellation_follows_what_each_operation_declared() {
        let pix = KeyOperation::named("pix");
        let rules = card_rules().with(pix.clone(), CancelByKey::AskResource);
        let of = |operation: &KeyOperation, locked_until, response| HeldKey {
            operation: operation.clone(),
            ..held(locked_until, response)
        };
        // Undeclared: not a payment, whatever its state.
        let boleto = KeyOperation::named("boleto");
        assert_eq!(
            decide_cancel(of(&boleto, 0, None), 1_000, 500, &rules),
            (CancelClaim::NotAPayment, None)
        );
        // Asked of its resource: never taken over to be voided; in progress until it made it.
        assert_eq!(
            decide_cancel(of(&pix, 1_300, None), 1_000, 500, &rules),
            (
                CancelClaim::InProgress {
                    retry_after_ms: 1_000
                },
                None
            )
        );
        assert_eq!(
            decide_cancel(of(&pix, 900, None), 1_000, 500, &rules),
            (
                CancelClaim::InProgress {
                    retry_after_ms: 1_000
                },
                None
            )
        );
        assert_eq!(
            decide_cancel(of(&pix, 0, Some((saved(), 7))), 1_000, 500, &rules),
            (CancelClaim::NotAPayment, None)
        );
        // The same Pix key, declared as a card would be, is voided downstream.
        let voided = card_rules().with(pix.clone(), CancelByKey::VoidDownstream);
        assert!(matches!(
            decide_cancel(of(&pix, 900, None), 1_000, 500, &voided).0,
            CancelClaim::Hold { .. }
        ));
    }

    fn saved() -> StoredResponse {
        StoredResponse {
            status: 201,
            body: b"{}".to_vec(),
        }
    }

    #[test]
    fn another_request_under_the_key_is_a_mismatch_whatever_the_key_state() {
        for h in [
            held(2_000, None),
            held(0, None),
            held(0, Some((saved(), 7))),
        ] {
            assert_eq!(
                decide(h, &fp("b"), 1_000, 500),
                Decision::Answer(NextAction::FingerprintMismatch)
            );
        }
    }

    #[test]
    fn a_completed_key_is_replayed_even_with_its_lease_long_gone() {
        assert_eq!(
            decide(held(0, Some((saved(), 7))), &fp("a"), 1_000, 500),
            Decision::Answer(NextAction::ReturnSavedResponse {
                response: saved(),
                completed_at: 7
            })
        );
    }

    #[test]
    fn a_live_lease_is_in_progress_for_the_time_it_has_left() {
        assert_eq!(
            decide(held(1_300, None), &fp("a"), 1_000, 500),
            Decision::Answer(NextAction::InProgress {
                retry_after_ms: 300
            })
        );
    }

    #[test]
    fn a_lease_that_ended_is_taken_over_with_the_next_fence() {
        for locked_until in [1_000, 999, 0] {
            let d = decide(held(locked_until, None), &fp("a"), 1_000, 500);
            assert_eq!(
                d,
                Decision::TakeOver {
                    fence: 4,
                    locked_until: 1_500
                }
            );
            assert_eq!(
                d.action(),
                NextAction::StartProcessing {
                    fence: 4,
                    takeover: true
                }
            );
        }
    }

    #[test]
    fn the_first_claim_executes_with_the_first_fence() {
        assert_eq!(
            inserted(),
            NextAction::StartProcessing {
                fence: FIRST_FENCE,
                takeover: false
            }
        );
    }
}
