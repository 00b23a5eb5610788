//! The Pix operation: `POST /pagamentos` with `"metodo": "pix"` under an idempotency key, run by
//! the same runner as card payments (`crate::idempotency`), and the settlement that follows.
//!
//! 1. **Charge** ([`Pix`], an [`Operation`]): `PUT /cob/{txid}` at the provider, the txid derived
//!    from (merchant, key), so a retry or a takeover after a crash asks for the same charge and the
//!    provider refuses a second one (then it is read back). The charge and its first answer,
//!    **201 `aguardando`** with the BR Code and the expiry, are written in one fenced
//!    transaction; every replay repeats those bytes.
//! 2. **Settle** ([`Settler`]): a signed webhook (`webhook.rs`) or the poller asks the provider
//!    for the charge (the webhook's body is never trusted) and records each Pix received once by
//!    its end-to-end id, in the same transaction as its effect on the charge. A charge whose time
//!    ran out is removed at the provider, then marked `expirado`; a cancellation removes it,
//!    then marks it `cancelado`. A Pix that arrives after either is recorded as
//!    `recebido_apos_cancelamento`, never dropped.
//! 3. **Read**: `GET /pagamentos/{id}` gives the charge's state now (and can wait for a change).

pub mod brcode;
mod poll;
pub mod provider;
mod settle;
pub mod webhook;

pub use poll::PixPoll;
pub use settle::{PollReport, Settler};

use crate::awaited::{self, Awaited, PaidLater, Parts};
use crate::clock::{parse_rfc3339, Millis};
use crate::domain::{FieldError, KeyOperation, PaymentAsk, PixRequest, PixStatus, Txid};
use crate::error::{ApiError, Result};
use crate::idempotency::{Held, Keyed, Recovery};
use crate::schema::PixPaymentBody;
use crate::store::{AwaitedHead, PixCharge, PixStore};
use provider::{Cob, PixProvider, ProviderError};

/// How this server's Pix charges are made.
#[derive(Debug, Clone)]
pub struct PixSettings {
    /// Seconds a charge is shown when the request does not say.
    pub expiry_secs: u32,
    /// The receiver printed in the BR Code.
    pub merchant: brcode::Merchant,
}

/// The Pix operation.
#[derive(Debug)]
pub struct Pix {
    parts: Parts<dyn PixStore, dyn PixProvider>,
    settings: PixSettings,
}

impl From<ProviderError> for ApiError {
    fn from(e: ProviderError) -> Self {
        ApiError::GatewayUnavailable(e.to_string())
    }
}

impl awaited::Refusal for ProviderError {
    fn refused(&self) -> Option<&str> {
        match self {
            ProviderError::Refused(detail) => Some(detail),
            _ => None,
        }
    }
}

impl Pix {
    /// The operation on these parts.
    pub fn new(parts: Parts<dyn PixStore, dyn PixProvider>, settings: PixSettings) -> Self {
        Self { parts, settings }
    }

    /// Validates a Pix body and fingerprints it. Nothing is stored for a request that fails here.
    pub fn prepare(
        merchant: crate::domain::MerchantId,
        key: crate::domain::IdempotencyKey,
        body: serde_json::Value,
    ) -> Result<Keyed<PixRequest>> {
        let request = PixRequest::from_json(&body).map_err(ApiError::Validation)?;
        Ok(Keyed::new(merchant, key, "/pagamentos", &body, request))
    }

    /// The charge as the provider reported it, with what the request adds.
    fn charge_of(&self, held: &Held<'_>, request: &PixRequest, cob: &Cob) -> Result<PixCharge> {
        let criacao = parse_rfc3339(&cob.calendario.criacao).ok_or_else(|| {
            ApiError::GatewayUnavailable(format!(
                "o provedor Pix deu uma data ilegível: {:?}",
                cob.calendario.criacao
            ))
        })?;
        let copia_e_cola = cob.pix_copia_e_cola.clone().unwrap_or_else(|| {
            brcode::dynamic(&cob.location, request.ask.valor, &self.settings.merchant)
        });
        Ok(PixCharge {
            head: AwaitedHead::new(
                held.merchant,
                held.key,
                &request.ask,
                self.parts.store.now_ms(),
            ),
            txid: Txid::derive(held.merchant, held.key),
            status: PixStatus::Aguardando,
            copia_e_cola,
            location: cob.location.clone(),
            expira_em: criacao + cob.calendario.expiracao * 1000,
            e2eid: None,
            pago_em: None,
            valor_recebido: None,
        })
    }

