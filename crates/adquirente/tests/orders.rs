//! The acquirer simulator as its own process, asked over HTTP as a server asks it: what it
//! refuses (and records nothing for), one charge per key, authorizations captured or cancelled
//! once, refunds in parts under their own keys, voided keys, and its ledger kept across a kill -9.

use serde_json::{json, Value};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

const TOKEN: &str = "adquirente_token_de_teste";

struct Acquirer {
    child: Child,
    url: String,
    http: reqwest::Client,
}

impl Acquirer {
    fn start(dir: &Path, listen: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_adquirente"))
            .args(["--listen", listen, "--token", TOKEN])
            .arg("--database")
            .arg(dir.join("adquirente.db"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_string();
        Self {
            child,
            url,
            http: reqwest::Client::new(),
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> (u16, Value) {
        let res = req.bearer_auth(TOKEN).send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, key: Option<&str>, body: Value) -> (u16, Value) {
        let mut req = self.http.post(format!("{}{path}", self.url)).json(&body);
        if let Some(key) = key {
            req = req.header("X-Idempotency-Key", key);
        }
        self.send(req).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.http.get(format!("{}{path}", self.url)))
            .await
    }

    async fn charges(&self) -> usize {
        self.get("/qa/ledger").await.1["cobrancas"]
            .as_array()
            .unwrap()
            .len()
    }
}

impl Drop for Acquirer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn order(amount: &str, token: &str, capture_mode: &str, key: &str) -> Value {
    json!({
        "type": "online", "processing_mode": "automatic", "capture_mode": capture_mode,
        "external_reference": key, "total_amount": amount,
        "transactions": {"payments": [{"amount": amount,
            "payment_method": {"type": "credit_card", "token": token, "installments": 1}}]},
        "metadata": {"merchant": "loja_a", "referencia": "venda-1"}
    })
}

#[tokio::test]
async fn what_it_refuses_it_records_nothing_for() {
    let dir = tempfile::tempdir().unwrap();
    let acq = Acquirer::start(dir.path(), "127.0.0.1:0");
    let good = order("10.00", "tok_aprovado", "automatic", "dk_a");

    let res = acq
        .http
        .post(format!("{}/v1/orders", acq.url))
        .header("X-Idempotency-Key", "dk_a")
        .json(&good)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401, "no token");
    let (status, body) = acq.post("/v1/orders", None, good.clone()).await;
    assert_eq!(
        (status, &body["errors"][0]["code"]),
        (400, &json!("idempotency_key_required"))
    );
    let mut cases = Vec::new();
    for (field, value) in [
        ("/type", json!("point")),
        ("/total_amount", json!("9.99")),
        ("/transactions/payments/0/amount", json!("10")),
        (
            "/transactions/payments/0/payment_method/token",
            json!("4111111111111111"),
        ),
        ("/transactions/payments/0/payment_method/type", json!("pix")),
        ("/capture_mode", json!("later")),
        ("/metadata/merchant", json!("loja a")),
    ] {
        let mut bad = good.clone();
        *bad.pointer_mut(field).unwrap() = value;
        cases.push((field, acq.post("/v1/orders", Some("dk_a"), bad).await.0));
    }
    assert!(cases.iter().all(|(_, s)| *s == 400), "{cases:?}");
    assert_eq!(acq.charges().await, 0);
    // The key refused so many times is still free.
    assert_eq!(acq.post("/v1/orders", Some("dk_a"), good).await.0, 201);
}

#[tokio::test]
async fn a_key_charges_once_can_be_voided_unused_and_is_found_by_its_reference() {
    let dir = tempfile::tempdir().unwrap();
    let acq = Acquirer::start(dir.path(), "127.0.0.1:0");

    let (status, first) = acq
        .post(
            "/v1/orders",
            Some("dk_1"),
            order("12.34", "tok_aprovado", "automatic", "dk_1"),
        )
        .await;
    assert_eq!((status, &first["status"]), (201, &json!("processed")));
    let (status, again) = acq
        .post(
            "/v1/orders",
            Some("dk_1"),
            order("12.34", "tok_aprovado", "automatic", "dk_1"),
        )
        .await;
    assert_eq!((status, &again["id"]), (200, &first["id"]));
    let id = first["id"].as_str().unwrap();
    assert_eq!(
        acq.get(&format!("/v1/orders/{id}")).await.1["id"],
        first["id"]
    );
    let found = acq.get("/v1/orders?external_reference=dk_1").await.1;
    assert_eq!(found["data"][0]["id"], first["id"]);
    assert_eq!(
        acq.get("/v1/orders?external_reference=dk_x").await.1["data"],
        json!([])
    );

    let (_, declined) = acq
        .post(
            "/v1/orders",
            Some("dk_2"),
            order("5.00", "tok_saldo_insuficiente", "automatic", "dk_2"),
        )
        .await;
    assert_eq!(
        (&declined["status"], &declined["status_detail"]),
        (&json!("failed"), &json!("saldo_insuficiente"))
    );

    let void = json!({"idempotency_key": "dk_3", "merchant": "loja_a"});
    let (status, voided) = acq
        .post("/v1/orders/cancel-by-idempotency-key", None, void)
        .await;
    assert_eq!((status, &voided["order"]), (200, &Value::Null));
    let (status, refused) = acq
        .post(
            "/v1/orders",
            Some("dk_3"),
            order("1.00", "tok_aprovado", "automatic", "dk_3"),
        )
        .await;
    assert_eq!(
        (status, &refused["errors"][0]["code"]),
        (409, &json!("idempotency_key_voided"))
    );
    let void = json!({"idempotency_key": "dk_1", "merchant": "loja_a"});
    let (_, charged) = acq
        .post("/v1/orders/cancel-by-idempotency-key", None, void)
        .await;
    assert_eq!(
        charged["order"]["id"], first["id"],
        "a key that charged is not voided"
    );
    assert_eq!(acq.charges().await, 2);
}

#[tokio::test]
async fn an_authorization_moves_once_and_refunds_are_kept_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let acq = Acquirer::start(dir.path(), "127.0.0.1:0");
    let (_, auth) = acq
        .post(
            "/v1/orders",
            Some("dk_a"),
            order("50.00", "tok_aprovado", "manual", "dk_a"),
        )
        .await;
    assert_eq!(
        (&auth["status"], &auth["status_detail"]),
        (&json!("action_required"), &json!("waiting_capture"))
    );
    let id = auth["id"].as_str().unwrap();
    assert_eq!(
        acq.post(&format!("/v1/orders/{id}/capture"), None, json!({}))
            .await
            .0,
        400,
        "a capture carries its key"
    );
    let (_, captured) = acq
        .post(&format!("/v1/orders/{id}/capture"), Some("c1"), json!({}))
        .await;
    assert_eq!(captured["status"], "processed");
    let (_, late) = acq
        .post(&format!("/v1/orders/{id}/cancel"), Some("c2"), json!({}))
        .await;
    assert_eq!(
        late["status"], "processed",
        "a cancel after the capture changes nothing"
    );

    let (_, other) = acq
        .post(
            "/v1/orders",
            Some("dk_b"),
            order("20.00", "tok_aprovado", "manual", "dk_b"),
        )
        .await;
    let other_id = other["id"].as_str().unwrap();
    let (_, undone) = acq
        .post(
            &format!("/v1/orders/{other_id}/cancel"),
            Some("c3"),
            json!({}),
        )
        .await;
    assert_eq!(undone["status"], "canceled");
    let (_, after) = acq
        .post(
            &format!("/v1/orders/{other_id}/capture"),
            Some("c4"),
            json!({}),
        )
        .await;
    assert_eq!(
        after["status"], "canceled",
        "a capture after the cancel changes nothing"
    );

    let (_, at_once) = acq
        .post(
            "/v1/orders",
            Some("dk_c"),
            order("1.00", "tok_aprovado", "automatic", "dk_c"),
        )
        .await;
    let (status, not) = acq
        .post(
            &format!("/v1/orders/{}/capture", at_once["id"].as_str().unwrap()),
            Some("c5"),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, &not["errors"][0]["code"]),
        (409, &json!("order_not_authorized"))
    );

