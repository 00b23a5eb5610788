//! The request log as an operator reads it: the real binary at INFO, its stderr in a file, one
//! line per request with every field, written off the request path and all there at exit.

use crate::helpers::{listening_url, Backend, TestDb, API_KEY};
use std::process::{Command, Stdio};

#[tokio::test]
async fn every_request_has_one_line_with_its_fields_and_none_names_a_card() {
    // Arrange: the binary at its default level, its log in a file.
    let db = TestDb::new(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("server.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_payment-api"))
        .args(["--listen", "127.0.0.1:0", "--api-key"])
        .arg(format!("{API_KEY}=loja_a"))
        .args(db.args())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let url = listening_url(&mut child);
    let client = reqwest::Client::new();
    let pay = |key: &'static str| {
        client
            .post(format!("{url}/pagamentos"))
            .bearer_auth(API_KEY)
            .header("Idempotency-Key", key)
            .json(&serde_json::json!({"valor": 1234, "cartao": "tok_aprovado"}))
            .send()
    };

    // Act: a first execution, its replay, a refused key, a lookup; then a graceful stop.
    assert_eq!(pay("log-k1").await.unwrap().status(), 201);
    assert_eq!(pay("log-k1").await.unwrap().status(), 201);
    assert_eq!(pay("chave inválida").await.unwrap().status(), 400);
    let found = client
        .get(format!("{url}/pagamentos?idempotency_key=log-k1"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(found.status(), 200);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success(), "a clean exit");

    // Assert: one `request` line each, in order, with what each knew.
    let log = std::fs::read_to_string(&log_path).unwrap();
    let requests: Vec<&str> = log.lines().filter(|l| l.contains(" request ")).collect();
    assert_eq!(requests.len(), 4, "one line per request:\n{log}");
    let has = |line: &str, fields: &[&str]| {
        for f in fields {
            assert!(line.contains(f), "{f} in {line}");
        }
        assert!(line.contains("micros="), "{line}");
    };
    has(
        requests[0],
        &[
            "method=POST",
            "path=/pagamentos",
            "status=201",
            "merchant=loja_a",
            "key=log-k1",
            "outcome=first",
        ],
    );
    has(requests[1], &["status=201", "key=log-k1", "outcome=replay"]);
    has(
        requests[2],
        &[
            "status=400",
            "merchant=loja_a",
            "outcome=invalid-idempotency-key",
        ],
    );
    has(
        requests[3],
        &["method=GET", "path=/pagamentos", "status=200"],
    );
    assert!(
        log.lines()
            .any(|l| l.contains("execution{merchant=loja_a key=log-k1}")
                && l.contains("payment executed")),
        "the first execution's own line carries its span:\n{log}"
    );
    assert!(
        !log.contains("tok_aprovado"),
        "no card token in the log:\n{log}"
    );
}
