//! The payment operation: `POST /pagamentos` under an idempotency key (the runner in
//! `crate::idempotency` claims, fences and replays; this module charges and stores).
//!
//! The charge goes to the gateway under a downstream key derived from (merchant, key), so a
//! takeover after a crash gets the earlier charge back instead of charging again; the payment and
//! the answer are written in one transaction, only if this worker's fence still holds the key.

use crate::clock::Millis;
use crate::domain::{
    CancelByKey, CardToken, DownstreamKey, Fingerprint, IdempotencyKey, KeyOperation, Means,
    MerchantId, PaymentId, PaymentRequest, PaymentStatus,
};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::gateway::{
    ChargeDecision, ChargeMetadata, ChargeOrder, Gateway, GatewayError, GatewayResult,
};
use crate::idempotency::{in_progress, Completed, Held, Keyed, Operation, Recovery};
use crate::metrics::Metrics;
use crate::schema::PaymentBody;
use crate::store::{Completion, FinishOutcome, Payment, PaymentStore, SaleStore, StoredResponse};
use crate::tenders;
use std::sync::Arc;
use std::time::Instant;

/// The payment operation, with what it needs: the payments, the gateway, the metrics, and how
/// long a key is kept (a key abandoned longer than that is burned, not released).
#[derive(Debug)]
pub struct Payments {
    pub(crate) payments: Arc<dyn PaymentStore>,
    pub(crate) sales: Arc<dyn SaleStore>,
    pub(crate) gateway: Arc<dyn Gateway>,
    pub(crate) metrics: Arc<Metrics>,
    /// How long a key is kept: a key older than this that never charged is burned in recovery.
    pub(crate) key_retention_ms: Millis,
}

/// What settling a payment key by voiding it came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Voided {
    /// Nothing was charged under the key, and nothing ever will be.
    Cancelled,
    /// The key had made this payment (approved or declined).
    Payment(Box<Payment>),
}

impl Voided {
    /// The key's payment, if it made one.
    pub fn payment(&self) -> Option<&Payment> {
        match self {
            Voided::Cancelled => None,
            Voided::Payment(p) => Some(p),
        }
    }
}

/// What [`Payments::complete_charge`] stored.
#[derive(Debug)]
enum ChargeSettled {
    /// The key completed with this payment (new, or the one the charge already had).
    Payment(Box<Payment>),
    /// The charge's payment was made by another request under this key (purged, then reused):
    /// the key was deleted, so the request it holds now is answered 422 on its retry.
    Mismatch,
    /// Another worker took the key over meanwhile; nothing was written.
    LeaseLost,
}

impl Payments {
    /// Validates a payment's body and fingerprints it. Nothing is stored for a request that
    /// fails here.
    pub fn prepare(
        merchant: MerchantId,
        key: IdempotencyKey,
        body: serde_json::Value,
    ) -> Result<Keyed<PaymentRequest>> {
        let request = PaymentRequest::from_json(&body).map_err(ApiError::Validation)?;
        Ok(Keyed::new(merchant, key, "/pagamentos", &body, request))
    }

    /// Settles a payment key held under its fence without executing it: voids its downstream key
    /// at the gateway and marks it cancelled, or, if the gateway had charged it, completes it
    /// with that charge's payment. The cancellation by key's step, and the recovery worker's for
    /// a key too old to be retried.
    pub async fn void_or_complete(&self, held: &Held<'_>) -> Result<Voided> {
        let downstream = DownstreamKey::derive(held.merchant, held.key);
        let Some(charged) = self.gateway.void(&downstream, held.merchant).await? else {
            if !held.mark_cancelled().await? {
                // The key is void at the gateway either way; who holds it now will find out.
                return Err(in_progress(0));
            }
            tracing::info!(merchant = %held.merchant, key = held.key.as_ref(), "key cancelled: it can never charge");
            return Ok(Voided::Cancelled);
        };
        match self.complete_charge(held, &charged).await? {
            ChargeSettled::Payment(payment) => Ok(Voided::Payment(payment)),
            // Another worker holds the key now; it is the one to ask again.
            ChargeSettled::Mismatch | ChargeSettled::LeaseLost => Err(in_progress(0)),
        }
    }

    /// The gateway returned a charge it had made before. If that charge already has its
    /// payment, this key was sent again after its retention purged it: the same request gets
    /// the original payment (answered as a replay; no second payment row), another request a
    /// 422 (and the key is left free, so the original request can still get its payment).
    /// `None`: the charge has no payment yet (a takeover after a crash), so the caller stores it.
    async fn reconcile(
        &self,
        held: &Held<'_>,
        request: &PaymentRequest,
        charged: &GatewayResult,
    ) -> Result<Option<Completed>> {
        let Some((existing, fingerprint)) = self
            .payments
            .payment_by_charge(&charged.cobranca_id)
            .await?
        else {
            return Ok(None);
        };
        let same = match fingerprint {
            Some(fp) => fp == *held.fingerprint,
            // Stored before fingerprints were kept: compare what the payment records.
            None => {
                existing.valor == request.ask.valor
                    && existing.descricao == request.ask.descricao
                    && existing.referencia == request.ask.referencia
            }
        };
        if !same {
            tracing::warn!(payment = %existing.id, "key sent again after its retention with another request");
            held.forget().await?;
            return Err(ApiError::FingerprintMismatch);
        }
        tracing::info!(payment = %existing.id, "key sent again after its retention: answered with its payment");
        held.complete_with_existing(existing.id.as_ref(), response_for(&existing))
            .await
            .map(Some)
    }