    let payment = captured["transactions"]["payments"][0]["id"]
        .as_str()
        .unwrap();
    let part = json!({"transactions": [{"id": payment, "amount": "10.00"}]});
    let refund = format!("/v1/orders/{id}/refund");
    let (status, first) = acq.post(&refund, Some("dr_1"), part.clone()).await;
    assert_eq!(status, 201);
    let (status, again) = acq.post(&refund, Some("dr_1"), part).await;
    assert_eq!(
        (status, &again["transactions"]["refunds"]),
        (200, &first["transactions"]["refunds"])
    );
    let wrong = json!({"transactions": [{"id": "PAY-outro", "amount": "1.00"}]});
    assert_eq!(acq.post(&refund, Some("dr_2"), wrong).await.0, 404);
    let more = json!({"transactions": [{"id": payment, "amount": "50.01"}]});
    assert_eq!(acq.post(&refund, Some("dr_3"), more).await.0, 400);
    let estornos = acq.get("/qa/ledger").await.1["estornos"].clone();
    assert_eq!(estornos.as_array().unwrap().len(), 1, "{estornos}");
}

#[tokio::test]
async fn its_ledger_outlives_a_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut acq = Acquirer::start(dir.path(), "127.0.0.1:0");
    let (_, made) = acq
        .post(
            "/v1/orders",
            Some("dk_k"),
            order("7.00", "tok_aprovado", "automatic", "dk_k"),
        )
        .await;
    acq.child.kill().unwrap();
    acq.child.wait().unwrap();
    let listen = acq.url.trim_start_matches("http://").to_string();
    let back = Acquirer::start(dir.path(), &listen);
    let (status, again) = back
        .post(
            "/v1/orders",
            Some("dk_k"),
            order("7.00", "tok_aprovado", "automatic", "dk_k"),
        )
        .await;
    assert_eq!(
        (status, &again["id"]),
        (200, &made["id"]),
        "the same order, answered again"
    );
    assert_eq!(back.charges().await, 1);
}
