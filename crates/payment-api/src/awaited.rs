//! Resources a customer pays after the key's first answer — a Pix charge, a card-machine order:
//! what every such operation does the same way, written once. Its key completes with the
//! resource stored beside the first answer (`aguardando`, the bytes every replay repeats); a key
//! purged and asked again, or completed by another worker, finds the resource by the provider's
//! id and answers it as a replay (another request with that key: 422).

use crate::clock::Millis;
use crate::domain::{Fingerprint, IdempotencyKey, KeyOperation, MerchantId};
use crate::error::{ApiError, Result};
use crate::idempotency::{Completed, Held, KeyResource, Recovery, ResourceState};
use crate::store::{AwaitedCompletion, AwaitedRecord, Awaiting, Lookup, Store, StoredResponse};
use std::marker::PhantomData;
use std::sync::Arc;

/// A resource a customer pays later, as the operation that made it answers it.
pub trait Awaited: AwaitedRecord + Clone {
    /// What it is, in the log line written when it is stored ("Pix charge", "card machine order").
    const WHAT: &'static str;
    /// When it was made (store clock).
    fn created_at(&self) -> Millis;
    /// The body it is answered with as it stands now.
    fn body(&self) -> Vec<u8>;
    /// Itself as first answered: `aguardando`, nothing paid, nothing decided.
    fn as_first(&self) -> Self;
    /// While a customer may still pay it, what a cancellation by key is refused with (a 409 that
    /// says what would end it); `None` once it can no longer take money.
    fn still_payable(&self) -> Option<ApiError>;
}

/// The answer of a resource as it stands (always 201: it was made).
pub fn response_for<R: Awaited>(resource: &R) -> StoredResponse {
    StoredResponse {
        status: 201,
        body: resource.body(),
    }
}

/// The first answer of a resource (`aguardando`), whatever it is now.
pub fn first_answer<R: Awaited>(resource: &R) -> StoredResponse {
    response_for(&resource.as_first())
}

/// Completes the key with the resource the provider made for it: found already stored (a key
/// purged and asked again, or completed by another worker) it is answered as a replay — or a
/// 422 to another request —; otherwise it is written with its first answer under the key's
/// fence.
pub async fn complete<R: Awaited, S: Awaiting + ?Sized>(
    held: &Held<'_>,
    store: &S,
    resource: R,
) -> Result<Completed> {
    let found = store
        .awaited_by_provider::<R>(resource.provider_id())
        .await?;
    if let Some(done) = existing(held, found).await? {
        return Ok(done);
    }
    let response = response_for(&resource);
    let (id, created_at) = (resource.owner().2.clone(), resource.created_at());
    let provider_id = resource.provider_id().to_string();
    let finished = store
        .finish_awaited(AwaitedCompletion {
            fence: held.fence,
            resource,
            response: response.clone(),
            fingerprint: held.fingerprint.clone(),
        })
        .await?;
    let done = Completed::first(finished, response, created_at);
    if matches!(done, Completed::First { .. }) {
        tracing::info!(payment = %id, provider_id, "{} stored", R::WHAT);
    }
    Ok(done)
}

/// What a recovery worker's [`complete`] of a resource made before a crash comes to.
pub fn recovered<R: Awaited>(held: &Held<'_>, done: &Completed, resource: &R) -> Recovery {
    match done {
        Completed::LeaseLost => Recovery::Nothing,
        Completed::Existing(_) => Recovery::Completed,
        Completed::First { .. } => {
            tracing::warn!(merchant = %held.merchant, key = held.key.as_ref(), provider_id = resource.provider_id(), "recovery: {} made before a crash; stored", R::WHAT);
            Recovery::Completed
        }
    }
}

/// The key's resource found already stored (`found`, with the fingerprint of the request that
/// made it): the same request gets it as a replay, another one a 422 (and the key is let go).
/// `None` when nothing was found.
async fn existing<R: Awaited>(
    held: &Held<'_>,
    found: Option<(R, Option<Fingerprint>)>,
) -> Result<Option<Completed>> {
    let Some((resource, fingerprint)) = found else {
        return Ok(None);
    };
    if fingerprint.is_some_and(|fp| fp != *held.fingerprint) {
        held.forget().await?;
        return Err(ApiError::FingerprintMismatch);
    }
    held.complete_with_existing(resource.owner().2.as_ref(), first_answer(&resource))
        .await
        .map(Some)
}

/// What a cancellation by key sees of a resource paid later (`CancelByKey::AskResource`): the
/// resource outlives its key, and only its own cancel, answered by the provider, ends it
/// ("cancelled" here would be a promise nobody keeps). Needs only the store: a server whose
/// provider is not configured still answers for the resources it made.
pub struct AwaitedKeys<R> {
    kind: KeyOperation,
    store: Arc<dyn Store>,
    resource: PhantomData<fn() -> R>,
}

impl<R> AwaitedKeys<R> {
    /// The resources the keys of operation `kind` make, in `store`.
    pub fn new(kind: KeyOperation, store: Arc<dyn Store>) -> Self {
        AwaitedKeys {
            kind,
            store,
            resource: PhantomData,
        }
    }
}

impl<R> std::fmt::Debug for AwaitedKeys<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwaitedKeys")
            .field("kind", &self.kind)
            .finish()
    }
}

#[async_trait::async_trait]
impl<R: Awaited> KeyResource for AwaitedKeys<R> {
    fn kind(&self) -> KeyOperation {
        self.kind.clone()
    }

    async fn state_for_cancel(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> Result<ResourceState> {
        let found = self
            .store
            .awaited_by::<R>(merchant, Lookup::key(key))
            .await?;
        Ok(match found.first() {
            None => ResourceState::None,
            Some(resource) => resource
                .still_payable()
                .map_or(ResourceState::Closed, ResourceState::Open),
        })
    }
}
