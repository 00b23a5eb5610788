//! The Orders API as a till's server meets it: the real simulator on port 0 with its own
//! database file, every count read from its own ledger.

use axum::http::HeaderMap;
use maquininha::Counts;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::mpsc;

const TOKEN: &str = "token_for_tests";
const SECRET: &str = "secret_for_tests";
const POS: &str = "PAGAR_SIM__POS-1";

struct Machine {
    running: Option<maquininha::RunningMachine>,
    http: reqwest::Client,
    url: String,
    dir: tempfile::TempDir,
}

impl Machine {
    async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    async fn start_with(f: impl FnOnce(&mut maquininha::Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, f).await
    }

    async fn start_in(dir: tempfile::TempDir, f: impl FnOnce(&mut maquininha::Config)) -> Self {
        let mut config = maquininha::Config::sandbox(dir.path().join("maq.db"), TOKEN, SECRET);
        config.terminals = format!("{POS},PAGAR_SIM__POS-2");
        f(&mut config);
        let running = maquininha::start(config).await.unwrap();
        Self {
            url: running.url(),
            running: Some(running),
            http: reqwest::Client::new(),
            dir,
        }
    }

    fn counts(&self) -> Counts {
        self.running.as_ref().unwrap().counts()
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(TOKEN);
        if let Some(k) = key {
            req = req.header("X-Idempotency-Key", k);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    async fn create(&self, key: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, "/v1/orders", Some(key), Some(body))
            .await
    }

    async fn order(&self, id: &str) -> Value {
        self.send(
            reqwest::Method::GET,
            &format!("/v1/orders/{id}"),
            None,
            None,
        )
        .await
        .1
    }

    async fn cancel(&self, id: &str, key: &str) -> (u16, Value) {
        self.send(
            reqwest::Method::POST,
            &format!("/v1/orders/{id}/cancel"),
            Some(key),
            None,
        )
        .await
    }

    async fn refund(&self, id: &str, key: &str) -> (u16, Value) {
        self.send(
            reqwest::Method::POST,
            &format!("/v1/orders/{id}/refund"),
            Some(key),
            None,
        )
        .await
    }

    /// The machine's page looks for its order (what moves it to `at_terminal`).
    async fn machine_looks(&self, terminal: &str) -> Value {
        self.http
            .get(format!("{}/terminais/{terminal}/pedido", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The customer does `acao` at the machine.
    async fn at_machine(&self, terminal: &str, act: Value) -> (u16, Value) {
        let res = self
            .http
            .post(format!("{}/terminais/{terminal}/acao", self.url))
            .json(&act)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    async fn restart(mut self) -> Self {
        self.running.take().unwrap().shutdown().await;
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        Self::start_in(dir, |_| {}).await
    }
}

fn order(valor: &str, reference: &str, terminal: &str) -> Value {
    json!({
        "type": "point",
        "external_reference": reference,
        "description": "Venda no caixa 1",
        "transactions": {"payments": [{"amount": valor}]},
        "config": {
            "point": {"terminal_id": terminal, "print_on_terminal": "no_ticket"},
            "payment_method": {"default_type": "credit_card", "default_installments": 3},
        },
    })
}

#[tokio::test]
async fn an_order_is_made_once_per_key_and_a_terminal_holds_one_open_order() {
    let m = Machine::start().await;
    // Act: the same request twice (its answer lost), the keys in another order.
    let (s1, first) = m.create("k-1", order("10.00", "venda-1", POS)).await;
    let mut reordered = order("10.00", "venda-1", POS);
    reordered["config"] = json!({
        "payment_method": {"default_installments": 3, "default_type": "credit_card"},
        "point": {"print_on_terminal": "no_ticket", "terminal_id": POS},
    });
    let (s2, again) = m.create("k-1", reordered).await;
    // Assert: one order, answered twice as it stands.
    assert_eq!((s1, s2), (201, 201));
    assert_eq!(first["id"], again["id"]);
    assert_eq!(first["status"], "created");
    assert_eq!(first["total_amount"], "10.00");
    assert_eq!(first["transactions"]["payments"][0]["amount"], "10.00");
    assert_eq!(first["config"]["point"]["terminal_id"], POS);
    assert_eq!(m.counts().orders, 1);
    // The key with another body is refused, and so is a second open order on the terminal.
    let (s, e) = m.create("k-1", order("11.00", "venda-1", POS)).await;
    assert_eq!(
        (s, e["errors"][0]["code"].as_str()),
        (409, Some("idempotency_key_already_used"))
    );
    let (s, e) = m.create("k-2", order("5.00", "venda-2", POS)).await;
    assert_eq!(
        (s, e["errors"][0]["code"].as_str()),
        (409, Some("already_queued_order_on_terminal"))
    );
    // Another terminal is free.
    let (s, _) = m
        .create("k-3", order("5.00", "venda-3", "PAGAR_SIM__POS-2"))
        .await;
    assert_eq!(s, 201);
    assert_eq!(m.counts().orders, 2);
}

#[tokio::test]
async fn bad_requests_are_refused_clearly_and_store_nothing() {
    let m = Machine::start().await;
    let no_key = m
        .send(
            reqwest::Method::POST,
            "/v1/orders",
            None,
            Some(order("1.00", "r", POS)),
        )
        .await;
    assert_eq!(
        (no_key.0, no_key.1["errors"][0]["code"].as_str()),
        (400, Some("missing_idempotency_key"))
    );
    let unauthorized = m
        .http
        .post(format!("{}/v1/orders", m.url))
        .header("X-Idempotency-Key", "k")
        .json(&order("1.00", "r", POS))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    let mut cases = vec![
        order("10", "r", POS),
        order("-1.00", "r", POS),
        order("0.00", "r", POS),
        order("10.00", "bad reference!", POS),
        json!({"type": "qr", "external_reference": "r"}),
    ];
    let mut debit_in_three = order("10.00", "r", POS);
    debit_in_three["config"]["payment_method"]["default_type"] = json!("debit_card");
    cases.push(debit_in_three);
    let mut too_soon = order("10.00", "r", POS);
    too_soon["expiration_time"] = json!("PT5S");
    cases.push(too_soon);
    for (i, body) in cases.into_iter().enumerate() {
        let (s, e) = m.create(&format!("bad-{i}"), body.clone()).await;
        assert_eq!(s, 400, "{body} → {e}");
        assert!(
            e["errors"][0]["message"]
                .as_str()
                .is_some_and(|t| !t.is_empty()),
            "{e}"
        );
    }
    let (s, e) = m
        .create("bad-terminal", order("10.00", "r", "NO_SUCH"))
        .await;
    assert_eq!(
        (s, e["errors"][0]["code"].as_str()),
        (404, Some("terminal_not_found"))
    );
    assert_eq!(m.counts().orders, 0, "nothing stored");
    // The key of a refused request stays free.
    assert_eq!(m.create("bad-0", order("10.00", "r", POS)).await.0, 201);
}

#[tokio::test]
async fn the_till_cancels_only_before_the_machine_takes_the_order() {
    let m = Machine::start().await;
    // Before the machine takes it: cancelled, for good (the machine then shows nothing).
    let (_, a) = m.create("a", order("7.00", "venda-a", POS)).await;
    let a_id = a["id"].as_str().unwrap();
    let (s, c) = m.cancel(a_id, "cancel-a").await;
    assert_eq!((s, c["status"].as_str()), (200, Some("canceled")));
    assert!(m.machine_looks(POS).await["pedido"].is_null());
    let (s, again) = m.cancel(a_id, "cancel-a").await;
    assert_eq!((s, &again), (200, &c), "the same key answers the same");

    // Once the machine took it, the till's cancel is refused: only the machine ends it now.
    let (_, b) = m.create("b", order("8.00", "venda-b", POS)).await;
    let b_id = b["id"].as_str().unwrap();
    assert_eq!(
        m.machine_looks(POS).await["pedido"]["status"],
        "at_terminal"
    );
    let (s, e) = m.cancel(b_id, "cancel-b").await;
    assert_eq!(
        (s, e["errors"][0]["code"].as_str()),
        (409, Some("cannot_cancel_order"))
    );
    assert_eq!(m.order(b_id).await["status"], "at_terminal");
    // The customer taps after the till gave up: it is paid, and the till finds it by GET.
    let (s, _) = m
        .at_machine(POS, json!({"acao": "aprovar", "cartao": "debit_card"}))
        .await;
    assert_eq!(s, 200);
    let paid = m.order(b_id).await;
    assert_eq!(paid["status"], "processed");
    assert_eq!(
        paid["transactions"]["payments"][0]["status_detail"],
        "accredited"
    );
    assert_eq!(
        paid["transactions"]["payments"][0]["payment_method"]["type"],
        "debit_card"
    );
    // Now it cannot be cancelled, only refunded — once, whatever the retries.
    assert_eq!(m.cancel(b_id, "cancel-b2").await.0, 409);
    let (s, r) = m.refund(b_id, "refund-b").await;
    assert_eq!((s, r["status"].as_str()), (200, Some("refunded")));
    assert_eq!(m.refund(b_id, "refund-b").await.1, r);
    assert_eq!(
        m.refund(b_id, "refund-b-again").await.1["status"],
        "refunded"
    );
    let (s, e) = m.refund(b_id, "cancel-a").await;
    assert_eq!(
        (s, e["errors"][0]["code"].as_str()),
        (409, Some("idempotency_key_already_used"))
    );
    let counts = m.counts();
    assert_eq!(
        (counts.orders, counts.paid, counts.refunds, counts.canceled),
        (2, 1, 1, 1)
    );
}

#[tokio::test]
async fn declines_a_removed_card_a_machine_that_gives_up_and_one_that_stops_answering() {
    let m = Machine::start().await;
    let mut ids = Vec::new();
    for (i, act) in ["saldo_insuficiente", "senha_incorreta", "desistir"]
        .iter()
        .enumerate()
    {
        let (_, o) = m
            .create(&format!("k{i}"), order("3.00", &format!("v{i}"), POS))
            .await;
        m.machine_looks(POS).await;
        // The card taken out mid-way charges nothing and the machine asks again.
        let (s, removed) = m.at_machine(POS, json!({"acao": "retirar_cartao"})).await;
        assert_eq!(
            (s, removed["mensagem"].as_str()),
            (200, Some("cartao_retirado"))
        );
        assert_eq!(
            m.order(o["id"].as_str().unwrap()).await["status"],
            "at_terminal"
        );
        assert_eq!(m.at_machine(POS, json!({"acao": act})).await.0, 200);
        ids.push(o["id"].as_str().unwrap().to_string());
    }
    let states: Vec<(String, String)> = futures_lite(ids.iter().map(|id| m.order(id)))
        .await
        .into_iter()
        .map(|o| {
            (
                o["status"].as_str().unwrap().into(),
                o["status_detail"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("failed".into(), "insufficient_amount".into()),
            ("failed".into(), "invalid_pin".into()),
            ("canceled".into(), "canceled_on_terminal".into()),
        ]
    );
    // A machine that stops answering never takes its order: the till may still cancel it.
    m.at_machine(POS, json!({"acao": "sem_resposta"})).await;
    let (_, o) = m.create("k-silent", order("4.00", "v-silent", POS)).await;
    assert!(m.machine_looks(POS).await["silenciosa"].as_bool().unwrap());
    assert_eq!(
        m.order(o["id"].as_str().unwrap()).await["status"],
        "created"
    );
    assert_eq!(m.at_machine(POS, json!({"acao": "aprovar"})).await.0, 409);
    assert_eq!(
        m.cancel(o["id"].as_str().unwrap(), "c-silent").await.1["status"],
        "canceled"
    );
    assert_eq!(m.counts().paid, 0, "nothing was charged");
}

async fn futures_lite<F: std::future::Future<Output = Value>>(
    fs: impl Iterator<Item = F>,
) -> Vec<Value> {
    let mut out = Vec::new();
    for f in fs {
        out.push(f.await);
    }
    out
}

#[tokio::test]
async fn an_order_nobody_pays_expires_and_the_ledger_survives_a_restart() {
    let m = Machine::start_with(|c| c.expiration_secs = 1).await;
    let (_, o) = m.create("k", order("9.99", "venda-exp", POS)).await;
    let id = o["id"].as_str().unwrap().to_string();
    let mut status = Value::Null;
    for _ in 0..100 {
        status = m.order(&id).await["status"].clone();
        if status == "expired" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "expired");
    // Expired, the terminal is free again; the ledger is the same after a restart.
    let (s, second) = m.create("k2", order("1.00", "venda-2", POS)).await;
    assert_eq!(s, 201);
    let m = m.restart().await;
    assert_eq!(m.order(&id).await["status"], "expired");
    assert_eq!(
        m.create("k2", order("1.00", "venda-2", POS)).await.1["id"],
        second["id"]
    );
    assert_eq!(m.counts().orders, 2);
}

#[tokio::test]
async fn every_change_is_notified_signed_as_mercado_pago_signs_and_tried_again_until_answered() {
    // A receiver that refuses the first try of each notification.
    let (tx, mut rx) = mpsc::unbounded_channel::<(HeaderMap, String, Value)>();
    let tries = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let receiver = axum::Router::new().route(
        "/mp",
        axum::routing::post({
            let tries = tries.clone();
            move |headers: HeaderMap, q: axum::extract::RawQuery, body: axum::Json<Value>| {
                let tx = tx.clone();
                let n = tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async move {
                    if n.is_multiple_of(2) {
                        return axum::http::StatusCode::SERVICE_UNAVAILABLE;
                    }
                    let _ = tx.send((headers, q.0.unwrap_or_default(), body.0));
                    axum::http::StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/mp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, receiver).await });
    let m = Machine::start_with(|c| c.notification_url = Some(hook)).await;

    let (_, o) = m.create("k", order("12.34", "venda-n", POS)).await;
    m.machine_looks(POS).await;
    m.at_machine(POS, json!({"acao": "aprovar"})).await;
    let (headers, query, body) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    let id = o["id"].as_str().unwrap();
    assert_eq!(query, format!("data.id={id}&type=order"));
    assert_eq!(body["action"], "order.processed");
    assert_eq!(body["data"]["id"], id);
    assert_eq!(body["data"]["total_amount"], "12.34");
    // The signature checks as a receiver checks it: ts and v1 from the header, the manifest
    // from data.id (lower-cased), x-request-id and ts.
    let sig = headers["x-signature"].to_str().unwrap();
    let request_id = headers["x-request-id"].to_str().unwrap();
    let ts: i64 = sig
        .split(',')
        .find_map(|p| p.strip_prefix("ts="))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(maquininha::signature(SECRET, id, request_id, ts), sig);
    assert_ne!(
        maquininha::signature("another secret", id, request_id, ts),
        sig
    );
    // Recorded just after the receiver answered.
    for _ in 0..100 {
        if m.counts().notifications == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(m.counts().notifications, 1);
    assert!(
        tries.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "the refused try was tried again"
    );
}

#[tokio::test]
async fn qa_loses_or_duplicates_notifications_on_purpose_and_refuses_an_unknown_mode() {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let receiver = axum::Router::new().route(
        "/mp",
        axum::routing::post(move |headers: HeaderMap| {
            let tx = tx.clone();
            async move {
                let request = headers["x-request-id"].to_str().unwrap().to_string();
                let _ = tx.send(request);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/mp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, receiver).await });
    let m = Machine::start_with(|c| c.notification_url = Some(hook)).await;
    let mode = |modo: &'static str| {
        let (http, url) = (m.http.clone(), m.url.clone());
        async move {
            http.put(format!("{url}/qa/notificacoes"))
                .json(&json!({"modo": modo}))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(mode("talvez").await, 400, "an unknown mode is refused");

    // Lost: the order is paid, and nobody is told.
    assert_eq!(mode("perdida").await, 204);
    m.create("k-lost", order("5.00", "venda-lost", POS)).await;
    m.machine_looks(POS).await;
    m.at_machine(POS, json!({"acao": "aprovar"})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(rx.try_recv().is_err(), "no notification was sent");

    // Duplicated: the next change is told twice, as two deliveries.
    assert_eq!(mode("duplicada").await, 204);
    m.create("k-dup", order("6.00", "venda-dup", POS)).await;
    m.machine_looks(POS).await;
    m.at_machine(POS, json!({"acao": "aprovar"})).await;
    let first = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_ne!(first, second, "two deliveries, each its own x-request-id");
}
