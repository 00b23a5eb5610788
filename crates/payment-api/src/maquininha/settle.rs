//! Settling card-machine orders from what the provider says: after a notification, on each poll,
//! and when the cashier cancels. Every path ends in one write, [`MachineStore::settle_machine`]:
//! a paid order becomes a payment in the same transaction, a closed one is closed, once.

use super::provider::{CancelAnswer, MachineProvider, Order, OrderState};
use crate::clock::Millis;
use crate::domain::{CardPlan, MachineStatus, OrderKey};
use crate::error::{ApiError, Result};
use crate::settlement::Settlement;
use crate::store::{Awaiting, MachineOrder, MachineStore, MachineUpdate};
use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Most orders asked about in one poll pass.
const POLL_BATCH: usize = 200;

/// How far a notification's `ts` may be from now.
const NOTIFICATION_WINDOW_MS: Millis = 5 * 60 * 1000;

/// What the provider's order means for the stored one.
fn update_of(order: &Order, asked: Option<CardPlan>) -> MachineUpdate {
    let (status, motivo) = match order.state() {
        OrderState::Open => (MachineStatus::Aguardando, None),
        OrderState::Paid => (MachineStatus::Aprovado, None),
        OrderState::Declined => (MachineStatus::Recusado, Some(order.status_detail.clone())),
        OrderState::Canceled => (MachineStatus::Cancelado, Some(order.status_detail.clone())),
        OrderState::Expired => (MachineStatus::Expirado, None),
    };
    MachineUpdate {
        status,
        estado: order.status.clone(),
        motivo: motivo.filter(|m| !m.is_empty()),
        plano_pago: (status == MachineStatus::Aprovado)
            .then(|| order.paid_plan(asked))
            .flatten(),
    }
}

/// What one poll pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MachinePollReport {
    /// Orders asked about.
    pub polled: u64,
    /// Orders this pass moved.
    pub changed: u64,
    /// Orders the provider could not be asked about (the next pass tries again).
    pub failed: u64,
}

/// Settles card-machine orders.
#[derive(Debug)]
pub struct MachineSettler {
    store: Arc<dyn MachineStore>,
    provider: Arc<dyn MachineProvider>,
    changed: Notify,
}

impl MachineSettler {
    /// A settler on these parts.
    pub fn new(store: Arc<dyn MachineStore>, provider: Arc<dyn MachineProvider>) -> Self {
        Self {
            store,
            provider,
            changed: Notify::new(),
        }
    }

    /// Woken whenever an order changed on this server (a reader waiting for a change re-reads).
    pub fn changed(&self) -> &Notify {
        &self.changed
    }

    /// Records what the provider's `order` says of the stored one. True when something changed.
    async fn apply(&self, stored: &MachineOrder, order: &Order) -> Result<bool> {
        let update = update_of(order, stored.plano);
        let changed = self.store.settle_machine(&stored.order_id, &update).await?;
        if changed {
            tracing::info!(payment = %stored.head.id, order = %order.id, status = update.status.as_str(), estado = %update.estado, "card machine order settled");
            self.changed.notify_waiters();
        }
        Ok(changed)
    }

    /// Asks the provider about the order `order_id` and records what it says (a notification's
    /// step: its body only names the order). True when something changed.
    pub async fn settle(&self, order_id: &str) -> Result<bool> {
        let Some((stored, _)) = self
            .store
            .awaited_by_provider::<MachineOrder>(order_id)
            .await?
        else {
            tracing::warn!(order = %order_id, "a notification named an order this server never made");
            return Ok(false);
        };
        self.settle_stored(&stored).await
    }

    /// Asks the provider about a stored order and records what it says.
    async fn settle_stored(&self, stored: &MachineOrder) -> Result<bool> {
        let Some(order) = self.provider.get(&stored.order_id).await? else {
            tracing::warn!(order = %stored.order_id, "the provider has no such order");
            return Ok(false);
        };
        self.apply(stored, &order).await
    }

    /// The cashier cancels an order: asked of the provider, which cancels it only while no
    /// machine has taken it. Answers the order as it now stands (idempotent); an order the
    /// machine holds is [`ApiError::MachineAtTerminal`]: a card may still pay it, and the
    /// screen must not say "cancelado".
    pub async fn cancel(&self, stored: MachineOrder) -> Result<MachineOrder> {
        if stored.status == MachineStatus::Aguardando {
            let key = OrderKey::derive_cancel(&stored.head.merchant, &stored.head.idempotency_key);
            match self.provider.cancel(&stored.order_id, &key).await? {
                CancelAnswer::Canceled(order) => {
                    self.apply(&stored, &order).await?;
                }
                CancelAnswer::Ended => {
                    self.settle_stored(&stored).await?;
                }
                CancelAnswer::AtTerminal => {
                    self.settle_stored(&stored).await?;
                    return Err(ApiError::MachineAtTerminal);
                }
            }
        }
        self.store
            .awaited_by_id::<MachineOrder>(&stored.head.merchant, &stored.head.id)
            .await?
            .ok_or(ApiError::NotFound)
    }

    /// One pass of the poller: the orders still waiting (the least recently changed first) are
    /// read from the provider and what it says is recorded (a lost notification is found here).
    pub async fn poll_once(&self) -> Result<MachinePollReport> {
        let mut report = MachinePollReport::default();
        for stored in self.store.machines_waiting(POLL_BATCH).await? {
            report.polled += 1;
            match self.provider.get(&stored.order_id).await {
                Ok(Some(order)) => {
                    if self.apply(&stored, &order).await? {
                        report.changed += 1;
                    }
                }
                Ok(None) => {
                    tracing::warn!(order = %stored.order_id, "poll: the provider has no such order")
                }
                Err(e) => {
                    tracing::warn!(order = %stored.order_id, error = %e, "poll: machine provider not answering");
                    report.failed += 1;
                }
            }
        }
        Ok(report)
    }

