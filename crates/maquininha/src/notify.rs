//! Notifications, as Mercado Pago sends them for orders: `POST {url}?data.id=<id>&type=order`
//! with `{"action": "order.<status>", "type": "order", "data": {…}}`, signed in `x-signature`
//! (`ts=<ms>,v1=<hex HMAC-SHA256 of "id:<data.id>;request-id:<x-request-id>;ts:<ts>;">`, the id
//! lower-cased as the docs ask for alphanumeric ids). A delivery not answered 2xx is tried again
//! (at most [`TRIES`] times, backing off); every try is recorded in the ledger.

use crate::store::{now_ms, Ledger, Order};
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Most tries of one notification.
pub const TRIES: u32 = 4;

/// The `x-signature` value for a notification of `data_id` sent as `request_id` at `ts`.
pub fn signature(secret: &str, data_id: &str, request_id: &str, ts: i64) -> String {
    let manifest = format!(
        "id:{};request-id:{request_id};ts:{ts};",
        data_id.to_lowercase()
    );
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(manifest.as_bytes());
    format!("ts={ts},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// How notifications are delivered from now on (a QA control: `PUT /qa/notificacoes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Each once (tried again until answered 2xx), as the provider does.
    Entregue,
    /// None: the network lost them (the client's `GET` or poll must find the change).
    Perdida,
    /// Each twice, as two deliveries (a provider's retry whose first answer was lost).
    Duplicada,
}

impl Delivery {
    /// Parses the QA word.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "entregue" => Some(Delivery::Entregue),
            "perdida" => Some(Delivery::Perdida),
            "duplicada" => Some(Delivery::Duplicada),
            _ => None,
        }
    }
}

/// Sends the notifications.
pub struct Notifier {
    store: Arc<Ledger>,
    secret: String,
    url: Mutex<Option<String>>,
    delivery: Mutex<Delivery>,
    client: reqwest::Client,
}

impl Notifier {
    pub fn new(store: Arc<Ledger>, secret: String, url: Option<String>) -> Self {
        Self {
            store,
            secret,
            url: Mutex::new(url),
            delivery: Mutex::new(Delivery::Entregue),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .expect("HTTP client"),
        }
    }

    pub fn set_url(&self, url: Option<String>) {
        *self.url.lock().unwrap_or_else(|p| p.into_inner()) = url;
    }

    pub fn set_delivery(&self, delivery: Delivery) {
        *self.delivery.lock().unwrap_or_else(|p| p.into_inner()) = delivery;
    }

    /// Tells the application that `order` changed, in the background.
    pub fn notify(&self, order: &Order) {
        let Some(url) = self.url.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return;
        };
        let copies = match *self.delivery.lock().unwrap_or_else(|p| p.into_inner()) {
            Delivery::Entregue => 1,
            Delivery::Duplicada => 2,
            Delivery::Perdida => {
                tracing::info!(order = %order.id, "QA: notification lost on purpose");
                return;
            }
        };
        let action = format!("order.{}", order.status.as_str());
        let body = json!({
            "action": action,
            "api_version": "v1",
            "type": "order",
            "live_mode": false,
            "date_created": now_ms(),
            "data": {
                "id": order.id,
                "type": "point",
                "status": order.status.as_str(),
                "status_detail": order.status_detail,
                "external_reference": order.ask.external_reference,
                "total_amount": pagar_rules::decimal::format(order.ask.centavos),
                "version": order.version,
            },
        })
        .to_string();
        for _ in 0..copies {
            self.deliver(url.clone(), order.id.clone(), action.clone(), body.clone());
        }
    }

    /// One delivery of a notification, tried until answered 2xx, in the background.
    fn deliver(&self, url: String, id: String, action: String, body: String) {
        let (store, client, secret) =
            (self.store.clone(), self.client.clone(), self.secret.clone());
        tokio::spawn(async move {
            let target = format!("{url}?data.id={id}&type=order");
            for attempt in 0..TRIES {
                let request_id = uuid::Uuid::new_v4().to_string();
                let sent = client
                    .post(&target)
                    .header("content-type", "application/json")
                    .header("x-request-id", &request_id)
                    .header(
                        "x-signature",
                        signature(&secret, &id, &request_id, now_ms()),
                    )
                    .body(body.clone())
                    .send()
                    .await;
                let (status, error) = match &sent {
                    Ok(r) => (Some(r.status().as_u16()), None),
                    Err(e) => (None, Some(e.to_string())),
                };
                let _ = store.record_delivery(&id, &action, status, error.as_deref());
                if status.is_some_and(|s| (200..300).contains(&s)) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            tracing::warn!(order = %id, %action, "notification not delivered; the client's GET finds the order");
        });
    }
}
