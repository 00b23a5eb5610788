//! The references a run measures Pagar against, on this machine in the same run: SQLite's own
//! durable commits, a bare endpoint doing one such commit per request, and the fixed-answer
//! ceiling of a replay.

use super::*;

pub(super) fn open_raw(path: &std::path::Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "synchronous", "FULL").unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, merchant TEXT NOT NULL, valor INTEGER NOT NULL,
                                      cartao TEXT NOT NULL, created_at INTEGER NOT NULL)",
    )
    .unwrap();
    c
}

pub(super) fn insert(c: &Connection, valor: i64) {
    c.execute(
        "INSERT INTO t VALUES (?1, 'loja', ?2, 'tok_aprovado', ?3)",
        params![uuid::Uuid::new_v4().to_string(), valor, valor],
    )
    .unwrap();
}

pub(super) fn raw_commits(dir: &std::path::Path) -> Row {
    use durable_sqlite::reference::{percentile_ms, raw_commit_latencies};
    let start = Instant::now();
    let latencies = raw_commit_latencies(&dir.join("raw.db"), RAW_COMMITS).unwrap();
    Row {
        name: "raw SQLite durable commit (1 row/commit)",
        count: RAW_COMMITS,
        elapsed: start.elapsed(),
        p50_ms: percentile_ms(&latencies, 0.50),
        p99_ms: percentile_ms(&latencies, 0.99),
    }
}

pub(super) async fn bare_server(dir: &std::path::Path) -> String {
    use axum::routing::post;
    let conn = Arc::new(Mutex::new(open_raw(&dir.join("bare.db"))));
    let app = axum::Router::new().route(
        "/bare",
        post(move |body: axum::Json<serde_json::Value>| {
            let conn = conn.clone();
            async move {
                let valor = body["valor"].as_i64().unwrap_or(1);
                tokio::task::spawn_blocking(move || insert(&conn.lock().unwrap(), valor))
                    .await
                    .unwrap();
                (axum::http::StatusCode::CREATED, "{}")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/bare", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// The ceiling of a replay on this machine: an axum route that answers every request with one
/// fixed stored answer (Pagar's replay headers and a body of its size) and does nothing else —
/// no authentication, no key, no lookup, no log. It runs as a process of its own
/// (`processes::ceiling`), like Pagar, sharing the two cores with wrk: what is left between this
/// and a server is all that the server itself can still gain. Serves until killed.
pub(crate) async fn serve_constant(body: Vec<u8>) {
    use axum::http::{header, HeaderValue, StatusCode};
    use axum::response::IntoResponse;
    use axum::routing::post;
    let body = axum::body::Bytes::from(body);
    let app = axum::Router::new().route(
        "/pagamentos",
        post(move || {
            let body = body.clone();
            async move {
                let mut res = (StatusCode::CREATED, body).into_response();
                let h = res.headers_mut();
                h.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                h.insert("idempotent-replayed", HeaderValue::from_static("true"));
                res
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("listening on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}

/// The body Pagar replays for one of the keys the replay runs cycle through.
pub(super) async fn replay_body(url: &str) -> Vec<u8> {
    let res = reqwest::Client::new()
        .post(url)
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", "k-0-1")
        .header("Content-Type", "application/json")
        .body(r#"{"valor":2,"cartao":"tok_aprovado"}"#)
        .send()
        .await
        .expect("the server answers");
    assert!(res.headers().contains_key("idempotent-replayed"));
    res.bytes().await.unwrap().to_vec()
}
