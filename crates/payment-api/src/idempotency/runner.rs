//! The runner: one claim, one execution, one answer per key, whatever the operation.

use super::replay_cache::{Completed as Remembered, ReplayCache};
use super::{in_progress, Completed, Held, Operation};
use crate::clock::Millis;
use crate::domain::{BodyDigest, Fingerprint, IdempotencyKey, MerchantId};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::metrics::{Metrics, RequestOutcome};
use crate::store::{Claim, KeyStore, NextAction, StoredResponse};
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// How a request that was not refused is answered. The HTTP layer turns it into a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// This request executed the operation; the answer is durable.
    First(StoredResponse),
    /// The key completed earlier: its stored answer, to be sent again byte for byte.
    Replay(StoredResponse),
}

/// A request that passed every check that happens before execution, with its key.
#[derive(Debug)]
pub struct Keyed<R> {
    pub(crate) merchant: MerchantId,
    pub(crate) key: IdempotencyKey,
    pub(crate) fingerprint: Fingerprint,
    pub(crate) request: R,
    /// The request body as JSON bytes, kept with the claim for the recovery worker.
    body: Vec<u8>,
    /// The digest of the bytes as received, when the HTTP layer had them.
    pub(crate) digest: Option<BodyDigest>,
}

impl<R> Keyed<R> {
    /// A validated request under `key`, fingerprinted over its method, path (its scope: the same
    /// key cannot be sent to another resource) and JSON body.
    pub fn new(
        merchant: MerchantId,
        key: IdempotencyKey,
        path: &str,
        body: &serde_json::Value,
        request: R,
    ) -> Self {
        Self {
            fingerprint: Fingerprint::of("POST", path, body),
            merchant,
            key,
            request,
            body: serde_json::to_vec(body).expect("a JSON value serialises"),
            digest: None,
        }
    }

    /// Its fingerprint.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    /// The digest of the bytes it arrived as (a retry in the very same bytes is replayed before
    /// it is parsed).
    pub fn with_digest(mut self, digest: BodyDigest) -> Self {
        self.digest = Some(digest);
        self
    }
}

/// Runs operations under their keys. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Runner(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    keys: Arc<dyn KeyStore>,
    replays: ReplayCache,
    metrics: Arc<Metrics>,
    lease_ms: Millis,
}

impl Runner {
    /// A runner on `keys`, holding each key `lease_ms` before another request may take it
    /// over.
    pub fn new(
        keys: Arc<dyn KeyStore>,
        replays: ReplayCache,
        metrics: Arc<Metrics>,
        lease_ms: Millis,
    ) -> Self {
        Self(Arc::new(Inner {
            keys,
            replays,
            metrics,
            lease_ms,
        }))
    }

    /// The key table.
    pub fn keys(&self) -> &Arc<dyn KeyStore> {
        &self.0.keys
    }

