//! SQLite store: WAL, `synchronous=FULL`, `BEGIN IMMEDIATE`, and group commit through
//! [`durable_sqlite::Db`]: concurrent requests share one fsync, and no caller hears "done" before
//! its write is durable.

use super::*;
use crate::clock::Clock;
use durable_sqlite::{exec, Db, Options};
use rusqlite::{params, OptionalExtension, Row};
use rusqlite_migration::{Migrations, M};
use std::path::Path;
use std::sync::Arc;

mod awaited;
mod keys;
mod machine;
mod payments;
mod pix;
mod refunds;
mod sales;

use keys::*;

/// The schema, one file per version under `migrations/sqlite/` (PostgreSQL's are beside it).
/// Applied versions are tracked in `PRAGMA user_version`; a file is never edited once released.
fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(include_str!("../../../migrations/sqlite/V1__init.sql")),
        M::up(include_str!("../../../migrations/sqlite/V2__recovery.sql")),
        M::up(include_str!(
            "../../../migrations/sqlite/V3__terminal_and_range.sql"
        )),
        M::up(include_str!("../../../migrations/sqlite/V4__refunds.sql")),
        M::up(include_str!(
            "../../../migrations/sqlite/V5__operations_and_cancel.sql"
        )),
        M::up(include_str!(
            "../../../migrations/sqlite/V6__operation_names.sql"
        )),
        M::up(include_str!("../../../migrations/sqlite/V7__pix.sql")),
        M::up(include_str!(
            "../../../migrations/sqlite/V8__card_plans.sql"
        )),
        M::up(include_str!("../../../migrations/sqlite/V9__sales.sql")),
        M::up(include_str!(
            "../../../migrations/sqlite/V10__authorizations.sql"
        )),
        M::up(include_str!(
            "../../../migrations/sqlite/V11__charge_metadata.sql"
        )),
        M::up(include_str!(
            "../../../migrations/sqlite/V12__payment_means.sql"
        )),
        M::up(include_str!(
            "../../../migrations/sqlite/V13__tender_resources.sql"
        )),
        M::up(include_str!(
            "../../../migrations/sqlite/V14__card_machine.sql"
        )),
        M::up(include_str!(
            "../../../migrations/sqlite/V15__live_keys.sql"
        )),
        M::up(include_str!(
            "../../../migrations/sqlite/V16__machine_live_keys.sql"
        )),
    ])
}

/// The SQLite store. Cheap to clone; clones share the writer and the read pool.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    db: Db,
    clock: Arc<dyn Clock>,
}

impl SqliteStore {
    /// Opens (creating and migrating if needed) the database at `path` and starts its writer.
    pub fn open(path: impl AsRef<Path>, clock: Arc<dyn Clock>) -> StoreResult<Self> {
        Self::open_with_cache(path, clock, None)
    }

    /// [`SqliteStore::open`] with at most `reader_cache_kib` of page cache per pooled reader
    /// (`None`: SQLite's default). The app's embedded sandbox keeps a small one.
    pub fn open_with_cache(
        path: impl AsRef<Path>,
        clock: Arc<dyn Clock>,
        reader_cache_kib: Option<u32>,
    ) -> StoreResult<Self> {
        let options = Options {
            reader_cache_kib,
            ..Options::default()
        };
        let db = Db::open(path, options, |c| {
            migrations().to_latest(c).map_err(StoreError::from)
        })?;
        Ok(Self { db, clock })
    }

    /// The database, for the gateway simulator's ledger kept in the same file.
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// Stops the writer after the writes already queued.
    pub fn close(&self) {
        self.db.close();
    }
}

