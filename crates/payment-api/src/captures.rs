//! Capture and undo of an authorized card payment: `POST /pagamentos/{id}/captura` and
//! `POST /pagamentos/{id}/desfazimento`, each a money operation under its own idempotency key
//! (claimed, fenced and replayed by `crate::idempotency` like a charge).
//!
//! A payment made with `"captura": false` is an authorization: the card holds the amount and
//! nothing is taken. The gateway moves an authorization once, from `pendente`, in one guarded
//! write: captured, undone, or — past its time — lapsed. So a capture and an undo of one
//! authorization, from any number of keys, tills or replicas, never both take effect: the second
//! answers the state the first left (422 `autorizacao-desfeita`, `autorizacao-expirada` or
//! `pagamento-capturado`), stored and replayed like any answer. Asking the gateway again is safe
//! (it answers the state it is in), which is how a retry or a takeover rolls forward.

use crate::clock::Millis;
use crate::domain::{
    json_object, unknown_fields, CaptureState, CaptureStep, IdempotencyKey, KeyOperation,
    MerchantId, PaymentId,
};
use crate::error::{ApiError, Result};
use crate::faults::Faults;
use crate::gateway::{Gateway, GatewayError};
use crate::idempotency::{Completed, Held, Keyed, Operation, Recovery};
use crate::metrics::Metrics;
use crate::schema::PaymentBody;
use crate::store::{CaptureCompletion, Payment, PaymentStore, StoredResponse};
use std::sync::Arc;
use std::time::Instant;

/// What capture and undo share: the payments, the gateway, the metrics.
#[derive(Debug)]
pub struct AuthorizationSteps {
    payments: Arc<dyn PaymentStore>,
    gateway: Arc<dyn Gateway>,
    metrics: Arc<Metrics>,
}

/// A capture or undo request: the payment (from the path) and the step.
#[derive(Debug)]
pub struct StepOf {
    /// The authorized payment.
    pub payment: PaymentId,
    /// Capture or undo.
    pub step: CaptureStep,
}

/// `POST /pagamentos/{id}/captura`.
#[derive(Debug, Clone)]
pub struct Capture(Arc<AuthorizationSteps>);

/// `POST /pagamentos/{id}/desfazimento`.
#[derive(Debug, Clone)]
pub struct Undo(Arc<AuthorizationSteps>);

/// The authorizations' later settlement: every `every`, those past their time are lapsed as the
/// gateway says of each ([`AuthorizationSteps::lapse_due`]).
#[derive(Debug)]
pub struct Lapse {
    steps: Arc<AuthorizationSteps>,
    every: std::time::Duration,
}

#[async_trait::async_trait]
impl crate::settlement::Settlement for Lapse {
    fn name(&self) -> &'static str {
        "autorizacoes"
    }

    fn every(&self) -> std::time::Duration {
        self.every
    }

    async fn settle_once(&self) -> Result<()> {
        let n = self.steps.lapse_due().await?;
        if n > 0 {
            tracing::info!(settled = n, "authorizations past their time settled");
        }
        Ok(())
    }
}

impl Capture {
    /// The pass that lapses authorizations past their time, every `every`.
    pub fn lapse(&self, every: std::time::Duration) -> Lapse {
        Lapse {
            steps: self.0.clone(),
            every,
        }
    }
}

impl AuthorizationSteps {
    /// Both operations on these parts.
    pub fn operations(
        payments: Arc<dyn PaymentStore>,
        gateway: Arc<dyn Gateway>,
        metrics: Arc<Metrics>,
    ) -> (Capture, Undo) {
        let steps = Arc::new(Self {
            payments,
            gateway,
            metrics,
        });
        (Capture(steps.clone()), Undo(steps))
    }

    /// Validates a capture's or undo's body (an empty object: the whole amount is captured or
    /// released) and fingerprints it with its path, so the same key cannot capture another
    /// payment or undo what it was sent to capture. The payment id is kept with the claim, for
    /// the recovery worker.
    pub fn prepare(
        merchant: MerchantId,
        key: IdempotencyKey,
        payment: String,
        step: CaptureStep,
        body: serde_json::Value,
    ) -> Result<Keyed<StepOf>> {
        // An empty object: the whole authorization is captured or released.
        let mut errors = Vec::new();
        unknown_fields(
            json_object(&body).map_err(ApiError::Validation)?,
            &[],
            &mut errors,
        );
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        let Some(id) = PaymentId::from_path(&payment) else {
            return Err(ApiError::NotFound);
        };
        let path = format!("/pagamentos/{payment}/{}", step.path_segment());
        let kept = serde_json::json!({ "pagamento": id.as_ref() });
        Ok(Keyed::new(
            merchant,
            key,
            &path,
            &kept,
            StepOf { payment: id, step },
        ))
    }

