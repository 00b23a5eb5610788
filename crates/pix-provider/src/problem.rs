//! The API Pix's error answer, for its routes and its OAuth2 guard alike.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An RFC 9457 problem, with the API Pix's `type` URIs.
pub(crate) fn problem(status: StatusCode, name: &str, detail: &str) -> Response {
    let body = json!({
        "type": format!("https://pix.bcb.gov.br/api/v2/error/{name}"),
        "title": name,
        "status": status.as_u16(),
        "detail": detail,
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}
