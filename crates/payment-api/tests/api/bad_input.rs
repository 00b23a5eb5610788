//! Bad input, one row per case: every malformed request gets a clear problem+json 4xx (never a
//! 5xx, never a hang) and leaves nothing behind; the same key then works for the good request.
//! Requests are written byte for byte on a raw TCP connection, so duplicate headers, bytes no
//! client library would send and odd methods and paths reach the server as they are.

use crate::helpers::*;
use crate::stores;
use reqwest::StatusCode;
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What goes on the wire for one case.
struct Case {
    name: &'static str,
    method: &'static str,
    path: String,
    /// Header lines; `{KEY}` and `{AUTH}` are replaced by the case's key and `Bearer <api key>`.
    headers: Vec<String>,
    body: Vec<u8>,
    status: u16,
    /// The problem's slug (`None` for the one row answered with a normal 200).
    slug: Option<&'static str>,
    /// True when the case's key is valid, so the good request can follow with it.
    key_is_valid: bool,
}

const GOOD: &str = r#"{"valor": 100, "cartao": "tok_aprovado"}"#;

fn standard_headers() -> Vec<String> {
    [
        "Authorization: {AUTH}",
        "Idempotency-Key: {KEY}",
        "Content-Type: application/json",
    ]
    .map(String::from)
    .to_vec()
}

/// A POST /pagamentos with the standard headers and this body.
fn body(name: &'static str, body: impl Into<Vec<u8>>, status: u16, slug: &'static str) -> Case {
    Case {
        name,
        method: "POST",
        path: "/pagamentos".into(),
        headers: standard_headers(),
        body: body.into(),
        status,
        slug: Some(slug),
        key_is_valid: true,
    }
}

/// A POST /pagamentos with the good body and these headers instead of the standard ones.
fn headers(
    name: &'static str,
    headers: &[&str],
    status: u16,
    slug: &'static str,
    key_is_valid: bool,
) -> Case {
    Case {
        name,
        method: "POST",
        path: "/pagamentos".into(),
        headers: headers.iter().map(|h| h.to_string()).collect(),
        body: GOOD.into(),
        status,
        slug: Some(slug),
        key_is_valid,
    }
}

/// Another method or path, with the standard headers.
fn route(
    name: &'static str,
    method: &'static str,
    path: &str,
    status: u16,
    slug: Option<&'static str>,
) -> Case {
    Case {
        name,
        method,
        path: path.into(),
        headers: standard_headers(),
        body: if method == "POST" || method == "PUT" {
            GOOD.into()
        } else {
            Vec::new()
        },
        status,
        slug,
        key_is_valid: true,
    }
}

