//! Settling Pix charges from what the provider says: after a webhook, on each poll, and when the
//! cashier cancels. Every path ends in the same two writes: a Pix received recorded once by its
//! end-to-end id ([`PixStore::record_received`]), or a waiting charge closed
//! ([`PixStore::close_pix`]) after it was removed at the provider — removed first, so that a
//! charge marked closed can no longer be paid at a PSP that follows `bacen/pix-api#319`, and one
//! paid anyway is still found by the next poll.

use super::provider::{Cob, PixProvider, ProviderError};
use crate::clock::{parse_rfc3339, Millis};
use crate::domain::{MerchantId, PaymentId, PixStatus, Txid};
use crate::error::{ApiError, Result};
use crate::store::{Awaiting, PixCharge, PixReceived, PixStore, Via};
use std::sync::Arc;
use tokio::sync::Notify;

/// How long after its expiry a charge is still waited for before it is removed (the provider's
/// clock and ours differ; a payment confirmed at the last second is still on its way).
const EXPIRY_GRACE_MS: Millis = 5_000;

/// How long a charge closed unpaid is still asked about: a customer may pay a QR that was
/// cancelled or expired, and the webhook of that payment may be lost.
const LATE_PAYMENT_WINDOW_MS: Millis = 60 * 60 * 1000;

/// Most charges asked about in one poll pass.
const POLL_BATCH: usize = 200;

/// How far back a reconciliation lists the Pix received: a day, and two hours for a provider's
/// clock that differs from ours. Run every few minutes and at start, it finds every Pix received
/// while this server ran or within a day before it started, whatever became of its webhook and
/// however long after its charge was closed it was paid.
const RECONCILE_LOOKBACK_MS: Millis = 26 * 60 * 60 * 1000;

/// How far ahead of our clock a reconciliation's window reaches (the provider's clock may be).
const RECONCILE_AHEAD_MS: Millis = 60 * 60 * 1000;

/// Pix a reconciliation reads per page (the API Pix allows 1 000).
const RECONCILE_PAGE: u32 = 1000;

/// Most pages one reconciliation reads (a million Pix a day is far beyond one store's).
const RECONCILE_MAX_PAGES: u32 = 1000;

/// What one poll pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PollReport {
    /// Charges asked about.
    pub polled: u64,
    /// Pix received that this pass recorded (a webhook had not).
    pub recorded: u64,
    /// Charges closed as expired.
    pub expired: u64,
    /// Charges the provider could not be asked about (the next pass tries again).
    pub failed: u64,
}

/// What one reconciliation did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Pix the provider listed in the window.
    pub listed: u64,
    /// Of them, Pix this server had not recorded and now has.
    pub recorded: u64,
    /// Pix of charges this server never made (another system's, to the same key).
    pub foreign: u64,
}

/// Settles Pix charges.
#[derive(Debug)]
pub struct Settler {
    store: Arc<dyn PixStore>,
    provider: Arc<dyn PixProvider>,
    changed: Arc<Notify>,
    /// Where the next poll page starts (`None`: from the first charge).
    cursor: std::sync::Mutex<Option<(Millis, String)>>,
}

impl Settler {
    /// A settler on these parts.
    pub fn new(store: Arc<dyn PixStore>, provider: Arc<dyn PixProvider>) -> Self {
        Self {
            store,
            provider,
            changed: Arc::new(Notify::new()),
            cursor: std::sync::Mutex::new(None),
        }
    }

    /// Registers this server's webhook URL at the provider.
    pub async fn register_webhook(&self, url: &str) -> Result<()> {
        Ok(self.provider.register_webhook(url).await?)
    }

    /// Woken whenever a charge changed on this server (a reader waiting for a change re-reads).
    pub fn changed(&self) -> &Notify {
        &self.changed
    }

    /// Asks the provider about `txid` and records what it says (a webhook's step: its body only
    /// names the charge). True when something changed.
    pub async fn settle(&self, txid: &Txid, via: Via) -> Result<bool> {
        let Some(cob) = self.provider.get(txid).await? else {
            tracing::warn!(%txid, "the provider has no charge for this txid");
            return Ok(false);
        };
        let charge = self
            .store
            .awaited_by_provider::<PixCharge>(txid.as_ref())
            .await?
            .map(|(c, _)| c);
        self.apply(txid, charge.as_ref(), &cob, via).await
    }

    /// Records what the provider's charge says: each Pix received (once), or, for a charge
    /// removed there with nothing received, the close.
    async fn apply(
        &self,
        txid: &Txid,
        charge: Option<&PixCharge>,
        cob: &Cob,
        via: Via,
    ) -> Result<bool> {
        let mut changed = false;
        for item in &cob.pix {
            if item.txid.as_deref().is_some_and(|t| t != txid.as_ref()) {
                continue;
            }
            let (Some(valor), Some(horario)) = (
                pagar_rules::decimal::parse(&item.valor),
                parse_rfc3339(&item.horario),
            ) else {
                return Err(ApiError::GatewayUnavailable(format!(
                    "o provedor Pix deu um Pix ilegível: {item:?}"
                )));
            };
            let received = PixReceived {
                end_to_end_id: item.end_to_end_id.clone(),
                txid: txid.clone(),
                valor,
                horario,
                via,
            };
            if self.store.record_received(&received).await? {
                tracing::info!(%txid, e2eid = %item.end_to_end_id, via = via.as_str(), "Pix received recorded");
                changed = true;
            }
        }
        if cob.pix.is_empty() && cob.removed() {
            if let Some(charge) = charge.filter(|c| c.status == PixStatus::Aguardando) {
                let to = if self.store.now_ms() > charge.expira_em {
                    PixStatus::Expirado
                } else {
                    PixStatus::Cancelado
                };
                changed |= self.store.close_pix(txid, to).await?;
            }
        }
        if changed {
            self.changed.notify_waiters();
        }
        Ok(changed)
    }

