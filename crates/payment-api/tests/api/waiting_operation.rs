//! A third keyed operation, written the way a new one is (Pix, capture): a module implementing
//! `idempotency::Operation` and its route. (Its migration would create its resource's tables; the
//! key table takes any operation name. This double keeps its resource at its "provider", in
//! memory.) This test double answers **waiting** first
//! and settles later, like a Pix charge: the runner stores the first answer as the replay, and the
//! resource's later state is read from the resource (`GET`), never from a replay.

use crate::helpers::{Backend, TestDb};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use payment_api::clock::{Millis, SystemClock};
use payment_api::domain::{IdempotencyKey, KeyOperation, MerchantId};
use payment_api::faults::Faults;
use payment_api::idempotency::replay_cache::ReplayCache;
use payment_api::idempotency::{
    Answer, Completed, Held, Keyed, Operation, Recover, Recovery, Runner,
};
use payment_api::metrics::Metrics;
use payment_api::store::{Claim, KeyStore, PgOptions, PgStore, SqliteStore, StoredResponse};
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// A charge that is created `aguardando` and confirmed later by its provider (here, the test).
#[derive(Debug, Default)]
struct Waiting {
    /// The provider's side: resource id → (key, status).
    provider: Mutex<HashMap<String, (String, &'static str)>>,
    /// Charges created at the provider (never more than one per key).
    created: AtomicU32,
}

impl Waiting {
    fn body(id: &str, status: &str, valor: i64) -> Vec<u8> {
        serde_json::to_vec(&json!({"id": id, "status": status, "valor": valor})).unwrap()
    }

    /// The provider's charge for a key, created once (its id derives from the key, as a Pix
    /// `txid` derives from the downstream key).
    fn create_once(&self, key: &IdempotencyKey) -> String {
        let id = format!("esp_{}", key.as_ref().replace('-', ""));
        let mut provider = self.provider.lock().unwrap();
        provider.entry(id.clone()).or_insert_with(|| {
            self.created.fetch_add(1, Ordering::SeqCst);
            (key.as_ref().to_string(), "aguardando")
        });
        id
    }

    fn settle(&self, id: &str) {
        self.provider.lock().unwrap().get_mut(id).unwrap().1 = "pago";
    }

    fn status(&self, id: &str) -> Option<&'static str> {
        self.provider.lock().unwrap().get(id).map(|r| r.1)
    }
}

#[async_trait::async_trait]
impl Operation for Waiting {
    type Request = i64;
    const KIND: KeyOperation = KeyOperation::named("espera_teste");

    async fn execute(
        &self,
        held: &Held<'_>,
        valor: &i64,
        _faults: &Faults,
    ) -> payment_api::Result<Completed> {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let id = self.create_once(held.key);
        let response = StoredResponse {
            status: 201,
            body: Self::body(&id, "aguardando", *valor),
        };
        held.complete(&id, response).await
    }

    async fn recover(&self, held: &Held<'_>, _created_at: Millis) -> payment_api::Result<Recovery> {
        let valor: Value = serde_json::from_slice(held.request.unwrap()).unwrap();
        let id = self.create_once(held.key);
        let response = StoredResponse {
            status: 201,
            body: Self::body(&id, "aguardando", valor["valor"].as_i64().unwrap()),
        };
        Ok(match held.complete(&id, response).await? {
            Completed::LeaseLost => Recovery::Nothing,
            _ => Recovery::Completed,
        })
    }
}

#[derive(Clone)]
struct App {
    runner: Runner,
    op: Arc<Waiting>,
}

/// Its routes: `POST /esperas` under `Idempotency-Key`, `GET /esperas/{id}`.
fn routes(app: App) -> Router {
    async fn create(State(app): State<App>, headers: HeaderMap, body: String) -> Response {
        let key = IdempotencyKey::parse(headers["idempotency-key"].as_bytes()).unwrap();
        let json: Value = serde_json::from_str(&body).unwrap();
        let merchant = MerchantId::parse("loja").unwrap();
        let keyed = Keyed::new(
            merchant,
            key,
            "/esperas",
            &json,
            json["valor"].as_i64().unwrap(),
        );
        match app
            .runner
            .run(app.op.clone(), keyed, &Faults::default())
            .await
        {
            Ok(Answer::First(r)) => {
                (StatusCode::from_u16(r.status).unwrap(), r.body).into_response()
            }
            Ok(Answer::Replay(r)) => (
                StatusCode::from_u16(r.status).unwrap(),
                [("idempotent-replayed", "true")],
                r.body,
            )
                .into_response(),
            Err(e) => e.into_response(),
        }
    }
    async fn read(State(app): State<App>, Path(id): Path<String>) -> Response {
        match app.op.status(&id) {
            Some(status) => axum::Json(json!({"id": id, "status": status})).into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        }
    }
    Router::new()
        .route("/esperas", post(create))
        .route("/esperas/{id}", get(read))
        .with_state(app)
}

async fn key_store(db: &TestDb) -> Arc<dyn KeyStore> {
    match db {
        TestDb::Sqlite { path, .. } => {
            Arc::new(SqliteStore::open(path, Arc::new(SystemClock::default())).unwrap())
        }
        TestDb::Postgres { url, .. } => Arc::new(
            PgStore::connect(url, PgOptions::default(), Arc::new(SystemClock::default()))
                .await
                .unwrap(),
        ),
    }
}