    /// Completes a held key whose charge the gateway made, without the client's request in
    /// hand: the recovery worker's and the cancellation's step. A charge that already has its
    /// payment (one per `cobranca_id`) completes the key with it; otherwise the payment is built
    /// from the request kept with the key or, when there is none (a cancellation found a charge
    /// its worker never stored), from the gateway's own record of the charge.
    async fn complete_charge(
        &self,
        held: &Held<'_>,
        charged: &GatewayResult,
    ) -> Result<ChargeSettled> {
        if let Some((existing, fingerprint)) = self
            .payments
            .payment_by_charge(&charged.cobranca_id)
            .await?
        {
            if fingerprint.is_some_and(|fp| fp != *held.fingerprint)
                && held.request.is_some()
                && existing.idempotency_key == *held.key
            {
                held.forget().await?;
                return Ok(ChargeSettled::Mismatch);
            }
            return Ok(
                match held
                    .complete_with_existing(existing.id.as_ref(), response_for(&existing))
                    .await?
                {
                    Completed::LeaseLost => ChargeSettled::LeaseLost,
                    _ => ChargeSettled::Payment(Box::new(existing)),
                },
            );
        }
        let request = held
            .request
            .and_then(|b| crate::domain::parse_json_strict(b).ok())
            .and_then(|v| PaymentRequest::from_json(&v).ok());
        let created_at = self.payments.now_ms();
        let (payment, fingerprint) = match request {
            Some(request) => (
                build_payment(held.merchant, held.key, &request, charged, created_at),
                held.fingerprint,
            ),
            // The key's row was made by the cancellation, which has no request: the charge's
            // metadata names the request that made it, and the key answers that request.
            None => (
                from_charge(held.merchant, held.key, charged, created_at),
                charged
                    .metadata
                    .fingerprint
                    .as_ref()
                    .unwrap_or(held.fingerprint),
            ),
        };
        let (finished, _) = self.finish(held, &payment, fingerprint).await?;
        Ok(match finished {
            FinishOutcome::Stored => ChargeSettled::Payment(Box::new(payment)),
            FinishOutcome::LeaseLost => ChargeSettled::LeaseLost,
        })
    }

    /// Writes the payment and its answer under the key's fence, in one transaction; returns what
    /// came of it and the answer (serialised once).
    async fn finish(
        &self,
        held: &Held<'_>,
        payment: &Payment,
        fingerprint: &Fingerprint,
    ) -> Result<(FinishOutcome, StoredResponse)> {
        let started = Instant::now();
        let response = response_for(payment);
        let finished = self
            .payments
            .finish(Completion {
                merchant: held.merchant.clone(),
                key: held.key.clone(),
                fence: held.fence,
                payment: payment.clone(),
                response: response.clone(),
                fingerprint: fingerprint.clone(),
            })
            .await?;
        self.metrics.store_op("finish", started);
        Ok((finished, response))
    }
}

#[async_trait::async_trait]
impl Operation for Payments {
    type Request = PaymentRequest;
    const KIND: KeyOperation = KeyOperation::PAGAMENTO;
    const CANCEL_BY_KEY: CancelByKey = CancelByKey::VoidDownstream;

    fn referencia(request: &PaymentRequest) -> Option<String> {
        request.ask.referencia.clone()
    }

