//! Pix through the engine: the real payment API and the Pix provider simulator, each on a real
//! port with its own database; charges and Pix counted in the simulator's own tables.

use crate::helpers::*;
use checkout_core::{
    Attempt, AttemptState, Centavos, Checkout, CoreError, DiscrepancyKind, PayOutcome, PixStatus,
    SaleId,
};
use serde_json::{json, Value};
use std::time::Duration;

const PIX_TOKEN: &str = "pix_token_checkout_core";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The simulator and an API pointed at it (webhooks registered, a poll every 200 ms).
struct PixStack {
    psp: pix_provider::RunningProvider,
    api: Api,
    _dir: tempfile::TempDir,
}

impl PixStack {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = pix_provider::Config::sandbox(dir.path().join("psp.db"), PIX_TOKEN, SECRET);
        let psp = pix_provider::start(config).await.unwrap();
        let url = psp.url();
        let api = Api::start_with(move |c| {
            c.pix.pix_provider_url = Some(url.clone());
            c.pix.pix_client_secret = PIX_TOKEN.into();
            c.pix.pix_webhook_secrets = SECRET.into();
            c.pix.pix_webhook_url = Some("auto".into());
            c.pix.pix_poll_ms = 200;
        })
        .await;
        Self {
            psp,
            api,
            _dir: dir,
        }
    }

    /// The customer pays the charge `txid` (a QA order of the simulator).
    async fn customer_pays(&self, txid: &str, order: Value) -> u16 {
        reqwest::Client::new()
            .post(format!("{}/qa/cob/{txid}/pagar", self.psp.url()))
            .bearer_auth(PIX_TOKEN)
            .json(&order)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

async fn pay_pix(checkout: &Checkout, sale: &str, valor: i64) -> Result<PayOutcome, CoreError> {
    checkout
        .pay_pix(SaleId::parse(sale).unwrap(), Centavos::new(valor).unwrap())
        .await
}

fn attempt_of(outcome: PayOutcome) -> Attempt {
    match outcome {
        PayOutcome::Created(a) | PayOutcome::Existing(a) => a,
    }
}

/// Waits (at most 10 s) until the attempt has its QR from the server.
async fn with_qr(checkout: &Checkout, attempt: &Attempt) -> Attempt {
    for _ in 0..200 {
        let a = checkout.attempt(&attempt.id).await.unwrap();
        if a.pix.is_some() {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no QR for {}", attempt.id);
}

#[tokio::test]
async fn a_pix_pressed_as_the_till_opens_is_made_and_paid_not_refused_as_offline() {
    // Arrange: the engine has not heard from the server yet (its first probe is under way).
    let stack = PixStack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let checkout = Checkout::open(dir.path().join("outbox.db"), fast_config(&stack.api.url()))
        .await
        .unwrap();

    // Act: F5 at once.
    let attempt = attempt_of(pay_pix(&checkout, "venda-pix-1", 1_234).await.unwrap());
    let shown = with_qr(&checkout, &attempt).await;
    let pix = shown.pix.clone().unwrap();
    assert_eq!(
        shown.state,
        AttemptState::Pendente,
        "waits for the customer"
    );
    assert!(
        pix.copia_e_cola.starts_with("000201"),
        "{}",
        pix.copia_e_cola
    );
    assert_eq!(stack.customer_pays(&pix.txid, json!({})).await, 201);
    let paid = checkout
        .wait_final(&attempt.id, Duration::from_secs(20))
        .await
        .unwrap();

    // Assert
    assert_eq!(paid.state, AttemptState::Aprovado);
    let pix = paid.pix.unwrap();
    assert_eq!(pix.status, PixStatus::Aprovado);
    assert!(pix.e2eid.is_some());
    let counts = stack.psp.counts();
    assert_eq!((counts.cobrancas, counts.pix), (1, 1));
    checkout.shutdown().await;
}

#[tokio::test]
async fn a_pix_paid_after_the_till_cancelled_it_is_recorded_at_once_and_closed_as_money_to_give_back(
) {
    // Arrange: a Pix on screen, cancelled by the cashier, the sale then paid by card.
    let stack = PixStack::start().await;
    let engine = Engine::open(fast_config(&stack.api.url())).await;
    let checkout = &engine.checkout;
    let attempt = attempt_of(pay_pix(checkout, "venda-pix-2", 2_500).await.unwrap());
    let shown = with_qr(checkout, &attempt).await;
    let cancelled = checkout.cancel_pix(&attempt.id).await.unwrap();
    assert_eq!(cancelled.state, AttemptState::Recusado);
    let card = engine.pay("venda-pix-2", 2_500, "tok_aprovado").await;
    assert_eq!(
        engine.final_state(&card).await.state,
        AttemptState::Aprovado
    );
    assert_eq!(
        checkout.check_late_pix().await.unwrap(),
        0,
        "nothing paid yet"
    );

    // Act: the customer's bank pays the removed charge anyway (bacen/pix-api#319).
    let txid = shown.pix.unwrap().txid;
    let order = json!({"aceitar_inativa": true});
    assert_eq!(stack.customer_pays(&txid, order).await, 201);
    let mut recorded = 0;
    for _ in 0..100 {
        recorded = checkout.check_late_pix().await.unwrap();
        if recorded > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Assert: recorded once, beside the declined attempt; the closing lists it to give back.
    assert_eq!(recorded, 1);
    let late = checkout.attempt(&attempt.id).await.unwrap();
    assert!(late.is_late_pix(), "{late:?}");
    assert_eq!(checkout.check_late_pix().await.unwrap(), 0, "recorded once");
    let closing = checkout.close_day(None, false).await.unwrap();
    assert_eq!(closing.pix.recebidos_apos_cancelamento.count, 1);
    let kinds: Vec<_> = closing.discrepancies.iter().map(|d| d.kind).collect();
    assert_eq!(kinds, vec![DiscrepancyKind::PixReceivedAfterCancel]);
    assert_eq!(stack.psp.counts().pix, 1);
    // The sale was paid by card: the Pix cannot be kept as its payment too.
    let kept = checkout.keep_late_pix(&attempt.id).await;
    assert!(
        matches!(&kept, Err(CoreError::Invalid(m)) if m.contains("devolva o Pix")),
        "{kept:?}"
    );
    assert!(checkout.attempt(&attempt.id).await.unwrap().is_late_pix());
}

#[tokio::test]
async fn an_explicit_check_for_late_pix_that_cannot_ask_the_server_says_so_instead_of_none() {
    // Arrange: a Pix the cashier cancelled; then the server goes away.
    let mut stack = PixStack::start().await;
    let engine = Engine::open(fast_config(&stack.api.url())).await;
    let checkout = &engine.checkout;
    let attempt = attempt_of(pay_pix(checkout, "venda-pix-muda", 1_900).await.unwrap());
    let txid = with_qr(checkout, &attempt).await.pix.unwrap().txid;
    checkout.cancel_pix(&attempt.id).await.unwrap();
    stack.api.down().await;

    // Act + Assert: "none recorded" would read as "none paid"; it is an error instead.
    let unasked = checkout.check_late_pix().await;
    assert!(
        matches!(&unasked, Err(CoreError::Unreachable(m)) if m.contains("1 Pix")),
        "{unasked:?}"
    );

    // The server back and the customer's late payment made: the next check records it.
    stack.api.up().await;
    assert_eq!(
        stack
            .customer_pays(&txid, json!({"aceitar_inativa": true}))
            .await,
        201
    );
    let mut recorded = Err(CoreError::Unreachable(String::new()));
    for _ in 0..100 {
        recorded = checkout.check_late_pix().await;
        if matches!(recorded, Ok(n) if n > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(recorded.unwrap(), 1);
    assert!(checkout.attempt(&attempt.id).await.unwrap().is_late_pix());
}

/// Pays a Pix, cancels it, and has the customer pay it anyway; returns the attempt once the
/// till has recorded the late Pix.
async fn late_pix(stack: &PixStack, checkout: &Checkout, sale: &str, valor: i64) -> Attempt {
    let attempt = attempt_of(pay_pix(checkout, sale, valor).await.unwrap());
    let txid = with_qr(checkout, &attempt).await.pix.unwrap().txid;
    checkout.cancel_pix(&attempt.id).await.unwrap();
    let order = json!({"aceitar_inativa": true});
    assert_eq!(stack.customer_pays(&txid, order).await, 201);
    for _ in 0..100 {
        if checkout.check_late_pix().await.unwrap() > 0 {
            return checkout.attempt(&attempt.id).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the late Pix of {sale} was never recorded");
}

#[tokio::test]
async fn a_late_pix_is_kept_as_the_payment_of_a_sale_not_paid_another_way_and_the_day_reconciles() {
    // Arrange: the cashier cancelled the QR, the customer paid it anyway, nothing else was paid.
    let stack = PixStack::start().await;
    let engine = Engine::open(fast_config(&stack.api.url())).await;
    let checkout = &engine.checkout;
    let late = late_pix(&stack, checkout, "venda-pix-4", 4_200).await;
    assert!(late.is_late_pix());

    // Act
    let kept = checkout.keep_late_pix(&late.id).await.unwrap();

    // Assert: the sale is paid by that Pix; no second charge, nothing to give back.
    assert_eq!(kept.state, AttemptState::Aprovado);
    assert_eq!(kept.motivo.as_deref(), Some("recebido_apos_cancelamento"));
    assert_eq!(
        kept.payment_id,
        kept.pix.as_ref().map(|p| p.payment_id.clone())
    );
    let again = attempt_of(pay_pix(checkout, "venda-pix-4", 4_200).await.unwrap());
    assert_eq!(
        again.id, late.id,
        "the sale is paid: pressing again returns its payment"
    );
    let closing = checkout.close_day(None, false).await.unwrap();
    assert!(
        closing.discrepancies.is_empty(),
        "{:?}",
        closing.discrepancies
    );
    assert_eq!(closing.pix.recebidos_apos_cancelamento.count, 1);
    assert_eq!(closing.net_centavos.get(), 4_200);
    let twice = checkout.keep_late_pix(&late.id).await;
    assert!(matches!(twice, Err(CoreError::Invalid(_))), "{twice:?}");
    let counts = stack.psp.counts();
    assert_eq!((counts.cobrancas, counts.pix), (1, 1));
}

#[tokio::test]
async fn with_the_server_down_a_pix_is_refused_at_once_and_nothing_is_stored() {
    // Arrange
    let mut stack = PixStack::start().await;
    let engine = Engine::open(fast_config(&stack.api.url())).await;
    stack.api.down().await;

    // Act
    let refused = pay_pix(&engine.checkout, "venda-pix-3", 990).await;

    // Assert
    assert!(matches!(refused, Err(CoreError::PixOffline)), "{refused:?}");
    assert!(engine.checkout.attempts().await.unwrap().is_empty());
    assert_eq!(stack.psp.counts().cobrancas, 0);
}

/// A Pix for `sale` once the server answers again (a fault switched resets the connections: the
/// first probe after it may find none), at most 5 s of tries.
async fn pay_pix_when_online(checkout: &Checkout, sale: &str, valor: i64) -> Attempt {
    for _ in 0..100 {
        match pay_pix(checkout, sale, valor).await {
            Ok(o) => return attempt_of(o),
            Err(CoreError::PixOffline) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("the server never answered for {sale}");
}

/// "Cancelar Pix" whose answer never comes: the engine asks the server what became of the
/// charge, records it when it can, and says when it cannot; never "cancelled" by guess.
#[tokio::test]
async fn a_pix_cancel_whose_answer_is_lost_is_settled_by_asking_the_server() {
    use pagar_testkit::{Fault, FaultProxy};
    let stack = PixStack::start().await;
    let proxy = FaultProxy::start(stack.api.addr).await;
    let engine = Engine::open(fast_config(&proxy.url())).await;
    let checkout = &engine.checkout;

    // (a) The server cancels and its answer is cut: the engine reads the charge, cancelled.
    let a = attempt_of(pay_pix(checkout, "venda-pix-cut", 900).await.unwrap());
    let txid = with_qr(checkout, &a).await.pix.unwrap().txid;
    proxy.set(Fault::CutNextPostAnswer).await;
    let cancelled = checkout.cancel_pix(&a.id).await.unwrap();
    assert_eq!(cancelled.state, AttemptState::Recusado);
    assert_eq!(cancelled.motivo.as_deref(), Some("pix_cancelado"));
    assert_eq!(
        stack.customer_pays(&txid, json!({})).await,
        409,
        "removed at the bank"
    );

    // (b) The cancel never reaches the server (a middlebox answers 503): the charge still waits.
    proxy.set(Fault::Pass).await;
    let b = pay_pix_when_online(checkout, "venda-pix-503", 1_100).await;
    let txid = with_qr(checkout, &b).await.pix.unwrap().txid;
    proxy.set(Fault::RejectNextPost(503)).await;
    let refused = checkout.cancel_pix(&b.id).await;
    assert!(
        matches!(refused, Err(CoreError::PixNotCancelled)),
        "{refused:?}"
    );
    assert_eq!(
        checkout.attempt(&b.id).await.unwrap().state,
        AttemptState::Pendente
    );
    assert_eq!(
        stack.customer_pays(&txid, json!({})).await,
        201,
        "it can still be paid"
    );
    let paid = checkout
        .wait_final(&b.id, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(paid.state, AttemptState::Aprovado);

    // (c) Nothing answers: unknown, said so; the attempt waits and follows the charge after.
    proxy.set(Fault::Pass).await;
    let c = pay_pix_when_online(checkout, "venda-pix-down", 1_300).await;
    let txid = with_qr(checkout, &c).await.pix.unwrap().txid;
    proxy.set(Fault::Refuse).await;
    let unknown = checkout.cancel_pix(&c.id).await;
    assert!(
        matches!(unknown, Err(CoreError::PixCancelUnknown(_))),
        "{unknown:?}"
    );
    assert_eq!(
        stack
            .customer_pays(&txid, json!({"webhook": "perdido"}))
            .await,
        201
    );
    proxy.set(Fault::Pass).await;
    let paid = checkout
        .wait_final(&c.id, Duration::from_secs(15))
        .await
        .unwrap();
    assert_eq!(paid.state, AttemptState::Aprovado);
    let counts = stack.psp.counts();
    assert_eq!((counts.cobrancas, counts.pix), (3, 2));
}

#[tokio::test]
async fn a_late_pix_of_a_divided_sale_is_never_kept_as_one_of_its_parts() {
    // Arrange: a part of a divided sale by Pix, cancelled, then paid by the customer anyway.
    let stack = PixStack::start().await;
    let engine = Engine::open(fast_config(&stack.api.url())).await;
    let checkout = &engine.checkout;
    let sale = SaleId::parse("venda-dividida-pix").unwrap();
    let part = attempt_of(
        checkout
            .pay_pix_tender(
                sale,
                Centavos::new(3_000).unwrap(),
                Centavos::new(1_000).unwrap(),
            )
            .await
            .unwrap(),
    );
    let txid = with_qr(checkout, &part).await.pix.unwrap().txid;
    checkout.cancel_pix(&part.id).await.unwrap();
    let order = json!({"aceitar_inativa": true});
    assert_eq!(stack.customer_pays(&txid, order).await, 201);
    for _ in 0..100 {
        if checkout.check_late_pix().await.unwrap() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(checkout.attempt(&part.id).await.unwrap().is_late_pix());

    // Act
    let kept = checkout.keep_late_pix(&part.id).await;

    // Assert: refused (the server never counts it among the sale's parts); it stays to give back.
    assert!(matches!(kept, Err(CoreError::Invalid(_))), "{kept:?}");
    let still = checkout.attempt(&part.id).await.unwrap();
    assert_eq!(still.state, AttemptState::Recusado);
    assert!(still.is_late_pix());
}

#[tokio::test]
async fn a_part_of_a_divided_sale_paid_by_pix_after_its_charge_closed_while_the_till_waited_is_given_back(
) {
    use pagar_testkit::{Fault, FaultProxy};
    // Arrange: a divided sale's first part by Pix. The charge is cancelled on the server while
    // the till hears nothing (its cancel executed, the answer lost on the way), and the customer
    // pays it anyway; the till, still waiting for that Pix, then reads the charge.
    let stack = PixStack::start().await;
    let proxy = FaultProxy::start(stack.api.addr).await;
    let engine = Engine::open(fast_config(&proxy.url())).await;
    let checkout = &engine.checkout;
    let sale = SaleId::parse("venda-dividida-pix-tarde").unwrap();
    let part = attempt_of(
        checkout
            .pay_pix_tender(
                sale.clone(),
                Centavos::new(3_000).unwrap(),
                Centavos::new(1_000).unwrap(),
            )
            .await
            .unwrap(),
    );
    let pix = with_qr(checkout, &part).await.pix.unwrap();
    proxy.set(Fault::Refuse).await;
    let cancelled = reqwest::Client::new()
        .post(format!(
            "{}/pagamentos/{}/cancelamento",
            stack.api.url(),
            pix.payment_id
        ))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", "cancelamento-perdido")
        .send()
        .await
        .unwrap()
        .status();
    assert!(cancelled.is_success(), "{cancelled}");
    let order = json!({"aceitar_inativa": true});
    assert_eq!(stack.customer_pays(&pix.txid, order).await, 201);
    // Act
    proxy.set(Fault::Pass).await;
    let read = checkout
        .wait_final(&part.id, Duration::from_secs(15))
        .await
        .unwrap();
    // Assert: not one of the sale's parts (the server counts no such Pix among them): closed
    // unpaid, its Pix shown to give back, and the part still owed.
    assert_eq!(read.state, AttemptState::Recusado, "{read:?}");
    assert!(read.is_late_pix(), "{read:?}");
    let shown = stack
        .api
        .get_json(&format!("/vendas/{}", sale.as_ref()))
        .await;
    assert_eq!(
        (shown["pago"].as_i64(), shown["a_devolver"].as_i64()),
        (Some(0), Some(1_000))
    );
}
