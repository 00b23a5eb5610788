//! Resources a customer pays after the key's first answer — a Pix charge, a card-machine order:
//! what every such operation does the same way, written once. Its key completes with the
//! resource stored beside the first answer (`aguardando`, the bytes every replay repeats); a key
//! purged and asked again, or completed by another worker, finds the resource by the provider's
//! id and answers it as a replay (another request with that key: 422).

use crate::clock::Millis;
use crate::domain::{Fingerprint, PaymentId};
use crate::error::{ApiError, Result};
use crate::idempotency::{Completed, Held};
use crate::store::{AwaitedCompletion, FinishOutcome, StoreResult, StoredResponse};
use std::future::Future;

/// A resource a customer pays later, as the operation that made it answers it.
pub trait Awaited: Clone {
    /// What it is, in the log line written when it is stored ("Pix charge", "card machine order").
    const WHAT: &'static str;
    /// Its payment id (`pay_…`).
    fn payment_id(&self) -> &PaymentId;
    /// The provider's id for it (a txid, an order id).
    fn provider_id(&self) -> &str;
    /// When it was made (store clock).
    fn created_at(&self) -> Millis;
    /// The body it is answered with as it stands now.
    fn body(&self) -> Vec<u8>;
    /// Itself as first answered: `aguardando`, nothing paid, nothing decided.
    fn as_first(&self) -> Self;
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

/// Writes the resource and its first answer under the key's fence, through `store` (the
/// means' own table).
pub async fn finish<R, F>(
    held: &Held<'_>,
    resource: R,
    store: impl FnOnce(AwaitedCompletion<R>) -> F,
) -> Result<Completed>
where
    R: Awaited,
    F: Future<Output = StoreResult<FinishOutcome>>,
{
    let response = response_for(&resource);
    let (id, created_at) = (resource.payment_id().clone(), resource.created_at());
    let provider_id = resource.provider_id().to_string();
    let finished = store(AwaitedCompletion {
        fence: held.fence,
        resource,
        response: response.clone(),
        fingerprint: held.fingerprint.clone(),
    })
    .await?;
    if finished == FinishOutcome::Stored {
        tracing::info!(payment = %id, provider_id, "{} stored", R::WHAT);
    }
    Ok(Completed::first(finished, response, created_at))
}

/// The key's resource found already stored (`found`, with the fingerprint of the request that
/// made it): the same request gets it as a replay, another one a 422 (and the key is let go).
/// `None` when nothing was found.
pub async fn existing<R: Awaited>(
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
    held.complete_with_existing(resource.payment_id().as_ref(), first_answer(&resource))
        .await
        .map(Some)
}
