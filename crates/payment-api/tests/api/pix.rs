//! Pix end to end at the API: the real server on both stores, the Pix provider simulator as an
//! HTTP service of its own (its own port and database file), webhooks signed and delivered over
//! loopback. Charges and Pix received are counted in the simulator's own database and in the
//! server's `pix_received`, never trusted from answers.

use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::time::Duration;

/// The secret the provider signs with and the server checks (Standard Webhooks' own example).
pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Another valid secret (rotation).
const NEW_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
pub(crate) const PIX_TOKEN: &str = "pix_token_for_tests";

/// A Pix provider simulator on its own port and database.
pub(crate) struct Provider {
    running: Option<pix_provider::RunningProvider>,
    pub(crate) url: String,
    client: reqwest::Client,
    token: tokio::sync::OnceCell<String>,
    _dir: tempfile::TempDir,
}

impl Provider {
    pub(crate) async fn start(secrets: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = pix_provider::Config::sandbox(dir.path().join("psp.db"), PIX_TOKEN, secrets);
        let running = pix_provider::start(config).await.unwrap();
        Self {
            url: running.url(),
            running: Some(running),
            client: reqwest::Client::new(),
            token: tokio::sync::OnceCell::new(),
            _dir: dir,
        }
    }

    /// Points a server's configuration at this provider, webhooks registered to the server.
    pub(crate) fn configure(
        &self,
        c: &mut payment_api::Config,
        server_secrets: &str,
        poll_ms: u64,
    ) {
        c.pix.pix_provider_url = Some(self.url.clone());
        c.pix.pix_client_secret = PIX_TOKEN.into();
        c.pix.pix_webhook_secrets = server_secrets.into();
        c.pix.pix_webhook_url = Some("auto".into());
        c.pix.pix_poll_ms = poll_ms;
    }

    /// Waits until a server configured by [`Provider::configure`] has registered its webhook
    /// (the server does it in the background at start; a Pix paid before would be found only by
    /// the poll). Asked as a PSP's client would: `GET /webhook/{chave}`.
    pub(crate) async fn webhook_registered(&self) {
        let chave = payment_api::Config::sandbox("unused.db".into(), API_KEY, "loja_a", ADMIN)
            .pix
            .pix_key;
        let url = format!("{}/webhook/{chave}", self.url);
        assert!(
            crate::helpers::eventually(Duration::from_secs(20), || async {
                let token = self.token().await;
                let res = self.client.get(&url).bearer_auth(token).send().await;
                res.is_ok_and(|r| r.status() == StatusCode::OK)
            })
            .await,
            "the server never registered its webhook at the provider"
        );
    }

    /// An OAuth2 token of the sandbox client (every scope, asked once), to ask the simulator as
    /// a PSP's client would.
    pub(crate) async fn token(&self) -> String {
        self.token.get_or_init(|| self.new_token()).await.clone()
    }

    async fn new_token(&self) -> String {
        let res = self
            .client
            .post(format!("{}/oauth/token", self.url))
            .basic_auth(pix_provider::SANDBOX_CLIENT_ID, Some(PIX_TOKEN))
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let body: Value = res.json().await.unwrap();
        body["access_token"].as_str().unwrap().to_string()
    }

    pub(crate) fn counts(&self) -> pix_provider::Counts {
        self.running.as_ref().unwrap().counts()
    }

    /// The customer pays `txid` (QA control).
    pub(crate) async fn customer_pays(&self, txid: &str, order: Value) -> reqwest::Response {
        self.client
            .post(format!("{}/qa/cob/{txid}/pagar", self.url))
            .bearer_auth(PIX_TOKEN)
            .json(&order)
            .send()
            .await
            .unwrap()
    }

