//! Idempotency keys: the only code that claims, fences, completes and replays them.
//!
//! A money operation (a payment, a refund, and whatever comes next) is an [`Operation`]: its
//! validated request, its execution against the gateway under the fence, its recovery after a
//! crash. The [`Runner`] does the rest, the same for every operation (after Brandur Leach's
//! rocket-rides-atomic), each phase its own transaction:
//!
//! 1. **claim** — INSERT the key under `UNIQUE (merchant, key)` with a lease and a fencing token,
//!    recording which operation it is for, or learn from the existing row what to do instead
//!    (replay, refuse, wait, take over: `store::claim::decide`);
//! 2. **execute** — the operation calls the gateway under a downstream key derived from
//!    (merchant, key), so a takeover after a crash gets the earlier result instead of a second;
//! 3. **complete** — the operation writes its resource and the answer in one transaction, only if
//!    its fence still holds the key.
//!
//! The first answer is the replay, byte for byte, for as long as the key is kept. An operation
//! whose resource settles later (a charge answered *waiting*) answers that first state once; the
//! resource's later state is read from the resource, never from a replay.

mod recovery;
pub mod replay_cache;
mod runner;

pub use recovery::{Recover, Recovered, Recovery};
pub use runner::{Answer, Keyed, Runner};

use crate::clock::Millis;
use crate::domain::{CancelByKey, Fingerprint, IdempotencyKey, KeyOperation, MerchantId};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::store::{FinishOutcome, KeyAnswer, KeyStore, StoredResponse};

/// A money operation executed under an idempotency key. Implement it, give it a migration for
/// its resource and a route that calls [`Runner::run`], and add it to the recovery worker's list
/// ([`Runner::recover_abandoned`]): nothing else changes.
#[async_trait::async_trait]
pub trait Operation: Send + Sync + 'static {
    /// Its request, validated (fingerprinted by [`Keyed::new`] before it gets here).
    type Request: Send + Sync + 'static;

    /// The name the key row records (`[a-z_]`).
    const KIND: KeyOperation;

    /// What a cancellation by key does to a key it claimed (`crate::cancel`): not a payment
    /// unless the operation says otherwise.
    const CANCEL_BY_KEY: CancelByKey = CancelByKey::NotAPayment;

    /// The `referencia` a look-up by reference sees the execution by while it runs.
    fn referencia(_request: &Self::Request) -> Option<String> {
        None
    }

    /// Executes a key this request claimed (or took over) under `held.fence`, and completes it:
    /// its resource and its answer in one fenced write. A refusal that stores nothing frees the
    /// key first ([`Held::forget`]); a failure before anything happened releases it
    /// ([`Held::release`]) so the retry need not wait for the lease.
    async fn execute(
        &self,
        held: &Held<'_>,
        request: &Self::Request,
        faults: &Faults,
    ) -> Result<Completed>;

    /// Settles a key whose worker died mid-execution, taken over under `held.fence` with the
    /// request kept with it (`held.request`): roll forward with what the gateway says of its
    /// downstream key, never a second execution of the same key.
    async fn recover(&self, held: &Held<'_>, created_at: Millis) -> Result<Recovery>;
}

/// The resource of an operation whose [`CancelByKey`] is `AskResource`: what a cancellation by
/// key sees of it, asked before the key's claim (`crate::cancel`).
#[async_trait::async_trait]
pub trait KeyResource: Send + Sync + std::fmt::Debug {
    /// The operation whose keys make this resource.
    fn kind(&self) -> KeyOperation;

