//! A card at the card machine, end to end at the API: the real server on both stores, the
//! machine's provider simulator (`crates/maquininha`) on its own port and database, its
//! notifications signed and delivered over loopback, and the customer played through the
//! machine's own routes. Orders and payments are counted in the simulator's ledger.

use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "maquininha_token_for_tests";
const SECRET: &str = "maquininha_secret_for_tests";
const POS: &str = "PAGAR_SIM__POS-1";

/// The machine's provider simulator on its own port and database.
struct Machine {
    running: maquininha::RunningMachine,
    url: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Machine {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = maquininha::Config::sandbox(dir.path().join("maq.db"), TOKEN, SECRET);
        config.terminals = format!("{POS},PAGAR_SIM__POS-2");
        let running = maquininha::start(config).await.unwrap();
        Self {
            url: running.url(),
            running,
            http: reqwest::Client::new(),
            _dir: dir,
        }
    }

    fn counts(&self) -> maquininha::Counts {
        self.running.counts()
    }

    /// Points a server at this provider; notifications to it when `notify` (after it starts).
    fn configure(&self, c: &mut payment_api::Config, poll_ms: u64) {
        c.maquininha.maquininha_url = Some(self.url.clone());
        c.maquininha.maquininha_token = TOKEN.into();
        c.maquininha.maquininha_secret = SECRET.into();
        c.maquininha.maquininha_poll_ms = poll_ms;
    }