    async fn cob(&self, txid: &str) -> Value {
        self.client
            .get(format!("{}/cob/{txid}", self.url))
            .bearer_auth(self.token().await)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// The cashier cancels the Pix `id` ("Cancelar Pix", `POST /pagamentos/{id}/cancelamento`):
/// answered 200 with the charge as it now stands, which is returned.
pub(crate) async fn cancel_pix(app: &TestApp, id: &str) -> Value {
    let res = app
        .client
        .post(format!("{}/pagamentos/{id}/cancelamento", app.url))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

/// Waits until the server's first Pix pass has ended — its reconciliation listed the Pix
/// received (none yet) and its poll read the waiting charges — so a charge made from now on is
/// left to the next pass, minutes away.
pub(crate) async fn reconciled_once(app: &TestApp) {
    assert!(
        eventually(Duration::from_secs(10), || async {
            let metrics = app.get("/metrics").await.text().await.unwrap();
            metrics.contains(r#"pagar_pix_reconciliations_total{status="ok"} 1"#)
                && metrics
                    .contains(r#"pagar_settlement_passes_total{settlement="pix",status="ok"} 1"#)
        })
        .await,
        "the first Pix pass never ended"
    );
}

async fn spawn(backend: Backend, provider: &Provider, poll_ms: u64) -> TestApp {
    let app = TestApp::spawn_with(backend, |c| provider.configure(c, SECRET, poll_ms)).await;
    provider.webhook_registered().await;
    app
}

fn pix(valor: i64, referencia: &str) -> Value {
    json!({"valor": valor, "metodo": "pix", "referencia": referencia})
}

/// Waits until the payment reads `status` (long poll), and returns it.
pub(crate) async fn status_becomes(app: &TestApp, id: &str, status: &str) -> Value {
    let mut last = Value::Null;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        last = app.get_json(&format!("/pagamentos/{id}?aguardar=2")).await;
        if last["status"] == status {
            return last;
        }
        // `aguardar` waits only while it is `aguardando`.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{id} never became {status}: {last}");
}

#[apply(stores)]
async fn a_pix_is_answered_waiting_with_a_valid_br_code_and_paid_by_the_customer_once(
    #[case] backend: Backend,
) {
    // Arrange
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 60_000).await;
    // The settlement's first pass (the reconciliation at start, then a poll) over before the
    // charge exists: otherwise that poll can find it paid before the webhook arrives.
    reconciled_once(&app).await;
    let key = new_key();
    // Act
    let first = app.pay(&key, &pix(1234, "venda-1")).await;
    let (status, replayed, first_bytes) = body_of(first).await;
    let again = app.pay(&key, &pix(1234, "venda-1")).await;
    let (again_status, again_replayed, again_bytes) = body_of(again).await;
    // Assert: 201 aguardando, replayed byte for byte.
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(replayed, None);
    assert_eq!(again_status, StatusCode::CREATED);
    assert_eq!(again_replayed.as_deref(), Some("true"));
    assert_eq!(first_bytes, again_bytes);
    let body: Value = serde_json::from_slice(&first_bytes).unwrap();
    assert_eq!(body["status"], "aguardando");
    assert_eq!(body["metodo"], "pix");
    let txid = body["pix"]["txid"].as_str().unwrap().to_string();
    assert!((26..=35).contains(&txid.len()) && txid.chars().all(|c| c.is_ascii_alphanumeric()));
    // The BR Code: an outside parser reads it, and it points at the provider's location.
    let code = body["pix"]["copia_e_cola"].as_str().unwrap();
    let parsed = brcode::str_to_brcode(code);
    assert!(parsed.is_pix());
    assert_eq!(parsed.amount, Some(12.34));
    let location = psp.cob(&txid).await["location"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(code.contains(&location), "{code} / {location}");
    assert_eq!(psp.counts().cobrancas, 1);

    // Act: the customer pays; the webhook settles it.
    let paid = psp.customer_pays(&txid, json!({})).await;
    assert_eq!(paid.status(), StatusCode::CREATED);
    let e2eid = paid.json::<Value>().await.unwrap()["endToEndId"]
        .as_str()
        .unwrap()
        .to_string();
    let id = body["id"].as_str().unwrap();
    let now = status_becomes(&app, id, "aprovado").await;
    // Assert
    assert_eq!(now["pix"]["e2eid"], e2eid.as_str());
    assert!(now["pix"]["pago_em"].is_string());
    assert_eq!(app.db.count("pix_received").await, 1);
    assert_eq!(app.db.count("pix_received WHERE via = 'webhook'").await, 1);
    // A replay still answers the first bytes; the state is read from the resource.
    let (_, _, replay) = body_of(app.pay(&key, &pix(1234, "venda-1")).await).await;
    assert_eq!(replay, first_bytes);
    // A look-up by reference sees it.
    let found = app.get_json("/pagamentos?referencia=venda-1").await;
    assert_eq!(found["pix"][0]["status"], "aprovado");
    let counts = psp.counts();
    assert_eq!((counts.cobrancas, counts.pix), (1, 1));
}

/// The PSP's token counts (`GET /qa/tokens`): issued since start, and live.
async fn tokens(psp: &Provider) -> (u64, u64) {
    let res = psp
        .client
        .get(format!("{}/qa/tokens", psp.url))
        .bearer_auth(PIX_TOKEN)
        .send()
        .await
        .unwrap();
    let t: Value = res.json().await.unwrap();
    (
        t["emitidos"].as_u64().unwrap(),
        t["vivos"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn the_server_keeps_one_oauth2_token_and_asks_for_a_new_one_when_the_psp_revokes_it() {
    let psp = Provider::start(SECRET).await;
    let app = spawn(Backend::Sqlite, &psp, 60_000).await;
    // Registering the webhook took a token; two charges reuse it.
    for n in 0..2 {
        let res = app
            .pay(&new_key(), &pix(100 + n, &format!("tok-{n}")))
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
    }
    // One token is the server's, kept; the other this test's own (it asked whether the webhook
    // was registered).
    assert_eq!(tokens(&psp).await, (2, 2), "one token each, kept");

    // The PSP revokes it (credential rotation): the next charge is refused once, a new token
    // is asked for, and the charge is made — the cashier never sees the refusal.
    let res = psp
        .client
        .delete(format!("{}/qa/tokens", psp.url))
        .bearer_auth(PIX_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = app.pay(&new_key(), &pix(300, "tok-depois")).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(tokens(&psp).await, (3, 1), "the server asked for one more");
    assert_eq!(psp.counts().cobrancas, 3);
}

/// A server whose client secret the PSP does not know makes no charge and says why.
#[tokio::test]
async fn a_wrong_client_secret_makes_no_charge_and_the_pix_is_answered_unavailable() {
    let psp = Provider::start(SECRET).await;
    let app = TestApp::spawn_with(Backend::Sqlite, |c| {
        psp.configure(c, SECRET, 60_000);
        c.pix.pix_client_secret = "errado".into();
    })
    .await;
    let res = app.pay(&new_key(), &pix(100, "tok-errado")).await;
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["retryable"], true);
    assert_eq!(psp.counts().cobrancas, 0);
    assert_eq!(tokens(&psp).await, (0, 0));
}

#[apply(stores)]
async fn concurrent_duplicates_of_one_pix_make_one_charge_at_the_provider(
    #[case] backend: Backend,
) {
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 60_000).await;
    let key = new_key();
    let body = pix(500, "venda-dup");
    let answers = futures::future::join_all((0..8).map(|_| {
        let (client, url, key, body) = (
            app.client.clone(),
            app.url.clone(),
            key.clone(),
            body.clone(),
        );
        async move { try_pay(&client, &url, &key, &body).await.unwrap() }
    }))
    .await;
    let mut ids = std::collections::BTreeSet::new();
    for a in answers {
        match a.status() {
            StatusCode::CREATED => {
                ids.insert(a.json::<Value>().await.unwrap()["id"].to_string());
            }
            StatusCode::CONFLICT => {}
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(psp.counts().cobrancas, 1);
    assert_eq!(app.db.count("pix_charges").await, 1);
}

#[apply(stores)]
async fn a_webhook_sent_three_times_is_applied_once(#[case] backend: Backend) {
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 60_000).await;
    let body: Value = app
        .pay(&new_key(), &pix(700, "venda-3x"))
        .await
        .json()
        .await
        .unwrap();
    let txid = body["pix"]["txid"].as_str().unwrap();
    psp.customer_pays(txid, json!({"webhook": "triplicado"}))
        .await;
    status_becomes(&app, body["id"].as_str().unwrap(), "aprovado").await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            psp.counts().entregas_aceitas == 3
        })
        .await,
        "{:?}",
        psp.counts()
    );
    assert_eq!(app.db.count("pix_received").await, 1);
    assert_eq!(psp.counts().pix, 1);
}

#[apply(stores)]
async fn a_lost_webhook_is_caught_by_the_poll(#[case] backend: Backend) {
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 200).await;
    let body: Value = app
        .pay(&new_key(), &pix(900, "venda-perdida"))
        .await
        .json()
        .await
        .unwrap();
    psp.customer_pays(
        body["pix"]["txid"].as_str().unwrap(),
        json!({"webhook": "perdido"}),
    )
    .await;
    status_becomes(&app, body["id"].as_str().unwrap(), "aprovado").await;
    assert_eq!(psp.counts().entregas, 0);
    assert_eq!(app.db.count("pix_received WHERE via = 'consulta'").await, 1);
}

#[apply(stores)]
async fn a_pix_seen_before_its_charge_was_stored_is_applied_to_it_by_the_next_poll(
    #[case] backend: Backend,
) {
    // Arrange: the charge of a key is made and paid at the provider before the server stored it
    // (a first execution that charged and died); its callback reaches the server first.
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 200).await;
    let key = new_key();
    let txid = payment_api::domain::Txid::derive(
        &payment_api::domain::MerchantId::parse("loja_a").unwrap(),
        &payment_api::domain::IdempotencyKey::parse(key.as_bytes()).unwrap(),
    );
    let made = psp
        .client
        .put(format!("{}/cob/{txid}", psp.url))
        .bearer_auth(psp.token().await)
        .json(&json!({"calendario": {"expiracao": 600}, "valor": {"original": "5.00"}, "chave": "pagar-sandbox@pix.example"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    assert_eq!(
        psp.customer_pays(txid.as_ref(), json!({})).await.status(),
        StatusCode::CREATED
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while app.db.count("pix_received").await == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        app.db.count("pix_received WHERE charge_id IS NULL").await,
        1,
        "recorded, no charge yet"
    );

    // Act: the key's retry stores the charge (the provider refuses the used txid; it is read back).
    let body: Value = app
        .pay(&key, &pix(500, "venda-adiantada"))
        .await
        .json()
        .await
        .unwrap();

    // Assert: the Pix already received pays it, once.
    let id = body["id"].as_str().unwrap();
    let paid = status_becomes(&app, id, "aprovado").await;
    assert_eq!(paid["pix"]["txid"], txid.as_ref());
    assert_eq!(
        app.db
            .count("pix_received WHERE charge_id IS NOT NULL")
            .await,
        1
    );
    assert_eq!(
        app.db
            .count("payments WHERE status = 'aprovado' AND valor = 500")
            .await,
        1
    );
    let counts = psp.counts();
    assert_eq!((counts.cobrancas, counts.pix), (1, 1));
}

#[apply(stores)]
async fn with_more_charges_waiting_than_a_poll_page_the_newest_lost_webhook_is_still_found(
    #[case] backend: Backend,
) {
    // Arrange: 230 charges waiting (a poll reads 200 at a time, oldest first).
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 100).await;
    let mut last = Value::Null;
    for i in 0..230 {
        last = app
            .pay(&new_key(), &pix(100 + i, &format!("venda-fila-{i}")))
            .await
            .json()
            .await
            .unwrap();
    }
    assert_eq!(psp.counts().cobrancas, 230);

    // Act: the customer pays the newest, and its callback is lost.
    let txid = last["pix"]["txid"].as_str().unwrap();
    let paid = psp.customer_pays(txid, json!({"webhook": "perdido"})).await;
    assert_eq!(paid.status(), StatusCode::CREATED);

    // Assert: a later page of the poll finds it.
    status_becomes(&app, last["id"].as_str().unwrap(), "aprovado").await;
    assert_eq!(app.db.count("pix_received WHERE via = 'consulta'").await, 1);
}

/// Posts a webhook body to the server with these Standard Webhooks headers.
async fn post_webhook(app: &TestApp, body: &str, headers: &[(&str, String)]) -> reqwest::Response {
    let mut req = app
        .client
        .post(format!("{}/webhooks/pix", app.url))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    req.send().await.unwrap()
}

fn signed(secret: &str, id: &str, ts: i64, body: &str) -> String {
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .sign(id, ts, body.as_bytes())
        .unwrap()
}

#[apply(stores)]
async fn an_unsigned_forged_or_stale_webhook_is_refused_and_records_nothing(
    #[case] backend: Backend,
) {
    // Arrange: a paid charge whose webhook was lost, no poll, and the reconciliation at start
    // done before it was paid: only a webhook could settle it.
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 3_600_000).await;
    reconciled_once(&app).await;
    let body: Value = app
        .pay(&new_key(), &pix(300, "venda-forjada"))
        .await
        .json()
        .await
        .unwrap();
    let txid = body["pix"]["txid"].as_str().unwrap();
    let paid: Value = psp
        .customer_pays(txid, json!({"webhook": "perdido"}))
        .await
        .json()
        .await
        .unwrap();
    let note = json!({"pix": [{"endToEndId": paid["endToEndId"], "txid": txid, "valor": "3.00", "horario": paid["horario"]}]})
        .to_string();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    // Act + Assert: each bad one is 401 and records nothing.
    let unsigned = post_webhook(
        &app,
        &note,
        &[
            ("webhook-id", "msg_1".into()),
            ("webhook-timestamp", now.to_string()),
        ],
    )
    .await;
    assert_problem(
        unsigned,
        StatusCode::UNAUTHORIZED,
        "webhook-nao-autenticado",
    )
    .await;
    let forged = post_webhook(
        &app,
        &note,
        &[
            ("webhook-id", "msg_2".into()),
            ("webhook-timestamp", now.to_string()),
            ("webhook-signature", signed(NEW_SECRET, "msg_2", now, &note)),
        ],
    )
    .await;
    assert_problem(forged, StatusCode::UNAUTHORIZED, "webhook-nao-autenticado").await;
    let stale = post_webhook(
        &app,
        &note,
        &[
            ("webhook-id", "msg_3".into()),
            ("webhook-timestamp", (now - 600).to_string()),
            (
                "webhook-signature",
                signed(SECRET, "msg_3", now - 600, &note),
            ),
        ],
    )
    .await;
    let problem = assert_problem(stale, StatusCode::UNAUTHORIZED, "webhook-nao-autenticado").await;
    assert!(
        problem["detail"].as_str().unwrap().contains("5 minutos"),
        "{problem}"
    );
    let tampered = post_webhook(
        &app,
        &note.replace("3.00", "3000.00"),
        &[
            ("webhook-id", "msg_4".into()),
            ("webhook-timestamp", now.to_string()),
            ("webhook-signature", signed(SECRET, "msg_4", now, &note)),
        ],
    )
    .await;
    assert_problem(
        tampered,
        StatusCode::UNAUTHORIZED,
        "webhook-nao-autenticado",
    )
    .await;
    assert_eq!(app.db.count("pix_received").await, 0);
    assert_eq!(
        app.get_json(&format!("/pagamentos/{}", body["id"].as_str().unwrap()))
            .await["status"],
        "aguardando"
    );
    // A good one is applied — from what the provider says, not from its body.
    let lying = json!({"pix": [{"endToEndId": paid["endToEndId"], "txid": txid, "valor": "9999.00", "horario": paid["horario"]}]}).to_string();
    let good = post_webhook(
        &app,
        &lying,
        &[
            ("webhook-id", "msg_5".into()),
            ("webhook-timestamp", now.to_string()),
            ("webhook-signature", signed(SECRET, "msg_5", now, &lying)),
        ],
    )
    .await;
    assert_eq!(good.status(), StatusCode::OK);
    assert_eq!(app.db.count("pix_received WHERE valor = 300").await, 1);
}

#[apply(stores)]
async fn a_rotated_secret_is_accepted_during_the_rotation(#[case] backend: Backend) {
    // The provider signs with the new secret only; the server accepts the old and the new.
    let psp = Provider::start(NEW_SECRET).await;
    let app = TestApp::spawn_with(backend, |c| {
        psp.configure(c, &format!("{SECRET},{NEW_SECRET}"), 3_600_000)
    })
    .await;
    psp.webhook_registered().await;
    let body: Value = app
        .pay(&new_key(), &pix(450, "venda-rotacao"))
        .await
        .json()
        .await
        .unwrap();
    psp.customer_pays(body["pix"]["txid"].as_str().unwrap(), json!({}))
        .await;
    status_becomes(&app, body["id"].as_str().unwrap(), "aprovado").await;
}

#[apply(stores)]
async fn a_pix_cancelled_then_paid_anyway_is_recorded_as_received_after_cancellation(
    #[case] backend: Backend,
) {
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 60_000).await;
    let body: Value = app
        .pay(&new_key(), &pix(2500, "venda-cancelada"))
        .await
        .json()
        .await
        .unwrap();
    let (id, txid) = (
        body["id"].as_str().unwrap(),
        body["pix"]["txid"].as_str().unwrap(),
    );
    // Act: the cashier cancels (twice: idempotent).
    for _ in 0..2 {
        assert_eq!(cancel_pix(&app, id).await["status"], "cancelado");
    }
    assert_eq!(
        psp.cob(txid).await["status"],
        "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    );
    // A PSP that follows bacen/pix-api#319 refuses the payment.
    let refused = psp.customer_pays(txid, json!({})).await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    // One that does not takes the money anyway: it is recorded, never dropped.
    let paid = psp
        .customer_pays(txid, json!({"aceitar_inativa": true}))
        .await;
    assert_eq!(paid.status(), StatusCode::CREATED);
    let now = status_becomes(&app, id, "recebido_apos_cancelamento").await;
    assert!(now["pix"]["e2eid"].is_string());
    assert_eq!(app.db.count("pix_received").await, 1);
}

#[apply(stores)]
async fn a_pix_paid_before_the_cancel_stays_paid(#[case] backend: Backend) {
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 3_600_000).await;
    let body: Value = app
        .pay(&new_key(), &pix(800, "venda-corrida"))
        .await
        .json()
        .await
        .unwrap();
    let (id, txid) = (
        body["id"].as_str().unwrap(),
        body["pix"]["txid"].as_str().unwrap(),
    );
    psp.customer_pays(txid, json!({"webhook": "perdido"})).await;
    let res = app
        .client
        .post(format!("{}/pagamentos/{id}/cancelamento", app.url))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(res.json::<Value>().await.unwrap()["status"], "aprovado");
    assert_eq!(psp.cob(txid).await["status"], "CONCLUIDA");
}

#[apply(stores)]
async fn an_expired_pix_is_removed_and_a_late_payment_is_still_recorded(#[case] backend: Backend) {
    let psp = Provider::start(SECRET).await;
    let app = TestApp::spawn_with_clock(backend, |c| psp.configure(c, SECRET, 100)).await;
    let body: Value = app
        .pay(
            &new_key(),
            &json!({"valor": 150, "metodo": "pix", "expiracao": 30}),
        )
        .await
        .json()
        .await
        .unwrap();
    let (id, txid) = (
        body["id"].as_str().unwrap(),
        body["pix"]["txid"].as_str().unwrap(),
    );
    // Act: the server's clock passes the expiry (and its grace); the poll removes it.
    app.advance_clock(Duration::from_secs(40));
    status_becomes(&app, id, "expirado").await;
    assert_eq!(
        psp.cob(txid).await["status"],
        "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    );
    // The customer pays the stale QR at a PSP that lets it through.
    psp.customer_pays(txid, json!({"aceitar_inativa": true, "webhook": "perdido"}))
        .await;
    status_becomes(&app, id, "recebido_apos_cancelamento").await;
}

#[apply(stores)]
async fn the_same_key_as_pix_then_card_is_422_and_pix_without_a_provider_is_refused(
    #[case] backend: Backend,
) {
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 60_000).await;
    let key = new_key();
    assert_eq!(
        app.pay(&key, &pix(100, "v")).await.status(),
        StatusCode::CREATED
    );
    let card = app
        .pay(
            &key,
            &json!({"valor": 100, "cartao": "tok_aprovado", "referencia": "v"}),
        )
        .await;
    assert_problem(
        card,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency-key-reused",
    )
    .await;
    let bad = app
        .pay(
            &new_key(),
            &json!({"valor": 100, "metodo": "pix", "cartao": "tok_aprovado"}),
        )
        .await;
    assert_problem(bad, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
    assert_eq!(psp.counts().cobrancas, 1);

    let no_pix = TestApp::spawn(backend).await;
    let refused = no_pix.pay(&new_key(), &pix(100, "v")).await;
    assert_problem(
        refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "pix-indisponivel",
    )
    .await;
    assert_eq!(no_pix.stored_keys().await, 0);
}

/// Real process: the server aborts right after the provider made the charge, before storing it.
/// The next process completes the key with that same charge: one charge at the provider.
#[apply(stores)]
async fn a_server_that_dies_after_the_provider_charged_makes_no_second_charge(
    #[case] backend: Backend,
) {
    let psp = Provider::start(SECRET).await;
    let db = TestDb::new(backend).await;
    let pix_args = [
        "--pix-provider-url",
        psp.url.as_str(),
        "--pix-client-secret",
        PIX_TOKEN,
        "--pix-webhook-secrets",
        SECRET,
        "--lease-ms",
        "500",
    ];
    let mut crashing = ServerProcess::start(
        &db,
        &[&pix_args[..], &["--fault-crash-after-charge", "1"]].concat(),
    );
    let key = new_key();
    let body = pix(4321, "venda-crash");
    let lost = try_pay(&reqwest::Client::new(), &crashing.url, &key, &body).await;
    assert!(lost.is_err(), "the server should have died: {lost:?}");
    let _ = crashing.child.wait();
    assert_eq!(psp.counts().cobrancas, 1);
    let next = ServerProcess::start(&db, &pix_args);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let client = reqwest::Client::new();
    let mut answer = None;
    for _ in 0..50 {
        let res = try_pay(&client, &next.url, &key, &body).await.unwrap();
        if res.status() == StatusCode::CREATED {
            answer = Some(res.json::<Value>().await.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answer = answer.expect("the retry completed the key");
    assert_eq!(answer["status"], "aguardando");
    assert_eq!(psp.counts().cobrancas, 1);
    assert_eq!(db.count("pix_charges").await, 1);
}

/// A received Pix paid back (devolução) through the refund route: never more than the Pix in
/// total, a retry of the same key replayed, and a lost answer never paying back twice.
#[apply(stores)]
async fn a_devolucao_never_passes_the_pix_and_a_lost_answer_never_pays_back_twice(
    #[case] backend: Backend,
) {
    // Arrange: a Pix of R$ 30,00, paid.
    let psp = Provider::start(SECRET).await;
    let app = spawn(backend, &psp, 60_000).await;
    let body: Value = app
        .pay(&new_key(), &pix(3000, "venda-devolucao"))
        .await
        .json()
        .await
        .unwrap();
    let id = body["id"].as_str().unwrap().to_string();
    psp.customer_pays(body["pix"]["txid"].as_str().unwrap(), json!({}))
        .await;
    status_becomes(&app, &id, "aprovado").await;
    let refund = |key: String, valor: i64| {
        let (client, url) = (app.client.clone(), app.url.clone());
        let path = format!("{url}/pagamentos/{id}/estornos");
        async move {
            client
                .post(path)
                .bearer_auth(API_KEY)
                .header("Idempotency-Key", key)
                .json(&json!({"valor": valor, "referencia": "dev-1"}))
                .send()
                .await
        }
    };
    // Act + Assert: R$ 10,00 back; the same key again is a replay.
    let k1 = new_key();
    let first = refund(k1.clone(), 1000).await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    let first = first.bytes().await.unwrap();
    let again = refund(k1.clone(), 1000).await.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.bytes().await.unwrap(), first);
    // The answer of the next one is lost after the server committed; its retry is a replay.
    app.set_faults(json!({"drop_response_probability": 1.0}))
        .await;
    let k2 = new_key();
    assert!(
        refund(k2.clone(), 1500).await.is_err(),
        "the answer was dropped"
    );
    app.set_faults(json!({})).await;
    let retried = refund(k2.clone(), 1500).await.unwrap();
    assert_eq!(retried.status(), StatusCode::CREATED);
    assert_eq!(retried.headers()["idempotent-replayed"], "true");
    // R$ 5,00 left: R$ 5,01 is refused, and nothing moves.
    let over = refund(new_key(), 501).await.unwrap();
    assert_problem(
        over,
        StatusCode::UNPROCESSABLE_ENTITY,
        "estorno-excede-saldo",
    )
    .await;
    let last = refund(new_key(), 500).await.unwrap();
    assert_eq!(last.status(), StatusCode::CREATED);
    // Counted at the provider: three devoluções, R$ 30,00, never more than the Pix.
    let c = psp.counts();
    assert_eq!((c.devolucoes, c.devolvido), (3, 3000));
    let read = app.get_json(&format!("/pagamentos/{id}")).await;
    assert_eq!(read["status"], "aprovado");
    assert_eq!(read["estornos"].as_array().unwrap().len(), 3);
}

/// Real process: the server aborts right after the provider paid a devolução back, before
/// storing it. The next process settles the key by asking the provider under the same id (which
/// refuses a second devolução): one devolução.
#[apply(stores)]
async fn a_server_that_dies_after_a_devolucao_makes_no_second_one(#[case] backend: Backend) {
    let psp = Provider::start(SECRET).await;
    let db = TestDb::new(backend).await;
    let pix_args = [
        "--pix-provider-url",
        psp.url.as_str(),
        "--pix-client-secret",
        PIX_TOKEN,
        "--pix-webhook-secrets",
        SECRET,
        "--pix-webhook-url",
        "auto",
        "--lease-ms",
        "500",
    ];
    let client = reqwest::Client::new();
    let key = new_key();
    let id;
    {
        let first = ServerProcess::start(&db, &pix_args);
        let body: Value = try_pay(
            &client,
            &first.url,
            &new_key(),
            &pix(2000, "venda-crash-dev"),
        )
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        id = body["id"].as_str().unwrap().to_string();
        psp.customer_pays(body["pix"]["txid"].as_str().unwrap(), json!({}))
            .await;
        assert!(
            eventually(Duration::from_secs(10), || async {
                merchant_get(&client, &first.url, &format!("/pagamentos/{id}")).await["status"]
                    == "aprovado"
            })
            .await
        );
    }
    let mut crashing = ServerProcess::start(
        &db,
        &[&pix_args[..], &["--fault-crash-after-charge", "1"]].concat(),
    );
    let devolver = |url: String| {
        let (client, key, id) = (client.clone(), key.clone(), id.clone());
        async move {
            client
                .post(format!("{url}/pagamentos/{id}/estornos"))
                .bearer_auth(API_KEY)
                .header("Idempotency-Key", key)
                .json(&json!({"valor": 2000}))
                .send()
                .await
        }
    };
    assert!(
        devolver(crashing.url.clone()).await.is_err(),
        "the server died"
    );
    let _ = crashing.child.wait();
    assert_eq!(psp.counts().devolucoes, 1);
    let next = ServerProcess::start(&db, &pix_args);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut answer = None;
    for _ in 0..50 {
        let res = devolver(next.url.clone()).await.unwrap();
        if res.status() == StatusCode::CREATED {
            answer = Some(res.json::<Value>().await.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        answer.expect("the retry completed the key")["status"],
        "aprovado"
    );
    let c = psp.counts();
    assert_eq!((c.devolucoes, c.devolvido), (1, 2000));
}

/// A PSP that asks for the merchant's certificate (mutual TLS, as the API Pix's PSPs do): a
/// client without it never gets past the handshake; the server with it and the PSP's CA makes
/// the charge; a server without it makes none and says the provider is unavailable.
#[tokio::test]
async fn over_mutual_tls_only_a_server_with_the_merchants_certificate_reaches_the_psp() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = pix_provider::Config::sandbox(dir.path().join("psp.db"), PIX_TOKEN, SECRET);
    config.tls_dir = Some(dir.path().join("tls"));
    let psp = pix_provider::start(config).await.unwrap();
    let url = psp.url();
    assert!(url.starts_with("https://"), "{url}");
    let files = psp.tls().unwrap().clone();

    // No client certificate: refused in the handshake, even with the right client secret.
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&files.ca).unwrap()).unwrap();
    let anonymous = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .unwrap();
    let refused = anonymous
        .post(format!("{url}/oauth/token"))
        .basic_auth(pix_provider::SANDBOX_CLIENT_ID, Some(PIX_TOKEN))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await;
    assert!(refused.is_err(), "{refused:?}");

    // The server with the merchant's certificate and the PSP's CA: the charge is made.
    let configure = |c: &mut payment_api::Config, cert: bool| {
        c.pix.pix_provider_url = Some(url.clone());
        c.pix.pix_client_secret = PIX_TOKEN.into();
        c.pix.pix_ca_cert = Some(files.ca.clone());
        c.pix.pix_client_cert = cert.then(|| files.client.clone());
        c.pix.pix_poll_ms = 60_000;
    };
    let app = TestApp::spawn_with(Backend::Sqlite, |c| configure(c, true)).await;
    let res = app.pay(&new_key(), &pix(990, "mtls-1")).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(psp.counts().cobrancas, 1);

    // A server without it: nothing is charged; the Pix is answered unavailable, to try again.
    let without = TestApp::spawn_with(Backend::Sqlite, |c| configure(c, false)).await;
    let res = without.pay(&new_key(), &pix(990, "mtls-2")).await;
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(psp.counts().cobrancas, 1);
    psp.shutdown().await;
}
