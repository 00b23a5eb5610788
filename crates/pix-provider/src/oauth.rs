//! OAuth2 client credentials, as the PSPs that implement the API Pix require (its
//! `securitySchemes.OAuth2.flows.clientCredentials`): the merchant's client asks
//! `POST /oauth/token` (HTTP Basic `client_id:client_secret`, `grant_type=client_credentials`,
//! optional `scope`) for a bearer token that expires; every API Pix route asks for its scope
//! (`cob.write` to create or remove a charge, `cob.read` to read one, `pix.read`/`pix.write`
//! for Pix and devoluções, `webhook.read`/`webhook.write`). A missing, unknown or expired token
//! is answered 401 (`WWW-Authenticate: Bearer error="invalid_token"`, RFC 6750), a token without
//! the route's scope 403. The QA controls (`/qa/…`, the simulator playing customers and the
//! bank, not a PSP route) take a token of their own.

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Form, Json};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every scope this simulator grants: the API Pix's for immediate charges, Pix and webhooks.
pub const SCOPES: [&str; 6] = [
    "cob.write",
    "cob.read",
    "pix.write",
    "pix.read",
    "webhook.write",
    "webhook.read",
];

/// The merchant's client, its tokens, and the QA controls' token.
pub(crate) struct Clients {
    client_id: String,
    client_secret: String,
    ttl: Duration,
    qa_token: String,
    issued: Mutex<HashMap<String, Issued>>,
    total: AtomicU64,
}

struct Issued {
    scopes: Vec<String>,
    expires: Instant,
}

/// What a request needs to be let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// A live token with this scope.
    Scope(&'static str),
    /// The QA controls' token.
    Qa,
    /// Nothing: the token endpoint checks the client itself.
    Nothing,
}

fn needs(method: &Method, path: &str) -> Needs {
    let write = |scope| {
        if method == Method::GET {
            None
        } else {
            Some(scope)
        }
    };
    if path == "/oauth/token" {
        return Needs::Nothing;
    }
    if path.starts_with("/qa/") {
        return Needs::Qa;
    }
    let (read, written) = if path.starts_with("/cob/") {
        ("cob.read", write("cob.write"))
    } else if path.starts_with("/webhook/") {
        ("webhook.read", write("webhook.write"))
    } else {
        ("pix.read", write("pix.write"))
    };
    Needs::Scope(written.unwrap_or(read))
}

impl Clients {
    pub(crate) fn new(client_id: &str, client_secret: &str, ttl: Duration, qa_token: &str) -> Self {
        Self {
            client_id: client_id.to_string(),
            client_secret: client_secret.to_string(),
            ttl,
            qa_token: qa_token.to_string(),
            issued: Mutex::new(HashMap::new()),
            total: AtomicU64::new(0),
        }
    }

    fn issued(&self) -> std::sync::MutexGuard<'_, HashMap<String, Issued>> {
        self.issued.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The refusal of `token` for `scope`, or `None` when it is live and carries it; an expired
    /// one is forgotten.
    fn refusal(&self, token: &str, scope: &str) -> Option<Response> {
        let mut issued = self.issued();
        let now = Instant::now();
        issued.retain(|_, i| i.expires > now);
        match issued.get(token) {
            None => Some(unauthorized(
                "Bearer error=\"invalid_token\"",
                "invalid_token",
                "token ausente, desconhecido ou expirado",
            )),
            Some(i) if !i.scopes.iter().any(|s| s == scope) => Some(crate::problem::problem(
                StatusCode::FORBIDDEN,
                "AcessoNegado",
                &format!("o token não tem o escopo {scope}"),
            )),
            Some(_) => None,
        }
    }

    fn client_is(&self, authorization: Option<&str>) -> bool {
        let Some(basic) = authorization.and_then(|v| v.strip_prefix("Basic ")) else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(basic.trim()) else {
            return false;
        };
        let expected = format!("{}:{}", self.client_id, self.client_secret);
        decoded == expected.as_bytes()
    }
}

fn bearer(req: &Request) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

fn unauthorized(challenge: &str, error: &str, detail: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge.to_string())],
        Json(json!({"error": error, "error_description": detail})),
    )
        .into_response()
}

