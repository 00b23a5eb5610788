//! A card at the card machine through the engine: the real payment API and the machine's
//! provider simulator, each on a real port with its own database; the customer played through
//! the machine's own routes; orders counted in the simulator's ledger.

use crate::helpers::*;
use checkout_core::{
    Attempt, AttemptState, CardPlan, Centavos, Checkout, CoreError, MachineStatus, PayOutcome,
    SaleId,
};
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "maquininha_token_checkout_core";
const SECRET: &str = "maquininha_secret_checkout_core";
const POS: &str = "PAGAR_SIM__POS-1";

/// The simulator and an API pointed at it (notifications on, a poll every 200 ms).
struct MachineStack {
    machine: maquininha::RunningMachine,
    api: Api,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl MachineStack {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = maquininha::Config::sandbox(dir.path().join("maq.db"), TOKEN, SECRET);
        let machine = maquininha::start(config).await.unwrap();
        let url = machine.url();
        let api = Api::start_with(move |c| {
            c.maquininha.maquininha_url = Some(url.clone());
            c.maquininha.maquininha_token = TOKEN.into();
            c.maquininha.maquininha_secret = SECRET.into();
            c.maquininha.maquininha_poll_ms = 200;
        })
        .await;
        let http = reqwest::Client::new();
        let res = http
            .put(format!("{}/qa/notificacoes", machine.url()))
            .json(&json!({"url": format!("{}/webhooks/maquininha", api.url())}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 204);
        Self {
            machine,
            api,
            http,
            _dir: dir,
        }
    }

    fn config(&self) -> checkout_core::Config {
        let mut c = fast_config(&self.api.url());
        c.maquininha = Some(POS.into());
        c
    }

    /// The machine looks for its order (taking a `created` one).
    async fn machine_looks(&self) -> Value {
        self.http
            .get(format!("{}/terminais/{POS}/pedido", self.machine.url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The customer does `act` at the machine.
    async fn customer(&self, act: Value) -> u16 {
        self.http
            .post(format!("{}/terminais/{POS}/acao", self.machine.url()))
            .json(&act)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

async fn pay_at_machine(
    checkout: &Checkout,
    sale: &str,
    valor: i64,
    plano: Option<CardPlan>,
) -> Result<PayOutcome, CoreError> {
    checkout
        .pay_maquininha(
            SaleId::parse(sale).unwrap(),
            Centavos::new(valor).unwrap(),
            plano,
        )
        .await
}

/// The attempt once the server said something of its order (at most 10 s) whose machine state
/// is `estado`.
async fn order_shows(engine: &Engine, attempt: &Attempt, estado: &str) -> Attempt {
    attempt_until(engine, attempt, Duration::from_secs(10), |a| {
        a.maquininha.as_ref().is_some_and(|m| m.estado == estado)
    })
    .await
    .unwrap_or_else(|a| panic!("the order never showed {estado}: {a:?}"))
}

#[tokio::test]
async fn a_card_at_the_machine_waits_for_the_machine_and_is_paid_once() {
    let stack = MachineStack::start().await;
    let engine = Engine::open(stack.config()).await;
    let attempt = attempt_of(
        pay_at_machine(
            &engine.checkout,
            "venda-maq-1",
            12_000,
            Some(CardPlan::CREDITO),
        )
        .await
        .unwrap(),
    );
    // The order reaches the machine; the screen can tell when the machine takes it.
    let sent = order_shows(&engine, &attempt, "created").await;
    assert_eq!(sent.state, AttemptState::Pendente);
    assert_eq!(sent.maquininha.as_ref().unwrap().maquininha, POS);
    assert_eq!(stack.machine_looks().await["pedido"]["centavos"], 12_000);
    order_shows(&engine, &attempt, "at_terminal").await;
    // The customer pays on credit.
    assert_eq!(stack.customer(json!({"acao": "aprovar"})).await, 200);
    let paid = engine.final_state(&attempt).await;
    assert_eq!(paid.state, AttemptState::Aprovado);
    let order = paid.maquininha.unwrap();
    assert_eq!(order.status, MachineStatus::Aprovado);
    assert_eq!(order.pago_com.as_deref(), Some("credito"));
    let counts = stack.machine.counts();
    assert_eq!((counts.orders, counts.paid), (1, 1));
    engine.checkout.shutdown().await;
}

#[tokio::test]
async fn the_cashier_cancels_until_the_machine_takes_the_order_and_then_is_told_a_card_can_still_pay(
) {
    let stack = MachineStack::start().await;
    let engine = Engine::open(stack.config()).await;
    // Before the machine takes it: cancelled, and the sale may be paid another way.
    let first = attempt_of(
        pay_at_machine(&engine.checkout, "venda-maq-2", 500, None)
            .await
            .unwrap(),
    );
    order_shows(&engine, &first, "created").await;
    let cancelled = engine.checkout.cancel_maquininha(&first.id).await.unwrap();
    assert_eq!(cancelled.state, AttemptState::Recusado);
    assert_eq!(cancelled.motivo.as_deref(), Some("maquininha_cancelado"));

    // Once the machine took it: not cancelled, and the screen says why.
    let second = attempt_of(
        pay_at_machine(&engine.checkout, "venda-maq-2", 500, None)
            .await
            .unwrap(),
    );
    order_shows(&engine, &second, "created").await;
    stack.machine_looks().await;
    let refused = engine.checkout.cancel_maquininha(&second.id).await;
    assert!(
        matches!(refused, Err(CoreError::MachineHasOrder)),
        "{refused:?}"
    );
    let now = engine.checkout.attempt(&second.id).await.unwrap();
    assert_eq!(now.state, AttemptState::Pendente);
    assert!(now.maquininha.as_ref().unwrap().at_machine(), "{now:?}");
    // The card presented after the cashier gave up pays the sale.
    stack.customer(json!({"acao": "aprovar"})).await;
    assert_eq!(
        engine.final_state(&second).await.state,
        AttemptState::Aprovado
    );
    let counts = stack.machine.counts();
    assert_eq!((counts.orders, counts.paid, counts.canceled), (2, 1, 1));
    engine.checkout.shutdown().await;
}

#[tokio::test]
async fn a_decline_at_the_machine_ends_the_attempt_and_a_till_restarted_mid_order_follows_it_to_its_end(
) {
    let stack = MachineStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    let checkout = Checkout::open(&db, stack.config()).await.unwrap();
    settled_connectivity(&checkout).await;
    let declined = attempt_of(
        pay_at_machine(&checkout, "venda-maq-3", 990, None)
            .await
            .unwrap(),
    );
    for _ in 0..200 {
        if checkout
            .attempt(&declined.id)
            .await
            .unwrap()
            .maquininha
            .is_some()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stack.machine_looks().await;
    stack.customer(json!({"acao": "saldo_insuficiente"})).await;
    let ended = checkout
        .wait_final(&declined.id, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(ended.state, AttemptState::Recusado);
    assert_eq!(ended.motivo.as_deref(), Some("insufficient_amount"));

    // Another order; the till stops while the machine has it, the customer pays meanwhile.
    let paid = attempt_of(
        pay_at_machine(&checkout, "venda-maq-3", 990, None)
            .await
            .unwrap(),
    );
    for _ in 0..200 {
        if checkout
            .attempt(&paid.id)
            .await
            .unwrap()
            .maquininha
            .is_some()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    checkout.shutdown().await;
    stack.machine_looks().await;
    stack
        .customer(json!({"acao": "aprovar", "cartao": "debit_card"}))
        .await;
    let reopened = Checkout::open(&db, stack.config()).await.unwrap();
    let after = reopened
        .wait_final(&paid.id, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(after.state, AttemptState::Aprovado);
    assert_eq!(
        after.maquininha.unwrap().pago_com.as_deref(),
        Some("debito")
    );
    let counts = stack.machine.counts();
    assert_eq!((counts.orders, counts.paid, counts.failed), (2, 1, 1));
    reopened.shutdown().await;
}

#[tokio::test]
async fn a_till_without_a_machine_says_so_and_stores_nothing() {
    let stack = MachineStack::start().await;
    let engine = Engine::open(fast_config(&stack.api.url())).await;
    let refused = pay_at_machine(&engine.checkout, "venda-maq-4", 100, None).await;
    assert!(matches!(refused, Err(CoreError::NoMachine)), "{refused:?}");
    assert!(engine.checkout.attempts().await.unwrap().is_empty());
    assert_eq!(stack.machine.counts().orders, 0);
    engine.checkout.shutdown().await;
}