impl SqliteStore {
    /// A merchant's rows of `from` (`"<columns> FROM <table>"`) whose `field` is `value`, oldest
    /// first, each read by `row`: what every look-up by `referencia` or key reads.
    async fn rows_by<T: Send + 'static>(
        &self,
        from: String,
        merchant: &MerchantId,
        field: PaymentField,
        value: &str,
        row: fn(&Row<'_>) -> rusqlite::Result<T>,
    ) -> StoreResult<Vec<T>> {
        let column = field.column();
        let (m, v) = (merchant.to_string(), value.to_string());
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(&format!(
                    "SELECT {from} WHERE merchant = ?1 AND {column} = ?2 ORDER BY created_at, id"
                ))?;
                let rows = st.query_map(params![m, v], row)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn health(&self) -> StoreResult<()> {
        self.db
            .read(|c| Ok(c.query_row("SELECT 1", [], |_| Ok(()))?))
            .await
    }

    async fn ready(&self) -> StoreResult<()> {
        // Through the writer: a stopped writer thread or a database that cannot take its write
        // lock fails here, where a read would still succeed.
        self.db.write(|_| Ok(())).await
    }
}

impl Clocked for SqliteStore {
    fn now_ms(&self) -> Millis {
        self.clock.now_ms()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_reaper_s_liveness_checks_read_only_the_open_payments_pix_and_machine_orders() {
        let mut c = rusqlite::Connection::open_in_memory().unwrap();
        migrations().to_latest(&mut c).unwrap();
        for sql in [purge_candidates(), purge_one()] {
            let plan: Vec<String> = c
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map(params![0, 1], |r| r.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let plan = plan.join("\n");
            assert!(plan.contains("payments_live_key"), "{plan}");
            assert!(plan.contains("pix_charges_live_key"), "{plan}");
            assert!(plan.contains("machine_orders_live_key"), "{plan}");
        }
    }

    #[test]
    fn payments_made_before_their_means_was_stored_get_it_from_the_migration() {
        let mut c = rusqlite::Connection::open_in_memory().unwrap();
        migrations().to_version(&mut c, 11).unwrap();
        for (id, cobranca) in [("pay_card", "ch_1"), ("pay_pix", "pix:E1234")] {
            c.execute(
                "INSERT INTO payments (id, merchant, idempotency_key, valor, status, cobranca_id, created_at)
                 VALUES (?1, 'loja', ?1, 100, 'aprovado', ?2, 0)",
                params![id, cobranca],
            )
            .unwrap();
        }
        migrations().to_latest(&mut c).unwrap();
        let rows: Vec<(String, String, String)> = c
            .prepare("SELECT id, meio, cobranca_id FROM payments ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let row = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
        assert_eq!(
            rows,
            [
                row("pay_card", "cartao", "ch_1"),
                row("pay_pix", "pix", "E1234")
            ]
        );
        // The same id under another means is another payment; under the same, refused.
        let insert = |id: &str, meio: &str| {
            c.execute(
                "INSERT INTO payments (id, merchant, idempotency_key, valor, status, cobranca_id, created_at, meio)
                 VALUES (?1, 'loja', ?1, 100, 'aprovado', 'E1234', 0, ?2)",
                params![id, meio],
            )
        };
        assert!(insert("pay_other", "cartao").is_ok());
        assert!(insert("pay_again", "pix").is_err());
    }

    #[test]
    fn keys_claimed_before_operations_were_recorded_get_theirs_from_the_migration() {
        let mut c = rusqlite::Connection::open_in_memory().unwrap();
        migrations().to_version(&mut c, 4).unwrap();
        for (key, body) in [
            ("k-pagamento", r#"{"valor":100,"cartao":"tok_aprovado"}"#),
            (
                "k-estorno",
                r#"{"estorno":{"pagamento":"pay_1","corpo":{"valor":1}}}"#,
            ),
        ] {
            c.execute(
                "INSERT INTO idempotency_keys (merchant, key, fingerprint, created_at, locked_until, fence, recovery_point, request_body)
                 VALUES ('loja', ?1, 'fp', 0, 0, 1, 'started', ?2)",
                params![key, body.as_bytes()],
            )
            .unwrap();
        }
        migrations().to_latest(&mut c).unwrap();
        let ops: Vec<(String, String)> = c
            .prepare("SELECT key, operation FROM idempotency_keys ORDER BY key")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            ops,
            [
                ("k-estorno".to_string(), "estorno".to_string()),
                ("k-pagamento".to_string(), "pagamento".to_string())
            ]
        );
    }

    use super::*;
    use crate::clock::ManualClock;
    use std::time::Duration;

    fn claim(key: &str, fp: &str) -> Claim {
        Claim {
            merchant: MerchantId::parse("loja").unwrap(),
            key: IdempotencyKey::parse(key.as_bytes()).unwrap(),
            fingerprint: Fingerprint::from_stored(fp.into()),
            request: Vec::new(),
            lease_ms: 1_000,
            operation: KeyOperation::PAGAMENTO,
            referencia: None,
        }
    }

    #[tokio::test]
    async fn a_second_claim_of_a_live_key_is_in_progress_and_after_the_lease_is_a_takeover() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let store = SqliteStore::open(dir.path().join("t.db"), clock.clone()).unwrap();
        assert_eq!(
            store.claim(claim("k", "f")).await.unwrap(),
            NextAction::StartProcessing {
                fence: 1,
                takeover: false
            }
        );
        assert!(matches!(
            store.claim(claim("k", "f")).await.unwrap(),
            NextAction::InProgress { .. }
        ));
        assert_eq!(
            store.claim(claim("k", "other")).await.unwrap(),
            NextAction::FingerprintMismatch
        );
        clock.advance(Duration::from_millis(1_001));
        assert_eq!(
            store.claim(claim("k", "f")).await.unwrap(),
            NextAction::StartProcessing {
                fence: 2,
                takeover: true
            }
        );
    }

    #[tokio::test]
    async fn the_reaper_s_purge_deletes_at_most_its_batch_oldest_first_and_never_a_key_in_progress()
    {
        // Arrange: seven keys completed a second apart, one still in progress, all older than a
        // retention of ten seconds by the time the purge runs.
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let store = SqliteStore::open(dir.path().join("t.db"), clock.clone()).unwrap();
        let (merchant, retention_ms) = (MerchantId::parse("loja").unwrap(), 10_000);
        for i in 0..7 {
            let key = format!("k{i}");
            let NextAction::StartProcessing { fence, .. } =
                store.claim(claim(&key, "f")).await.unwrap()
            else {
                panic!("a fresh key is claimed");
            };
            let answer = KeyAnswer {
                merchant: merchant.clone(),
                key: IdempotencyKey::parse(key.as_bytes()).unwrap(),
                fence,
                resource: format!("pay_{i}"),
                response: StoredResponse {
                    status: 201,
                    body: b"{}".to_vec(),
                },
            };
            assert_eq!(
                store.finish_existing(answer).await.unwrap(),
                FinishOutcome::Stored
            );
            clock.advance(Duration::from_secs(1));
        }
        store.claim(claim("in-progress", "f")).await.unwrap();
        clock.advance(Duration::from_secs(60));
        let keys = || async {
            let mut left = Vec::new();
            for k in ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "in-progress"] {
                let key = IdempotencyKey::parse(k.as_bytes()).unwrap();
                if store.lookup_key(&merchant, &key).await.unwrap().is_some() {
                    left.push(k);
                }
            }
            left
        };

        // Act + Assert: three at a time, the oldest first, until fewer than three are left.
        assert_eq!(store.purge_keys(retention_ms, 3).await.unwrap(), 3);
        assert_eq!(keys().await, ["k3", "k4", "k5", "k6", "in-progress"]);
        assert_eq!(store.purge_keys(retention_ms, 3).await.unwrap(), 3);
        assert_eq!(store.purge_keys(retention_ms, 3).await.unwrap(), 1);
        assert_eq!(store.purge_keys(retention_ms, 3).await.unwrap(), 0);
        assert_eq!(keys().await, ["in-progress"]);
    }

    #[tokio::test]
    async fn reopening_a_database_keeps_its_rows_and_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = SqliteStore::open(&path, ManualClock::new()).unwrap();
        store.claim(claim("k", "f")).await.unwrap();
        store.close();
        let again = SqliteStore::open(&path, ManualClock::new()).unwrap();
        assert!(again
            .lookup_key(
                &MerchantId::parse("loja").unwrap(),
                &IdempotencyKey::parse(b"k").unwrap()
            )
            .await
            .unwrap()
            .is_some());
    }
}
