//! The served OpenAPI document is valid (checked by the Python `openapi-spec-validator`, which
//! `make test` installs) and says what an integrator needs: lookups as optional query parameters,
//! the Idempotency-Key header required, every answer the server can send with its headers.

use crate::helpers::*;
use serde_json::Value;
use std::process::Command;

#[tokio::test]
async fn the_served_openapi_document_validates_and_describes_every_answer() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let text = reqwest::get(format!("{}/openapi.json", app.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, &text).unwrap();
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
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}
