//! Giving money back: refunds, and a divided sale given up or confirmed (its authorizations
//! undone or captured).

use super::*;

impl Checkout {
    /// Refunds `valor` of an approved payment attempt (all that is left when `None`): returns the
    /// payment's undecided refund if it has one, or creates a refund attempt with a fresh key,
    /// durable before anything is sent. It is sent, retried, replayed after a crash and looked
    /// up like a payment; while offline it waits in the queue (counted apart from payments).
    /// Refused when the payment is not approved or `valor` is more than what is left of it.
    pub async fn refund(
        &self,
        payment: &AttemptId,
        valor: Option<Centavos>,
        motivo: Option<RefundReason>,
    ) -> Result<PayOutcome> {
        let (outcome, queue) = self
            .inner
            .outbox
            .refund(payment, valor, motivo, now_ms())
            .await?;
        if let PayOutcome::Created(a) = &outcome {
            tracing::info!(attempt = %a.id, key = %a.idempotency_key, valor = a.valor.get(), payment = ?a.refund_payment, "refund stored");
            self.inner.announce(a.clone(), queue);
            self.inner.wake.notify_one();
        }
        Ok(outcome)
    }

    /// Cancels a sale the customer gave up on ("Cancelar venda"): every approved payment of it is
    /// refunded in full — each a refund attempt with its own key, sent and retried like any
    /// (cash given back from the drawer at once) — and the refunds are returned, including any
    /// already on their way. Refused while a payment of the sale is still undecided: it could
    /// still charge, and is refunded once it is known.
    pub async fn abandon_sale(&self, sale: &SaleId) -> Result<Vec<Attempt>> {
        let attempts = self.inner.outbox.attempts_of(sale).await?;
        if attempts.iter().any(|a| !a.is_refund() && a.is_undecided()) {
            return Err(CoreError::Invalid(
                "um pagamento desta venda ainda está em andamento: espere o resultado antes de cancelar a venda".into(),
            ));
        }
        if attempts
            .iter()
            .any(|a| a.captura == Some(Capture::Capturar))
        {
            return Err(CoreError::Invalid(
                "a captura desta venda já foi pedida: espere a confirmação e então estorne".into(),
            ));
        }
        // Authorized parts are undone (nothing was taken); the rest are refunded.
        let mut refunds = self
            .inner
            .outbox
            .decide_captures(sale, Capture::Desfazer, now_ms())
            .await?;
        if !refunds.is_empty() {
            self.inner.captures_due.notify_one();
        }
        let reason = RefundReason::parse("venda cancelada").expect("a valid reason");
        for paid in attempts.iter().filter(|a| {
            !a.is_refund()
                && a.state == AttemptState::Aprovado
                && a.captura.is_none_or(|c| c == Capture::Capturada)
        }) {
            match self.refund(&paid.id, None, reason.clone()).await {
                Ok(PayOutcome::Created(r) | PayOutcome::Existing(r)) => refunds.push(r),
                Err(CoreError::NothingToRefund) => {}
                Err(e) => return Err(e),
            }
        }
        tracing::info!(sale = %sale, refunds = refunds.len(), "sale cancelled: its payments are being refunded");
        Ok(refunds)
    }

    /// Confirms a sale whose receipt was shown (paid in parts, or at once when the store confirms
    /// after the receipt): every authorized payment of it is captured, each under a key of its own written ahead before it is sent. Refused while the
    /// sale is not fully paid. Returns the tenders decided now (none when it was confirmed
    /// before: asking again changes nothing).
    pub async fn confirm_sale(&self, sale: &SaleId) -> Result<Vec<Attempt>> {
        let attempts = self.inner.outbox.attempts_of(sale).await?;
        // A sale paid at once: its one payment is its total.
        let total = match attempts.iter().find_map(|a| a.sale_total) {
            Some(total) => total,
            None => match attempts.iter().find(|a| !a.is_refund() && a.pays()) {
                Some(paid) => paid.valor,
                None => {
                    return Err(CoreError::Invalid(
                        "a venda ainda não tem pagamento aprovado".into(),
                    ))
                }
            },
        };
        let paid = crate::outbox::paid_of(&attempts);
        if paid < total.get() {
            return Err(CoreError::Invalid(format!(
                "a venda ainda não está paga: faltam {}",
                crate::domain::format_brl(total.get() - paid)
            )));
        }
        let decided = self
            .inner
            .outbox
            .decide_captures(sale, Capture::Capturar, now_ms())
            .await?;
        if !decided.is_empty() {
            tracing::info!(sale = %sale, tenders = decided.len(), "sale confirmed: its authorizations are being captured");
            self.inner.captures_due.notify_one();
        }
        Ok(decided)
    }

    /// What an approved payment attempt has had paid back, has on its way back and has left;
    /// refused for anything but an approved payment.
    pub async fn refund_balance(&self, payment: &AttemptId) -> Result<RefundBalance> {
        self.inner.outbox.refund_balance(payment).await
    }

    /// The refunds of a payment attempt, oldest first.
    pub async fn refunds_of(&self, payment: &AttemptId) -> Result<Vec<Attempt>> {
        self.inner.outbox.refunds_of(payment).await
    }
}
