//! The served OpenAPI document is valid (checked by the Python `openapi-spec-validator`, which
//! `make test` installs) and says what an integrator needs: lookups as optional query parameters,
//! the Idempotency-Key header required, every answer the server can send with its headers.

use crate::helpers::*;
use crate::stores;
use rstest_reuse::apply;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The document as the running server serves it, saved as `openapi.json` in a new folder.
async fn served_document(app: &TestApp) -> (String, tempfile::TempDir, std::path::PathBuf) {
    let text = reqwest::get(format!("{}/openapi.json", app.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, &text).unwrap();
    (text, dir, path)
}

#[tokio::test]
async fn the_served_openapi_document_validates_and_describes_every_answer() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (text, _dir, path) = served_document(&app).await;
    let out = Command::new("python3")
        .args(["-m", "openapi_spec_validator"])
        .arg(&path)
        .output()
        .expect("python3 runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "openapi-spec-validator (make deps-openapi installs it): {said}"
    );
    assert!(said.contains("OK"), "{said}");

    let doc: Value = serde_json::from_str(&text).unwrap();
    let pagamentos = &doc["paths"]["/pagamentos"];
    for p in pagamentos["get"]["parameters"].as_array().unwrap() {
        assert_eq!(p["in"], "query", "{p}");
        assert_eq!(p["required"], false, "{p}");
    }
    let key = &pagamentos["post"]["parameters"][0];
    assert_eq!(
        (
            key["name"].as_str(),
            key["in"].as_str(),
            key["required"].as_bool()
        ),
        (Some("Idempotency-Key"), Some("header"), Some(true))
    );
    let responses = &pagamentos["post"]["responses"];
    for status in [
        "201", "402", "400", "401", "408", "409", "413", "415", "422", "429", "431", "503",
    ] {
        assert!(
            responses[status].is_object(),
            "POST /pagamentos {status} is documented"
        );
    }
    for status in ["409", "429", "503"] {
        assert!(
            responses[status]["headers"]["Retry-After"].is_object(),
            "{status} has Retry-After"
        );
    }
    assert!(responses["201"]["headers"]["Idempotent-Replayed"].is_object());
    // The examples are answers the server really sent: same fields as a payment made now.
    let example = &responses["201"]["content"]["application/json"]["example"];
    let real: Value = app
        .pay(
            &new_key(),
            &serde_json::json!({"valor": 1234, "cartao": "tok_aprovado", "referencia": "venda-0042"}),
        )
        .await
        .json()
        .await
        .unwrap();
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(example), keys(&real), "{example} vs {real}");
    assert_eq!(
        responses["409"]["content"]["application/problem+json"]["example"]["type"],
        "urn:pagar:problem:key-in-progress"
    );
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}

/// An integrator's path, on both stores: a Python client generated from the served document by
/// `openapi-python-client` (nothing edited) pays, replays, meets a 409, looks payments up, and
/// pays by Pix.
#[apply(stores)]
async fn a_client_generated_from_the_document_pays_replays_meets_a_409_and_looks_up(
    #[case] backend: Backend,
) {
    let psp = crate::pix::Provider::start(crate::pix::SECRET).await;
    let app = TestApp::spawn_with(backend, |c| {
        c.slow_gateway_ms = 2_000;
        psp.configure(c, crate::pix::SECRET, 60_000);
    })
    .await;
    psp.webhook_registered().await;
    let (_, dir, doc) = served_document(&app).await;
    let generated = Command::new("openapi-python-client")
        .args(["generate", "--meta", "none", "--path"])
        .arg(&doc)
        .current_dir(dir.path())
        .output()
        .expect("openapi-python-client runs (make deps-openapi installs it)");
    assert!(
        generated.status.success(),
        "generation failed: {}{}",
        String::from_utf8_lossy(&generated.stdout),
        String::from_utf8_lossy(&generated.stderr)
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/api/generated_client.py");
    let out = tokio::task::spawn_blocking({
        let (url, dir) = (app.url.clone(), dir.path().to_path_buf());
        move || {
            Command::new("python3")
                .arg(script)
                .arg(url)
                .arg(API_KEY)
                .env("PYTHONPATH", dir)
                .output()
                .expect("python3 runs")
        }
    })
    .await
    .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("generated client: ok"), "{said}");
    assert_eq!(app.ledger().await.len(), 2, "one charge per key");
}
