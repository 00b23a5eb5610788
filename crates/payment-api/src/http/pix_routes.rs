//! The Pix's own routes: the cancel of a QR the customer has not paid, and the provider's webhook.

use super::*;

/// Cancels a Pix the customer has not paid: removed at the Pix provider, then `cancelado`.
/// Idempotent; a Pix already paid stays paid (its state is the answer either way).
#[utoipa::path(
    post,
    path = "/pagamentos/{id}/cancelamento",
    params(("id" = String, Path, description = "The Pix payment (`pay_…`)")),
    responses(
        (status = 200, description = "The Pix as it now stands: `cancelado`, or `aprovado` when the customer paid first", body = PixPaymentBody),
        (status = 401, description = "Bad API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such Pix for this merchant", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "No Pix provider configured (`pix-indisponivel`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The Pix provider did not answer; nothing changed, try again", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn cancel_pix(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    Path(id): Path<String>,
) -> Result<Json<PixPaymentBody>> {
    let id = PaymentId::from_path(&id).ok_or(ApiError::NotFound)?;
    let pix = state.pix().ok_or(ApiError::PixUnavailable)?;
    let charge = pix.settler.cancel(&merchant, &id).await?;
    Ok(Json(PixPaymentBody::from(&charge)))
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
    match result {
        Ok(()) => logged(StatusCode::OK.into_response(), None, None, "webhook"),
        Err(e) => {
            let (_, slug, _, _) = e.describe();
            if matches!(e, ApiError::WebhookRejected(_)) {
                tracing::warn!(error = %e, "Pix webhook refused");
            }
            logged(e.into_response(), None, None, slug)
        }
    }
}
