//! Brandur Leach's "completer": finishes executions abandoned after a crash without waiting for
//! the client to retry. A key still `started` whose lease ended more than `stale_ms` ago is taken
//! over (a new fence, so a worker that is only late can no longer write), then settled by the
//! operation that claimed it ([`Operation::recover`]). A key that fails is logged and counted,
//! and the pass goes on.

use super::{Held, Operation, Runner};
use crate::clock::Millis;
use crate::domain::KeyOperation;
use crate::error::Result;

/// What settling one abandoned key did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Its outcome (found at the gateway) is stored, and its answer replayable.
    Completed,
    /// Nothing happened at the gateway: the key is released for the client's retry.
    Released,
    /// The key is void: it never executed and now never will.
    Cancelled,
    /// Nothing to do (another worker settled it meanwhile).
    Nothing,
}

/// What one pass of the recovery worker did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// Abandoned keys whose outcome was found and is now stored.
    pub completed: u64,
    /// Abandoned keys the gateway never executed, released for the client's next try.
    pub released: u64,
    /// Abandoned keys made void (a cancellation finished, or never executed and too old).
    pub cancelled: u64,
    /// Keys that could not be settled in this pass (logged with the key; the next pass tries
    /// again). One never stops the pass.
    pub failed: u64,
}

/// What the recovery worker asks of an operation: the [`Operation`]s, and the cancellation by
/// key, which claims keys without a request of its own.
#[async_trait::async_trait]
pub trait Recover: Send + Sync {
    /// The operation name its keys record.
    fn kind(&self) -> KeyOperation;
    /// Settles an abandoned key taken over under `held.fence`.
    async fn recover(&self, held: &Held<'_>, created_at: Millis) -> Result<Recovery>;
}

#[async_trait::async_trait]
impl<O: Operation> Recover for O {
    fn kind(&self) -> KeyOperation {
        O::KIND
    }

    async fn recover(&self, held: &Held<'_>, created_at: Millis) -> Result<Recovery> {
        Operation::recover(self, held, created_at).await
    }
}

impl Runner {
    /// One pass over the keys abandoned more than `stale_ms` ago (at most 100), each settled by
    /// the one of `operations` that claimed it. A key of an operation not in the list (a newer
    /// replica's) is left alone for a replica that knows it.
    pub async fn recover_abandoned(
        &self,
        operations: &[&dyn Recover],
        stale_ms: Millis,
    ) -> Result<Recovered> {
        let mut done = Recovered::default();
        for a in self.keys().abandoned(stale_ms, 100).await? {
            let Some(op) = operations.iter().find(|op| op.kind() == a.operation) else {
                tracing::warn!(merchant = %a.merchant, key = a.key.as_ref(), operation = %a.operation, "recovery: an operation this server does not know; left to a replica that does");
                continue;
            };
            let settled = async {
                let Some(fence) = self
                    .keys()
                    .take_over(&a.merchant, &a.key, a.fence, self.lease_ms())
                    .await?
                else {
                    return Ok(Recovery::Nothing); // a client retry got there first
                };
                let held = Held {
                    keys: self.keys().as_ref(),
                    merchant: &a.merchant,
                    key: &a.key,
                    fence,
                    fingerprint: &a.fingerprint,
                    request: a.request.as_deref(),
                };
                op.recover(&held, a.created_at).await
            }
            .await;
            let status = match settled {
                Ok(Recovery::Completed) => {
                    done.completed += 1;
                    "completed"
                }
                Ok(Recovery::Released) => {
                    done.released += 1;
                    "released"
                }
                Ok(Recovery::Cancelled) => {
                    done.cancelled += 1;
                    "cancelled"
                }
                Ok(Recovery::Nothing) => continue,
                Err(e) => {
                    // The next pass tries it again; say which key and the store's own words.
                    tracing::warn!(merchant = %a.merchant, key = a.key.as_ref(), operation = %a.operation, error = ?e, "recovery: could not settle this key now; going on with the others");
                    done.failed += 1;
                    self.metrics().recovered("failed");
                    continue;
                }
            };
            tracing::info!(merchant = %a.merchant, key = a.key.as_ref(), operation = %a.operation, status, "recovery: abandoned key settled");
            self.metrics().recovered(status);
        }
        Ok(done)
    }
}
