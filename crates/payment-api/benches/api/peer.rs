//! The peer `make bench` measures Pagar beside: a small axum app with `axum-idempotent` 0.6.0
//! from crates.io, wired as its README shows (`CookieManagerLayer` → ruts `SessionLayer` on a
//! Moka store → `IdempotentLayer` in direct-key mode on `Idempotency-Key`). Keys and responses
//! live in memory only. The middleware caches only for a request that carries a session, so the
//! bench opens one session for the merchant (`POST /sessao`) and every request sends its cookie.
//! The handler does what Pagar's does short of storing: it validates the body and "charges" an
//! in-memory ledger (`GET /cobrancas` counts its charges). It runs as deployed, a process of its
//! own (`processes::peer`), never inside the bench's runtime.

use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use axum_idempotent::{IdempotentLayer, IdempotentOptions};
use ruts::store::moka::MokaStore;
use ruts::{CookieOptions, Session, SessionLayer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tower_cookies::CookieManagerLayer;

async fn open_session(session: Session<MokaStore>) -> StatusCode {
    let ttl = ruts::store::Ttl::new(3600).expect("a valid ttl");
    session
        .set("merchant", &"loja_bench", ttl, None)
        .await
        .expect("the session store answers");
    StatusCode::CREATED
}

/// Serves the peer on a free loopback port (printed as `listening on http://…`) until killed.
pub async fn serve() {
    let charges = Arc::new(AtomicU64::new(0));
    let counted = charges.clone();
    let pay = move |Json(body): Json<serde_json::Value>| {
        let charges = counted.clone();
        async move {
            let valor = body["valor"]
                .as_i64()
                .filter(|v| (1..=100_000_000).contains(v));
            let cartao = body["cartao"].as_str().filter(|c| c.starts_with("tok_"));
            let (Some(valor), Some(_)) = (valor, cartao) else {
                return (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    Json(serde_json::json!({})),
                );
            };
            charges.fetch_add(1, Ordering::SeqCst);
            let id = format!("pay_{}", uuid::Uuid::now_v7().simple());
            (
                StatusCode::CREATED,
                Json(
                    serde_json::json!({"id": id, "status": "aprovado", "valor": valor, "moeda": "BRL"}),
                ),
            )
        }
    };
    let store = Arc::new(MokaStore::builder().build());
    let idempotent_options = IdempotentOptions::default()
        .use_idempotency_key_header(Some("Idempotency-Key"), true)
        .expire_after(60 * 5);
    // The idempotency layer wraps the payment route; the login route (added after it) opens the
    // session the middleware needs.
    let app = Router::new()
        .route("/pagamentos", post(pay))
        .layer(IdempotentLayer::<MokaStore>::new(idempotent_options))
        .route("/sessao", post(open_session))
        .route(
            "/cobrancas",
            axum::routing::get(move || async move { charges.load(Ordering::SeqCst).to_string() }),
        )
        .layer(SessionLayer::new(store).with_cookie_options(CookieOptions::build().name("session")))
        .layer(CookieManagerLayer::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("listening on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}

/// Opens the merchant's session at the peer whose `POST /pagamentos` is `url`; the cookie.
pub async fn login(url: &str) -> String {
    let base = url.trim_end_matches("/pagamentos");
    let res = reqwest::Client::new()
        .post(format!("{base}/sessao"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        reqwest::StatusCode::CREATED,
        "the peer's login"
    );
    res.headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("session="))
        .and_then(|v| v.split(';').next())
        .expect("the peer opened a session")
        .to_string()
}

/// The charges the peer whose `POST /pagamentos` is `url` made so far.
pub async fn charges(url: &str) -> u64 {
    let base = url.trim_end_matches("/pagamentos");
    reqwest::get(format!("{base}/cobrancas"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .parse()
        .expect("a count")
}