    /// Pays a paid order back in full at the provider, under `key`: answers the order as the
    /// provider then reports it.
    pub async fn refund(&self, order_id: &str, key: &OrderKey) -> Result<Order> {
        Ok(self.provider.refund(order_id, key).await?)
    }
}

/// The poll, run by the server like every operation's settlement.
#[derive(Debug)]
pub struct MachinePoll {
    settler: Arc<MachineSettler>,
    every: Duration,
}

impl MachinePoll {
    /// The poll of `settler`'s orders, every `every`.
    pub fn new(settler: Arc<MachineSettler>, every: Duration) -> Self {
        Self { settler, every }
    }
}

#[async_trait::async_trait]
impl Settlement for MachinePoll {
    fn name(&self) -> &'static str {
        "maquininha"
    }

    fn every(&self) -> Duration {
        self.every
    }

    async fn settle_once(&self) -> Result<()> {
        let r = self.settler.poll_once().await?;
        if r.changed + r.failed > 0 {
            tracing::info!(
                polled = r.polled,
                changed = r.changed,
                failed = r.failed,
                "card machine poll"
            );
        }
        Ok(())
    }
}

/// Checks a notification's `x-signature` as Mercado Pago documents it: `ts=<ts>,v1=<hex>`, where
/// `v1` is HMAC-SHA256, under the application's secret, of
/// `id:<data.id, lower-cased>;request-id:<x-request-id>;ts:<ts>;`. With no secret configured every
/// notification is refused and the poll alone settles orders.
pub struct NotificationVerifier(Option<String>);

impl std::fmt::Debug for NotificationVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NotificationVerifier(***)")
    }
}

impl NotificationVerifier {
    /// A verifier for `secret` (empty: none).
    pub fn new(secret: &str) -> Self {
        Self(Some(secret.to_string()).filter(|s| !s.is_empty()))
    }

    /// Checks the headers of a notification about `data_id`, received at `now_ms`.
    pub fn verify(&self, headers: &HeaderMap, data_id: &str, now_ms: Millis) -> Result<()> {
        let refuse = |why: &str| Err(ApiError::WebhookRejected(why.to_string()));
        let Some(secret) = &self.0 else {
            return refuse("nenhuma assinatura secreta da maquininha configurada");
        };
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let (Some(signature), Some(request_id)) = (header("x-signature"), header("x-request-id"))
        else {
            return refuse("faltam x-signature ou x-request-id");
        };
        let part = |name: &str| {
            signature
                .split(',')
                .filter_map(|p| p.trim().split_once('='))
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v)
        };
        let (Some(ts), Some(v1)) = (part("ts"), part("v1")) else {
            return refuse("x-signature sem ts ou v1");
        };
        let Ok(ts_value) = ts.parse::<i64>() else {
            return refuse("ts ilegível");
        };
        // Milliseconds, or seconds from a provider that sends them so.
        let ts_ms = if ts_value < 100_000_000_000 {
            ts_value.saturating_mul(1000)
        } else {
            ts_value
        };
        if (now_ms - ts_ms).abs() > NOTIFICATION_WINDOW_MS {
            return refuse("ts fora da janela de 5 minutos");
        }
        let Ok(expected) = hex::decode(v1) else {
            return refuse("v1 não é hexadecimal");
        };
        let manifest = format!(
            "id:{};request-id:{request_id};ts:{ts};",
            data_id.to_lowercase()
        );
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
        mac.update(manifest.as_bytes());
        mac.verify_slice(&expected)
            .or_else(|_| refuse("assinatura não confere"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(secret: &str, id: &str, rid: &str, ts: i64) -> HeaderMap {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("id:{};request-id:{rid};ts:{ts};", id.to_lowercase()).as_bytes());
        let v1 = hex::encode(mac.finalize().into_bytes());
        let mut h = HeaderMap::new();
        h.insert("x-signature", format!("ts={ts},v1={v1}").parse().unwrap());
        h.insert("x-request-id", rid.parse().unwrap());
        h
    }

    #[test]
    fn a_notification_is_accepted_only_signed_with_the_secret_for_its_order_and_in_time() {
        let v = NotificationVerifier::new("s3cret");
        let now = 1_800_000_000_000;
        let good = signed("s3cret", "ORD01ABC", "r-1", now);
        assert!(v.verify(&good, "ORD01ABC", now).is_ok());
        assert!(v.verify(&good, "ORD01ABC", now + 60_000).is_ok());
        // Seconds are taken as well.
        let secs = signed("s3cret", "ORD01ABC", "r-1", now / 1000);
        assert!(v.verify(&secs, "ORD01ABC", now).is_ok());
        for (headers, id, at) in [
            (signed("other", "ORD01ABC", "r-1", now), "ORD01ABC", now),
            (good.clone(), "ORD02XYZ", now),
            (good.clone(), "ORD01ABC", now + 6 * 60_000),
            (HeaderMap::new(), "ORD01ABC", now),
        ] {
            assert!(v.verify(&headers, id, at).is_err());
        }
        assert!(NotificationVerifier::new("")
            .verify(&good, "ORD01ABC", now)
            .is_err());
    }
}