    /// The charge at the provider for this key: created now, or, when the txid was used before
    /// (a retry after a crash), read back.
    async fn cob_for(&self, txid: &Txid, request: &PixRequest) -> Result<Cob, ProviderError> {
        let valor = request.ask.valor.as_reais();
        let expiry = request.expiracao.unwrap_or(self.settings.expiry_secs);
        match self
            .parts
            .provider
            .create(txid, &valor, expiry, request.ask.descricao.as_deref())
            .await
        {
            Err(ProviderError::TxidTaken) => {
                self.parts.provider.get(txid).await?.ok_or_else(|| {
                    ProviderError::Unavailable("o provedor recusou o txid e não o encontra".into())
                })
            }
            other => other,
        }
    }
}

impl Awaited for PixCharge {
    const WHAT: &'static str = "Pix charge";

    fn body(&self) -> Vec<u8> {
        PixPaymentBody::bytes_of(self)
    }

    fn as_first(&self) -> Self {
        PixCharge {
            status: PixStatus::Aguardando,
            e2eid: None,
            pago_em: None,
            valor_recebido: None,
            ..self.clone()
        }
    }

    fn still_payable(&self) -> Option<ApiError> {
        // Paid, its payment answered before this was asked; closed unpaid, nothing to cancel.
        (self.status == PixStatus::Aguardando).then_some(ApiError::PixWaiting)
    }
}

impl awaited::PaidLaterRequest for PixRequest {
    fn ask(&self) -> &PaymentAsk {
        &self.ask
    }

    fn from_json(body: &serde_json::Value) -> std::result::Result<Self, Vec<FieldError>> {
        PixRequest::from_json(body)
    }
}

#[async_trait::async_trait]
impl PaidLater for Pix {
    type Request = PixRequest;
    type Resource = PixCharge;
    type Made = Cob;
    type Error = ProviderError;
    type Store = dyn PixStore;
    type Provider = dyn PixProvider;
    const OPERATION: KeyOperation = KeyOperation::named("pix");
    const REFUSAL_FIELD: &'static str = "";
    const REFUSED: &'static str = "o provedor Pix recusou a cobrança";

    fn parts(&self) -> &Parts<dyn PixStore, dyn PixProvider> {
        &self.parts
    }

    async fn ask_provider(
        &self,
        held: &Held<'_>,
        request: &PixRequest,
    ) -> std::result::Result<Cob, ProviderError> {
        self.cob_for(&Txid::derive(held.merchant, held.key), request)
            .await
    }

    fn stored(&self, held: &Held<'_>, request: &PixRequest, cob: Cob) -> Result<PixCharge> {
        self.charge_of(held, request, &cob)
    }

    /// Settled by what the provider says of the key's txid: a charge there is stored the way the
    /// request path stores it (its QR can have been shown only if the answer went out, so it may
    /// be paid); none → the key is released for the client's retry, or burned once too old.
    async fn recover_key(&self, held: &Held<'_>, created_at: Millis) -> Result<Recovery> {
        let txid = Txid::derive(held.merchant, held.key);
        let Some(cob) = self.parts.provider.get(&txid).await? else {
            if held.now_ms() - created_at > self.parts.key_retention_ms {
                held.mark_cancelled().await?;
                return Ok(Recovery::Cancelled);
            }
            held.release().await?;
            return Ok(Recovery::Released);
        };
        let Some(request) = awaited::kept_request::<PixRequest>(held).await? else {
            return Ok(Recovery::Released);
        };
        let charge = self.charge_of(held, &request, &cob)?;
        let done = awaited::complete(held, &*self.parts.store, charge.clone()).await?;
        Ok(awaited::recovered(held, &done, &charge))
    }
}
