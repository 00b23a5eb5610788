//! The key table, on PostgreSQL.

use super::*;

/// Completes a key with its answer under its fence — `$1` merchant, `$2` key, `$3` fence, `$4`
/// status, `$5` body, `$6` payment id, `$7` the clock's shift —: every finish of a key is this
/// statement, alone or as the `done` step of a larger one.
pub(super) const COMPLETE_KEY: &str = "UPDATE idempotency_keys
     SET recovery_point = 'finished', response_status = $4, response_body = $5,
         payment_id = $6, completed_at = pagar_now_ms() + $7, locked_until = 0
     WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL";

/// Claims a key for any operation (a cancellation's too, with no request kept) — `$1` merchant,
/// `$2` key, `$3` fingerprint, `$4` lease, `$5` the clock's shift, `$6` request, `$7` first
/// fence, `$8` operation, `$9` referencia —, or does nothing when it is taken (then no row comes
/// back). Its transaction commits without waiting for its WAL to reach the disk
/// (`synchronous_commit` off for that transaction alone, set in the statement: no round trip
/// more), as SQLite's claim commits relaxed. PostgreSQL writes its WAL in order, so the
/// execution's completion (or the cancellation's mark), committed durably after it, makes the
/// claim durable too; a crash of the database that loses a claim loses everything after it, and
/// the retry claims anew and gets the gateway's charge back under the same downstream key.
pub(super) const CLAIM_INSERT: &str = "INSERT INTO idempotency_keys
         (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point,
          request_body, operation, referencia)
     SELECT $1::text, $2::text, $3::text, now_ms, now_ms + $4, $7::bigint, 'started', $6::bytea,
            $8::text, $9::text
     FROM (SELECT pagar_now_ms() + $5 AS now_ms,
                  set_config('synchronous_commit', 'off', true)) AS t
     ON CONFLICT (merchant, key) DO NOTHING
     RETURNING fence";

/// True while `fence` still holds the key `k` of `m` and it is not completed, with the key's row
/// locked (shared) until `tx` ends: a takeover cannot change the fence before this write commits.
pub(super) async fn fence_holds(
    tx: &deadpool_postgres::Transaction<'_>,
    m: &str,
    k: &str,
    fence: i64,
) -> StoreResult<bool> {
    Ok(tx
        .query_opt(
            "SELECT 1 FROM idempotency_keys
             WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL
             FOR SHARE",
            &[&m, &k, &fence],
        )
        .await?
        .is_some())
}

pub(super) fn held_from_row(r: &Row) -> StoreResult<claim::HeldKey> {
    HeldColumns {
        fingerprint: r.try_get("fingerprint")?,
        locked_until: r.try_get("locked_until")?,
        fence: r.try_get("fence")?,
        status: r
            .try_get::<_, Option<i32>>("response_status")?
            .map(i64::from),
        body: r.try_get("response_body")?,
        completed_at: r.try_get("completed_at")?,
        operation: r.try_get("operation")?,
        cancelled_at: r.try_get("cancelled_at")?,
        payment_id: r.try_get("payment_id")?,
        request: if r.columns().iter().any(|c| c.name() == "request_body") {
            r.try_get("request_body")?
        } else {
            None
        },
    }
    .parse()
}

/// A conflicting claim finds the row gone only if the reaper purged it in between; try again.
pub(super) const CLAIM_ATTEMPTS: usize = 3;

/// Why a key's decision was given up: its row changed under each of the [`CLAIM_ATTEMPTS`]
/// tries of `during` (the client retries with the same key).
fn kept_changing(key: &str, during: &str) -> StoreError {
    StoreError::Unavailable(format!(
        "a chave {key:?} mudou {CLAIM_ATTEMPTS} vezes durante {during}"
    ))
}

