//! The till's Pix: a sale paid by a QR, its cancel, and a Pix paid after it was closed.

use super::*;

impl Checkout {
    /// Pays `valor` for `sale` by Pix, like [`Checkout::pay`]: the attempt is written ahead, then
    /// the server makes the charge and answers its QR; the attempt stays `pendente` until the
    /// customer pays (`aprovado`), the charge expires or is cancelled (`recusado`). Refused while
    /// the server is not known to be reachable: a Pix cannot be shown without it.
    pub async fn pay_pix(&self, sale: SaleId, valor: Centavos) -> Result<PayOutcome> {
        self.pay_pix_with(sale, valor, None).await
    }

    /// One part of a divided sale (total `total`) by Pix, like [`Checkout::pay_pix`]: its QR
    /// holds its part of the sale at the server while the customer has it, and frees it if it is
    /// cancelled or expires unpaid.
    pub async fn pay_pix_tender(
        &self,
        sale: SaleId,
        total: Centavos,
        valor: Centavos,
    ) -> Result<PayOutcome> {
        self.pay_pix_with(sale, valor, Some(total)).await
    }

    pub(super) async fn pay_pix_with(
        &self,
        sale: SaleId,
        valor: Centavos,
        sale_total: Option<Centavos>,
    ) -> Result<PayOutcome> {
        // What the last request knew is not enough either way (online then, or nothing known yet
        // just after start, or offline until the next periodic probe): the QR must come now. One
        // health probe (within the probe timeout) says whether the server answers.
        self.inner.probe_once().await;
        if self.connectivity() != Connectivity::Online {
            return Err(CoreError::PixOffline);
        }
        self.pay_with(sale, valor, PayMethod::Pix, sale_total).await
    }

    /// Cancels a Pix the customer has not paid: the server removes the charge at the provider,
    /// and the attempt ends `recusado` (`pix_cancelado`), or `aprovado` when the customer paid
    /// first. Needs the server; while it cannot be asked, the Pix keeps waiting. A cancel whose
    /// answer is lost is followed by a question: what the server says of the charge is recorded
    /// (cancelled, paid), or [`CoreError::PixNotCancelled`] when it still waits (the cancel never
    /// reached it); with no answer to either, [`CoreError::PixCancelUnknown`] — the attempt
    /// stays `pendente` and the dispatcher follows the charge to its end once the server answers.
    pub async fn cancel_pix(&self, id: &AttemptId) -> Result<Attempt> {
        let attempt = self.attempt(id).await?;
        if !attempt.is_pix() || attempt.state != AttemptState::Pendente {
            return Ok(attempt);
        }
        let Some(pix) = &attempt.pix else {
            return Err(CoreError::Invalid(
                "o Pix ainda está sendo gerado no servidor; aguarde o QR para cancelar".into(),
            ));
        };
        let answer = match self.inner.client.cancel_waiting(&pix.payment_id).await {
            // No answer: the cancel may have been executed and its answer lost, or never have
            // arrived. The server says which, by the charge as it stands.
            Answer::Retry { error, .. } => {
                match self
                    .inner
                    .client
                    .waiting_status(&pix.payment_id, Duration::ZERO)
                    .await
                {
                    Answer::PixWaiting(_) => {
                        tracing::warn!(attempt = %id, "Pix cancel lost on its way: the Pix still waits");
                        return Err(CoreError::PixNotCancelled);
                    }
                    Answer::Retry { reach, .. } => {
                        self.inner
                            .observe(Connectivity::of(reach), Some(error.clone()))
                            .await;
                        tracing::warn!(attempt = %id, %error, "Pix cancel unanswered");
                        return Err(CoreError::PixCancelUnknown(error));
                    }
                    settled => settled,
                }
            }
            answer => answer,
        };
        let result = match answer {
            Answer::Final(f) => TryResult::Final(f),
            Answer::PixWaiting(c) => TryResult::PixWaiting(c),
            Answer::MachineWaiting(_) => {
                return Err(CoreError::Invalid(
                    "o servidor descreve este Pix como pedido de maquininha".into(),
                ))
            }
            Answer::Review { reason, .. } => return Err(CoreError::Invalid(reason)),
            Answer::Retry { error, .. } => return Err(CoreError::PixCancelUnknown(error)),
        };
        let (attempt, queue) = self.inner.outbox.record(id, result, now_ms()).await?;
        tracing::info!(attempt = %attempt.id, state = attempt.state.as_str(), "Pix cancel answered");
        self.inner.announce(attempt.clone(), queue);
        Ok(attempt)
    }

    /// Asks the server now (not at the next periodic check) whether any Pix this till closed
    /// unpaid in the last day was paid after all, and records each one that was, so the screen
    /// and the closing show it to give back. How many it recorded; [`CoreError::Unreachable`]
    /// when the server could not be asked about every one (those it could are recorded, the rest
    /// are asked about again at the next periodic check).
    pub async fn check_late_pix(&self) -> Result<usize> {
        late_pix::check_wide(&self.inner).await
    }

    /// Keeps a Pix the customer paid after the till closed it as its sale's payment, when the
    /// sale was not paid another way: the sale is paid by that Pix (its receipt carries the
    /// end-to-end id) and nothing is given back. Local: the server already has the money as a
    /// payment of this attempt, so the closing then agrees with it.
    pub async fn keep_late_pix(&self, id: &AttemptId) -> Result<Attempt> {
        let (attempt, queue) = self.inner.outbox.keep_late_pix(id, now_ms()).await?;
        tracing::info!(attempt = %attempt.id, "late Pix kept as the sale's payment");
        self.inner.announce(attempt.clone(), queue);
        Ok(attempt)
    }
}