fn cases() -> Vec<Case> {
    let deep_array = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    // Under the 16 KiB limit, far past serde_json's nesting limit of 128.
    let deeper_than_the_parser = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
    let deep_object = format!("{}1{}", r#"{"a":"#.repeat(2_000), "}".repeat(2_000));
    let too_large = format!(
        r#"{{"valor": 100, "cartao": "tok_aprovado", "descricao": "{}"}}"#,
        "x".repeat(16 * 1024)
    );
    let mut invalid_utf8 = br#"{"valor": 100, "cartao": "tok_aprovado", "descricao": ""#.to_vec();
    invalid_utf8.extend_from_slice(b"\xff\xfe\"}");
    let huge_header = format!("X-Enchimento: {}", "a".repeat(16 * 1024));
    let long_key = format!("Idempotency-Key: {}", "k".repeat(256));
    vec![
        // Bodies.
        body(
            "truncated JSON",
            r#"{"valor": 100, "cartao": "tok_apr"#,
            400,
            "malformed-json",
        ),
        body("empty body", "", 400, "malformed-json"),
        body(
            "not JSON",
            "valor=100&cartao=tok_aprovado",
            400,
            "malformed-json",
        ),
        body(
            "arrays nested 10 000 deep (20 000 bytes)",
            deep_array,
            413,
            "payload-too-large",
        ),
        body(
            "arrays nested 5 000 deep",
            deeper_than_the_parser,
            400,
            "malformed-json",
        ),
        body(
            "objects nested 2 000 deep",
            deep_object,
            400,
            "malformed-json",
        ),
        body("16 KiB + 1 body", too_large, 413, "payload-too-large"),
        body(
            "invalid UTF-8 in a string",
            invalid_utf8,
            400,
            "malformed-json",
        ),
        body(
            "a lone surrogate escape",
            r#"{"valor": 100, "cartao": "tok_aprovado", "descricao": "\udc00"}"#,
            400,
            "malformed-json",
        ),
        body(
            "a byte-order mark first",
            "\u{feff}{\"valor\": 100, \"cartao\": \"tok_aprovado\"}",
            400,
            "malformed-json",
        ),
        body(
            "valor given twice",
            r#"{"valor": 100, "valor": 999999, "cartao": "tok_aprovado"}"#,
            400,
            "malformed-json",
        ),
        body(
            "cartao given twice",
            r#"{"valor": 100, "cartao": "tok_recusado", "cartao": "tok_aprovado"}"#,
            400,
            "malformed-json",
        ),
        body(
            "trailing garbage",
            r#"{"valor": 100, "cartao": "tok_aprovado"} x"#,
            400,
            "malformed-json",
        ),
        body(
            "two objects",
            r#"{"valor": 100, "cartao": "tok_aprovado"}{"valor": 1}"#,
            400,
            "malformed-json",
        ),
        body(
            "valor out of f64 range",
            r#"{"valor": 1e400, "cartao": "tok_aprovado"}"#,
            400,
            "malformed-json",
        ),
        body(
            "valor as a string",
            r#"{"valor": "100", "cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "valor with decimals",
            r#"{"valor": 100.5, "cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "valor as 100.0",
            r#"{"valor": 100.0, "cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "valor as 1e2",
            r#"{"valor": 1e2, "cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "valor negative",
            r#"{"valor": -1, "cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "valor zero",
            r#"{"valor": 0, "cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "valor over the maximum",
            r#"{"valor": 100000001, "cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "valor past u64",
            r#"{"valor": 99999999999999999999, "cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "valor null",
            r#"{"valor": null, "cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "valor missing",
            r#"{"cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "valor a boolean",
            r#"{"valor": true, "cartao": "tok_aprovado"}"#,
            422,
            "validation",
        ),
        body(
            "cartao unknown",
            r#"{"valor": 100, "cartao": "tok_qualquer"}"#,
            422,
            "validation",
        ),
        body(
            "cartao a number",
            r#"{"valor": 100, "cartao": 4111111111111111}"#,
            422,
            "validation",
        ),
        body("cartao missing", r#"{"valor": 100}"#, 422, "validation"),
        body(
            "an extra field",
            r#"{"valor": 100, "cartao": "tok_aprovado", "parcelas": 3}"#,
            422,
            "validation",
        ),
        body("the body an array", "[]", 422, "validation"),
        body("the body a string", r#""pagar""#, 422, "validation"),
        body("the body null", "null", 422, "validation"),
        body(
            "descricao 256 characters",
            format!(
                r#"{{"valor": 100, "cartao": "tok_aprovado", "descricao": "{}"}}"#,
                "d".repeat(256)
            ),
            422,
            "validation",
        ),
        body(
            "descricao with NUL",
            r#"{"valor": 100, "cartao": "tok_aprovado", "descricao": "a\u0000b"}"#,
            422,
            "validation",
        ),
        body(
            "descricao a number",
            r#"{"valor": 100, "cartao": "tok_aprovado", "descricao": 7}"#,
            422,
            "validation",
        ),
        body(
            "referencia an object",
            r#"{"valor": 100, "cartao": "tok_aprovado", "referencia": {"id": 1}}"#,
            422,
            "validation",
        ),
        body(
            "referencia with an escape character",
            r#"{"valor": 100, "cartao": "tok_aprovado", "referencia": "\u001b[31m"}"#,
            422,
            "validation",
        ),
        // Idempotency keys.
        headers(
            "key missing",
            &["Authorization: {AUTH}", "Content-Type: application/json"],
            400,
            "invalid-idempotency-key",
            false,
        ),
        headers(
            "key empty",
            &[
                "Authorization: {AUTH}",
                "Idempotency-Key: ",
                "Content-Type: application/json",
            ],
            400,
            "invalid-idempotency-key",
            false,
        ),
        headers(
            "key of 256 characters",
            &[
                "Authorization: {AUTH}",
                long_key.as_str(),
                "Content-Type: application/json",
            ],
            400,
            "invalid-idempotency-key",
            false,
        ),
        headers(
            "key with a tab inside",
            &[
                "Authorization: {AUTH}",
                "Idempotency-Key: abc\tdef",
                "Content-Type: application/json",
            ],
            400,
            "invalid-idempotency-key",
            false,
        ),
        headers(
            "key with a space inside",
            &[
                "Authorization: {AUTH}",
                "Idempotency-Key: abc def",
                "Content-Type: application/json",
            ],
            400,
            "invalid-idempotency-key",
            false,
        ),
        headers(
            "key not ASCII",
            &[
                "Authorization: {AUTH}",
                "Idempotency-Key: chave-é",
                "Content-Type: application/json",
            ],
            400,
            "invalid-idempotency-key",
            false,
        ),
        headers(
            "key given twice",
            &[
                "Authorization: {AUTH}",
                "Idempotency-Key: {KEY}",
                "Idempotency-Key: {KEY}",
                "Content-Type: application/json",
            ],
            400,
            "invalid-idempotency-key",
            true,
        ),
        headers(
            "sf-string with a bad escape",
            &[
                "Authorization: {AUTH}",
                r#"Idempotency-Key: "a\x""#,
                "Content-Type: application/json",
            ],
            400,
            "invalid-idempotency-key",
            false,
        ),
        headers(
            "sf-string unterminated",
            &[
                "Authorization: {AUTH}",
                r#"Idempotency-Key: "abc"#,
                "Content-Type: application/json",
            ],
            400,
            "invalid-idempotency-key",
            false,
        ),
        // Other headers.
        headers(
            "Authorization missing",
            &["Idempotency-Key: {KEY}", "Content-Type: application/json"],
            401,
            "unauthorized",
            true,
        ),
        headers(
            "Authorization given twice",
            &[
                "Authorization: {AUTH}",
                "Authorization: {AUTH}",
                "Idempotency-Key: {KEY}",
                "Content-Type: application/json",
            ],
            400,
            "duplicate-header",
            true,
        ),
        headers(
            "Authorization with another scheme",
            &[
                "Authorization: Basic c2s6eA==",
                "Idempotency-Key: {KEY}",
                "Content-Type: application/json",
            ],
            401,
            "unauthorized",
            true,
        ),
        headers(
            "Authorization with an empty token",
            &[
                "Authorization: Bearer ",
                "Idempotency-Key: {KEY}",
                "Content-Type: application/json",
            ],
            401,
            "unauthorized",
            true,
        ),
        headers(
            "Authorization with an unknown key",
            &[
                "Authorization: Bearer sk_test_ninguem_123",
                "Idempotency-Key: {KEY}",
                "Content-Type: application/json",
            ],
            401,
            "unauthorized",
            true,
        ),
        headers(
            "a 16 KiB header",
            &[
                "Authorization: {AUTH}",
                "Idempotency-Key: {KEY}",
                "Content-Type: application/json",
                huge_header.as_str(),
            ],
            431,
            "headers-too-large",
            true,
        ),
        headers(
            "Content-Type missing",
            &["Authorization: {AUTH}", "Idempotency-Key: {KEY}"],
            415,
            "unsupported-media-type",
            true,
        ),
        headers(
            "Content-Type text/plain",
            &[
                "Authorization: {AUTH}",
                "Idempotency-Key: {KEY}",
                "Content-Type: text/plain",
            ],
            415,
            "unsupported-media-type",
            true,
        ),
        headers(
            "Content-Type application/xml",
            &[
                "Authorization: {AUTH}",
                "Idempotency-Key: {KEY}",
                "Content-Type: application/xml",
            ],
            415,
            "unsupported-media-type",
            true,
        ),
        // Methods and paths.
        route(
            "PUT /pagamentos",
            "PUT",
            "/pagamentos",
            405,
            Some("method-not-allowed"),
        ),
        route(
            "DELETE a payment",
            "DELETE",
            "/pagamentos/pay_x",
            405,
            Some("method-not-allowed"),
        ),
        route(
            "PATCH /health",
            "PATCH",
            "/health",
            405,
            Some("method-not-allowed"),
        ),
        route(
            "POST with a trailing slash",
            "POST",
            "/pagamentos/",
            404,
            Some("not-found"),
        ),
        route(
            "an unknown path",
            "GET",
            "/pagamento",
            404,
            Some("not-found"),
        ),
        route(
            "path traversal in a payment id",
            "GET",
            "/pagamentos/..%2F..%2Fetc%2Fpasswd",
            404,
            Some("not-found"),
        ),
        route(
            "a lookup with no filter",
            "GET",
            "/pagamentos",
            400,
            Some("bad-query"),
        ),
        route(
            "a lookup with both filters",
            "GET",
            "/pagamentos?referencia=a&idempotency_key=b",
            400,
            Some("bad-query"),
        ),
        route(
            "SQL in referencia finds nothing",
            "GET",
            "/pagamentos?referencia=%27%20OR%201%3D1%20--",
            200,
            None,
        ),
    ]
}

/// Sends `request` on a fresh connection and reads the whole answer (at most 5 s).
async fn send(url: &str, request: &[u8]) -> (u16, String, Vec<u8>) {
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer))
        .await
        .expect("answered within 5 s, never a hang")
        .ok();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {head:?}"));
    (status, head.to_ascii_lowercase(), body.as_bytes().to_vec())
}

fn wire(case: &Case, key: &str) -> Vec<u8> {
    let auth = format!("Bearer {API_KEY}");
    let mut out = format!(
        "{} {} HTTP/1.1\r\nHost: pagar\r\nConnection: close\r\n",
        case.method, case.path
    )
    .into_bytes();
    for h in &case.headers {
        let line = h.replace("{KEY}", key).replace("{AUTH}", &auth);
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", case.body.len()).as_bytes());
    out.extend_from_slice(&case.body);
    out
}

#[apply(stores)]
async fn every_malformed_request_gets_a_clear_4xx_and_leaves_nothing_behind(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let cases = cases();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let key = new_key();
        let (keys_before, ledger_before) = (app.stored_keys().await, app.ledger().await.len());
        let (status, head, body) = send(&app.url, &wire(case, &key)).await;
        let problem: Option<Value> = serde_json::from_slice(&body).ok();
        let slug = problem
            .as_ref()
            .and_then(|p| p["type"].as_str())
            .map(|t| t.trim_start_matches("urn:pagar:problem:").to_string());
        let is_problem = head.contains("content-type: application/problem+json");
        let ok = status == case.status
            && match case.slug {
                Some(want) => is_problem && slug.as_deref() == Some(want),
                None => problem.is_some_and(|p| p["pagamentos"] == serde_json::json!([])),
            };
        if !ok {
            failures.push(format!(
                "{}: got {status} {slug:?} (problem+json: {is_problem}), want {} {:?}",
                case.name, case.status, case.slug
            ));
            continue;
        }
        if app.stored_keys().await != keys_before || app.ledger().await.len() != ledger_before {
            failures.push(format!("{}: something was stored or charged", case.name));
        }
        if case.key_is_valid && case.method == "POST" && case.path == "/pagamentos" {
            let good = app.pay(&key, &approved(100)).await;
            if good.status() != reqwest::StatusCode::CREATED {
                failures.push(format!(
                    "{}: the key was not free afterwards ({})",
                    case.name,
                    good.status()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[apply(stores)]
async fn a_body_trickled_a_byte_at_a_time_is_cut_at_the_deadline(#[case] backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| c.body_timeout_ms = 1_000).await;
    let key = new_key();
    let head = format!(
        "POST /pagamentos HTTP/1.1\r\nHost: pagar\r\nAuthorization: Bearer {API_KEY}\r\nIdempotency-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        GOOD.len()
    );
    let addr = app.url.trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let (mut rd, mut wr) = s.into_split();
    let trickle = tokio::spawn(async move {
        for b in GOOD.bytes() {
            if wr.write_all(&[b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), rd.read_to_end(&mut answer))
        .await
        .expect("cut well before the body would have finished (20 s)")
        .ok();
    trickle.abort();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("urn:pagar:problem:request-timeout"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(app.stored_keys().await, 0);
    assert_eq!(
        app.pay(&key, &approved(100)).await.status(),
        reqwest::StatusCode::CREATED
    );
}

/// A NUL or a control character in a path id or a look-up value is refused before any store call
/// (PostgreSQL cannot hold a NUL: it used to answer 503 and leave a refund key claimed), and
/// nothing is stored.
#[apply(stores)]
async fn a_nul_in_a_path_id_or_a_lookup_value_is_refused_before_the_store(
    #[case] backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    for path in ["/pagamentos/pay_%00x", "/pagamentos/pay%09x"] {
        assert_problem(app.get(path).await, StatusCode::NOT_FOUND, "not-found").await;
    }
    for query in [
        "/pagamentos?referencia=venda%00",
        "/pagamentos?idempotency_key=k%00",
        "/pagamentos?referencia=a%0Ab",
    ] {
        assert_problem(app.get(query).await, StatusCode::BAD_REQUEST, "bad-query").await;
    }
    let refund = app
        .client
        .post(format!("{}/pagamentos/pay_%00x/estornos", app.url))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", new_key())
        .json(&json!({"valor": 100}))
        .send()
        .await
        .unwrap();
    assert_problem(refund, StatusCode::NOT_FOUND, "not-found").await;
    assert_eq!(app.stored_keys().await, 0, "no key claimed");
}
