//! The refund operation: `POST /pagamentos/{id}/estornos` under an idempotency key (claimed,
//! fenced and replayed by `crate::idempotency` like any operation), with one step more than a
//! charge:
//!
//! 1. **hold** the amount against the payment: the refund row is created `pendente` and
//!    `payments.estornado` grows, in one transaction whose guarded `UPDATE` the database decides
//!    (`estornado + valor <= payments.valor`, with a `CHECK` behind it), so concurrent refunds on
//!    any number of replicas can never pay back more than was charged. A takeover finds its
//!    key's hold and keeps it. A refusal (no such payment, declined payment, too much) frees the
//!    key and stores nothing;
//! 2. **refund** at the gateway under a downstream key derived from (merchant, key) in the refund
//!    namespace, so a takeover gets the earlier refund back instead of paying back twice;
//! 3. **finish**: the refund's outcome and the response in one transaction under the fence; a
//!    declined refund gives its amount back to the payment in the same transaction.

use crate::clock::Millis;
use crate::domain::{
    DownstreamKey, IdempotencyKey, KeyOperation, Means, MerchantId, PaymentId, RefundId,
    RefundRequest, RefundStatus,
};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::gateway::{ChargeDecision, Gateway, GatewayRefund};
use crate::idempotency::{Completed, Held, Keyed, Operation, Recovery};
use crate::maquininha::{MachineProvider, OrderState};
use crate::metrics::Metrics;
use crate::pix::provider::PixProvider;
use crate::schema::RefundBody;
use crate::store::{
    FinishOutcome, Hold, PaymentStore, Refund, RefundCompletion, RefundStore, StoredResponse,
};
use std::sync::Arc;

/// The refund operation, with what it needs: the refunds, the payments they pay back, the
/// gateway, the metrics.
#[derive(Debug)]
pub struct Refunds {
    pub(crate) refunds: Arc<dyn RefundStore>,
    pub(crate) payments: Arc<dyn PaymentStore>,
    pub(crate) gateway: Arc<dyn Gateway>,
    /// The Pix provider, which pays back a received Pix (a devolução).
    pub(crate) pix: Option<Arc<dyn PixProvider>>,
    /// The card machine's provider, which pays back an order a card paid there.
    pub(crate) machine: Option<Arc<dyn MachineProvider>>,
    pub(crate) metrics: Arc<Metrics>,
}

/// A refund request and the payment it pays back (from the path).
#[derive(Debug)]
pub struct RefundOf {
    /// The payment to pay back.
    pub payment: PaymentId,
    /// Amount and reason.
    pub request: RefundRequest,
}

impl Refunds {
    /// Validates a refund's body and fingerprints it with its path (so the same key cannot
    /// refund another payment). Nothing is stored for a request that fails here.
    pub fn prepare(
        merchant: MerchantId,
        key: IdempotencyKey,
        payment: String,
        body: serde_json::Value,
    ) -> Result<Keyed<RefundOf>> {
        let request = RefundRequest::from_json(&body).map_err(ApiError::Validation)?;
        let Some(payment_id) = PaymentId::from_path(&payment) else {
            return Err(ApiError::NotFound);
        };
        let path = format!("/pagamentos/{payment}/estornos");
        Ok(Keyed::new(
            merchant,
            key,
            &path,
            &body,
            RefundOf {
                payment: payment_id,
                request,
            },
        ))
    }

    /// Asks the gateway to pay `held` back, under the downstream key of its (merchant, key): the
    /// earlier result if it was asked before, one refund otherwise.
    async fn ask_gateway(&self, held: &Refund) -> Result<GatewayRefund> {
        let charge = self
            .payments
            .payment(&held.merchant, &held.payment_id)
            .await?
            .ok_or_else(|| ApiError::Internal("a held refund has no payment".into()))?;
        let downstream = DownstreamKey::derive_refund(&held.merchant, &held.idempotency_key);
        match charge.meio {
            Means::Pix => {
                self.ask_pix_provider(&charge.cobranca_id, &downstream, held.valor)
                    .await
            }
            Means::Cartao => Ok(self
                .gateway
                .refund(downstream, &held.merchant, &charge.cobranca_id, held.valor)
                .await?),
            Means::Maquininha => self.ask_machine_provider(held, &charge).await,
        }
    }

