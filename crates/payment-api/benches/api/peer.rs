//! The peer `make bench` measures Pagar beside: a small axum app with `axum-idempotent` 0.6.0
//! from crates.io, wired as its README shows (`CookieManagerLayer` → ruts `SessionLayer` on a
//! Moka store → `IdempotentLayer` in direct-key mode on `Idempotency-Key`). Keys and responses
//! live in memory only. The middleware caches only for a request that carries a session, so the
//! bench opens one session for the merchant (`POST /sessao`) and every request sends its cookie.
//! The handler does what Pagar's does short of storing: it validates the body and charges the
//! card at the acquirer Pagar charges at (the `adquirente` process whose address
//! [`ACQUIRER`] holds: `POST /v1/orders` under an `X-Idempotency-Key` made from the client's
//! key, as Mercado Pago's integrations do), over one pooled HTTP client. It runs as deployed, a
//! process of its own (`processes::peer`), never inside the bench's runtime; its charges are
//! counted in the acquirer's ledger, under [`MERCHANT`].

use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use axum_idempotent::{IdempotentLayer, IdempotentOptions};
use pagar_testkit::ACQUIRER_TOKEN;
use ruts::store::moka::MokaStore;
use ruts::{CookieOptions, Session, SessionLayer};
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

/// Where the peer charges: the acquirer's base URL, in its process's environment.
pub(crate) const ACQUIRER: &str = "PAGAR_BENCH_ACQUIRER";
/// The merchant the peer charges for at the acquirer.
pub(crate) const MERCHANT: &str = "loja_par";

/// The acquirer's order for one charge of `valor` centavos on `cartao`, as Pagar's gateway
/// client sends it (`payment_api::gateway::online_orders::NewOrder`, written out here as a peer
/// integrating from the acquirer's documentation would).
fn order(key: &str, valor: i64, cartao: &str) -> serde_json::Value {
    let amount = format!("{}.{:02}", valor / 100, valor % 100);
    serde_json::json!({
        "type": "online",
        "processing_mode": "automatic",
        "capture_mode": "automatic",
        "external_reference": key,
        "total_amount": amount,
        "transactions": {"payments": [{"amount": amount, "payment_method": {"token": cartao}}]},
        "metadata": {"merchant": MERCHANT},
    })
}

/// Serves the peer on a free loopback port (printed as `listening on http://…`) until killed.
pub async fn serve() {
    let acquirer = std::env::var(ACQUIRER).expect("the acquirer's address");
    let http = reqwest::Client::new();
    let pay = move |headers: HeaderMap, Json(body): Json<serde_json::Value>| {
        let (http, acquirer) = (http.clone(), acquirer.clone());
        async move {
            let refused = |status| (status, Json(serde_json::json!({})));
            let valor = body["valor"]
                .as_i64()
                .filter(|v| (1..=100_000_000).contains(v));
            let cartao = body["cartao"].as_str().filter(|c| c.starts_with("tok_"));
            let key = headers.get("idempotency-key").and_then(|k| k.to_str().ok());
            let (Some(valor), Some(cartao), Some(key)) = (valor, cartao, key) else {
                return refused(StatusCode::UNPROCESSABLE_ENTITY);
            };
            let downstream = format!("{MERCHANT}-{key}");
            let charged = http
                .post(format!("{acquirer}/v1/orders"))
                .bearer_auth(ACQUIRER_TOKEN)
                .header("X-Idempotency-Key", &downstream)
                .json(&order(&downstream, valor, cartao))
                .send()
                .await;
            let order: serde_json::Value = match charged {
                Ok(res) if res.status().is_success() => match res.json().await {
                    Ok(order) => order,
                    Err(_) => return refused(StatusCode::BAD_GATEWAY),
                },
                _ => return refused(StatusCode::BAD_GATEWAY),
            };
            let id = format!("pay_{}", uuid::Uuid::now_v7().simple());
            (
                StatusCode::CREATED,
                Json(serde_json::json!({
                    "id": id, "status": "aprovado", "valor": valor, "moeda": "BRL",
                    "cobranca_id": order["id"],
                })),
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