    async fn execute(
        &self,
        held: &Held<'_>,
        request: &PaymentRequest,
        faults: &Faults,
    ) -> Result<Completed> {
        tenders::hold(self.sales.as_ref(), held, &request.ask).await?;
        let downstream = DownstreamKey::derive(held.merchant, held.key);
        let started = Instant::now();
        let order = ChargeOrder {
            valor: request.ask.valor,
            cartao: request.cartao,
            plano: request.plano,
            captura: request.captura,
            metadata: ChargeMetadata {
                fingerprint: Some(held.fingerprint.clone()),
                referencia: request.ask.referencia.clone(),
                descricao: request.ask.descricao.clone(),
                terminal: request.ask.terminal.clone(),
            },
        };
        let charged = self.gateway.charge(downstream, held.merchant, order).await;
        self.metrics.store_op("gateway_charge", started);
        let charged = match charged {
            Ok(c) => c,
            Err(GatewayError::Voided) => {
                // The key was cancelled while this worker held it (a cancellation took an
                // expired lease over) or cancelled and then purged: it never charges.
                held.mark_cancelled().await?;
                return Err(ApiError::KeyCancelled);
            }
            Err(e) => {
                // Nothing happened at the gateway that we cannot find again (the downstream key
                // makes the next try idempotent); free the key so the client's retry runs now.
                // Not freed, it is only held until its lease ends (the retry hears 409 till then).
                if let Err(release) = held.release().await {
                    tracing::warn!(error = %release, "key not released after a gateway failure; its lease ends it");
                }
                return Err(e.into());
            }
        };
        if charged.fresh {
            self.metrics
                .charge(charged.decision == ChargeDecision::Aprovado);
        }
        faults.after_charge();

        if !charged.fresh {
            if let Some(done) = self.reconcile(held, request, &charged).await? {
                return Ok(done);
            }
        }
        let created_at = self.payments.now_ms();
        let payment = build_payment(held.merchant, held.key, request, &charged, created_at);
        let (finished, response) = self.finish(held, &payment, held.fingerprint).await?;
        if finished == FinishOutcome::Stored {
            tracing::info!(status = response.status, payment = %payment.id, replay = false, "payment executed");
        }
        Ok(Completed::first(finished, response, created_at))
    }

    /// Settled by what the gateway says of the key's downstream key: charged → its payment is
    /// stored the way the request path stores it and the answer becomes replayable (so a
    /// look-up by `referencia` finds every real charge); never charged → the key is released
    /// with its request for the client's retry (and looked at again by a later pass, in case a
    /// stalled worker charges it after all), or, once older than the key retention, burned.
    async fn recover(&self, held: &Held<'_>, created_at: Millis) -> Result<Recovery> {
        let downstream = DownstreamKey::derive(held.merchant, held.key);
        let Some(charged) = self.gateway.find_charge(&downstream).await? else {
            if held.now_ms() - created_at > self.key_retention_ms {
                // No client retries a key this old without looking it up first: burn it, so
                // that a worker still stalled somewhere can never charge it.
                return Ok(match self.void_or_complete(held).await? {
                    Voided::Cancelled => Recovery::Cancelled,
                    Voided::Payment(_) => Recovery::Completed,
                });
            }
            // Kept with its request, lease ended: the client's retry takes it over and charges
            // once under the same downstream key; if a worker that was only stalled charges it
            // meanwhile, a later pass finds that charge and stores it.
            held.release().await?;
            return Ok(Recovery::Released);
        };
        Ok(match self.complete_charge(held, &charged).await? {
            ChargeSettled::Payment(payment) => {
                tracing::warn!(merchant = %held.merchant, key = held.key.as_ref(), payment = %payment.id, "recovery: charged before a crash; payment stored");
                Recovery::Completed
            }
            ChargeSettled::Mismatch | ChargeSettled::LeaseLost => Recovery::Nothing,
        })
    }
}

/// The payment for a charge the gateway made, with what the request adds.
fn build_payment(
    merchant: &MerchantId,
    key: &IdempotencyKey,
    request: &PaymentRequest,
    charged: &GatewayResult,
    created_at: Millis,
) -> Payment {
    Payment {
        valor: request.ask.valor,
        descricao: request.ask.descricao.clone(),
        referencia: request.ask.referencia.clone(),
        terminal: request.ask.terminal.clone(),
        plano: request.plano,
        ..from_charge(merchant, key, charged, created_at)
    }
}

/// The answer a payment was (and is again) sent as: the same bytes every time.
pub(crate) fn response_for(payment: &Payment) -> StoredResponse {
    StoredResponse {
        status: payment.status.http_status(),
        body: PaymentBody::bytes_of(payment),
    }
}

/// A payment as the gateway's record of the charge tells it, with what the merchant kept with
/// the charge (what the request adds is taken from the request by [`build_payment`] when it is
/// at hand).
fn from_charge(
    merchant: &MerchantId,
    key: &IdempotencyKey,
    charged: &GatewayResult,
    created_at: Millis,
) -> Payment {
    let (status, motivo) = match &charged.decision {
        ChargeDecision::Aprovado => (PaymentStatus::Aprovado, None),
        ChargeDecision::Recusado(m) => (PaymentStatus::Recusado, Some(m.clone())),
    };
    Payment {
        id: PaymentId::new(),
        status,
        valor: charged.valor,
        motivo,
        descricao: charged.metadata.descricao.clone(),
        referencia: charged.metadata.referencia.clone(),
        idempotency_key: key.clone(),
        cobranca_id: charged.cobranca_id.clone(),
        meio: Means::Cartao,
        created_at,
        merchant: merchant.clone(),
        terminal: charged.metadata.terminal.clone(),
        plano: charged.plano,
        captura: charged.captura,
        autorizacao_expira_em: charged.autorizacao_expira_em,
        apos_cancelamento: false,
    }
}

/// The card tokens the sandbox knows, for UIs that offer a choice.
pub fn sandbox_tokens() -> impl Iterator<Item = &'static str> {
    CardToken::ALL.into_iter().map(CardToken::as_str)
}