    /// A card paid at the machine is paid back through its order (`POST /v1/orders/{id}/refund`),
    /// under a key derived from the refund's (merchant, key): a retry gets the same refund. The
    /// machine's provider pays back whole orders only: a part is declined, and its amount is
    /// free again.
    async fn ask_machine_provider(
        &self,
        held: &Refund,
        charge: &crate::store::Payment,
    ) -> Result<GatewayRefund> {
        let provider = self.machine.as_ref().ok_or(ApiError::MachineUnavailable)?;
        let key = crate::domain::OrderKey::derive_refund(&held.merchant, &held.idempotency_key);
        if held.valor != charge.valor {
            return Ok(GatewayRefund {
                estorno_id: key.as_ref().to_string(),
                decision: ChargeDecision::Recusado("maquininha_estorna_so_o_valor_inteiro".into()),
                fresh: true,
            });
        }
        let order = provider.refund(&charge.cobranca_id, &key).await?;
        if order.status != "refunded" || order.state() != OrderState::Paid {
            // Not paid back yet at the provider: asked again (same key) on the retry.
            return Err(ApiError::GatewayUnavailable(format!(
                "estorno do pedido {} na maquininha ainda não confirmado ({})",
                order.id, order.status
            )));
        }
        Ok(GatewayRefund {
            estorno_id: format!("{}:{}", order.id, key.as_ref()),
            decision: ChargeDecision::Aprovado,
            fresh: true,
        })
    }

    /// A received Pix is paid back by the Pix provider (a devolução), under an id derived from
    /// the downstream key: the provider refuses a second devolução with it, and the client reads
    /// the first one back, so a retry or a takeover never pays back twice.
    async fn ask_pix_provider(
        &self,
        e2eid: &str,
        downstream: &DownstreamKey,
        valor: crate::domain::Centavos,
    ) -> Result<GatewayRefund> {
        let provider = self.pix.as_ref().ok_or(ApiError::PixUnavailable)?;
        let id = downstream.as_ref().trim_start_matches("dr_");
        let devolucao = provider.refund(e2eid, id, &valor.as_reais()).await?;
        let decision = match devolucao.status.as_str() {
            "DEVOLVIDO" => ChargeDecision::Aprovado,
            "NAO_REALIZADO" => ChargeDecision::Recusado("devolucao_nao_realizada".into()),
            other => {
                // Still being processed at the provider: asked again (same id) on the retry.
                return Err(ApiError::GatewayUnavailable(format!(
                    "devolução Pix {id} ainda em processamento ({other})"
                )));
            }
        };
        Ok(GatewayRefund {
            estorno_id: devolucao.rtr_id,
            decision,
            fresh: true,
        })
    }

    /// Stores the gateway's decision on `held` and its answer, if `fence` still holds the key.
    async fn finish(
        &self,
        held: Refund,
        refunded: GatewayRefund,
        fence: i64,
    ) -> Result<(Refund, StoredResponse, FinishOutcome)> {
        let done = settled(held, refunded.decision, refunded.estorno_id);
        let response = response_for(&done);
        let finished = self
            .refunds
            .finish_refund(RefundCompletion {
                merchant: done.merchant.clone(),
                key: done.idempotency_key.clone(),
                fence,
                refund: done.clone(),
                response: response.clone(),
            })
            .await?;
        Ok((done, response, finished))
    }
}

#[async_trait::async_trait]
impl Operation for Refunds {
    type Request = RefundOf;
    const KIND: KeyOperation = KeyOperation::ESTORNO;

    /// A refund executing is seen by its `referencia` too (`GET /pagamentos?referencia=` lists it
    /// in `em_andamento`): a client in doubt about a refund must not read "no refund" while one
    /// may still be paid back.
    fn referencia(asked: &RefundOf) -> Option<String> {
        asked.request.referencia.clone()
    }

