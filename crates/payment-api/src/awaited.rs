//! Resources a customer pays after the key's first answer — a Pix charge, a card-machine order:
//! what every such operation does the same way, written once. Its key completes with the
//! resource stored beside the first answer (`aguardando`, the bytes every replay repeats); a key
//! purged and asked again, or completed by another worker, finds the resource by the provider's
//! id and answers it as a replay (another request with that key: 422).

use crate::clock::Millis;
use crate::domain::{
    CancelByKey, FieldError, Fingerprint, IdempotencyKey, KeyOperation, MerchantId, PaymentAsk,
};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::idempotency::{Completed, Held, KeyResource, Operation, Recovery, ResourceState};
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

/// How a provider's error says it refused: it made nothing and would refuse the same request
/// again. Any other error is a provider not heard, which may have made it.
pub trait Refusal: Into<ApiError> {
    /// The provider's own words when it refused; `None` when it was not heard.
    fn refused(&self) -> Option<&str>;
}

/// A request for a resource paid later.
pub trait PaidLaterRequest: Send + Sync + Sized + 'static {
    /// What it asks as every payment does.
    fn ask(&self) -> &PaymentAsk;
    /// Validates a parsed body; every problem is reported.
    fn from_json(body: &serde_json::Value) -> std::result::Result<Self, Vec<FieldError>>;
}

/// What every means paid later is built on: where its resources are kept, the sales whose parts
/// it pays, its provider, and how long the server keeps a key (past it, a key's resource the
/// provider no longer knows was never made).
#[derive(Debug)]
pub struct Parts<S: ?Sized, P: ?Sized> {
    /// Its resources' store.
    pub store: Arc<S>,
    /// The sales whose parts it may pay.
    pub sales: Arc<dyn SaleStore>,
    /// Its provider.
    pub provider: Arc<P>,
    /// How long a key is kept.
    pub key_retention_ms: Millis,
}

/// A means whose resource a customer pays after its first answer (a Pix charge, a card-machine
/// order): what it asks its provider for, how it stores what the provider made, and how a key
/// whose worker died is settled. Its [`Operation`] is written once, for every such means: cancel
/// by key asks the resource ([`CancelByKey::AskResource`]); the part of a divided sale is held
/// before the provider is asked (while a customer may pay it, nothing else may take that part);
/// a provider that refused made nothing and would refuse again (the key is forgotten, a 422 for
/// the client); a provider not heard may have made it (the key is released for the same retry);
/// what it made is stored with its first answer under the key's fence ([`complete`]).
#[async_trait::async_trait]
pub trait PaidLater: Send + Sync + 'static {
    /// Its validated request.
    type Request: PaidLaterRequest;
    /// What it stores and answers.
    type Resource: Awaited;
    /// What the provider answers when it makes the resource.
    type Made: Send;
    /// The provider's error.
    type Error: Refusal + Send;
    /// Where its resources are kept.
    type Store: Awaiting + Send + Sync + ?Sized;
    /// Its provider.
    type Provider: Send + Sync + ?Sized;
    /// The name its key rows record ([`Operation::KIND`]).
    const OPERATION: KeyOperation;
    /// The request field a provider's refusal is reported on (`""`: the whole body).
    const REFUSAL_FIELD: &'static str;
    /// What a refusal says was refused ("o provedor Pix recusou a cobrança").
    const REFUSED: &'static str;

    /// What it is built on.
    fn parts(&self) -> &Parts<Self::Store, Self::Provider>;
    /// Asks the provider for the key's resource: made now, or the one the key made before.
    async fn ask_provider(
        &self,
        held: &Held<'_>,
        request: &Self::Request,
    ) -> std::result::Result<Self::Made, Self::Error>;
    /// The resource as stored, from what the provider made and what the request adds.
    fn stored(
        &self,
        held: &Held<'_>,
        request: &Self::Request,
        made: Self::Made,
    ) -> Result<Self::Resource>;
    /// Settles a key whose worker died mid-execution ([`Operation::recover`]).
    async fn recover_key(&self, held: &Held<'_>, created_at: Millis) -> Result<Recovery>;
}

#[async_trait::async_trait]
impl<M: PaidLater> Operation for M {
    type Request = M::Request;
    const KIND: KeyOperation = M::OPERATION;
    const CANCEL_BY_KEY: CancelByKey = CancelByKey::AskResource;

    fn referencia(request: &M::Request) -> Option<String> {
        request.ask().referencia.clone()
    }

    async fn execute(
        &self,
        held: &Held<'_>,
        request: &M::Request,
        faults: &Faults,
    ) -> Result<Completed> {
        crate::tenders::hold(&*self.parts().sales, held, request.ask()).await?;
        let made = match self.ask_provider(held, request).await {
            Ok(made) => made,
            Err(e) => {
                if let Some(detail) = e.refused() {
                    let message = format!("{}: {detail}", M::REFUSED);
                    held.forget().await?;
                    let refused = FieldError::new(M::REFUSAL_FIELD, message);
                    return Err(ApiError::Validation(vec![refused]));
                }
                let _ = held.release().await;
                return Err(e.into());
            }
        };
        faults.after_charge();
        complete(
            held,
            &*self.parts().store,
            self.stored(held, request, made)?,
        )
        .await
    }

    async fn recover(&self, held: &Held<'_>, created_at: Millis) -> Result<Recovery> {
        self.recover_key(held, created_at).await
    }
}

/// The request a key kept, read again for a recovery; `None` when none can be read (then the key
/// is released for the client's retry, which brings it again).
pub async fn kept_request<R: PaidLaterRequest>(held: &Held<'_>) -> Result<Option<R>> {
    let request = held
        .request
        .and_then(|b| crate::domain::parse_json_strict(b).ok())
        .and_then(|v| R::from_json(&v).ok());
    if request.is_none() {
        held.release().await?;
    }
    Ok(request)
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