async fn serve(keys: Arc<dyn KeyStore>, op: Arc<Waiting>) -> (String, Runner) {
    let runner = Runner::new(
        keys,
        ReplayCache::new(100, 60_000),
        Arc::new(Metrics::default()),
        30_000,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = routes(App {
        runner: runner.clone(),
        op,
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, runner)
}

async fn post_espera(url: &str, key: &str, valor: i64) -> (u16, bool, Vec<u8>) {
    let res = reqwest::Client::new()
        .post(format!("{url}/esperas"))
        .header("idempotency-key", key)
        .body(json!({"valor": valor}).to_string())
        .send()
        .await
        .unwrap();
    let replayed = res.headers().contains_key("idempotent-replayed");
    (
        res.status().as_u16(),
        replayed,
        res.bytes().await.unwrap().to_vec(),
    )
}

#[apply(crate::stores)]
async fn a_waiting_answer_is_replayed_as_first_sent_while_the_resource_settles(backend: Backend) {
    let db = TestDb::new(backend).await;
    let op = Arc::new(Waiting::default());
    let (url, _) = serve(key_store(&db).await, op.clone()).await;
    let key = uuid::Uuid::new_v4().to_string();

    let (status, replayed, first) = post_espera(&url, &key, 1500).await;
    assert_eq!((status, replayed), (201, false));
    let body: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(body["status"], "aguardando");
    let id = body["id"].as_str().unwrap().to_string();

    op.settle(&id);
    let now: Value = reqwest::get(format!("{url}/esperas/{id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        now["status"], "pago",
        "the resource's later state is read from the resource"
    );

    let (status, replayed, again) = post_espera(&url, &key, 1500).await;
    assert_eq!((status, replayed), (201, true));
    assert_eq!(
        again, first,
        "the replay is the first answer, byte for byte"
    );
    assert_eq!(op.created.load(Ordering::SeqCst), 1);

    let (status, _, _) = post_espera(&url, &key, 999).await;
    assert_eq!(status, 422, "the same key with another request is refused");
    assert_eq!(op.created.load(Ordering::SeqCst), 1);
}

#[apply(crate::stores)]
async fn concurrent_duplicates_of_a_waiting_operation_create_it_once(backend: Backend) {
    let db = TestDb::new(backend).await;
    let op = Arc::new(Waiting::default());
    let (url, _) = serve(key_store(&db).await, op.clone()).await;
    let key = uuid::Uuid::new_v4().to_string();

    let answers = futures::future::join_all((0..8).map(|_| post_espera(&url, &key, 700))).await;

    assert_eq!(op.created.load(Ordering::SeqCst), 1, "{answers:?}");
    let firsts: Vec<_> = answers.iter().filter(|(s, r, _)| *s == 201 && !r).collect();
    assert_eq!(firsts.len(), 1, "one execution answered first");
    for (status, _, body) in &answers {
        assert!(
            (*status == 201 && *body == firsts[0].2) || *status == 409,
            "{status} {}",
            String::from_utf8_lossy(body)
        );
    }
}

#[apply(crate::stores)]
async fn a_waiting_operation_abandoned_by_a_crash_is_completed_by_the_recovery_worker(
    backend: Backend,
) {
    let db = TestDb::new(backend).await;
    let keys = key_store(&db).await;
    let op = Arc::new(Waiting::default());
    let (url, runner) = serve(keys.clone(), op.clone()).await;
    let key = uuid::Uuid::new_v4().to_string();
    // A worker claimed the key with its request and died before it answered.
    let body = json!({"valor": 4200});
    let claimed = Keyed::new(
        MerchantId::parse("loja").unwrap(),
        IdempotencyKey::parse(key.as_bytes()).unwrap(),
        "/esperas",
        &body,
        (),
    );
    keys.claim(Claim {
        merchant: MerchantId::parse("loja").unwrap(),
        key: IdempotencyKey::parse(key.as_bytes()).unwrap(),
        fingerprint: claimed.fingerprint().clone(),
        request: serde_json::to_vec(&body).unwrap(),
        operation: Waiting::KIND,
        referencia: None,
        lease_ms: 0,
    })
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;

    let other = KeyOperation::named("outra_operacao");
    struct Unknown(KeyOperation);
    #[async_trait::async_trait]
    impl Recover for Unknown {
        fn kind(&self) -> KeyOperation {
            self.0.clone()
        }
        async fn recover(&self, _: &Held<'_>, _: Millis) -> payment_api::Result<Recovery> {
            panic!("only the operation that claimed a key recovers it")
        }
    }
    let pass = runner
        .recover_abandoned(&[&Unknown(other), op.as_ref()], 10)
        .await
        .unwrap();

    assert_eq!(pass.completed, 1, "{pass:?}");
    assert_eq!(op.created.load(Ordering::SeqCst), 1);
    let (status, replayed, answer) = post_espera(&url, &key, 4200).await;
    assert_eq!((status, replayed), (201, true));
    assert_eq!(
        serde_json::from_slice::<Value>(&answer).unwrap()["status"],
        "aguardando"
    );
    assert_eq!(op.created.load(Ordering::SeqCst), 1, "never created twice");
}
