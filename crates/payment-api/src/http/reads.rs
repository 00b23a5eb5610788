//! The reads: a payment (waiting for its change on request), a sale paid in parts, and the
//! listings by reference, key or range.

use super::*;
use crate::store::Lookup;

/// One payment of the caller's merchant.
#[utoipa::path(
    get,
    path = "/pagamentos/{id}",
    params(("id" = String, Path, description = "`pay_…`"), WaitQuery),
    responses(
        (status = 200, description = "A card payment as it was answered, with what was refunded, what is left to refund, and its refunds (`PaymentDetail`); or a Pix in its state now (`PagamentoPix`); or a card at the machine in its state now (`PagamentoMaquininha`: `?aguardar` also returns when the machine takes the order)", body = PaymentRead),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn get_payment(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    Path(id): Path<String>,
    query: std::result::Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response> {
    let Query(wait) = query.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    let id = PaymentId::from_path(&id).ok_or(ApiError::NotFound)?;
    // A card payment answers from its row, as before; a Pix is read from its charge and a card
    // at the machine from its order (a paid one is a payment too, but its state is the
    // resource's). With no row yet, it waits for its customer: one resource or the other.
    let payment = state.store().payment(&merchant, &id).await?;
    let means = payment.as_ref().map(|p| p.meio);
    if let Some(payment) = payment.filter(|p| p.meio == Means::Cartao) {
        let refunds = state.store().refunds_of(&merchant, &id).await?;
        return Ok(Json(PaymentDetail::new(&payment, &refunds)).into_response());
    }
    let charge = match means {
        Some(Means::Maquininha) => None,
        Some(Means::Cartao | Means::Pix) | None => {
            state
                .store()
                .awaited_by_id::<PixCharge>(&merchant, &id)
                .await?
        }
    };
    if let Some(charge) = charge {
        let charge = match (wait.aguardar, state.pix()) {
            (Some(secs), Some(pix)) if charge.status == PixStatus::Aguardando => {
                let store = state.store();
                wait_while(
                    pix.settler.changed(),
                    secs,
                    charge,
                    |c| c.status == PixStatus::Aguardando,
                    || async {
                        store
                            .awaited_by_id::<PixCharge>(&merchant, &id)
                            .await?
                            .ok_or(ApiError::NotFound)
                    },
                )
                .await?
            }
            _ => charge,
        };
        let refunds = state.store().refunds_of(&merchant, &id).await?;
        return Ok(Json(PixPaymentBody::with_refunds(&charge, &refunds)).into_response());
    }
    let order = state
        .store()
        .awaited_by_id::<MachineOrder>(&merchant, &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let order = match (wait.aguardar, state.machine()) {
        (Some(secs), Some(machine)) if order.status == MachineStatus::Aguardando => {
            // The machine taking the order (`created` → `at_terminal`) ends the wait too: the
            // screen shows it.
            let (store, first) = (state.store(), order.estado.clone());
            let waiting = |o: &crate::store::MachineOrder| {
                o.status == MachineStatus::Aguardando && o.estado == first
            };
            wait_while(machine.settler.changed(), secs, order, waiting, || async {
                store
                    .awaited_by_id::<MachineOrder>(&merchant, &id)
                    .await?
                    .ok_or(ApiError::NotFound)
            })
            .await?
        }
        _ => order,
    };
    let refunds = state.store().refunds_of(&merchant, &id).await?;
    Ok(Json(MachinePaymentBody::with_refunds(&order, &refunds)).into_response())
}

/// A sale paid in parts, by the till's reference: its total, what its tenders paid and hold,
/// and what is missing.
#[utoipa::path(
    get,
    path = "/vendas/{referencia}",
    params(("referencia" = String, Path, description = "The till's id of the sale (`venda.referencia` of its tenders)"), SaleQuery),
    responses(
        (status = 200, description = "The sale and its tenders", body = VendaBody),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn get_sale(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    Path(referencia): Path<String>,
    query: std::result::Result<Query<SaleQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response> {
    let Query(q) = query.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    let terminal = q
        .terminal
        .as_deref()
        .map(crate::domain::TerminalId::parse)
        .transpose()
        .map_err(|e| ApiError::BadQuery(e.to_string()))?;
    let sale = state
        .store()
        .sale(&merchant, terminal.as_ref(), &referencia)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(VendaBody::from(&sale)).into_response())
}

/// `?terminal=` on `GET /vendas/{referencia}`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SaleQuery {
    /// The till whose sale it is (as its tenders said in `terminal`); none: a sale whose tenders
    /// named no terminal.
    pub(super) terminal: Option<String>,
}

/// `?aguardar=N` on `GET /pagamentos/{id}`: a long poll.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct WaitQuery {
    /// For a Pix still `aguardando`: answer as soon as it changes, or after this many seconds
    /// (at most 30) with it unchanged.
    pub(super) aguardar: Option<u64>,
}

/// Longest long poll, in seconds.
pub(super) const MAX_WAIT_SECS: u64 = 30;

/// Re-reads a resource that waits for its customer (`read`) whenever this server settles one
/// (`changed`), and at least every second (another replica may have settled it), while `waiting`
/// holds for it and `secs` have not passed; answers it as it then stands.
pub(super) async fn wait_while<T, Fut>(
    changed: &tokio::sync::Notify,
    secs: u64,
    mut now: T,
    waiting: impl Fn(&T) -> bool,
    read: impl Fn() -> Fut,
) -> Result<T>
where
    Fut: Future<Output = Result<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs.min(MAX_WAIT_SECS));
    while waiting(&now) && tokio::time::Instant::now() < deadline {
        let notified = changed.notified();
        let tick = tokio::time::sleep_until(
            deadline.min(tokio::time::Instant::now() + Duration::from_secs(1)),
        );
        tokio::select! {
            _ = notified => {}
            _ = tick => {}
        }
        now = read().await?;
    }
    Ok(now)
}

