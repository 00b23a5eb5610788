//! Refund attempts: one undecided refund per payment, never more than is left of it.

use super::*;

impl Outbox {
    /// Returns the payment's undecided refund, or durably creates a refund attempt of `valor`
    /// (what is left to refund when `None`) with a fresh key. Refused unless `payment` is an
    /// approved payment attempt and `valor` fits in what is left of it as the till knows it
    /// (the server decides for good: it refuses a refund past the payment's balance).
    pub async fn refund(
        &self,
        payment: &AttemptId,
        valor: Option<Centavos>,
        motivo: Option<RefundReason>,
        now: UnixMillis,
    ) -> Result<(PayOutcome, QueueSummary)> {
        let page_limit = self.page_limit;
        let payment = payment.clone();
        self.db
            .write(move |c| {
                let paid = get_attempt(c, &payment)?
                    .ok_or_else(|| CoreError::NotFound(payment.to_string()))?;
                let server_id = refundable(&paid)?;
                let existing = c
                    .prepare_cached(&format!(
                        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE refund_of = ?1 AND {LIVE_REFUND}"
                    ))?
                    .query_row([payment.as_ref()], attempt_from_row)
                    .optional()?;
                if let Some(a) = existing {
                    return Ok((PayOutcome::Existing(a), queue(c)?));
                }
                let valor = balance(c, &paid, None)?.check(valor)?;
                if let Some(limit) = page_limit {
                    limit.check(c.query_row("PRAGMA page_count", [], |r| r.get(0))?)?;
                }
                let id = AttemptId::generate();
                let key = IdempotencyKey::generate();
                // Cash goes back from the drawer, there and then: nothing is sent (its bytes keep
                // the cashier's reason, like a card refund's).
                let body = RefundBody::bytes(valor, &id, motivo.as_ref().map(AsRef::as_ref));
                let state = if server_id.is_some() { "pendente" } else { "aprovado" };
                exec(
                    c,
                    "INSERT INTO attempts (id, kind, refund_of, refund_payment, sale_id, idempotency_key, valor,
                                           cartao, metodo, plano, request_body, state, next_try_at, created_at, updated_at)
                     VALUES (?1, 'estorno', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?11, ?9, ?12, ?10, ?10, ?10)",
                    params![
                        id.as_ref(), payment.as_ref(), server_id.as_ref().map(AsRef::<str>::as_ref), paid.sale_id.as_ref(),
                        key.as_ref(), valor.get(), paid.cartao.as_ref().map_or("", AsRef::as_ref),
                        paid.metodo.as_str(), body, now, paid.plano.map(|p| p.as_stored()), state
                    ],
                )?;
                let created = get_attempt(c, &id)?.expect("just inserted");
                Ok((PayOutcome::Created(created), queue(c)?))
            })
            .await
    }

    /// What an approved payment attempt has had paid back and has on its way back. Refused, as
    /// [`Outbox::refund`] refuses, for anything but an approved payment.
    pub async fn refund_balance(&self, payment: &AttemptId) -> Result<RefundBalance> {
        let payment = payment.clone();
        self.db
            .read(move |c| {
                let paid = get_attempt(c, &payment)?
                    .ok_or_else(|| CoreError::NotFound(payment.to_string()))?;
                refundable(&paid)?;
                Ok(balance(c, &paid, None)?)
            })
            .await
    }

    /// The refunds of a payment attempt, oldest first.
    pub async fn refunds_of(&self, payment: &AttemptId) -> Result<Vec<Attempt>> {
        let payment = payment.clone();
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    "WHERE kind = 'estorno' AND refund_of = ?1 ORDER BY seq",
                    [payment.as_ref()],
                )?)
            })
            .await
    }
}

/// The server id of an approved payment attempt, which a refund of it names (`None` for cash,
/// given back from the drawer); refused for anything else.
fn refundable(paid: &Attempt) -> Result<Option<PaymentId>> {
    if paid.kind != AttemptKind::Pagamento {
        return Err(CoreError::Invalid(
            "um estorno não pode ser estornado; escolha o pagamento".into(),
        ));
    }
    // A Pix the customer paid after the till closed it goes back by a devolução too.
    if paid.state != AttemptState::Aprovado && !paid.is_late_pix() {
        return Err(CoreError::Invalid(format!(
            "só um pagamento aprovado pode ser estornado; este está {}",
            paid.state.label()
        )));
    }
    if paid.is_cash() {
        return Ok(None);
    }
    let id = paid.payment_id.as_deref().unwrap_or_default();
    PaymentId::parse(id)
        .map(Some)
        .map_err(|e| CoreError::Invalid(e.to_string()))
}

/// The refund balance of the payment attempt `paid`, leaving out the refund `except`.
pub(super) fn balance(
    c: &rusqlite::Connection,
    paid: &Attempt,
    except: Option<&AttemptId>,
) -> rusqlite::Result<RefundBalance> {
    let (estornado, em_andamento) = c
        .prepare_cached(&format!(
            "SELECT COALESCE(SUM(valor) FILTER (WHERE state = 'aprovado'), 0),
                    COALESCE(SUM(valor) FILTER (WHERE {LIVE_REFUND}), 0)
             FROM attempts WHERE kind = 'estorno' AND refund_of = ?1 AND id IS NOT ?2"
        ))?
        .query_row(
            params![paid.id.as_ref(), except.map(AsRef::<str>::as_ref)],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
        )?;
    // Sums of positive amounts: never negative (a CHECK keeps every `valor` positive).
    let total = |v: i64| Total::new(v).unwrap_or(Total::ZERO);
    Ok(RefundBalance {
        valor: paid.valor,
        estornado: total(estornado),
        em_andamento: total(em_andamento),
    })
}