    async fn execute(
        &self,
        held: &Held<'_>,
        asked: &RefundOf,
        faults: &Faults,
    ) -> Result<Completed> {
        let asked = Refund {
            id: RefundId::new(),
            payment_id: asked.payment.clone(),
            merchant: held.merchant.clone(),
            idempotency_key: held.key.clone(),
            valor: asked.request.valor,
            status: RefundStatus::Pendente,
            motivo: asked.request.motivo.clone(),
            referencia: asked.request.referencia.clone(),
            recusa: None,
            estorno_gateway: None,
            created_at: 0,
        };
        let hold = match self.refunds.hold_refund(asked.clone(), held.fence).await? {
            // The key held this refund before: a takeover, or the key purged and sent again.
            Hold::Held(r) if !same_request(&r, &asked) => {
                tracing::warn!(refund = %r.id, "refund key sent again with another request");
                held.forget().await?;
                return Err(ApiError::FingerprintMismatch);
            }
            Hold::Held(r) if r.status != RefundStatus::Pendente => {
                // Decided before its key was purged, asked again with the same request: the key
                // completes with that refund's answer (a replay), and no money moves again.
                tracing::info!(refund = %r.id, "refund key sent again after its retention: answered with its refund");
                return held
                    .complete_with_existing(r.id.as_ref(), response_for(&r))
                    .await;
            }
            Hold::Held(r) => *r,
            Hold::LeaseLost => return Err(ApiError::LeaseLost),
            refused => {
                // Nothing was held: the key is freed and nothing is stored, like a validation
                // error.
                held.forget().await?;
                return Err(match refused {
                    Hold::NoPayment => ApiError::NotFound,
                    Hold::NotApproved => ApiError::NotRefundable,
                    Hold::NotCaptured => ApiError::NotCaptured,
                    Hold::Exceeds { left } => ApiError::RefundExceeds { left },
                    Hold::Held(_) | Hold::LeaseLost => unreachable!("matched above"),
                });
            }
        };
        let refunded = match self.ask_gateway(&hold).await {
            Ok(r) => r,
            Err(e) => {
                // The hold stays with the key; the client's retry takes the key over at once and
                // asks the gateway again under the same downstream key.
                let _ = held.release().await;
                return Err(e);
            }
        };
        if refunded.fresh {
            self.metrics
                .refund(refunded.decision == ChargeDecision::Aprovado);
        }
        faults.after_charge();
        let (done, response, finished) = self.finish(hold, refunded, held.fence).await?;
        if finished == FinishOutcome::Stored {
            tracing::info!(status = response.status, refund = %done.id, payment = %done.payment_id, replay = false, "refund executed");
        }
        Ok(Completed::first(finished, response, held.now_ms()))
    }

    /// A refund is rolled forward, never back: its amount is held, so the worker asks the
    /// gateway for it under the key's downstream key (which returns the refund if the dead
    /// worker got that far, and executes it once otherwise, even if a worker that was only slow
    /// asks too) and stores the outcome. Giving the hold back instead would be unsafe: a slow
    /// worker could still be at the gateway, and the freed amount could then be refunded twice.
    /// A key with no hold never reached the gateway, and is freed.
    async fn recover(&self, held: &Held<'_>, _created_at: Millis) -> Result<Recovery> {
        let Some(hold) = self.refunds.refund_by_key(held.merchant, held.key).await? else {
            return Ok(if held.forget().await? {
                Recovery::Released
            } else {
                Recovery::Nothing
            });
        };
        if hold.status != RefundStatus::Pendente {
            // Decided before the key was purged and claimed again: the key completes with it.
            return Ok(
                match held
                    .complete_with_existing(hold.id.as_ref(), response_for(&hold))
                    .await?
                {
                    Completed::LeaseLost => Recovery::Nothing,
                    _ => Recovery::Completed,
                },
            );
        }
        let refunded = self.ask_gateway(&hold).await?;
        let (refund, _, finished) = self.finish(hold, refunded, held.fence).await?;
        if finished != FinishOutcome::Stored {
            return Ok(Recovery::Nothing);
        }
        tracing::warn!(merchant = %held.merchant, key = held.key.as_ref(), refund = %refund.id, "recovery: abandoned refund completed");
        Ok(Recovery::Completed)
    }
}

/// Whether the refund a key held is the one this request asks for: the same payment, amount,
/// reason and reference (a key's refund never changes what it pays back).
fn same_request(held: &Refund, asked: &Refund) -> bool {
    held.payment_id == asked.payment_id
        && held.valor == asked.valor
        && held.motivo == asked.motivo
        && held.referencia == asked.referencia
}

/// The held refund as the gateway decided it.
fn settled(held: Refund, decision: ChargeDecision, estorno_id: String) -> Refund {
    let (status, recusa) = match decision {
        ChargeDecision::Aprovado => (RefundStatus::Aprovado, None),
        ChargeDecision::Recusado(m) => (RefundStatus::Recusado, Some(m)),
    };
    Refund {
        status,
        recusa,
        estorno_gateway: Some(estorno_id),
        ..held
    }
}

/// The answer a refund was (and is again) sent as.
fn response_for(refund: &Refund) -> StoredResponse {
    StoredResponse {
        status: refund.status.http_status(),
        body: RefundBody::bytes_of(refund),
    }
}