    /// Where the resource `key` made stands, for a cancellation of the key.
    async fn state_for_cancel(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> Result<ResourceState>;
}

/// What a key's resource says to a cancellation by key.
#[derive(Debug)]
pub enum ResourceState {
    /// The key made none: the key's claim decides.
    None,
    /// It can still take money: the cancellation is refused with this (a 409 that says what
    /// would end it).
    Open(ApiError),
    /// It can no longer take money and took none: not a payment key (422).
    Closed,
}

/// A key some worker holds under `fence`, with what was claimed with it, and the key-table
/// operations the holder may do.
pub struct Held<'a> {
    pub(crate) keys: &'a dyn KeyStore,
    /// Owner of the key.
    pub merchant: &'a MerchantId,
    /// The key.
    pub key: &'a IdempotencyKey,
    /// The fencing token: only writes carrying it are accepted.
    pub fence: i64,
    /// The fingerprint of the request that claimed the key.
    pub fingerprint: &'a Fingerprint,
    /// The request kept with the key (none for a key a cancellation claimed).
    pub request: Option<&'a [u8]>,
}

impl Held<'_> {
    /// Ends the lease early: nothing happened at the gateway, and the retry takes the key over
    /// at once.
    pub async fn release(&self) -> Result<()> {
        Ok(self
            .keys
            .release(self.merchant, self.key, self.fence)
            .await?)
    }

    /// Deletes the key: nothing was or will be stored for it (a refusal, like a validation
    /// error). False when the fence no longer holds it.
    pub async fn forget(&self) -> Result<bool> {
        Ok(self
            .keys
            .forget(self.merchant, self.key, self.fence)
            .await?)
    }

    /// Completes the key with its first answer, for an operation whose resource is kept outside
    /// this database (at a provider, say): the key records the resource's id and the answer,
    /// replayed from now on; the resource's later state is read from the resource.
    pub async fn complete(&self, resource: &str, response: StoredResponse) -> Result<Completed> {
        let finished = self.write_answer(resource, &response).await?;
        Ok(Completed::first(finished, response, self.now_ms()))
    }

    /// Completes the key with the answer of a resource made before (`resource`: its id; the key
    /// was purged and the same request came again): a replay, and nothing else moves.
    pub async fn complete_with_existing(
        &self,
        resource: &str,
        response: StoredResponse,
    ) -> Result<Completed> {
        Ok(match self.write_answer(resource, &response).await? {
            FinishOutcome::Stored => Completed::Existing(response),
            FinishOutcome::LeaseLost => Completed::LeaseLost,
        })
    }

    /// Completes the key with `response` and the id of `resource`, if the fence still holds it.
    async fn write_answer(
        &self,
        resource: &str,
        response: &StoredResponse,
    ) -> Result<FinishOutcome> {
        Ok(self
            .keys
            .finish_existing(KeyAnswer {
                merchant: self.merchant.clone(),
                key: self.key.clone(),
                fence: self.fence,
                resource: resource.to_string(),
                response: response.clone(),
            })
            .await?)
    }

    /// Marks the key cancelled (completed with no answer: it can never execute). False when the
    /// fence no longer holds it.
    pub async fn mark_cancelled(&self) -> Result<bool> {
        Ok(self
            .keys
            .mark_cancelled(self.merchant, self.key, self.fence)
            .await?)
    }

    /// The store's clock.
    pub fn now_ms(&self) -> Millis {
        self.keys.now_ms()
    }
}

/// How an execution ended for the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completed {
    /// The operation wrote its resource and this answer under the fence: the first answer,
    /// replayed from now on.
    First {
        /// The answer.
        response: StoredResponse,
        /// When it was written (store clock).
        completed_at: Millis,
    },
    /// The key completed with the answer of a resource made before: a replay.
    Existing(StoredResponse),
    /// Another worker took the key over meanwhile; nothing was written.
    LeaseLost,
}

impl Completed {
    /// What a fenced write of the first answer came to.
    pub fn first(finished: FinishOutcome, response: StoredResponse, completed_at: Millis) -> Self {
        match finished {
            FinishOutcome::Stored => Completed::First {
                response,
                completed_at,
            },
            FinishOutcome::LeaseLost => Completed::LeaseLost,
        }
    }
}

/// A 409 for a key another worker holds, with the seconds to wait.
pub fn in_progress(retry_after_ms: Millis) -> ApiError {
    ApiError::KeyInProgress {
        retry_after_secs: u64::try_from((retry_after_ms + 999) / 1000)
            .unwrap_or(1)
            .max(1),
    }
}
