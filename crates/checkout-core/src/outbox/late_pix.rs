//! The Pix a till closed: those to ask about again, a Pix paid after it was closed recorded
//! beside its attempt, and kept as its sale's payment when nothing else paid it.

use super::*;

impl Outbox {
    /// Pix attempts this till closed unpaid (`recusado`, the charge `cancelado` or `expirado`)
    /// since `since`: a customer may still pay them.
    pub async fn pix_closed_since(&self, since: UnixMillis) -> Result<Vec<Attempt>> {
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    "WHERE metodo = 'pix' AND kind = 'pagamento' AND state = 'recusado'
                       AND id IN (SELECT attempt_id FROM pix
                                   WHERE status IN ('cancelado', 'expirado') AND updated_at >= ?1)
                     ORDER BY seq",
                    [since],
                )?)
            })
            .await
    }

    /// Records that the server received the Pix of a closed attempt after all: its charge's
    /// status and end-to-end id; the attempt stays `recusado`.
    pub async fn record_late_pix(
        &self,
        id: &AttemptId,
        pix: &PixCharge,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        let pix = pix.clone();
        self.change(id, move |c, id| {
            upsert_pix(c, id, &pix, now)?;
            exec(
                c,
                "UPDATE attempts SET updated_at = ?2 WHERE id = ?1",
                params![id.as_ref(), now],
            )?;
            Ok(())
        })
        .await
    }

    /// Keeps a Pix paid after the till closed it as its sale's payment: the attempt becomes
    /// `aprovado` with `motivo` `recebido_apos_cancelamento`, as when the sale still waited for it.
    /// Refused when the sale is paid, or being paid, another way (then the Pix is given back), or
    /// a devolução of it was asked for. One write: the check and the change see the same sale.
    pub async fn keep_late_pix(
        &self,
        id: &AttemptId,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        self.change(id, move |c, id| {
            let attempt = get_attempt(c, id)?.ok_or_else(|| CoreError::NotFound(id.to_string()))?;
            let Some(pix) = attempt.pix.as_ref().filter(|_| attempt.is_late_pix()) else {
                return Err(CoreError::Invalid(
                    "só um Pix recebido após cancelamento pode ser mantido como pagamento".into(),
                ));
            };
            // The server holds a divided sale's parts to its total and never counts a Pix paid
            // after it was closed among them: keeping it here would make the till and the
            // server disagree on what the sale was paid.
            if attempt.sale_total.is_some() {
                return Err(CoreError::Invalid(
                    "numa venda dividida, um Pix recebido após cancelamento não entra no pagamento: devolva o Pix e cobre a parte de novo"
                        .into(),
                ));
            }
            let other: Option<String> = c
                .prepare_cached(&format!(
                    "SELECT id FROM attempts WHERE sale_id = ?1 AND id != ?2 AND {BLOCKS_SALE} LIMIT 1"
                ))?
                .query_row(params![attempt.sale_id.as_ref(), id.as_ref()], |r| r.get(0))
                .optional()?;
            if other.is_some() {
                return Err(CoreError::Invalid(
                    "a venda já foi paga (ou está sendo paga) de outra forma: devolva o Pix ao cliente"
                        .into(),
                ));
            }
            let refunds: i64 = c.query_row(
                "SELECT count(*) FROM attempts WHERE refund_of = ?1 AND state != 'recusado'",
                [id.as_ref()],
                |r| r.get(0),
            )?;
            if refunds > 0 {
                return Err(CoreError::Invalid(
                    "já há uma devolução deste Pix: ele não pode mais ser mantido como pagamento"
                        .into(),
                ));
            }
            exec(
                c,
                "UPDATE attempts SET state = 'aprovado', motivo = 'recebido_apos_cancelamento',
                        payment_id = COALESCE(payment_id, ?2), updated_at = ?3
                  WHERE id = ?1 AND state = 'recusado'",
                params![id.as_ref(), pix.payment_id, now],
            )?;
            Ok(())
        })
        .await
    }
}