#[async_trait::async_trait]
impl KeyStore for PgStore {
    async fn lookup_key(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<KeyRecord>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "SELECT fingerprint, response_status, response_body, completed_at, cancelled_at
                 FROM idempotency_keys WHERE merchant = $1 AND key = $2",
            )
            .await?;
        let row = c
            .query_opt(&st, &[&merchant.as_ref(), &key.as_ref()])
            .await?;
        row.map(|r| {
            Ok(KeyRecord {
                fingerprint: Fingerprint::from_stored(r.get(0)),
                cancelled: r.get::<_, Option<i64>>(4).is_some(),
                response: stored_response(r.get::<_, Option<i32>>(1).map(i64::from), r.get(2))?,
                completed_at: r.get(3),
            })
        })
        .transpose()
    }

    async fn claim(&self, claim: Claim) -> StoreResult<NextAction> {
        let mut c = self.conn().await?;
        let (m, k, fp) = (
            claim.merchant.as_ref(),
            claim.key.as_ref(),
            claim.fingerprint.as_ref(),
        );
        let shift = self.shift();
        for _ in 0..CLAIM_ATTEMPTS {
            let insert = c.prepare_cached(CLAIM_INSERT).await?;
            if c.query_opt(
                &insert,
                &[
                    &m,
                    &k,
                    &fp,
                    &claim.lease_ms,
                    &shift,
                    &claim.request,
                    &claim::FIRST_FENCE,
                    &claim.operation.as_str(),
                    &claim.referencia,
                ],
            )
            .await?
            .is_some()
            {
                return Ok(claim::inserted());
            }
            // The key exists. A completed key never changes, so a replay (or a mismatch) is
            // decided from a plain read, without the row lock every other replica would queue on.
            let completed = c
                .prepare_cached(&format!(
                    "SELECT {HELD_COLUMNS} FROM idempotency_keys
                     WHERE merchant = $1 AND key = $2 AND completed_at IS NOT NULL"
                ))
                .await?;
            if let Some(row) = c.query_opt(&completed, &[&m, &k]).await? {
                let held = held_from_row(&row)?;
                if held.response.is_some() || held.cancelled {
                    return Ok(claim::decide(held, &claim.fingerprint, 0, claim.lease_ms).action());
                }
            }
            // Not completed: decide under its row lock.
            let tx = c.transaction().await?;
            let select = tx
                .prepare_cached(&format!(
                    "SELECT {HELD_COLUMNS}, pagar_now_ms() + $3 AS now_ms
                     FROM idempotency_keys WHERE merchant = $1 AND key = $2 FOR UPDATE"
                ))
                .await?;
            let Some(row) = tx.query_opt(&select, &[&m, &k, &shift]).await? else {
                tx.rollback().await?;
                continue;
            };
            let held = held_from_row(&row)?;
            let decision = claim::decide(
                held,
                &claim.fingerprint,
                row.try_get("now_ms")?,
                claim.lease_ms,
            );
            if let claim::Decision::TakeOver {
                fence,
                locked_until,
            } = decision
            {
                let takeover = tx
                    .prepare_cached(
                        "UPDATE idempotency_keys SET fence = $3, locked_until = $4
                         WHERE merchant = $1 AND key = $2",
                    )
                    .await?;
                tx.execute(&takeover, &[&m, &k, &fence, &locked_until])
                    .await?;
            }
            let action = decision.action();
            tx.commit().await?;
            return Ok(action);
        }
        Err(kept_changing(k, "a reserva"))
    }

    async fn release(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<()> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "UPDATE idempotency_keys SET locked_until = 0
                 WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL",
            )
            .await?;
        c.execute(&st, &[&merchant.as_ref(), &key.as_ref(), &fence])
            .await?;
        Ok(())
    }

    async fn purge_keys(&self, retention_ms: Millis, limit: u32) -> StoreResult<u64> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "DELETE FROM idempotency_keys WHERE (merchant, key) IN (
                   SELECT k.merchant, k.key FROM idempotency_keys AS k
                    WHERE completed_at IS NOT NULL AND completed_at < pagar_now_ms() + $2 - $1
                      AND NOT ({LIVE_KEY})
                    ORDER BY completed_at LIMIT $3)"
            ))
            .await?;
        Ok(
            c.execute(&st, &[&retention_ms, &self.shift(), &i64::from(limit)])
                .await?,
        )
    }

    async fn finish_existing(&self, answer: KeyAnswer) -> StoreResult<FinishOutcome> {
        let c = self.conn().await?;
        let st = c.prepare_cached(COMPLETE_KEY).await?;
        let updated = c
            .execute(
                &st,
                &[
                    &answer.merchant.as_ref(),
                    &answer.key.as_ref(),
                    &answer.fence,
                    &i32::from(answer.response.status),
                    &answer.response.body,
                    &answer.resource,
                    &self.shift(),
                ],
            )
            .await?;
        Ok(if updated == 1 {
            FinishOutcome::Stored
        } else {
            FinishOutcome::LeaseLost
        })
    }

    async fn forget(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "DELETE FROM idempotency_keys
                 WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL",
            )
            .await?;
        Ok(c.execute(&st, &[&merchant.as_ref(), &key.as_ref(), &fence])
            .await?
            == 1)
    }

    async fn abandoned(&self, stale_ms: Millis, limit: usize) -> StoreResult<Vec<Abandoned>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "SELECT merchant, key, fence, fingerprint, request_body, operation, created_at FROM idempotency_keys
                 WHERE completed_at IS NULL AND locked_until < pagar_now_ms() + $1 - $2
                 ORDER BY locked_until = 0, locked_until, fence LIMIT $3",
            )
            .await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        c.query(&st, &[&self.shift(), &stale_ms, &limit])
            .await?
            .into_iter()
            .map(|r| {
                abandoned_from(
                    r.get(0),
                    r.get(1),
                    r.get(2),
                    r.get(3),
                    r.get(4),
                    r.get(5),
                    r.get(6),
                )
            })
            .collect()
    }

    async fn take_over(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
        lease_ms: Millis,
    ) -> StoreResult<Option<i64>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(
                "UPDATE idempotency_keys SET fence = fence + 1, locked_until = now_ms + $4
                 FROM (SELECT pagar_now_ms() + $5 AS now_ms) AS t
                 WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL
                   AND locked_until <= now_ms
                 RETURNING fence",
            )
            .await?;
        Ok(c.query_opt(
            &st,
            &[
                &merchant.as_ref(),
                &key.as_ref(),
                &fence,
                &lease_ms,
                &self.shift(),
            ],
        )
        .await?
        .map(|r| r.get(0)))
    }

    async fn keys_in_progress(
        &self,
        merchant: &MerchantId,
        by: Lookup<'_>,
    ) -> StoreResult<Vec<InProgressKey>> {
        let (column, value) = (by.field.key_column(), by.value);
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!(
                "SELECT key, created_at FROM idempotency_keys
                 WHERE merchant = $1 AND {column} = $2 AND completed_at IS NULL AND locked_until <> 0
                 ORDER BY created_at, key"
            ))
            .await?;
        c.query(&st, &[&merchant.as_ref(), &value])
            .await?
            .iter()
            .map(|r| {
                let key: String = r.try_get(0)?;
                Ok(InProgressKey {
                    key: IdempotencyKey::parse(key.as_bytes()).map_err(|e| corrupt("key", e))?,
                    since: r.try_get(1)?,
                })
            })
            .collect()
    }

    async fn claim_for_cancel(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        lease_ms: Millis,
        rules: &CancelRules,
    ) -> StoreResult<CancelClaim> {
        let mut c = self.conn().await?;
        let (m, k) = (merchant.as_ref(), key.as_ref());
        let shift = self.shift();
        // The claim every operation makes, with no request and no reference kept.
        let insert = c.prepare_cached(CLAIM_INSERT).await?;
        for _ in 0..CLAIM_ATTEMPTS {
            let inserted = c
                .query_opt(
                    &insert,
                    &[
                        &m,
                        &k,
                        &claim::cancelling_fingerprint().as_ref(),
                        &lease_ms,
                        &shift,
                        &None::<Vec<u8>>,
                        &claim::FIRST_FENCE,
                        &KeyOperation::CANCELAMENTO.as_str(),
                        &None::<String>,
                    ],
                )
                .await?;
            if inserted.is_some() {
                return Ok(claim::cancel_inserted());
            }
            let tx = c.transaction().await?;
            let Some(row) = tx
                .query_opt(
                    &format!(
                        "SELECT {HELD_COLUMNS_AND_REQUEST}, pagar_now_ms() + $3 AS now_ms
                         FROM idempotency_keys WHERE merchant = $1 AND key = $2 FOR UPDATE"
                    ),
                    &[&m, &k, &shift],
                )
                .await?
            else {
                tx.rollback().await?;
                continue;
            };
            let (answer, takeover) = claim::decide_cancel(
                held_from_row(&row)?,
                row.try_get("now_ms")?,
                lease_ms,
                rules,
            );
            if let Some((fence, locked_until)) = takeover {
                tx.execute(
                    "UPDATE idempotency_keys SET fence = $3, locked_until = $4
                     WHERE merchant = $1 AND key = $2",
                    &[&m, &k, &fence, &locked_until],
                )
                .await?;
            }
            tx.commit().await?;
            return Ok(answer);
        }
        Err(kept_changing(k, "o cancelamento"))
    }

    async fn mark_cancelled(
        &self,
        merchant: &MerchantId,
        key: &IdempotencyKey,
        fence: i64,
    ) -> StoreResult<bool> {
        let c = self.conn().await?;
        Ok(c.execute(
            "UPDATE idempotency_keys
             SET recovery_point = 'finished', cancelled_at = now_ms, completed_at = now_ms, locked_until = 0
             FROM (SELECT pagar_now_ms() + $4 AS now_ms) AS t
             WHERE merchant = $1 AND key = $2 AND fence = $3 AND completed_at IS NULL",
            &[&merchant.as_ref(), &key.as_ref(), &fence, &self.shift()],
        )
        .await?
            == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;

    /// The PostgreSQL server the tests create their databases on (`.ci/run` starts it).
    fn admin_url() -> String {
        std::env::var("PAGAR_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
    }

    async fn admin(sql: &str) {
        let (client, conn) = tokio_postgres::connect(&admin_url(), NoTls).await.unwrap();
        let driver = tokio::spawn(conn);
        client.batch_execute(sql).await.unwrap();
        drop(client);
        let _ = driver.await;
    }

    async fn synchronous_commit(c: &Object) -> String {
        let row = c.query_one("SHOW synchronous_commit", &[]).await.unwrap();
        row.get(0)
    }

    /// The claim runs as a transaction of its own; here it runs inside one the test keeps open,
    /// to read what it set before the commit.
    #[tokio::test]
    async fn a_claim_commits_without_a_wal_flush_and_leaves_the_connection_durable() {
        // Arrange
        let name = format!("pagar_u_{}", uuid::Uuid::new_v4().simple());
        admin(&format!("CREATE DATABASE {name}")).await;
        let url = format!("{}/{name}", admin_url().rsplit_once('/').unwrap().0);
        let store = PgStore::connect(&url, PgOptions::default(), Arc::new(SystemClock::default()))
            .await
            .unwrap();
        let mut c = store.conn().await.unwrap();
        assert_eq!(synchronous_commit(&c).await, "on", "the server's default");

        // Act
        let tx = c.transaction().await.unwrap();
        let claimed = tx
            .query_opt(
                CLAIM_INSERT,
                &[
                    &"loja",
                    &"k-1",
                    &"fp",
                    &30_000i64,
                    &0i64,
                    &b"{}".to_vec(),
                    &claim::FIRST_FENCE,
                    &"pagamento",
                    &None::<String>,
                ],
            )
            .await
            .unwrap();
        let inside: String = tx
            .query_one("SHOW synchronous_commit", &[])
            .await
            .unwrap()
            .get(0);
        tx.commit().await.unwrap();

        // Assert
        assert!(claimed.is_some(), "the key was free: the claim took it");
        assert_eq!(
            inside, "off",
            "the claim's own commit does not wait for the disk"
        );
        assert_eq!(
            synchronous_commit(&c).await,
            "on",
            "every later commit on the connection (a completion) waits for the disk again"
        );
        drop(c);
        drop(store);
        admin(&format!("DROP DATABASE {name} WITH (FORCE)")).await;
    }
}
