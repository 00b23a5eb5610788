//! The routes of the means that answer *waiting*: the cancel of a Pix or of a card-machine order
//! nobody paid yet, and the providers' webhooks.

use super::*;

/// Cancels a payment that waits for the customer: a Pix (removed at the Pix provider, then
/// `cancelado`) or a card-machine order (cancelled at its provider, which does so only while
/// the machine has not taken it). Idempotent; one already paid stays paid (its state is the
/// answer either way).
#[utoipa::path(
    post,
    path = "/pagamentos/{id}/cancelamento",
    params(("id" = String, Path, description = "The Pix or card-machine payment (`pay_…`)")),
    responses(
        (status = 200, description = "As it now stands: `cancelado`, or `aprovado` when the customer paid first (`PagamentoPix` or `PagamentoMaquininha`)", body = PaymentRead),
        (status = 401, description = "Bad API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such Pix or card-machine payment for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The machine already took the order (`maquininha-com-o-pedido`): a card may still pay it; cancel on the machine, or wait for the customer", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "No Pix provider (`pix-indisponivel`) or card machine (`maquininha-indisponivel`) configured", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The provider did not answer; nothing changed, try again", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn cancel_waiting(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    Path(id): Path<String>,
) -> Result<Response> {
    let id = PaymentId::from_path(&id).ok_or(ApiError::NotFound)?;
    if let Some(stored) = state
        .store()
        .awaited_by_id::<MachineOrder>(&merchant, &id)
        .await?
    {
        let machine = state.machine().ok_or(ApiError::MachineUnavailable)?;
        let order = machine.settler.cancel(stored).await?;
        return Ok(Json(MachinePaymentBody::from(&order)).into_response());
    }
    let pix = state.pix().ok_or(ApiError::PixUnavailable)?;
    let charge = pix.settler.cancel(&merchant, &id).await?;
    Ok(Json(PixPaymentBody::from(&charge)).into_response())
}

/// The Pix provider's webhook (`{webhookUrl}/pix`): signature and timestamp checked on the raw
/// bytes, then each charge it names read back from the provider and settled. Answered 200 once
/// every charge is recorded; 401 for a bad signature (nothing recorded); 503 when the provider
/// cannot be read back (the provider sends it again, and the poll settles it anyway).
#[utoipa::path(
    post,
    path = "/webhooks/pix",
    request_body(content = String, description = "The API Pix callback: `{\"pix\": [{\"endToEndId\", \"txid\", \"valor\", \"horario\"}]}`", content_type = "application/json"),
    params(
        ("webhook-id" = String, Header, description = "Standard Webhooks message id"),
        ("webhook-timestamp" = i64, Header, description = "Unix seconds; more than 5 minutes away is refused"),
        ("webhook-signature" = String, Header, description = "`v1,<base64 HMAC-SHA256>`, space separated when signed with more than one secret"),
    ),
    responses(
        (status = 200, description = "Recorded (or already recorded: each Pix counts once)"),
        (status = 401, description = "Bad or missing signature, or stale timestamp; nothing recorded", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "No Pix provider configured", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The provider could not be read back; send again", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn pix_webhook(State(state): State<AppState>, req: Request) -> Response {
    let result = async {
        let pix = state.pix().ok_or(ApiError::PixUnavailable)?;
        let (parts, body) = req.into_parts();
        let bytes = read_body(body, state.max_body_bytes(), state.body_timeout()).await?;
        pix.verifier.verify(&bytes, &parts.headers)?;
        let note = crate::pix::webhook::Notification::parse(&bytes)?;
        for txid in note.txids() {
            pix.settler
                .settle(&txid, crate::store::Via::Webhook)
                .await?;
        }
        Ok::<_, ApiError>(())
    }
    .await;
    webhook_reply(result, "Pix webhook")
}

/// The card machine's provider's notification (`?data.id=<order>&type=order`, Mercado Pago's
/// shape): `x-signature` checked against the configured secret for that order, then the order
/// read back from the provider and settled. Answered 200 once recorded; 401 for a bad signature
/// (nothing recorded); 503 when the provider cannot be read back (it sends again, and the poll
/// settles it anyway).
#[utoipa::path(
    post,
    path = "/webhooks/maquininha",
    request_body(content = String, description = "`{\"action\": \"order.processed\", \"type\": \"order\", \"data\": {\"id\", …}}`: only `data.id` of the query is used", content_type = "application/json"),
    params(
        ("data.id" = String, Query, description = "The order"),
        ("type" = String, Query, description = "`order`"),
        ("x-signature" = String, Header, description = "`ts=<ts>,v1=<hex HMAC-SHA256 of \"id:<data.id>;request-id:<x-request-id>;ts:<ts>;\">`"),
        ("x-request-id" = String, Header, description = "The notification's id"),
    ),
    responses(
        (status = 200, description = "Recorded (or already recorded: each change counts once)"),
        (status = 401, description = "Bad or missing signature, or stale `ts`; nothing recorded", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "No card machine configured", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The provider could not be read back; send again", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn machine_notification(
    State(state): State<AppState>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    req: Request,
) -> Response {
    let result = async {
        let machine = state.machine().ok_or(ApiError::MachineUnavailable)?;
        let (parts, body) = req.into_parts();
        // Read (and bounded) like any body, though only the query names the order.
        read_body(body, state.max_body_bytes(), state.body_timeout()).await?;
        let order = query
            .get("data.id")
            .filter(|id| !id.is_empty() && id.len() <= 64)
            .ok_or_else(|| ApiError::WebhookRejected("falta data.id".into()))?;
        machine
            .verifier
            .verify(&parts.headers, order, state.store().now_ms())?;
        machine.settler.settle(order).await?;
        Ok::<_, ApiError>(())
    }
    .await;
    webhook_reply(result, "card machine notification")
}

/// A provider's webhook answered: 200 once recorded, the problem otherwise (a refused signature
/// logged as such), with the request's log line.
fn webhook_reply(result: Result<()>, what: &str) -> Response {
    match result {
        Ok(()) => logged(StatusCode::OK.into_response(), None, None, "webhook"),
        Err(e) => {
            let (_, slug, _, _) = e.describe();
            if matches!(e, ApiError::WebhookRejected(_)) {
                tracing::warn!(error = %e, "{what} refused");
            }
            logged(e.into_response(), None, None, slug)
        }
    }
}
