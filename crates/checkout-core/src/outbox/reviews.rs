//! Attempts in review: put back in the queue, settled by a look-up, their key cancelled, or
//! marked as checked with the server.

use super::*;

impl Outbox {
    /// Puts an attempt in `revisao` back in the queue with its same key and bytes, unless its
    /// sale has moved on to another payment attempt that is live or approved (for a refund:
    /// unless its payment has another undecided refund).
    pub async fn retry_review(
        &self,
        id: &AttemptId,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        self.change(id, move |c, id| {
            let attempt = get_attempt(c, id)?.ok_or_else(|| CoreError::NotFound(id.to_string()))?;
            if attempt.state != AttemptState::Revisao {
                return Err(CoreError::Invalid(format!(
                    "esta tentativa não está em revisão (está {}); não dá para reenviá-la",
                    attempt.state.label()
                )));
            }
            let other: Option<(String, String)> = c
                .prepare_cached(&format!(
                    "SELECT id, kind FROM attempts WHERE id != ?1 AND (
                         (sale_id = (SELECT sale_id FROM attempts
                                     WHERE id = ?1 AND state = 'revisao' AND kind = 'pagamento')
                          AND {BLOCKS_SALE})
                      OR (refund_of = (SELECT refund_of FROM attempts
                                       WHERE id = ?1 AND state = 'revisao' AND kind = 'estorno')
                          AND {LIVE_REFUND}))
                     LIMIT 1"
                ))?
                .query_row([id.as_ref()], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            if let Some((other, kind)) = other {
                return Err(CoreError::Invalid(if kind == "estorno" {
                    format!("este pagamento já tem outro estorno em andamento ({other}); não dá para reenviar este")
                } else {
                    format!("esta venda já tem outro pagamento ({other}); não dá para reenviar este")
                }));
            }
            // A refund sent again must still fit in what is left of its payment.
            if let Some(refund) = get_attempt(c, id)?.filter(Attempt::is_refund) {
                let payment = refund.refund_of.as_ref().expect("a refund names its payment");
                let paid = get_attempt(c, payment)?
                    .ok_or_else(|| CoreError::NotFound(payment.to_string()))?;
                super::refunds::balance(c, &paid, Some(id))?.fits(refund.valor)?;
            }
            exec(
                c,
                "UPDATE attempts SET state = 'pendente', next_try_at = ?2, updated_at = ?2,
                        review_checked_at = NULL
                 WHERE id = ?1 AND state = 'revisao'",
                params![id.as_ref(), now],
            )?;
            Ok(())
        })
        .await
    }

    /// Settles an attempt in `revisao` with what the server has for its `referencia`: a payment
    /// found means the attempt did reach the gateway. An authorization found is held
    /// (`captura = 'pendente'`), so its sale's confirmation captures it or a cancellation (or a
    /// restart) undoes it, exactly as one answered in time.
    pub async fn settle_review(
        &self,
        id: &AttemptId,
        answer: FinalAnswer,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        self.update(
            id,
            "UPDATE attempts SET state = ?2, response_status = ?3, response_body = ?4, payment_id = ?5,
                    motivo = ?6, review_checked_at = ?7, updated_at = ?7,
                    captura = CASE WHEN ?8 THEN 'pendente' ELSE captura END
             WHERE id = ?1 AND state = 'revisao'",
            vec![
                answer.state.as_str().to_string().into(),
                i64::from(answer.status).into(),
                answer.body.into(),
                answer.payment_id.into(),
                answer.motivo.into(),
                now.into(),
                answer.authorized.into(),
            ],
        )
        .await
    }

    /// Records that the server cancelled the key of a payment attempt in `revisao`: it never
    /// charged and never will, so the attempt is final as `recusado` (motivo
    /// [`KEY_CANCELLED`]) and the sale may get a new attempt.
    pub async fn record_key_cancelled(
        &self,
        id: &AttemptId,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        self.update(
            id,
            "UPDATE attempts SET state = 'recusado', motivo = ?2, review_checked_at = ?3, updated_at = ?3
             WHERE id = ?1 AND state = 'revisao' AND kind = 'pagamento'",
            vec![KEY_CANCELLED.to_string().into(), now.into()],
        )
        .await
    }

    /// Records that the server has no payment for an attempt in `revisao`.
    pub async fn mark_review_checked(
        &self,
        id: &AttemptId,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        self.update(
            id,
            "UPDATE attempts SET review_checked_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'revisao'",
            vec![now.into()],
        )
        .await
    }

    /// Attempts in `revisao`, oldest first; only those not yet checked with `unchecked_only`.
    /// A checked one stays here until a payment found or a cancelled key settles it.
    pub async fn reviews(&self, unchecked_only: bool) -> Result<Vec<Attempt>> {
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    "WHERE state = 'revisao' AND (?1 = 0 OR review_checked_at IS NULL) ORDER BY seq",
                    [unchecked_only],
                )?)
            })
            .await
    }
}
