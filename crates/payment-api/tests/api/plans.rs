//! Débito, crédito à vista or parcelado, voucher: the method and installments are part of the
//! request, of its fingerprint, of the payment and of the gateway's ledger.

use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};

fn card(valor: i64, cartao: &str, plan: Value) -> Value {
    let mut body = json!({"valor": valor, "cartao": cartao, "referencia": new_key()});
    body.as_object_mut()
        .unwrap()
        .extend(plan.as_object().unwrap().clone());
    body
}

#[apply(stores)]
async fn a_parcelado_is_charged_once_with_its_plan_and_the_same_key_with_other_installments_is_422(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    let three = card(
        10_000,
        "tok_aprovado",
        json!({"metodo": "credito", "parcelas": 3, "parcelamento": "loja"}),
    );
    let (status, _, first) = body_of(app.pay(&key, &three).await).await;
    assert_eq!(status, StatusCode::CREATED);
    let paid: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(
        (&paid["metodo"], &paid["parcelas"], &paid["parcelamento"]),
        (&json!("credito"), &json!(3), &json!("loja"))
    );

    // The same key asking for 2× (or à vista, or débito) is another request: 422, nothing charged.
    for other in [
        json!({"metodo": "credito", "parcelas": 2, "parcelamento": "loja"}),
        json!({"metodo": "credito", "parcelas": 3, "parcelamento": "emissor"}),
        json!({"metodo": "credito"}),
        json!({"metodo": "debito"}),
    ] {
        let mut body = three.clone();
        for k in ["metodo", "parcelas", "parcelamento"] {
            body.as_object_mut().unwrap().remove(k);
        }
        body.as_object_mut()
            .unwrap()
            .extend(other.as_object().unwrap().clone());
        assert_problem(
            app.pay(&key, &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency-key-reused",
        )
        .await;
    }
    // The original still replays byte for byte, and the ledger has one charge, on credit 3×.
    let (status, replayed, again) = body_of(app.pay(&key, &three).await).await;
    assert_eq!(
        (status, replayed.as_deref()),
        (StatusCode::CREATED, Some("true"))
    );
    assert_eq!(again, first);
    let ledger = app.ledger().await;
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["plano"], "credito:3:loja");
    let read = app
        .get_json(&format!("/pagamentos/{}", paid["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        (&read["metodo"], &read["parcelas"]),
        (&json!("credito"), &json!(3))
    );
}

#[apply(stores)]
async fn each_card_takes_only_the_methods_it_has_and_a_decline_says_why(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let parcelado = json!({"metodo": "credito", "parcelas": 6, "parcelamento": "emissor"});
    for (cartao, plan, status, motivo) in [
        ("tok_aprovado", json!({"metodo": "debito"}), 201, None),
        ("tok_aprovado", json!({"metodo": "credito"}), 201, None),
        ("tok_aprovado", parcelado.clone(), 201, None),
        (
            "tok_aprovado",
            json!({"metodo": "voucher"}),
            402,
            Some("metodo_nao_aceito"),
        ),
        ("tok_somente_debito", json!({"metodo": "debito"}), 201, None),
        (
            "tok_somente_debito",
            json!({"metodo": "credito"}),
            402,
            Some("metodo_nao_aceito"),
        ),
        (
            "tok_somente_debito",
            json!({}),
            402,
            Some("metodo_nao_aceito"),
        ),
        ("tok_voucher", json!({"metodo": "voucher"}), 201, None),
        (
            "tok_voucher",
            json!({"metodo": "debito"}),
            402,
            Some("metodo_nao_aceito"),
        ),
        (
            "tok_sem_parcelamento",
            json!({"metodo": "credito"}),
            201,
            None,
        ),
        (
            "tok_sem_parcelamento",
            parcelado.clone(),
            402,
            Some("parcelamento_nao_permitido"),
        ),
        (
            "tok_recusado",
            json!({"metodo": "debito"}),
            402,
            Some("cartao_recusado"),
        ),
    ] {
        let body = card(5_000, cartao, plan.clone());
        let (s, _, bytes) = body_of(app.pay(&new_key(), &body).await).await;
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(s.as_u16(), status, "{cartao} {plan}: {answer}");
        assert_eq!(answer["motivo"].as_str(), motivo, "{cartao} {plan}");
        assert_eq!(
            answer["metodo"],
            plan.get("metodo").cloned().unwrap_or(Value::Null)
        );
    }
    // Every decision, approvals and declines, is one ledger row with the plan asked.
    let ledger = app.ledger().await;
    assert_eq!(ledger.len(), 12);
    assert_eq!(
        ledger
            .iter()
            .filter(|r| r["plano"] == "credito:6:emissor")
            .count(),
        2
    );
}

#[apply(stores)]
async fn a_plan_that_does_not_fit_is_a_validation_error_and_leaves_the_key_free(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = new_key();
    for (plan, field) in [
        (
            json!({"metodo": "credito", "parcelas": 13, "parcelamento": "loja"}),
            "parcelas",
        ),
        (json!({"metodo": "credito", "parcelas": 3}), "parcelamento"),
        (
            json!({"metodo": "debito", "parcelas": 2, "parcelamento": "loja"}),
            "parcelas",
        ),
        (json!({"metodo": "boleto"}), "metodo"),
        (json!({"parcelas": 2, "parcelamento": "loja"}), "metodo"),
    ] {
        let problem = assert_problem(
            app.pay(&key, &card(5_000, "tok_aprovado", plan.clone()))
                .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation",
        )
        .await;
        assert_eq!(problem["errors"][0]["campo"], field, "{plan}: {problem}");
    }
    // R$ 0,03 does not split into 4 installments of at least a centavo.
    let tiny = card(
        3,
        "tok_aprovado",
        json!({"metodo": "credito", "parcelas": 4, "parcelamento": "loja"}),
    );
    let problem = assert_problem(
        app.pay(&key, &tiny).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation",
    )
    .await;
    assert_eq!(problem["errors"][0]["campo"], "parcelas");
    assert!(app.ledger().await.is_empty());
    assert_eq!(app.stored_keys().await, 0);
    // The key is still free for the corrected request.
    let ok = card(
        5_000,
        "tok_aprovado",
        json!({"metodo": "credito", "parcelas": 4, "parcelamento": "loja"}),
    );
    assert_eq!(app.pay(&key, &ok).await.status(), StatusCode::CREATED);
}
