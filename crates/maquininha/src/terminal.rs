//! The machine beside the cashier, as a web page per terminal: `GET /terminais/{id}` is the page;
//! it asks `GET /terminais/{id}/pedido` every half second (which, as a real machine fetching its
//! order, moves a `created` order to `at_terminal`), and `POST /terminais/{id}/acao` is what the
//! customer does with the card.

use crate::api::{error, ApiError, Shared};
use crate::store::{Order, Refused, Status};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

const PAGE: &str = include_str!("terminal.html");

type St = State<Arc<Shared>>;

pub fn router(state: Arc<Shared>) -> Router {
    Router::new()
        .route("/terminais/{id}", get(page))
        .route("/terminais/{id}/pedido", get(current))
        .route("/terminais/{id}/acao", post(act))
        .with_state(state)
}

fn known(s: &Shared, id: &str) -> Result<(), ApiError> {
    if s.terminals.iter().any(|t| t == id) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "terminal_not_found",
            format!("unknown terminal {id}"),
        ))
    }
}

fn is_silent(s: &Shared, id: &str) -> bool {
    s.silent
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|t| t == id)
}

async fn page(State(s): St, Path(id): Path<String>) -> Response {
    if let Err(e) = known(&s, &id) {
        return e.into_response();
    }
    (
        [(header::CACHE_CONTROL, "no-store")],
        Html(PAGE.replace("{{TERMINAL}}", &id)),
    )
        .into_response()
}

/// What the machine's screen shows of an order.
fn view(o: &Order) -> Value {
    json!({
        "id": o.id,
        "centavos": o.ask.centavos,
        "status": o.status.as_str(),
        "status_detail": o.status_detail,
        "tipo": o.ask.default_type,
        "parcelas": o.ask.installments,
        "cartao": o.card_type,
    })
}

/// `GET /terminais/{id}/pedido`: the order the machine is on (taking it if it was only
/// `created`), and how the last one ended.
async fn current(State(s): St, Path(id): Path<String>) -> Response {
    if let Err(e) = known(&s, &id) {
        return e.into_response();
    }
    let silent = is_silent(&s, &id);
    let open = match s.store.open_order(&id) {
        Ok(o) => o,
        Err(e) => return internal(e),
    };
    let open = match open {
        Some(o) if o.status == Status::Created && !silent => {
            match s.store.transition(
                &o.id,
                &[Status::Created],
                Status::AtTerminal,
                "at_terminal",
                None,
            ) {
                Ok(taken) => Some(taken),
                // Cancelled by the till meanwhile: nothing to take.
                Err(Refused::WrongStatus(_)) => None,
                Err(e) => return internal(e),
            }
        }
        other => other,
    };
    let last = match s.store.last_order(&id) {
        Ok(o) => o,
        Err(e) => return internal(e),
    };
    Json(json!({
        "terminal": id,
        "silenciosa": silent,
        "pedido": open.as_ref().map(view),
        "ultimo": last.as_ref().map(view),
    }))
    .into_response()
}

fn internal(e: Refused) -> Response {
    tracing::error!(error = %e, "ledger");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal_error",
        "internal error",
    )
}

/// What the customer (or QA) does at the machine.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Act {
    acao: String,
    /// The card approved: `debit_card`, `credit_card` or `voucher_card` (the order's default
    /// when absent).
    #[serde(default)]
    cartao: Option<String>,
}

/// `POST /terminais/{id}/acao`: `aprovar`, `saldo_insuficiente`, `senha_incorreta`,
/// `retirar_cartao`, `desistir`, `sem_resposta`, `responder`.
async fn act(State(s): St, Path(id): Path<String>, Json(a): Json<Act>) -> Response {
    if let Err(e) = known(&s, &id) {
        return e.into_response();
    }
    match a.acao.as_str() {
        "sem_resposta" | "responder" => {
            let mut silent = s.silent.lock().unwrap_or_else(|p| p.into_inner());
            silent.retain(|t| *t != id);
            if a.acao == "sem_resposta" {
                silent.push(id.clone());
            }
            return Json(json!({"silenciosa": a.acao == "sem_resposta"})).into_response();
        }
        _ => {}
    }
    if is_silent(&s, &id) {
        return error(
            StatusCode::CONFLICT,
            "terminal_silent",
            "the machine is not answering: choose 'responder' first",
        );
    }
    let open = match s.store.open_order(&id) {
        Ok(Some(o)) if o.status == Status::AtTerminal => o,
        Ok(_) => {
            return error(
                StatusCode::CONFLICT,
                "no_order_at_terminal",
                "no order is at the terminal",
            )
        }
        Err(e) => return internal(e),
    };
    let card = a
        .cartao
        .clone()
        .or_else(|| open.ask.default_type.clone())
        .unwrap_or_else(|| "credit_card".to_string());
    let (to, detail) = match a.acao.as_str() {
        "aprovar" => {
            if !["debit_card", "credit_card", "voucher_card"].contains(&card.as_str()) {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "cartao: debit_card, credit_card or voucher_card",
                );
            }
            (Status::Processed, "processed")
        }
        "saldo_insuficiente" => (Status::Failed, "insufficient_amount"),
        "senha_incorreta" => (Status::Failed, "invalid_pin"),
        "desistir" => (Status::Canceled, "canceled_on_terminal"),
        // The card came out before the end: nothing was charged, the machine asks again.
        "retirar_cartao" => {
            return Json(json!({"pedido": view(&open), "mensagem": "cartao_retirado"}))
                .into_response()
        }
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &format!("unknown action {other}"),
            )
        }
    };
    let card = (to == Status::Processed).then_some(card.as_str());
    match s
        .store
        .transition(&open.id, &[Status::AtTerminal], to, detail, card)
    {
        Ok(o) => {
            tracing::info!(order = %o.id, status = o.status.as_str(), "at the terminal");
            s.notifier.notify(&o);
            Json(json!({"pedido": view(&o)})).into_response()
        }
        Err(Refused::WrongStatus(now)) => error(
            StatusCode::CONFLICT,
            "order_status_conflict",
            &format!("the order is {now}"),
        ),
        Err(e) => internal(e),
    }
}