    /// Removes a waiting charge at the provider and closes it as `to`; a charge the provider had
    /// already been paid for is settled as paid instead.
    async fn remove_and_close(&self, charge: &PixCharge, to: PixStatus) -> Result<()> {
        match self.provider.remove(&charge.txid).await {
            Ok(cob) if cob.pix.is_empty() => {
                if self.store.close_pix(&charge.txid, to).await? {
                    tracing::info!(txid = %charge.txid, status = to.as_str(), "Pix charge closed");
                    self.changed.notify_waiters();
                }
                Ok(())
            }
            Ok(cob) => self
                .apply(&charge.txid, Some(charge), &cob, Via::Consulta)
                .await
                .map(drop),
            // Refused: it was paid meanwhile (a paid charge cannot be removed).
            Err(ProviderError::Refused(_)) => {
                self.settle(&charge.txid, Via::Consulta).await.map(drop)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The cashier cancels a Pix: removed at the provider, then `cancelado`; a charge already
    /// paid stays paid. Answers the charge as it now stands (idempotent: a second cancel changes
    /// nothing).
    pub async fn cancel(&self, merchant: &MerchantId, id: &PaymentId) -> Result<PixCharge> {
        let charge = self
            .store
            .awaited_by_id::<PixCharge>(merchant, id)
            .await?
            .ok_or(ApiError::NotFound)?;
        if charge.status == PixStatus::Aguardando {
            self.remove_and_close(&charge, PixStatus::Cancelado).await?;
        }
        self.store
            .awaited_by_id::<PixCharge>(merchant, id)
            .await?
            .ok_or(ApiError::NotFound)
    }

    /// One pass of the poller: the next page of the charges waiting or closed unpaid within the
    /// last hour is read from the provider (the pages go round, so every such charge is read
    /// within ⌈charges ÷ page⌉ passes); what was received is recorded (a lost webhook is found
    /// here), and a waiting charge past its expiry is removed and closed as `expirado`.
    pub async fn poll_once(&self) -> Result<PollReport> {
        let now = self.store.now_ms();
        let mut report = PollReport::default();
        let after = self
            .cursor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let page = self
            .store
            .pix_to_poll(now - LATE_PAYMENT_WINDOW_MS, after, POLL_BATCH)
            .await?;
        *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) = if page.len() < POLL_BATCH {
            None
        } else {
            page.last()
                .map(|c| (c.head.updated_at, c.head.id.to_string()))
        };
        for charge in page {
            report.polled += 1;
            let cob = match self.provider.get(&charge.txid).await {
                Ok(Some(cob)) => cob,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(txid = %charge.txid, error = %e, "poll: provider not answering");
                    report.failed += 1;
                    continue;
                }
            };
            if self
                .apply(&charge.txid, Some(&charge), &cob, Via::Consulta)
                .await?
                && !cob.pix.is_empty()
            {
                report.recorded += 1;
            }
            let overdue = charge.status == PixStatus::Aguardando
                && cob.pix.is_empty()
                && !cob.removed()
                && now > charge.expira_em + EXPIRY_GRACE_MS;
            if overdue {
                match self.remove_and_close(&charge, PixStatus::Expirado).await {
                    Ok(()) => report.expired += 1,
                    Err(e) => {
                        tracing::warn!(txid = %charge.txid, error = %e, "poll: could not expire");
                        report.failed += 1;
                    }
                }
            }
        }
        Ok(report)
    }

    /// Reconciles with the provider's list of the Pix received (`GET /pix?inicio&fim`) over the
    /// last [`RECONCILE_LOOKBACK_MS`]: each Pix of one of our charges that this server has not
    /// recorded (its webhook lost, and paid after the poll stopped asking about its charge) is
    /// settled from its charge, read back from the provider like any other. The list is only a
    /// hint, as a webhook is.
    pub async fn reconcile(&self) -> Result<ReconcileReport> {
        let now = self.store.now_ms();
        let (inicio, fim) = (
            crate::clock::rfc3339(now - RECONCILE_LOOKBACK_MS),
            crate::clock::rfc3339(now + RECONCILE_AHEAD_MS),
        );
        let mut report = ReconcileReport::default();
        let mut pagina = 0;
        loop {
            let page = self
                .provider
                .received(&inicio, &fim, pagina, RECONCILE_PAGE)
                .await?;
            for item in &page.pix {
                report.listed += 1;
                let Some(txid) = item.txid.as_deref().and_then(Txid::parse) else {
                    report.foreign += 1;
                    continue;
                };
                match self
                    .store
                    .awaited_by_provider::<PixCharge>(txid.as_ref())
                    .await?
                {
                    None => report.foreign += 1,
                    Some((charge, _)) if charge.e2eid.as_deref() == Some(&item.end_to_end_id) => {}
                    Some(_) => {
                        if self.settle(&txid, Via::Consulta).await? {
                            tracing::warn!(%txid, e2eid = %item.end_to_end_id, "reconciliation found a Pix no webhook or poll had recorded");
                            report.recorded += 1;
                        }
                    }
                }
            }
            pagina += 1;
            if pagina >= page.parametros.paginacao.quantidade_de_paginas
                || pagina >= RECONCILE_MAX_PAGES
            {
                return Ok(report);
            }
        }
    }
}
