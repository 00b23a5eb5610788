use crate::helpers::*;
use crate::stores;
use futures::future::join_all;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};

/// Fires 50 requests with one key at once and checks the outcome classes.
async fn fifty_at_once(app: &TestApp, body: Value) -> (Vec<Vec<u8>>, usize) {
    let key = new_key();
    let responses = join_all((0..50).map(|_| {
        let (app, key, body) = (&app, key.clone(), body.clone());
        async move { app.pay(&key, &body).await }
    }))
    .await;
    let mut successes = Vec::new();
    let mut conflicts = 0;
    for res in responses {
        match res.status() {
            StatusCode::CREATED => successes.push(res.bytes().await.unwrap().to_vec()),
            StatusCode::CONFLICT => {
                let retry_after: u64 = res.headers()["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(retry_after >= 1);
                let p = assert_problem(res, StatusCode::CONFLICT, "key-in-progress").await;
                assert_eq!(p["retryable"], true);
                conflicts += 1;
            }
            other => panic!("unexpected {other}: {}", res.text().await.unwrap()),
        }
    }
    (successes, conflicts)
}

#[apply(stores)]
async fn fifty_concurrent_requests_with_one_key_charge_once_and_agree(#[case] backend: Backend) {
    // Arrange
    let app = TestApp::spawn(backend).await;
    // Act
    let (successes, _conflicts) = fifty_at_once(&app, approved(700)).await;
    // Assert
    assert!(!successes.is_empty());
    assert!(
        successes.iter().all(|b| b == &successes[0]),
        "every 201 carries the same payment"
    );
    assert_eq!(app.ledger().await.len(), 1);
    assert_eq!(app.db.count("payments").await, 1);
}

#[apply(stores)]
async fn fifty_concurrent_requests_during_a_slow_charge_get_409_with_retry_after_and_charge_once(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let (successes, conflicts) =
        fifty_at_once(&app, json!({"valor": 700, "cartao": "tok_lento"})).await;
    assert_eq!(successes.len() + conflicts, 50);
    assert!(conflicts >= 1, "the slow charge keeps the key in progress");
    assert!(successes.iter().all(|b| b == &successes[0]));
    assert_eq!(app.ledger().await.len(), 1);
    assert_eq!(app.db.count("payments").await, 1);
}

#[apply(stores)]
async fn many_distinct_keys_at_once_each_charge_once(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let keys: Vec<String> = (0..200).map(|_| new_key()).collect();
    let body = approved(10);
    let responses = join_all(keys.iter().chain(keys.iter()).map(|k| app.pay(k, &body))).await;
    for res in responses {
        assert!(
            matches!(res.status(), StatusCode::CREATED | StatusCode::CONFLICT),
            "{}",
            res.status()
        );
    }
    assert_eq!(app.ledger().await.len(), 200);
    assert_eq!(app.db.count("payments").await, 200);
}
