//! `GET /pagamentos?desde=…&ate=…`: a merchant's payments in a time range, page by page (what a
//! till's closing reads), on both stores.

use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// A range around now wide enough for every payment of the test.
fn today() -> (String, String) {
    let now = time::OffsetDateTime::now_utc();
    let fmt = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    (
        fmt(now - time::Duration::hours(1)),
        fmt(now + time::Duration::hours(1)),
    )
}

fn enc(s: &str) -> String {
    s.replace('+', "%2B").replace(':', "%3A")
}

/// Every page of a range, following `proximo`; with `between` run after each page.
async fn all_pages<F, Fut>(app: &TestApp, extra: &str, mut between: F) -> (Vec<Value>, usize)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (desde, ate) = today();
    let mut cursor: Option<String> = None;
    let mut found = Vec::new();
    let mut pages = 0;
    loop {
        let mut path = format!("/pagamentos?desde={}&ate={}{extra}", enc(&desde), enc(&ate));
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let res = app.get(&path).await;
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let page: Value = res.json().await.unwrap();
        found.extend(page["pagamentos"].as_array().unwrap().iter().cloned());
        pages += 1;
        between(pages).await;
        match page["proximo"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => {
                assert!(
                    page["proximo"].is_null(),
                    "the last page says proximo: null"
                );
                break;
            }
        }
        assert!(pages < 100, "paging does not end");
    }
    (found, pages)
}

#[apply(stores)]
async fn a_range_pages_through_every_payment_once_while_more_are_added(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut before = HashSet::new();
    for i in 0..120 {
        let res = app
            .pay(&new_key(), &json!({"valor": 100 + i, "cartao": "tok_aprovado", "referencia": format!("att-{i}")}))
            .await;
        let body: Value = res.json().await.unwrap();
        before.insert(body["id"].as_str().unwrap().to_string());
    }
    // While the listing pages through (25 a page), other payments keep arriving.
    let added = std::sync::Mutex::new(Vec::new());
    let (found, pages) = all_pages(&app, "&limite=25", |page| {
        let app = &app;
        let added = &added;
        async move {
            if page <= 3 {
                for j in 0..10 {
                    let res = app
                        .pay(
                            &new_key(),
                            &json!({"valor": 5_000 + j, "cartao": "tok_recusado"}),
                        )
                        .await;
                    let body: Value = res.json().await.unwrap();
                    added
                        .lock()
                        .unwrap()
                        .push(body["id"].as_str().unwrap().to_string());
                }
            }
        }
    })
    .await;
    assert!(pages >= 5, "120 payments at 25 a page: {pages} pages");
    let ids: Vec<String> = found
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no payment on two pages");
    for id in &before {
        assert!(
            unique.contains(id),
            "{id}, there before the listing, was listed"
        );
    }
    let order: Vec<(time::OffsetDateTime, String)> = found
        .iter()
        .map(|p| {
            let at = time::OffsetDateTime::parse(
                p["criado_em"].as_str().unwrap(),
                &time::format_description::well_known::Rfc3339,
            )
            .unwrap();
            (at, p["id"].as_str().unwrap().to_string())
        })
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "oldest first, by (criado_em, id)");
    // Paging again from the start now finds every payment, the added ones too.
    let (again, _) = all_pages(&app, "&limite=1000", |_| async {}).await;
    assert_eq!(again.len(), before.len() + added.lock().unwrap().len());
}

#[apply(stores)]
async fn a_range_lists_only_the_callers_payments_and_a_terminal_only_its_own(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let mut per_terminal: HashMap<&str, usize> = HashMap::new();
    for (i, terminal) in ["caixa-01", "caixa-02", "caixa-01"].iter().enumerate() {
        let res = app
            .pay(
                &new_key(),
                &json!({"valor": 700 + i, "cartao": "tok_aprovado", "terminal": terminal}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
        let body: Value = res.json().await.unwrap();
        assert_eq!(
            body["terminal"],
            json!(terminal),
            "the terminal is stored and returned"
        );
        *per_terminal.entry(terminal).or_default() += 1;
    }
    let other = app
        .pay_as(
            OTHER_API_KEY,
            &new_key(),
            &json!({"valor": 999, "cartao": "tok_aprovado", "terminal": "caixa-01"}),
        )
        .await;
    assert_eq!(other.status(), StatusCode::CREATED);

    let (mine, _) = all_pages(&app, "", |_| async {}).await;
    assert_eq!(mine.len(), 3, "merchant B's payment is not listed for A");
    let (caixa1, _) = all_pages(&app, "&terminal=caixa-01", |_| async {}).await;
    assert_eq!(caixa1.len(), per_terminal["caixa-01"]);
    assert!(caixa1.iter().all(|p| p["terminal"] == "caixa-01"));
    let (none, _) = all_pages(&app, "&terminal=caixa-99", |_| async {}).await;
    assert!(none.is_empty());
}

#[apply(stores)]
async fn bad_ranges_are_422_and_mixed_lookups_400(#[case] backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (desde, ate) = today();
    let (desde, ate) = (enc(&desde), enc(&ate));
    for (query, field) in [
        (format!("desde={desde}"), "ate"),
        (format!("ate={ate}"), "desde"),
        (format!("desde=ontem&ate={ate}"), "desde"),
        (format!("desde={ate}&ate={desde}"), "ate"),
        (
            "desde=2026-01-01T00%3A00%3A00Z&ate=2026-12-01T00%3A00%3A00Z".to_string(),
            "ate",
        ),
        (format!("desde={desde}&ate={ate}&limite=0"), "limite"),
        (format!("desde={desde}&ate={ate}&limite=1001"), "limite"),
        (format!("desde={desde}&ate={ate}&limite=dez"), "limite"),
        (format!("desde={desde}&ate={ate}&cursor=nada"), "cursor"),
        (
            format!("desde={desde}&ate={ate}&terminal=caixa%201"),
            "terminal",
        ),
    ] {
        let res = app.get(&format!("/pagamentos?{query}")).await;
        let problem = assert_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
        assert!(
            problem["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["campo"] == field),
            "{query}: {problem}"
        );
    }
    let res = app
        .get(&format!("/pagamentos?referencia=x&desde={desde}&ate={ate}"))
        .await;
    assert_problem(res, StatusCode::BAD_REQUEST, "bad-query").await;
    let bad_terminal = app
        .pay(
            &new_key(),
            &json!({"valor": 100, "cartao": "tok_aprovado", "terminal": "caixa 1"}),
        )
        .await;
    assert_problem(bad_terminal, StatusCode::UNPROCESSABLE_ENTITY, "validation").await;
    assert!(
        app.ledger().await.is_empty(),
        "a bad terminal is refused before any charge"
    );
}