/// A lookup by exactly one of `referencia` and `idempotency_key`, or a time range (`desde` and
/// `ate`, with `cursor`, `limite` and `terminal`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PaymentQuery {
    /// The client's reference.
    pub(super) referencia: Option<String>,
    /// The idempotency key that created the payment.
    pub(super) idempotency_key: Option<String>,
    /// Range: from this instant (inclusive), RFC 3339 with an offset, e.g. `2026-12-01T00:00:00-03:00`.
    pub(super) desde: Option<String>,
    /// Range: up to this instant (exclusive), RFC 3339; at most 92 days after `desde`.
    pub(super) ate: Option<String>,
    /// Range: the `proximo` of the previous page.
    pub(super) cursor: Option<String>,
    /// Range: page size, 1–1000 (default 100).
    pub(super) limite: Option<String>,
    /// Range: only payments sent with this `terminal`.
    pub(super) terminal: Option<String>,
}

/// Finds payments by `referencia` or by `idempotency_key`, for a client resolving an attempt whose
/// outcome it does not know; `em_andamento` lists the keys still executing for it.
#[utoipa::path(
    get,
    path = "/pagamentos",
    params(PaymentQuery),
    responses(
        (status = 200, description = "The payments found (oldest first); empty when none. A look-up by `referencia` or `idempotency_key` also lists in `em_andamento` the keys still executing for it: no payment *and* nothing in progress is the only answer that means \"never charged\" (until a cancellation burns the key, a key in progress can still charge). A range answers one page in `(criado_em, id)` order and `proximo`, the cursor of the next page (`null` on the last): each payment that existed when the listing began is on exactly one page, however many are added meanwhile", body = PaymentList),
        (status = 400, description = "Not exactly one of `referencia`, `idempotency_key` and a range", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Bad API key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A bad range: `desde`/`ate` missing or not RFC 3339, `ate` not after `desde` or over 92 days later, a bad `limite`, `cursor` or `terminal`", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list_payments(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    query: std::result::Result<Query<PaymentQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<PaymentList>> {
    let Query(q) = query.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    let range = RangeParams {
        desde: q.desde,
        ate: q.ate,
        cursor: q.cursor,
        limite: q.limite,
        terminal: q.terminal,
    };
    if range.any() {
        if q.referencia.is_some() || q.idempotency_key.is_some() {
            return Err(ApiError::BadQuery(
                "informe referencia, idempotency_key ou um intervalo (desde e ate), não mais de um"
                    .into(),
            ));
        }
        let page = range.parse().map_err(ApiError::Validation)?;
        let found = state.store().payments_page(&merchant, &page).await?;
        let proximo = (found.len() == page.limit)
            .then(|| found.last())
            .flatten()
            .map(|last| {
                Cursor {
                    created_at: last.created_at,
                    id: last.id.clone(),
                }
                .encode()
            });
        return Ok(Json(PaymentList {
            pagamentos: found.iter().map(PaymentBody::from).collect(),
            proximo: Some(proximo),
            em_andamento: None,
            pix: None,
            maquininha: None,
        }));
    }
    if [&q.referencia, &q.idempotency_key]
        .into_iter()
        .flatten()
        .any(|v| v.chars().any(char::is_control))
    {
        // Nothing is ever stored with one (requests refuse them), and PostgreSQL cannot even
        // compare a NUL.
        return Err(ApiError::BadQuery(
            "referencia e idempotency_key não têm caracteres de controle".into(),
        ));
    }
    let (field, value) = match (q.referencia, q.idempotency_key) {
        (Some(r), None) => (PaymentField::Referencia, r),
        (None, Some(k)) => (PaymentField::IdempotencyKey, k),
        _ => return Err(ApiError::BadQuery(
            "informe exatamente um de: referencia, idempotency_key, ou um intervalo (desde e ate)"
                .into(),
        )),
    };
    let by = Lookup {
        field,
        value: &value,
    };
    // Executions first: one that completes between the two reads is then seen as a payment (or
    // still as in progress), never as neither.
    let executing = state.store().keys_in_progress(&merchant, by).await?;
    let pagamentos = state.store().payments_by(&merchant, by).await?;
    let pix = state.store().awaited_by::<PixCharge>(&merchant, by).await?;
    let machine = state
        .store()
        .awaited_by::<MachineOrder>(&merchant, by)
        .await?;
    Ok(Json(PaymentList {
        pagamentos: pagamentos.iter().map(PaymentBody::from).collect(),
        proximo: None,
        em_andamento: Some(executing.iter().map(EmAndamento::from).collect()),
        pix: (!pix.is_empty()).then(|| pix.iter().map(PixPaymentBody::from).collect()),
        maquininha: (!machine.is_empty())
            .then(|| machine.iter().map(MachinePaymentBody::from).collect()),
    }))
}