    /// How long a worker holds a key.
    pub fn lease_ms(&self) -> Millis {
        self.0.lease_ms
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// Replays, refuses, or executes `keyed` exactly once with `op`.
    pub async fn run<O: Operation>(
        &self,
        op: Arc<O>,
        keyed: Keyed<O::Request>,
        faults: &Faults,
    ) -> Result<Answer> {
        faults.before_execution().await?;

        // Fast path: a completed key is replayed from memory, without queueing a write. The
        // claim below decides every other key, completed ones included: it finds them itself,
        // so a first execution reads its key once, in the write that claims it.
        let now = self.0.keys.now_ms();
        if let Some(done) = self.0.replays.get(&keyed.merchant, &keyed.key, now) {
            if done.fingerprint != keyed.fingerprint {
                return Err(ApiError::FingerprintMismatch);
            }
            if keyed.digest.is_some() && done.digest != keyed.digest {
                // The same request in other bytes (key order, spaces): remember these too.
                self.remember(&keyed, done.response.clone(), done.completed_at);
            }
            return Ok(self.replay(done.response.clone()));
        }
        // From the claim on, the work runs in its own task: a client that hangs up (a timeout,
        // a dropped Wi-Fi) must not cancel an execution halfway, or every retry would find the
        // key held by a worker that no longer exists. Its lines name the merchant and the key.
        let span =
            tracing::info_span!("execution", merchant = %keyed.merchant, key = %keyed.key.as_ref());
        let runner = self.clone();
        let faults = faults.clone();
        let task = tokio::spawn(
            async move { runner.claim_and_execute(op, keyed, &faults).await }.instrument(span),
        );
        task.await
            .map_err(|e| ApiError::Internal(format!("execution task failed: {e}")))?
    }

    async fn claim_and_execute<O: Operation>(
        &self,
        op: Arc<O>,
        keyed: Keyed<O::Request>,
        faults: &Faults,
    ) -> Result<Answer> {
        let started = Instant::now();
        let next = self
            .0
            .keys
            .claim(Claim {
                merchant: keyed.merchant.clone(),
                key: keyed.key.clone(),
                fingerprint: keyed.fingerprint.clone(),
                request: keyed.body.clone(),
                lease_ms: self.0.lease_ms,
                operation: O::KIND,
                referencia: O::referencia(&keyed.request),
            })
            .await?;
        self.metrics().store_op("claim", started);
        match next {
            NextAction::ReturnSavedResponse {
                response,
                completed_at,
            } => {
                self.remember(&keyed, response.clone(), completed_at);
                Ok(self.replay(response))
            }
            NextAction::FingerprintMismatch => Err(ApiError::FingerprintMismatch),
            NextAction::Cancelled => Err(ApiError::KeyCancelled),
            NextAction::InProgress { retry_after_ms } => Err(in_progress(retry_after_ms)),
            NextAction::StartProcessing { fence, takeover } => {
                if takeover {
                    tracing::warn!(fence, "lease expired: taking over the key");
                }
                let held = Held {
                    keys: self.0.keys.as_ref(),
                    merchant: &keyed.merchant,
                    key: &keyed.key,
                    fence,
                    fingerprint: &keyed.fingerprint,
                    request: Some(&keyed.body),
                };
                let completed = op.execute(&held, &keyed.request, faults).await?;
                self.answer(&keyed, completed, fence).await
            }
        }
    }

    /// The answer of an execution whose completion was (or, its lease lost, was not) written.
    async fn answer<R>(
        &self,
        keyed: &Keyed<R>,
        completed: Completed,
        fence: i64,
    ) -> Result<Answer> {
        match completed {
            Completed::First {
                response,
                completed_at,
            } => {
                self.remember(keyed, response.clone(), completed_at);
                self.metrics().request(RequestOutcome::first);
                Ok(Answer::First(response))
            }
            Completed::Existing(response) => {
                self.remember(keyed, response.clone(), self.0.keys.now_ms());
                Ok(self.replay(response))
            }
            Completed::LeaseLost => {
                // A retry took the key over while we ran; whatever it stored is the answer.
                tracing::warn!(fence, "lease lost: this worker's result was not written");
                match self.0.keys.lookup_key(&keyed.merchant, &keyed.key).await? {
                    Some(record) if record.cancelled => Err(ApiError::KeyCancelled),
                    Some(record) if record.response.is_some() => {
                        Ok(self.replay(record.response.expect("checked above")))
                    }
                    _ => Err(ApiError::LeaseLost),
                }
            }
        }
    }

    fn remember<R>(&self, keyed: &Keyed<R>, response: StoredResponse, completed_at: Millis) {
        self.0.replays.put(
            &keyed.merchant,
            &keyed.key,
            Remembered {
                fingerprint: keyed.fingerprint.clone(),
                digest: keyed.digest,
                response,
                completed_at,
            },
        );
    }

    /// A retry that sends the very bytes of a request this server completed (and remembers) is
    /// answered from memory before its body is parsed, validated and fingerprinted: same bytes,
    /// same fingerprint. Anything else (`None`) goes the whole way through [`Runner::run`].
    /// Faults before execution apply as they do there.
    pub async fn replay_same_bytes(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        digest: &BodyDigest,
        faults: &Faults,
    ) -> Result<Option<Answer>> {
        let now = self.0.keys.now_ms();
        match self.0.replays.get(merchant, key, now) {
            Some(done) if done.digest.as_ref() == Some(digest) => {
                faults.before_execution().await?;
                Ok(Some(self.replay(done.response.clone())))
            }
            _ => Ok(None),
        }
    }

    fn replay(&self, saved: StoredResponse) -> Answer {
        self.metrics().request(RequestOutcome::replay);
        Answer::Replay(saved)
    }
}
