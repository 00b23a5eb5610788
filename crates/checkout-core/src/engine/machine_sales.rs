//! The till's card machine: a sale paid by a card at the machine beside the cashier, and its
//! cancel — which the machine's provider takes only while the machine has not taken the order.

use super::*;
use crate::domain::CardPlan;

impl Checkout {
    /// Pays `valor` for `sale` by a card at this till's machine, offered first as `plano`
    /// (`None`: the customer chooses at the machine), like [`Checkout::pay`]: the attempt is
    /// written ahead, then the server sends the order to the machine and answers it waiting;
    /// the attempt stays `pendente` until the machine's provider says how it ended (`aprovado`,
    /// or `recusado`: declined, cancelled, expired). Refused while the server is not known to be
    /// reachable: the order must reach the machine now.
    pub async fn pay_maquininha(
        &self,
        sale: SaleId,
        valor: Centavos,
        plano: Option<CardPlan>,
    ) -> Result<PayOutcome> {
        self.pay_maquininha_with(sale, valor, plano, None).await
    }

    /// One part of a divided sale (total `total`) by a card at the machine, like
    /// [`Checkout::pay_maquininha`]: its order holds its part of the sale while a card may pay
    /// it.
    pub async fn pay_maquininha_tender(
        &self,
        sale: SaleId,
        total: Centavos,
        valor: Centavos,
        plano: Option<CardPlan>,
    ) -> Result<PayOutcome> {
        self.pay_maquininha_with(sale, valor, plano, Some(total))
            .await
    }

    async fn pay_maquininha_with(
        &self,
        sale: SaleId,
        valor: Centavos,
        plano: Option<CardPlan>,
        sale_total: Option<Centavos>,
    ) -> Result<PayOutcome> {
        let Some(maquininha) = self.inner.config.maquininha.clone() else {
            return Err(CoreError::NoMachine);
        };
        self.inner.probe_once().await;
        if self.connectivity() != Connectivity::Online {
            return Err(CoreError::MachineOffline);
        }
        let method = PayMethod::Machine { maquininha, plano };
        self.pay_with(sale, valor, method, sale_total).await
    }

    /// Cancels a card-machine order no card has paid: the server asks the machine's provider,
    /// which cancels it only while the machine has not taken it. The attempt ends `recusado`
    /// (`maquininha_cancelado`), or `aprovado` when the customer paid first.
    /// [`CoreError::MachineHasOrder`] when the machine holds the order (a card may still pay it:
    /// the cashier cancels on the machine, or waits); [`CoreError::MachineCancelUnknown`] when
    /// neither the cancel nor the question that follows it is answered — the attempt stays
    /// `pendente` and the dispatcher follows the order to its end.
    pub async fn cancel_maquininha(&self, id: &AttemptId) -> Result<Attempt> {
        let attempt = self.attempt(id).await?;
        if !attempt.is_machine() || attempt.state != AttemptState::Pendente {
            return Ok(attempt);
        }
        let Some(order) = &attempt.maquininha else {
            return Err(CoreError::Invalid(
                "o pedido ainda está sendo enviado à maquininha; aguarde para cancelar".into(),
            ));
        };
        let answer = match self.inner.client.cancel_waiting(&order.payment_id).await {
            // No answer: the cancel may have been executed and its answer lost. The server says
            // which, by the order as it stands.
            Answer::Retry { error, .. } => match self
                .inner
                .client
                .waiting_status(&order.payment_id, Duration::ZERO)
                .await
            {
                Answer::Retry { reach, .. } => {
                    self.inner
                        .observe(Connectivity::of(reach), Some(error.clone()))
                        .await;
                    tracing::warn!(attempt = %id, %error, "card machine cancel unanswered");
                    return Err(CoreError::MachineCancelUnknown(error));
                }
                settled => settled,
            },
            answer => answer,
        };
        let (result, still_waiting) = match answer {
            Answer::Final(f) => (TryResult::Final(f), false),
            // Not cancelled: the machine holds it (or the cancel never arrived). Its state is
            // recorded for the screen, and the cashier is told a card may still pay it.
            Answer::MachineWaiting(o) => (TryResult::MachineWaiting(o), true),
            Answer::PixWaiting(_) => {
                return Err(CoreError::Invalid(
                    "o servidor descreve este pedido como Pix".into(),
                ))
            }
            Answer::Review { reason, .. } => return Err(CoreError::Invalid(reason)),
            Answer::Retry { error, .. } => return Err(CoreError::MachineCancelUnknown(error)),
        };
        let (attempt, queue) = self.inner.outbox.record(id, result, now_ms()).await?;
        self.inner.announce(attempt.clone(), queue);
        if still_waiting {
            tracing::warn!(attempt = %id, "card machine cancel refused: the machine holds the order");
            return Err(CoreError::MachineHasOrder);
        }
        tracing::info!(attempt = %attempt.id, state = attempt.state.as_str(), "card machine cancel answered");
        Ok(attempt)
    }
}