    /// Sends notifications to the server at `base` from now on.
    async fn notify(&self, base: &str) {
        let res = self
            .http
            .put(format!("{}/qa/notificacoes", self.url))
            .json(&json!({"url": format!("{base}/webhooks/maquininha")}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::NO_CONTENT);
    }

    /// The machine looks for its order (it takes a `created` one: `at_terminal`).
    async fn machine_looks(&self) -> Value {
        self.http
            .get(format!("{}/terminais/{POS}/pedido", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The customer does `act` at the machine.
    async fn customer(&self, act: Value) -> StatusCode {
        self.http
            .post(format!("{}/terminais/{POS}/acao", self.url))
            .json(&act)
            .send()
            .await
            .unwrap()
            .status()
    }
}

/// A server with the machine, settled by notifications (the poll an hour away).
async fn spawn(backend: Backend, machine: &Machine) -> TestApp {
    let app = TestApp::spawn_with(backend, |c| machine.configure(c, 3_600_000)).await;
    machine.notify(&app.url).await;
    app
}

fn at_machine(valor: i64, referencia: &str) -> Value {
    json!({"valor": valor, "maquininha": POS, "metodo": "credito", "parcelas": 3,
           "parcelamento": "loja", "referencia": referencia})
}

/// Waits until the payment `id` reads `status`.
async fn status_becomes(app: &TestApp, id: &str, status: &str) -> Value {
    let mut last = Value::Null;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        last = app.get_json(&format!("/pagamentos/{id}?aguardar=2")).await;
        if last["status"] == status {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{id} never became {status}: {last}");
}

async fn cancel_order(app: &TestApp, id: &str) -> reqwest::Response {
    app.client
        .post(format!("{}/pagamentos/{id}/cancelamento", app.url))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap()
}

#[apply(stores)]
async fn a_card_at_the_machine_is_one_order_replayed_and_paid_once(#[case] backend: Backend) {
    let machine = Machine::start().await;
    let app = spawn(backend, &machine).await;
    let key = new_key();
    // Act: the request, and its retry after a lost answer.
    let (status, replayed, first) =
        body_of(app.pay(&key, &at_machine(12_000, "venda-1")).await).await;
    let (again_status, again_replayed, again) =
        body_of(app.pay(&key, &at_machine(12_000, "venda-1")).await).await;
    // Assert: one order, answered aguardando, replayed byte for byte.
    assert_eq!((status, replayed), (StatusCode::CREATED, None));
    assert_eq!(
        (again_status, again_replayed.as_deref()),
        (StatusCode::CREATED, Some("true"))
    );
    assert_eq!(first, again);
    let body: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(body["status"], "aguardando");
    assert_eq!(body["metodo"], "maquininha");
    assert_eq!(body["maquininha"]["id"], POS);
    assert_eq!(body["maquininha"]["estado"], "created");
    assert_eq!(body["maquininha"]["parcelas"], 3);
    assert_eq!(machine.counts().orders, 1);

    // The machine takes it; the screen can show it (a wait returns on the machine's move too).
    let id = body["id"].as_str().unwrap();
    assert_eq!(machine.machine_looks().await["pedido"]["centavos"], 12_000);
    // The customer pays on credit in 3: the notification settles it.
    assert_eq!(
        machine
            .customer(json!({"acao": "aprovar", "cartao": "credit_card"}))
            .await,
        StatusCode::OK
    );
    let now = status_becomes(&app, id, "aprovado").await;
    assert_eq!(now["maquininha"]["estado"], "processed");
    assert_eq!(now["maquininha"]["pago_com"], "credito");
    assert_eq!(now["maquininha"]["parcelas_pagas"], 3);
    // A payment like any other: found by its reference, with the machine as its means.
    let found = app.get_json("/pagamentos?referencia=venda-1").await;
    assert_eq!(found["pagamentos"][0]["meio"], "maquininha");
    assert_eq!(found["pagamentos"][0]["status"], "aprovado");
    assert_eq!(found["pagamentos"][0]["parcelas"], 3);
    assert_eq!(found["maquininha"][0]["status"], "aprovado");
    assert_eq!(app.db.count("payments WHERE meio = 'maquininha'").await, 1);
    // The replay still answers the first bytes; the provider made one order, one charge.
    let (_, _, replay) = body_of(app.pay(&key, &at_machine(12_000, "venda-1")).await).await;
    assert_eq!(replay, first);
    let counts = machine.counts();
    assert_eq!((counts.orders, counts.paid), (1, 1));
}

#[apply(stores)]
async fn the_cashier_cancels_only_until_the_machine_takes_the_order_and_a_late_tap_is_a_paid_sale(
    #[case] backend: Backend,
) {
    let machine = Machine::start().await;
    let app = spawn(backend, &machine).await;
    // Before the machine takes it: cancelled, for good.
    let first: Value = app
        .pay(&new_key(), &at_machine(500, "venda-a"))
        .await
        .json()
        .await
        .unwrap();
    let res = cancel_order(&app, first["id"].as_str().unwrap()).await;
    assert_eq!(res.status(), StatusCode::OK);
    let cancelled: Value = res.json().await.unwrap();
    assert_eq!(cancelled["status"], "cancelado");
    assert!(machine.machine_looks().await["pedido"].is_null());

    // Once the machine took it: never "cancelado" while a card can pay it.
    let second: Value = app
        .pay(&new_key(), &at_machine(700, "venda-b"))
        .await
        .json()
        .await
        .unwrap();
    let id = second["id"].as_str().unwrap();
    machine.machine_looks().await;
    let refused = cancel_order(&app, id).await;
    assert_problem(refused, StatusCode::CONFLICT, "maquininha-com-o-pedido").await;
    let now = app.get_json(&format!("/pagamentos/{id}")).await;
    assert_eq!(
        (&now["status"], &now["maquininha"]["estado"]),
        (&json!("aguardando"), &json!("at_terminal"))
    );
    // The customer taps after the cashier gave up: a paid sale, not money with no sale.
    machine.customer(json!({"acao": "aprovar"})).await;
    status_becomes(&app, id, "aprovado").await;
    assert_eq!(app.db.count("payments WHERE meio = 'maquininha'").await, 1);
    let counts = machine.counts();
    assert_eq!((counts.orders, counts.paid, counts.canceled), (2, 1, 1));
}

#[apply(stores)]
async fn a_key_whose_order_can_still_be_paid_is_not_cancelled_by_key_and_a_declined_one_frees_its_part(
    #[case] backend: Backend,
) {
    let machine = Machine::start().await;
    let app = spawn(backend, &machine).await;
    let key = new_key();
    let tender = |valor: i64| {
        json!({"valor": valor, "maquininha": POS, "metodo": "debito", "referencia": new_key(),
               "terminal": "caixa-01", "venda": {"referencia": "venda-dividida", "total": 1000}})
    };
    let part: Value = app.pay(&key, &tender(600)).await.json().await.unwrap();
    assert_eq!(part["status"], "aguardando");
    // While the order can be paid: the key stays, and its part of the sale is held.
    assert_problem(
        app.cancel(&key).await,
        StatusCode::CONFLICT,
        "maquininha-aguardando",
    )
    .await;
    let over = app
        .pay(
            &new_key(),
            &json!({"valor": 500, "cartao": "tok_aprovado", "terminal": "caixa-01",
                    "venda": {"referencia": "venda-dividida", "total": 1000}}),
        )
        .await;
    assert_problem(over, StatusCode::UNPROCESSABLE_ENTITY, "venda-excedida").await;
    // Declined at the machine: recusado, with why, and its part is free again.
    machine.machine_looks().await;
    machine
        .customer(json!({"acao": "saldo_insuficiente"}))
        .await;
    let now = status_becomes(&app, part["id"].as_str().unwrap(), "recusado").await;
    assert_eq!(now["maquininha"]["motivo"], "insufficient_amount");
    let rest = app
        .pay(
            &new_key(),
            &json!({"valor": 1000, "cartao": "tok_aprovado", "terminal": "caixa-01",
                    "venda": {"referencia": "venda-dividida", "total": 1000}}),
        )
        .await;
    assert_eq!(rest.status(), StatusCode::CREATED);
    // Its key now answers as a Pix closed unpaid does: no payment to cancel (its order can no
    // longer charge; the till pays the part with a new key).
    assert_problem(
        app.cancel(&key).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "not-a-payment-key",
    )
    .await;
    assert_eq!(machine.counts().paid, 0);
}

#[apply(stores)]
async fn a_lost_notification_is_caught_by_the_poll_and_a_forged_one_records_nothing(
    #[case] backend: Backend,
) {
    let machine = Machine::start().await;
    // No notification URL at the provider: only the poll (every 100 ms) settles.
    let app = TestApp::spawn_with(backend, |c| machine.configure(c, 100)).await;
    let body: Value = app
        .pay(&new_key(), &at_machine(900, "venda-poll"))
        .await
        .json()
        .await
        .unwrap();
    let id = body["id"].as_str().unwrap();
    let order = body["maquininha"]["pedido"].as_str().unwrap();
    // A forged notification (wrong secret) is refused and records nothing.
    let forged = app
        .client
        .post(format!(
            "{}/webhooks/maquininha?data.id={order}&type=order",
            app.url
        ))
        .header(
            "x-signature",
            maquininha::signature("not the secret", order, "r-1", now_ms()),
        )
        .header("x-request-id", "r-1")
        .json(&json!({"action": "order.processed", "data": {"id": order}}))
        .send()
        .await
        .unwrap();
    assert_problem(forged, StatusCode::UNAUTHORIZED, "webhook-nao-autenticado").await;
    machine.machine_looks().await;
    machine
        .customer(json!({"acao": "aprovar", "cartao": "debit_card"}))
        .await;
    let now = status_becomes(&app, id, "aprovado").await;
    assert_eq!(now["maquininha"]["pago_com"], "debito");
    assert_eq!(machine.counts().notifications, 0, "none was sent");
    // A genuine notification sent again changes nothing more.
    let genuine = app
        .client
        .post(format!(
            "{}/webhooks/maquininha?data.id={order}&type=order",
            app.url
        ))
        .header(
            "x-signature",
            maquininha::signature(SECRET, order, "r-2", now_ms()),
        )
        .header("x-request-id", "r-2")
        .json(&json!({"action": "order.processed", "data": {"id": order}}))
        .send()
        .await
        .unwrap();
    assert_eq!(genuine.status(), StatusCode::OK);
    assert_eq!(app.db.count("payments WHERE meio = 'maquininha'").await, 1);
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[apply(stores)]
async fn a_paid_order_is_refunded_whole_once_and_a_part_is_declined(#[case] backend: Backend) {
    let machine = Machine::start().await;
    let app = spawn(backend, &machine).await;
    let body: Value = app
        .pay(&new_key(), &at_machine(3_000, "venda-estorno"))
        .await
        .json()
        .await
        .unwrap();
    let id = body["id"].as_str().unwrap().to_string();
    machine.machine_looks().await;
    machine.customer(json!({"acao": "aprovar"})).await;
    status_becomes(&app, &id, "aprovado").await;
    let refund = |key: String, valor: i64| {
        let (client, url, id) = (app.client.clone(), app.url.clone(), id.clone());
        async move {
            client
                .post(format!("{url}/pagamentos/{id}/estornos"))
                .bearer_auth(API_KEY)
                .header("Idempotency-Key", key)
                .json(&json!({"valor": valor}))
                .send()
                .await
                .unwrap()
        }
    };
    // A part: the machine pays back whole orders only.
    let part = refund(new_key(), 1_000).await;
    assert_eq!(part.status(), StatusCode::PAYMENT_REQUIRED);
    let part: Value = part.json().await.unwrap();
    assert_eq!(part["recusa"], "maquininha_estorna_so_o_valor_inteiro");
    // The whole, asked twice under one key (a lost answer): paid back once.
    let key = new_key();
    let whole = refund(key.clone(), 3_000).await;
    assert_eq!(whole.status(), StatusCode::CREATED);
    let again = refund(key, 3_000).await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(
        again.headers()["idempotent-replayed"].to_str().unwrap(),
        "true"
    );
    assert_eq!(machine.counts().refunds, 1);
    // Nothing is left to pay back.
    let more = refund(new_key(), 3_000).await;
    assert_problem(
        more,
        StatusCode::UNPROCESSABLE_ENTITY,
        "estorno-excede-saldo",
    )
    .await;
    assert_eq!(machine.counts().refunds, 1);
}

/// Real process: the server aborts right after the provider made the order, before storing it.
/// The next process, on the same key, gets the same order back: one order at the machine.
#[apply(stores)]
async fn a_server_that_dies_after_the_order_was_made_makes_no_second_order(
    #[case] backend: Backend,
) {
    let machine = Machine::start().await;
    let db = TestDb::new(backend).await;
    let args = [
        "--maquininha-url",
        machine.url.as_str(),
        "--maquininha-token",
        TOKEN,
        "--lease-ms",
        "500",
    ];
    let mut crashing = ServerProcess::start(
        &db,
        &[&args[..], &["--fault-crash-after-charge", "1"]].concat(),
    );
    let key = new_key();
    let body = at_machine(4_321, "venda-crash");
    let lost = try_pay(&reqwest::Client::new(), &crashing.url, &key, &body).await;
    assert!(lost.is_err(), "the server should have died: {lost:?}");
    let _ = crashing.child.wait();
    assert_eq!(machine.counts().orders, 1);
    let next = ServerProcess::start(&db, &args);
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
    assert_eq!(machine.counts().orders, 1, "the same order, not a second");
    assert_eq!(db.count("machine_orders").await, 1);
}

#[apply(stores)]
async fn bad_card_machine_requests_are_refused_clearly_and_store_nothing(#[case] backend: Backend) {
    let machine = Machine::start().await;
    let app = spawn(backend, &machine).await;
    for (body, campo) in [
        (json!({"valor": 100, "maquininha": "bad id!"}), "maquininha"),
        (
            json!({"valor": 100, "maquininha": POS, "cartao": "tok_aprovado"}),
            "cartao",
        ),
        (
            json!({"valor": 100, "maquininha": POS, "metodo": "debito", "parcelas": 2}),
            "parcelas",
        ),
        (json!({"valor": 0, "maquininha": POS}), "valor"),
        (
            json!({"valor": 100, "maquininha": "NO_SUCH_MACHINE"}),
            "maquininha",
        ),
    ] {
        let key = new_key();
        let res = app.pay(&key, &body).await;
        let problem = assert_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
        assert!(
            problem["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["campo"] == campo),
            "{body} → {problem}"
        );
        assert_eq!(app.stored_keys().await, 0, "{body}: the key stays free");
    }
    assert_eq!(machine.counts().orders, 0);
    // A server with no machine configured says so.
    let plain = TestApp::spawn(backend).await;
    let res = plain.pay(&new_key(), &at_machine(100, "v")).await;
    assert_problem(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "maquininha-indisponivel",
    )
    .await;
}

#[apply(stores)]
async fn a_waiting_order_keeps_its_key_past_a_short_key_retention_and_a_cancel_by_key_never_burns_it(
    #[case] backend: Backend,
) {
    // Arrange: keys kept 2 s, the reaper every second; an order at the machine, and a card
    // payment elsewhere whose key is there to be purged.
    let machine = Machine::start().await;
    let app = TestApp::spawn_with_clock(backend, |c| {
        machine.configure(c, 3_600_000);
        c.key_retention_secs = 2;
        c.reaper_interval_secs = 1;
    })
    .await;
    machine.notify(&app.url).await;
    let key = new_key();
    let waiting: Value = app
        .pay(&key, &at_machine(4_200, "venda-retida"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(waiting["status"], "aguardando");
    let id = waiting["id"].as_str().unwrap();
    assert_eq!(app.pay(&new_key(), &approved(500)).await.status(), 201);

    // Act: the retention passes; the reaper purges what it may.
    app.advance_clock(Duration::from_secs(10));
    app.keys_become(
        1,
        "the card payment's key is purged, the waiting order's is kept",
    )
    .await;

    // Assert: the key still knows its order: a cancel by key does not burn a key whose order a
    // card can still pay (the till would charge the sale again under a new key), and the same
    // request sent again is replayed, not a second order.
    assert_problem(
        app.cancel(&key).await,
        StatusCode::CONFLICT,
        "maquininha-aguardando",
    )
    .await;
    let again = app.pay(&key, &at_machine(4_200, "venda-retida")).await;
    assert_eq!(
        again
            .headers()
            .get("idempotent-replayed")
            .map(|v| v.to_str().unwrap()),
        Some("true")
    );
    // The customer pays at the machine: one order, one charge; then the key may go, and a
    // cancel by key answers the payment it made.
    machine.machine_looks().await;
    assert_eq!(
        machine.customer(json!({"acao": "aprovar"})).await,
        StatusCode::OK
    );
    status_becomes(&app, id, "aprovado").await;
    app.keys_become(0, "the paid order's key is purged after its retention")
        .await;
    let cancelled: Value = app.cancel(&key).await.json().await.unwrap();
    assert_eq!(cancelled["resultado"], "pagamento");
    assert_eq!(cancelled["pagamento"]["id"], id);
    let counts = machine.counts();
    assert_eq!((counts.orders, counts.paid), (1, 1));
}
