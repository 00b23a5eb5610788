use crate::helpers::*;
use checkout_core::{CardToken, Centavos, Checkout, CoreError, SaleId};
use std::time::Duration;

fn sale(s: &str) -> SaleId {
    SaleId::parse(s).unwrap()
}

#[tokio::test]
async fn a_locked_outbox_refuses_the_payment_and_nothing_reaches_the_server() {
    let api = Api::start().await;
    let mut config = fast_config(&api.url());
    config.busy_timeout = Duration::from_millis(200);
    let engine = Engine::open(config).await;
    // Another connection (a backup tool, say) holds the write lock.
    let other = rusqlite::Connection::open(&engine.db).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let err = engine
        .checkout
        .pay(
            sale("venda-s1"),
            Centavos::new(100).unwrap(),
            CardToken::parse("tok_aprovado").unwrap(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, CoreError::StorageBusy), "{err:?}");
    assert!(err.to_string().contains("nada foi enviado"));
    other.execute_batch("ROLLBACK").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(api.all_requests().await, 0, "the server saw nothing");
    assert!(api.ledger().await.is_empty());
    assert!(engine.checkout.attempts().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_full_disk_refuses_the_payment_and_nothing_reaches_the_server() {
    let mut api = Api::start().await;
    api.down().await; // keep every attempt pending so the outbox only grows
    let mut config = fast_config(&api.url());
    // Room for the schema (its tables and indexes take about 180 KiB) and for a few hundred
    // attempts before new ones are refused.
    config.max_outbox_bytes = Some(checkout_core::config::MIN_OUTBOX_BYTES);
    config.offline_caps.total = None;
    let engine = Engine::open(config).await;
    let mut refused = None;
    for i in 0..2_000 {
        match engine
            .checkout
            .pay(
                sale(&format!("venda-d{i}")),
                Centavos::new(100).unwrap(),
                CardToken::parse("tok_aprovado").unwrap(),
            )
            .await
        {
            Ok(_) => {}
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    let (stored, err) = refused.expect("the outbox fills up");
    assert!(
        stored > 0,
        "the cap left no room for any payment: the test would prove nothing"
    );
    assert!(matches!(err, CoreError::StorageFull), "{err:?}");
    assert!(err.to_string().contains("nada foi enviado"));
    assert_eq!(
        engine.checkout.attempts().await.unwrap().len(),
        stored,
        "the refused payment left nothing"
    );
    api.up().await;
    // The stored ones still go out; the refused one never does.
    tokio::time::timeout(Duration::from_secs(20), async {
        while engine.checkout.queue().await.unwrap().count > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(api.ledger().await.len(), stored);
}

#[tokio::test]
async fn only_one_process_may_own_an_outbox() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let err = Checkout::open(&engine.db, fast_config(&api.url()))
        .await
        .unwrap_err();
    assert!(matches!(err, CoreError::AlreadyOpen(_)), "{err:?}");
    assert!(err.to_string().contains("outra instância"));
}

#[tokio::test]
async fn every_attempt_is_exported_as_csv_and_json() {
    let api = Api::start().await;
    let engine = Engine::open(fast_config(&api.url())).await;
    let a = engine.pay("venda-e1", 123_456, "tok_aprovado").await;
    let b = engine.pay("venda-e2", 500, "tok_recusado").await;
    let a = engine.final_state(&a).await;
    engine.final_state(&b).await;
    let refund = engine.refund(&a, Some(456)).await;
    engine.final_state(refund.attempt()).await;
    let attempts = engine.checkout.attempts().await.unwrap();
    let csv = String::from_utf8(checkout_core::export::to_csv(&attempts).unwrap()).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0]
            .starts_with("attempt_id,kind,sale_id,refund_of,idempotency_key,state,valor_centavos"),
        "{}",
        lines[0]
    );
    assert!(
        lines[3].contains(&format!(",estorno,venda-e1,{},", a.id)) && lines[3].contains("R$ 4,56"),
        "{}",
        lines[3]
    );
    assert!(
        lines[1].contains(a.idempotency_key.as_ref())
            && lines[1].contains("aprovado")
            && lines[1].contains("\"R$ 1.234,56\"")
    );
    assert!(lines[2].contains("recusado") && lines[2].contains("cartao_recusado"));
    assert!(
        !csv.contains("tok_aprovado") && csv.contains("tok_…vado"),
        "masked card"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&checkout_core::export::to_json(&attempts).unwrap()).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 3);
    assert_eq!(json[2]["kind"], "estorno");
    assert_eq!(
        json[0]["payment_id"],
        attempts[0].payment_id.clone().unwrap().as_str()
    );
    assert_eq!(json[1]["motivo"], "cartao_recusado");
}
