//! The claim decision: what a request does when the INSERT of its key found the key already
//! there. One pure function over the stored row and the store's clock, called by both stores
//! inside the transaction that holds the row, so SQLite and PostgreSQL cannot decide differently.

use super::{NextAction, StoredResponse};
use crate::clock::Millis;
use crate::domain::Fingerprint;

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
    /// The completed answer and when it completed, if the key completed.
    pub response: Option<(StoredResponse, Millis)>,
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

/// Decides for a request with `fingerprint`, at `now`, that would hold the key for `lease_ms`.
/// In order: another request's key is refused (whatever its state); a completed key is replayed;
/// a live lease is waited for; an expired one is taken over.
pub(super) fn decide(
    held: HeldKey,
    fingerprint: &Fingerprint,
    now: Millis,
    lease_ms: Millis,
) -> Decision {
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
        }
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