/// Lets a request in when it carries what its route needs.
pub(crate) async fn guard(State(c): State<Arc<Clients>>, req: Request, next: Next) -> Response {
    match needs(req.method(), req.uri().path()) {
        Needs::Nothing => {}
        Needs::Qa if bearer(&req) == Some(c.qa_token.as_str()) => {}
        Needs::Qa => {
            return crate::problem::problem(
                StatusCode::FORBIDDEN,
                "AcessoNegado",
                "controles de QA: token de QA ausente ou errado",
            )
        }
        Needs::Scope(scope) => {
            if let Some(refused) = c.refusal(bearer(&req).unwrap_or_default(), scope) {
                return refused;
            }
        }
    }
    next.run(req).await
}

#[derive(Deserialize)]
pub(crate) struct TokenAsk {
    grant_type: Option<String>,
    scope: Option<String>,
}

/// `POST /oauth/token`: a token for the client that authenticates with HTTP Basic, for the
/// scopes asked (all of them when none are).
pub(crate) async fn token(
    State(c): State<Arc<Clients>>,
    headers: axum::http::HeaderMap,
    Form(ask): Form<TokenAsk>,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if !c.client_is(authorization) {
        return unauthorized(
            "Basic realm=\"pix\"",
            "invalid_client",
            "client_id ou client_secret inválidos",
        );
    }
    if ask.grant_type.as_deref() != Some("client_credentials") {
        let body = json!({"error": "unsupported_grant_type", "error_description": "use grant_type=client_credentials"});
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    let scopes: Vec<String> = match ask.scope.as_deref().map(str::trim) {
        None | Some("") => SCOPES.iter().map(|s| s.to_string()).collect(),
        Some(asked) => asked.split_whitespace().map(str::to_string).collect(),
    };
    if let Some(unknown) = scopes.iter().find(|s| !SCOPES.contains(&s.as_str())) {
        let body = json!({"error": "invalid_scope", "error_description": format!("escopo desconhecido: {unknown}")});
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    let access_token = format!("pxt_{}", uuid::Uuid::new_v4().simple());
    let scope = scopes.join(" ");
    c.total.fetch_add(1, Ordering::Relaxed);
    c.issued().insert(
        access_token.clone(),
        Issued {
            scopes,
            expires: Instant::now() + c.ttl,
        },
    );
    Json(json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": c.ttl.as_secs(),
        "scope": scope,
    }))
    .into_response()
}

/// `GET /qa/tokens`: tokens issued since start (`emitidos`) and still live (`vivos`).
pub(crate) async fn qa_tokens(State(c): State<Arc<Clients>>) -> Json<serde_json::Value> {
    let now = Instant::now();
    let live = c.issued().values().filter(|i| i.expires > now).count();
    Json(json!({"emitidos": c.total.load(Ordering::Relaxed), "vivos": live}))
}

/// `DELETE /qa/tokens`: the PSP revokes every token (as after a credential rotation or a
/// restart of its authorization server); clients must ask again.
pub(crate) async fn qa_revoke(State(c): State<Arc<Clients>>) -> Json<serde_json::Value> {
    let revoked = std::mem::take(&mut *c.issued()).len();
    Json(json!({"revogados": revoked}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_pix_route_asks_for_its_own_scope() {
        let cases = [
            (Method::PUT, "/cob/abc", Needs::Scope("cob.write")),
            (Method::PATCH, "/cob/abc", Needs::Scope("cob.write")),
            (Method::GET, "/cob/abc", Needs::Scope("cob.read")),
            (Method::GET, "/pix", Needs::Scope("pix.read")),
            (Method::GET, "/pix/E1", Needs::Scope("pix.read")),
            (
                Method::PUT,
                "/pix/E1/devolucao/d1",
                Needs::Scope("pix.write"),
            ),
            (
                Method::GET,
                "/pix/E1/devolucao/d1",
                Needs::Scope("pix.read"),
            ),
            (Method::PUT, "/webhook/k", Needs::Scope("webhook.write")),
            (Method::GET, "/webhook/k", Needs::Scope("webhook.read")),
            (Method::POST, "/qa/cob/abc/pagar", Needs::Qa),
            (Method::POST, "/oauth/token", Needs::Nothing),
        ];
        for (method, path, want) in cases {
            assert_eq!(needs(&method, path), want, "{method} {path}");
        }
    }
}
