//! Débito, crédito à vista or parcelado, voucher: the cashier's plan goes in the stored request,
//! the gateway charges it (or its card refuses it), and the closing counts the day by method.

use crate::helpers::*;
use checkout_core::{
    AttemptState, CardPlan, CardToken, Centavos, Financing, PayOutcome, PlanRules, SaleId,
};

impl Engine {
    async fn pay_plan(
        &self,
        sale: &str,
        valor: i64,
        cartao: &str,
        plan: CardPlan,
    ) -> checkout_core::Attempt {
        match self
            .checkout
            .pay_card(
                SaleId::parse(sale).unwrap(),
                Centavos::new(valor).unwrap(),
                CardToken::parse(cartao).unwrap(),
                plan,
            )
            .await
            .unwrap()
        {
            PayOutcome::Created(a) | PayOutcome::Existing(a) => a,
        }
    }
}

#[tokio::test]
async fn a_parcelado_is_charged_in_the_installments_chosen_and_the_closing_counts_each_method() {
    let api = Api::start().await;
    let mut config = fast_config(&api.url());
    config.terminal = Some("caixa-01".into());
    let engine = Engine::open(config).await;
    let rules = PlanRules::default();
    let three = rules
        .plan("parcelado", Some(3), Centavos::new(10_000).unwrap())
        .unwrap();
    let parcelado = engine
        .pay_plan("venda-1", 10_000, "tok_aprovado", three)
        .await;
    let debito = engine
        .pay_plan("venda-2", 2_500, "tok_somente_debito", CardPlan::DEBITO)
        .await;
    // A debit-only card asked for credit is declined by the gateway; the sale is then paid by
    // débito with a new attempt (a new key).
    let credit = engine
        .pay_plan("venda-3", 4_000, "tok_somente_debito", CardPlan::CREDITO)
        .await;
    let voucher = engine
        .pay_plan("venda-4", 3_000, "tok_voucher", CardPlan::VOUCHER)
        .await;
    for a in [&parcelado, &debito, &voucher] {
        assert_eq!(engine.final_state(a).await.state, AttemptState::Aprovado);
    }
    let declined = engine.final_state(&credit).await;
    assert_eq!(
        (declined.state, declined.motivo.as_deref()),
        (AttemptState::Recusado, Some("metodo_nao_aceito"))
    );
    let retried = engine
        .pay_plan("venda-3", 4_000, "tok_somente_debito", CardPlan::DEBITO)
        .await;
    assert_ne!(retried.idempotency_key, declined.idempotency_key);
    assert_eq!(
        engine.final_state(&retried).await.state,
        AttemptState::Aprovado
    );

    // The attempt keeps its plan, and the gateway charged exactly that plan, once.
    let stored = engine.checkout.attempt(&parcelado.id).await.unwrap();
    assert_eq!(stored.plano, Some(three));
    assert_eq!(
        three.installments_text(stored.valor).as_deref(),
        Some("3× de R$ 33,34 (última de R$ 33,32)")
    );
    let ledger = api.ledger().await;
    assert_eq!(
        ledger.len(),
        5,
        "one ledger row per attempt, declines included"
    );
    // The dispatcher sends independent attempts side by side: the ledger's order is theirs.
    let mut plans: Vec<Option<String>> = ledger
        .iter()
        .map(|r| r.plano.map(|p| p.to_string()))
        .collect();
    plans.sort();
    assert_eq!(
        plans,
        [
            Some("credito".into()),
            Some("credito:3:loja".into()),
            Some("debito".into()),
            Some("debito".into()),
            Some("voucher".into()),
        ]
    );

    let closing = engine.checkout.close_day(None, false).await.unwrap();
    assert!(
        closing.discrepancies.is_empty(),
        "{:?}",
        closing.discrepancies
    );
    let by: Vec<(&str, usize, i64)> = closing
        .por_forma
        .iter()
        .map(|m| (m.forma, m.tally.count, m.tally.centavos.get()))
        .collect();
    assert_eq!(
        by,
        [
            ("debito", 2, 6_500),
            ("parcelado", 1, 10_000),
            ("voucher", 1, 3_000)
        ]
    );
}

#[tokio::test]
async fn a_retry_of_a_parcelado_after_a_lost_answer_asks_for_the_same_installments() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    // The first answer is lost after the charge: the retry must carry the same plan, or the
    // server would refuse it (422) instead of replaying the charge.
    api.set_faults(serde_json::json!({"drop_response_probability": 1.0}))
        .await;
    let plan = CardPlan::parcelado(Centavos::new(60_000).unwrap(), 6, Financing::Emissor).unwrap();
    let a = engine
        .pay_plan("venda-1", 60_000, "tok_aprovado", plan)
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    api.set_faults(serde_json::json!({})).await;
    let done = engine.final_state(&a).await;
    assert_eq!(done.state, AttemptState::Aprovado);
    assert!(
        done.tries >= 2,
        "the answer was lost at least once: {} tries",
        done.tries
    );
    let ledger = api.ledger().await;
    assert_eq!(ledger.len(), 1, "one charge");
    assert_eq!(
        ledger[0].plano,
        Some(payment_api::domain::CardPlan::parse_stored("credito:6:emissor").unwrap())
    );
}
