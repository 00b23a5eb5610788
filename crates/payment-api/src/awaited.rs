//! Resources a customer pays after the key's first answer — a Pix charge, a card-machine order:
//! what every such operation does the same way, written once. Its key completes with the
//! resource stored beside the first answer (`aguardando`, the bytes every replay repeats); a key
//! purged and asked again, or completed by another worker, finds the resource by the provider's
//! id and answers it as a replay (another request with that key: 422).

use crate::domain::{
    FieldError, Fingerprint, IdempotencyKey, KeyOperation, MerchantId, PaymentAsk,
};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::idempotency::{Completed, Held, KeyResource, Recovery, ResourceState};
use crate::store::{
    AwaitedCompletion, AwaitedRecord, Awaiting, Lookup, SaleStore, Store, StoredResponse,
};
use std::marker::PhantomData;
use std::sync::Arc;

/// A resource a customer pays later, as the operation that made it answers it.
pub trait Awaited: AwaitedRecord + Clone {
    /// What it is, in the log line written when it is stored ("Pix charge", "card machine order").
    const WHAT: &'static str;
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

/// What a request for a resource paid later asks besides its own fields: which part of which
/// divided sale it pays (held before the provider is asked), and the field a refusal names.
pub struct Making<'a> {
    /// What the request asks as every payment does (its sale part among it).
    pub ask: &'a PaymentAsk,
    /// The request field a provider's refusal is reported on (`""`: the whole body).
    pub field: &'static str,
    /// What a refusal says was refused ("o provedor Pix recusou a cobrança").
    pub refused: &'static str,
}

/// How a provider's error says it refused: it made nothing and would refuse the same request
/// again. Any other error is a provider not heard, which may have made it.
pub trait Refusal: Into<ApiError> {
    /// The provider's own words when it refused; `None` when it was not heard.
    fn refused(&self) -> Option<&str>;
}

/// The request path of every resource paid later, once: the part of a divided sale is held
/// before the provider is asked (while a customer may pay it, nothing else may take that part);
/// a provider that refused made nothing and would refuse again (the key is forgotten, a 422 for
/// the client); a provider not heard may have made it (the key is released for the same
/// retry); what it made is stored with its first answer under the key's fence.
pub async fn make<R, S, P, E, F>(
    held: &Held<'_>,
    sales: &dyn SaleStore,
    store: &S,
    making: Making<'_>,
    faults: &Faults,
    ask: F,
    stored: impl FnOnce(P) -> Result<R>,
) -> Result<Completed>
where
    R: Awaited,
    S: Awaiting + ?Sized,
    E: Refusal,
    F: std::future::Future<Output = std::result::Result<P, E>>,
{
    crate::tenders::hold(sales, held, making.ask).await?;
    let made = match ask.await {
        Ok(made) => made,
        Err(e) => {
            if let Some(detail) = e.refused() {
                let message = format!("{}: {detail}", making.refused);
                held.forget().await?;
                return Err(ApiError::Validation(vec![FieldError::new(
                    making.field,
                    message,
                )]));
            }
            let _ = held.release().await;
            return Err(e.into());
        }
    };
    faults.after_charge();
    complete(held, store, stored(made)?).await
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
    let (id, created_at) = (resource.head().id.clone(), resource.head().created_at);
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
    held.complete_with_existing(resource.head().id.as_ref(), first_answer(&resource))
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
