//! Health, the OpenAPI document, metrics, and the QA-only admin routes.

use super::*;

/// Liveness: the process serves HTTP. The body also says how long completed idempotency keys
/// are kept (`key_retention_secs`), so a client knows when a key may have been purged and an old
/// attempt must be looked up by `referencia` before it is sent again.
#[utoipa::path(get, path = "/health", responses((status = 200, body = Health)))]
pub(crate) async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        key_retention_secs: state.key_retention_secs(),
    })
}

/// Readiness: the store answers and takes writes (SQLite: its writer thread runs; PostgreSQL: a
/// pooled connection answers). What a load balancer should route by.
#[utoipa::path(get, path = "/health/ready", responses((status = 200, body = Health), (status = 503, body = Problem)))]
pub(crate) async fn ready(State(state): State<AppState>) -> Result<Json<Health>> {
    state.store().ready().await?;
    Ok(Json(Health {
        status: "ready",
        key_retention_secs: state.key_retention_secs(),
    }))
}

pub(super) async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

pub(super) async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        state.metrics().encode(),
    )
}

/// QA: the gateway ledger, every merchant.
#[utoipa::path(get, path = "/admin/ledger", responses((status = 200, body = Ledger)), security(("admin" = [])))]
pub(crate) async fn admin_ledger(State(state): State<AppState>, _: Admin) -> Result<Json<Ledger>> {
    // Only the gateway simulator keeps a ledger the server can read.
    let ledger = state.ledger().ok_or(ApiError::NotFound)?;
    Ok(Json(Ledger::read(ledger.as_ref()).await?))
}

/// QA: the fault profile in force.
#[utoipa::path(get, path = "/admin/faults", responses((status = 200, body = Faults)), security(("admin" = [])))]
pub(crate) async fn admin_get_faults(
    State(state): State<AppState>,
    _: Admin,
) -> Result<Json<Faults>> {
    Ok(Json(state.faults()))
}

/// QA: replaces the fault profile; fields left out are off.
#[utoipa::path(
    put,
    path = "/admin/faults",
    request_body = Faults,
    responses((status = 200, body = Faults), (status = 422, body = Problem, content_type = "application/problem+json")),
    security(("admin" = []))
)]
pub(crate) async fn admin_put_faults(
    State(state): State<AppState>,
    _: Admin,
    body: Body,
) -> Result<Json<Faults>> {
    let bytes = read_body(body, state.max_body_bytes(), state.body_timeout()).await?;
    let json = parse_json(&bytes)?;
    let faults: Faults =
        serde_json::from_value(json).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    faults
        .validate()
        .map_err(|e| ApiError::Validation(vec![FieldError::new("faults", e)]))?;
    if state.embedded() && faults.crash_after_charge_probability > 0.0 {
        return Err(ApiError::Validation(vec![FieldError::new(
            "crash_after_charge_probability",
            "não existe na API embutida no app: derrubaria o próprio caixa",
        )]));
    }
    tracing::warn!(?faults, "fault profile changed");
    state.set_faults(faults.clone());
    Ok(Json(faults))
}
