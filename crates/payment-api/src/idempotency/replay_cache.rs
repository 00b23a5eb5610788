//! An in-memory cache of completed responses, so that replays skip the database.
//!
//! Safe because a completed response never changes: the store writes it once, under the
//! fencing token, and only the reaper removes it. An entry is used only while the key is within
//! its retention, so the cache never keeps a key alive longer than the store would.

use crate::clock::Millis;
use crate::domain::{BodyDigest, Fingerprint, IdempotencyKey, MerchantId};
use crate::store::StoredResponse;
use std::sync::Arc;

/// A completed key as the cache holds it.
#[derive(Debug, Clone)]
pub struct Completed {
    /// Fingerprint of the request that created it.
    pub fingerprint: Fingerprint,
    /// The exact bytes of a request known to have that fingerprint (the one that created it, or
    /// a retry that was checked against it): a retry with the same bytes is replayed unparsed.
    pub digest: Option<BodyDigest>,
    /// The stored response.
    pub response: StoredResponse,
    /// When it completed (store clock).
    pub completed_at: Millis,
}

/// A lookup key borrowed from the request: hashes like the stored `(String, String)` (a tuple
/// hashes its fields in order, and `str` hashes like `String`), so a replay allocates nothing.
#[derive(Hash)]
struct Borrowed<'a>(&'a str, &'a str);

impl quick_cache::Equivalent<(String, String)> for Borrowed<'_> {
    fn equivalent(&self, stored: &(String, String)) -> bool {
        self.0 == stored.0 && self.1 == stored.1
    }
}

/// Bounded cache of completed keys.
#[derive(Debug)]
pub struct ReplayCache {
    entries: quick_cache::sync::Cache<(String, String), Arc<Completed>>,
    retention_ms: Millis,
}

impl ReplayCache {
    /// A cache of at most `capacity` keys, each valid for `retention_ms` after completion.
    pub fn new(capacity: usize, retention_ms: Millis) -> Self {
        Self {
            entries: quick_cache::sync::Cache::new(capacity.max(1)),
            retention_ms,
        }
    }

    /// The completed key, if cached and still within retention at `now`.
    pub fn get(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        now: Millis,
    ) -> Option<Arc<Completed>> {
        let id = Borrowed(merchant.as_ref(), key.as_ref());
        let hit = self.entries.get(&id)?;
        if hit.completed_at + self.retention_ms > now {
            Some(hit)
        } else {
            self.entries.remove(&id);
            None
        }
    }

    /// Remembers a completed key.
    pub fn put(&self, merchant: &MerchantId, key: &IdempotencyKey, completed: Completed) {
        self.entries.insert(
            (merchant.to_string(), key.as_ref().to_string()),
            Arc::new(completed),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completed(at: Millis) -> Completed {
        Completed {
            fingerprint: Fingerprint::from_stored("fp".into()),
            digest: None,
            response: StoredResponse {
                status: 201,
                body: b"{}".to_vec(),
            },
            completed_at: at,
        }
    }

    #[test]
    fn a_borrowed_lookup_finds_what_was_stored_until_retention_ends() {
        let cache = ReplayCache::new(10, 1_000);
        let (loja, other) = (
            MerchantId::parse("loja").unwrap(),
            MerchantId::parse("outra").unwrap(),
        );
        let key = IdempotencyKey::parse(b"k-1").unwrap();
        cache.put(&loja, &key, completed(5_000));
        assert!(cache.get(&loja, &key, 5_500).is_some());
        assert!(
            cache.get(&other, &key, 5_500).is_none(),
            "scoped per merchant"
        );
        assert!(
            cache.get(&loja, &key, 6_000).is_none(),
            "expired with retention"
        );
        assert!(cache.get(&loja, &key, 5_500).is_none(), "and removed");
    }
}
