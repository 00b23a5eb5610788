//! The key table, on SQLite.

use super::*;

/// The reaper's expired keys (`?1` the cutoff), the oldest first, at most `?2`: row id,
/// merchant, key.
pub(super) fn purge_candidates() -> String {
    format!(
        "SELECT k.rowid, k.merchant, k.key FROM idempotency_keys AS k
          WHERE completed_at IS NOT NULL AND completed_at < ?1 AND NOT ({LIVE_KEY})
          ORDER BY completed_at LIMIT ?2"
    )
}

/// Deletes the key of row id `?1` if it is still expired (`?2` the cutoff) and no longer live.
pub(super) fn purge_one() -> String {
    format!(
        "DELETE FROM idempotency_keys AS k
          WHERE rowid = ?1 AND completed_at IS NOT NULL AND completed_at < ?2 AND NOT ({LIVE_KEY})"
    )
}

/// Stores the answer of a key and marks it finished, if `fence` still holds it. True when it did.
pub(super) fn complete_key(
    c: &rusqlite::Connection,
    merchant: &str,
    key: &str,
    fence: i64,
    response: &StoredResponse,
    payment_id: &str,
    now: Millis,
) -> rusqlite::Result<bool> {
    complete(c, (merchant, key, fence), response, payment_id, now, None)
}

/// [`complete_key`] for a payment's key: a key a cancellation claimed (it found the charge, with
/// no request beside it) becomes the key of the payment it made, with the fingerprint of the
/// request that made it, so that request is answered with it.
pub(super) fn complete_payment_key(
    c: &rusqlite::Connection,
    done: &Completion,
    now: Millis,
) -> rusqlite::Result<bool> {
    let held = (done.merchant.as_ref(), done.key.as_ref(), done.fence);
    let fingerprint = Some(done.fingerprint.as_ref());
    complete(
        c,
        held,
        &done.response,
        done.payment.id.as_ref(),
        now,
        fingerprint,
    )
}

/// The one UPDATE both complete a key with; `fingerprint` (a payment's) also turns a key a
/// cancellation claimed into the payment's. The SET reads the row as it was, so both columns
/// test the old `operation`.
fn complete(
    c: &rusqlite::Connection,
    (merchant, key, fence): (&str, &str, i64),
    response: &StoredResponse,
    payment_id: &str,
    now: Millis,
    fingerprint: Option<&str>,
) -> rusqlite::Result<bool> {
    let updated = exec(
        c,
        "UPDATE idempotency_keys
         SET recovery_point = 'finished', response_status = ?4, response_body = ?5,
             payment_id = ?6, completed_at = ?7, locked_until = 0,
             fingerprint = CASE WHEN operation = 'cancelamento' AND ?8 IS NOT NULL THEN ?8
                                ELSE fingerprint END,
             operation = CASE WHEN operation = 'cancelamento' AND ?8 IS NOT NULL THEN 'pagamento'
                              ELSE operation END
         WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL",
        params![
            merchant,
            key,
            fence,
            response.status,
            response.body,
            payment_id,
            now,
            fingerprint
        ],
    )?;
    Ok(updated == 1)
}

/// True while `fence` still holds the key `k` of `m` and it is not completed: what a write
/// under a fence checks first, in its own transaction.
pub(super) fn fence_holds(
    c: &rusqlite::Connection,
    m: &str,
    k: &str,
    fence: i64,
) -> rusqlite::Result<bool> {
    Ok(c.prepare_cached(
        "SELECT 1 FROM idempotency_keys
         WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL",
    )?
    .query_row(params![m, k, fence], |row| row.get::<_, i64>(0))
    .optional()?
    .is_some())
}

pub(super) fn held_from_row(r: &Row<'_>) -> rusqlite::Result<HeldColumns> {
    Ok(HeldColumns {
        fingerprint: r.get("fingerprint")?,
        locked_until: r.get("locked_until")?,
        fence: r.get("fence")?,
        status: r.get("response_status")?,
        body: r.get("response_body")?,
        completed_at: r.get("completed_at")?,
        operation: r.get("operation")?,
        cancelled_at: r.get("cancelled_at")?,
        payment_id: r.get("payment_id")?,
        request: match r.as_ref().column_index("request_body") {
            Ok(i) => r.get(i)?,
            Err(_) => None,
        },
    })
}

/// A key's row as the claim (`columns` = [`HELD_COLUMNS`]) or the cancellation
/// ([`HELD_COLUMNS_AND_REQUEST`]) decides from it, inside the caller's transaction.
pub(super) fn held_key(
    c: &rusqlite::Connection,
    columns: &str,
    merchant: &str,
    key: &str,
) -> StoreResult<claim::HeldKey> {
    c.prepare_cached(&format!(
        "SELECT {columns} FROM idempotency_keys WHERE merchant = ?1 AND key = ?2"
    ))?
    .query_row(params![merchant, key], held_from_row)?
    .parse()
}