    /// Asks the gateway to take the step and completes the key with what it says, in one
    /// fenced write with the payment's new state.
    async fn run(&self, held: &Held<'_>, of: &StepOf) -> Result<Completed> {
        let Some(payment) = self.payments.payment(held.merchant, &of.payment).await? else {
            held.forget().await?;
            return Err(ApiError::NotFound);
        };
        if payment.captura.is_none() {
            held.forget().await?;
            return Err(ApiError::NotAnAuthorization);
        }
        let started = Instant::now();
        let asked = self
            .gateway
            .settle_authorization(&payment.cobranca_id, Some(of.step))
            .await;
        self.metrics.store_op("gateway_settle", started);
        let state = match asked {
            Ok(state) => state,
            Err(e @ GatewayError::NotAnAuthorization) => {
                held.forget().await?;
                return Err(e.into());
            }
            Err(e) => {
                // Nothing is known to have moved; the step is safe to ask again.
                let _ = held.release().await;
                return Err(e.into());
            }
        };
        let response = answer(&payment, of.step, state);
        let finished = self
            .payments
            .finish_capture(CaptureCompletion {
                merchant: held.merchant.clone(),
                key: held.key.clone(),
                fence: held.fence,
                payment: payment.id.clone(),
                captura: state,
                response: response.clone(),
            })
            .await?;
        tracing::info!(payment = %payment.id, step = of.step.path_segment(), captura = %state, "authorization step");
        Ok(Completed::first(finished, response, held.now_ms()))
    }

    /// A key abandoned mid-step: asked again of the gateway with the payment kept with the
    /// claim (the gateway answers the state the first ask left), and completed with that.
    async fn recover(&self, held: &Held<'_>, step: CaptureStep) -> Result<Recovery> {
        let payment = held
            .request
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
            .and_then(|v| v.get("pagamento")?.as_str().and_then(PaymentId::from_path));
        let Some(payment) = payment else {
            held.forget().await?;
            return Ok(Recovery::Cancelled);
        };
        Ok(match self.run(held, &StepOf { payment, step }).await {
            Ok(Completed::LeaseLost) => Recovery::Nothing,
            Ok(_) => Recovery::Completed,
            Err(ApiError::NotFound | ApiError::NotAnAuthorization) => Recovery::Cancelled,
            Err(e) => return Err(e),
        })
    }

    /// Lapses the authorizations whose time is up, as the gateway says of each (it may have
    /// been captured or undone by a step whose answer was never stored): the reaper's pass.
    pub async fn lapse_due(&self) -> Result<u64> {
        let mut moved = 0;
        for p in self.payments.authorizations_due(100).await? {
            let state = self
                .gateway
                .settle_authorization(&p.cobranca_id, None)
                .await?;
            if state.is_final() {
                self.payments
                    .record_capture(&p.merchant, &p.id, state)
                    .await?;
                tracing::info!(payment = %p.id, captura = %state, "authorization past its time settled");
                moved += 1;
            }
        }
        Ok(moved)
    }
}

/// The answer to a step: the payment as it stands now (200) when the step took effect (now or
/// on an earlier ask), or the 422 of the state that stopped it.
fn answer(payment: &Payment, step: CaptureStep, state: CaptureState) -> StoredResponse {
    if state == step.target() {
        let after = Payment {
            captura: Some(state),
            ..payment.clone()
        };
        return StoredResponse {
            status: 200,
            body: PaymentBody::bytes_of(&after),
        };
    }
    let (status, body) = ApiError::AuthorizationSettled(state).problem_bytes();
    StoredResponse {
        status: status.as_u16(),
        body,
    }
}

#[async_trait::async_trait]
impl Operation for Capture {
    type Request = StepOf;
    const KIND: KeyOperation = KeyOperation::CAPTURA;

    async fn execute(&self, held: &Held<'_>, of: &StepOf, _faults: &Faults) -> Result<Completed> {
        self.0.run(held, of).await
    }

    async fn recover(&self, held: &Held<'_>, _created_at: Millis) -> Result<Recovery> {
        self.0.recover(held, CaptureStep::Capturar).await
    }
}

#[async_trait::async_trait]
impl Operation for Undo {
    type Request = StepOf;
    const KIND: KeyOperation = KeyOperation::DESFAZIMENTO;

    async fn execute(&self, held: &Held<'_>, of: &StepOf, _faults: &Faults) -> Result<Completed> {
        self.0.run(held, of).await
    }

    async fn recover(&self, held: &Held<'_>, _created_at: Millis) -> Result<Recovery> {
        self.0.recover(held, CaptureStep::Desfazer).await
    }
}