#[async_trait::async_trait]
impl KeyStore for SqliteStore {
    async fn lookup_key(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<KeyRecord>> {
        let (m, k) = (merchant.as_ref(), key.as_ref());
        self.db.read_indexed(|c| {
            let row = c
                .prepare_cached(
                    "SELECT fingerprint, response_status, response_body, completed_at, cancelled_at
                     FROM idempotency_keys WHERE merchant = ?1 AND key = ?2",
                )?
                .query_row(params![m, k], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get::<_, Option<i64>>(4)?,
                    ))
                })
                .optional()?;
            row.map(|(fp, status, body, completed_at, cancelled_at)| {
                Ok(KeyRecord {
                    fingerprint: Fingerprint::from_stored(fp),
                    cancelled: cancelled_at.is_some(),
                    response: stored_response(status, body)?,
                    completed_at,
                })
            })
            .transpose()
        })
    }

    async fn claim(&self, claim: Claim) -> StoreResult<NextAction> {
        let now = self.now_ms();
        // Relaxed (see `durable_sqlite`): the claim is visible to every other request at once and
        // survives a crash of this process; only a power cut can take it, and with it every
        // later write of this server (the payment and its answer are durable commits, which
        // make every commit before them durable too: the WAL is appended in order), so no
        // answer was sent. The gateway, a system of its own, may keep a charge made under it:
        // the retry claims the free key anew and gets that charge back under the same downstream
        // key; a cancellation finds it with the request's metadata (see `ChargeMetadata`).
        self.db
            .write_relaxed(move |c| {
                let (m, k) = (claim.merchant.as_ref(), claim.key.as_ref());
                let inserted = exec(
                    c,
                    "INSERT INTO idempotency_keys
                     (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point, request_body,
                      operation, referencia)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?7, 'started', ?6, ?8, ?9)
                 ON CONFLICT (merchant, key) DO NOTHING",
                    params![
                        m,
                        k,
                        claim.fingerprint.as_ref(),
                        now,
                        now + claim.lease_ms,
                        claim.request,
                        claim::FIRST_FENCE,
                        claim.operation.as_str(),
                        claim.referencia
                    ],
                )?;
                if inserted == 1 {
                    return Ok(claim::inserted());
                }
                let held = held_key(c, HELD_COLUMNS, m, k)?;
                let decision = claim::decide(held, &claim.fingerprint, now, claim.lease_ms);
                if let claim::Decision::TakeOver { fence, locked_until } = decision {
                    exec(
                        c,
                        "UPDATE idempotency_keys SET fence = ?3, locked_until = ?4
                         WHERE merchant = ?1 AND key = ?2",
                        params![m, k, fence, locked_until],
                    )?;
                }
                Ok(decision.action())
            })
            .await
    }

    async fn release(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<()> {
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db
            .write(move |c| {
                exec(
                    c,
                    "UPDATE idempotency_keys SET locked_until = 0
                 WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL",
                    params![m, k, fence],
                )?;
                Ok(())
            })
            .await
    }

    async fn purge_keys(&self, retention_ms: Millis, limit: u32) -> StoreResult<u64> {
        let cutoff = self.now_ms() - retention_ms;
        // Each key deleted reads pages of its own on a large store (keys are random, their
        // index entries far apart), from the disk when the store is larger than the page cache
        // the machine keeps for it: in the writer, every request queued behind the purge waited
        // for those reads (100 keys a write held it 10 ms and more on ten million keys, the p99 of
        // replays whose own is 2 ms). So the keys are found on a reader, beside the writer, and
        // the same reads made there for their rows and index entries bring those pages into the
        // page cache; the write then deletes them by row id, the conditions checked again.
        let found: Vec<i64> = self
            .db
            .read(move |c| {
                let mut candidates = c.prepare_cached(&purge_candidates())?;
                let mut entry = c.prepare_cached(
                    "SELECT 1 FROM idempotency_keys WHERE merchant = ?1 AND key = ?2",
                )?;
                let mut rows = candidates.query(params![cutoff, limit])?;
                let mut found = Vec::new();
                while let Some(r) = rows.next()? {
                    entry.exists(params![r.get::<_, String>(1)?, r.get::<_, String>(2)?])?;
                    found.push(r.get(0)?);
                }
                StoreResult::Ok(found)
            })
            .await?;
        if found.is_empty() {
            return Ok(0);
        }
        // A background write: the one writer runs it only once no payment's write waits, and
        // commits it without a sync (a purge a power cut undoes is done again by the next pass).
        self.db
            .write_background(move |c| {
                let mut delete = c.prepare_cached(&purge_one())?;
                let mut purged = 0;
                for rowid in found {
                    purged += delete.execute(params![rowid, cutoff])? as u64;
                }
                Ok(purged)
            })
            .await
    }

    async fn finish_existing(&self, answer: KeyAnswer) -> StoreResult<FinishOutcome> {
        let now = self.now_ms();
        let a = answer;
        self.db
            .write(move |c| {
                let (m, k) = (a.merchant.as_ref(), a.key.as_ref());
                Ok(
                    if complete_key(c, m, k, a.fence, &a.response, &a.resource, now)? {
                        FinishOutcome::Stored
                    } else {
                        FinishOutcome::LeaseLost
                    },
                )
            })
            .await
    }

    async fn forget(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool> {
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db
            .write(move |c| {
                Ok(exec(
                    c,
                    "DELETE FROM idempotency_keys
                     WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL",
                    params![m, k, fence],
                )? == 1)
            })
            .await
    }

    async fn abandoned(&self, stale_ms: Millis, limit: usize) -> StoreResult<Vec<Abandoned>> {
        let cutoff = self.now_ms() - stale_ms;
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT merchant, key, fence, fingerprint, request_body, operation, created_at FROM idempotency_keys
                     WHERE completed_at IS NULL AND locked_until < ?1
                     ORDER BY locked_until = 0, locked_until, fence LIMIT ?2",
                )?;
                let rows = st
                    .query_map(params![cutoff, limit as i64], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get(2)?,
                            r.get::<_, String>(3)?,
                            r.get(4)?,
                            r.get(5)?,
                            r.get(6)?,
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.into_iter()
                    .map(|(m, k, fence, fp, request, op, at)| {
                        abandoned_from(m, k, fence, fp, request, op, at)
                    })
                    .collect()
            })
            .await
    }

    async fn take_over(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
        lease_ms: Millis,
    ) -> StoreResult<Option<i64>> {
        let now = self.now_ms();
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db
            .write(move |c| {
                let updated = exec(
                    c,
                    "UPDATE idempotency_keys SET fence = fence + 1, locked_until = ?4
                     WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL
                       AND locked_until <= ?5",
                    params![m, k, fence, now + lease_ms, now],
                )?;
                Ok((updated == 1).then_some(fence + 1))
            })
            .await
    }

    async fn keys_in_progress(
        &self,
        merchant: &MerchantId,
        by: Lookup<'_>,
    ) -> StoreResult<Vec<InProgressKey>> {
        let (column, value) = (by.field.key_column(), by.value);
        let (m, v) = (merchant.to_string(), value.to_string());
        self.db
            .read(move |c| {
                let rows = c
                    .prepare_cached(&format!(
                        "SELECT key, created_at FROM idempotency_keys
                         WHERE merchant = ?1 AND {column} = ?2 AND completed_at IS NULL AND locked_until <> 0
                         ORDER BY created_at, key"
                    ))?
                    .query_map(params![m, v], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, Millis>(1)?))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.into_iter()
                    .map(|(key, since)| {
                        Ok(InProgressKey {
                            key: IdempotencyKey::parse(key.as_bytes())
                                .map_err(|e| corrupt("key", e))?,
                            since,
                        })
                    })
                    .collect()
            })
            .await
    }

    async fn claim_for_cancel(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        lease_ms: Millis,
        rules: &CancelRules,
    ) -> StoreResult<CancelClaim> {
        let now = self.now_ms();
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        let rules = rules.clone();
        self.db
            .write(move |c| {
                let inserted = exec(
                    c,
                    "INSERT INTO idempotency_keys
                     (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point, operation)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'started', 'cancelamento')
                     ON CONFLICT (merchant, key) DO NOTHING",
                    params![
                        m,
                        k,
                        claim::cancelling_fingerprint().as_ref(),
                        now,
                        now + lease_ms,
                        claim::FIRST_FENCE
                    ],
                )?;
                if inserted == 1 {
                    return Ok(claim::cancel_inserted());
                }
                let (answer, takeover) = claim::decide_cancel(held_key(c, HELD_COLUMNS_AND_REQUEST, &m, &k)?, now, lease_ms, &rules);
                if let Some((fence, locked_until)) = takeover {
                    exec(
                        c,
                        "UPDATE idempotency_keys SET fence = ?3, locked_until = ?4
                         WHERE merchant = ?1 AND key = ?2",
                        params![m, k, fence, locked_until],
                    )?;
                }
                Ok(answer)
            })
            .await
    }

    async fn mark_cancelled(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool> {
        let now = self.now_ms();
        let (m, k) = (merchant.to_string(), key.as_ref().to_string());
        self.db
            .write(move |c| {
                Ok(exec(
                    c,
                    "UPDATE idempotency_keys
                     SET recovery_point = 'finished', cancelled_at = ?4, completed_at = ?4, locked_until = 0
                     WHERE merchant = ?1 AND key = ?2 AND fence = ?3 AND completed_at IS NULL",
                    params![m, k, fence, now],
                )? == 1)
            })
            .await
    }
}
