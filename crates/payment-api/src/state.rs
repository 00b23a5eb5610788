//! State shared by every request of one server.

use crate::awaited::{AwaitedKeys, Parts};
use crate::cancel::Cancel;
use crate::captures::{AuthorizationSteps, Capture, Undo};
use crate::config::Config;
use crate::domain::MerchantId;
use crate::faults::Faults;
use crate::gateway::simulator::SimulatorLedger;
use crate::gateway::Gateway;
use crate::idempotency::replay_cache::ReplayCache;
use crate::idempotency::{Operation, Recover, Runner};
use crate::maquininha::{
    HttpMachineProvider, MachinePoll, MachineProvider, MachineSettler, Maquininha,
    NotificationVerifier,
};
use crate::metrics::Metrics;
use crate::payments::Payments;
use crate::pix::provider::{HttpPixProvider, PixProvider};
use crate::pix::webhook::Verifier;
use crate::pix::{Pix, PixPoll, PixSettings, Settler};
use crate::provider_http::Credentials;
use crate::refunds::Refunds;
use crate::settlement::Settlement;
use crate::store::{MachineOrder, PixCharge, Store};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The server's parts, wired once at start: the store, the runner and the operations it runs,
/// the gateway simulator's ledger (when the simulator is the gateway), faults and metrics. The
/// HTTP handlers read it; the use cases get only the parts they need. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

struct Shared {
    store: Arc<dyn Store>,
    runner: Runner,
    payments: Arc<Payments>,
    refunds: Arc<Refunds>,
    cancel: Cancel,
    capture: Capture,
    undo: Undo,
    pix: Option<PixParts>,
    machine: Option<MachineParts>,
    settlements: Vec<Arc<dyn Settlement>>,
    ledger: Option<Arc<dyn SimulatorLedger>>,
    api_keys: HashMap<String, MerchantId>,
    admin_token: Option<String>,
    faults: RwLock<Faults>,
    metrics: Arc<Metrics>,
    key_retention_secs: u64,
    max_body_bytes: usize,
    max_header_bytes: usize,
    body_timeout: std::time::Duration,
    embedded: bool,
    cors_origins: String,
}

/// The Pix operation and what settles its charges, when a provider is configured.
#[derive(Debug)]
pub struct PixParts {
    /// The keyed operation.
    pub op: Arc<Pix>,
    /// Webhook, poll and cancel.
    pub settler: Arc<Settler>,
    /// The webhook signature check.
    pub verifier: Verifier,
}

/// The card-machine operation and what settles its orders, when a provider is configured.
#[derive(Debug)]
pub struct MachineParts {
    /// The keyed operation.
    pub op: Arc<Maquininha>,
    /// Notifications, poll, cancel and refunds.
    pub settler: Arc<MachineSettler>,
    /// The notifications' signature check.
    pub verifier: NotificationVerifier,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The API keys and the admin token are credentials: only their count and presence show.
        f.debug_struct("AppState")
            .field("store", &self.store)
            .field("runner", &self.runner)
            .field("payments", &self.payments)
            .field(
                "api_keys",
                &format_args!("{} keys (***)", self.api_keys.len()),
            )
            .field("admin_token", &self.admin_token.as_ref().map(|_| "***"))
            .field("key_retention_secs", &self.key_retention_secs)
            .field("embedded", &self.embedded)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// Wires the state from a configuration and its parts. `ledger`: the gateway simulator's
    /// ledger, when `gateway` is the simulator (the admin routes read it).
    pub fn new(
        config: &Config,
        api_keys: HashMap<String, MerchantId>,
        store: Arc<dyn Store>,
        gateway: Arc<dyn Gateway>,
        ledger: Option<Arc<dyn SimulatorLedger>>,
    ) -> Self {
        let metrics = Arc::new(Metrics::default());
        let lease_ms = i64::try_from(config.lease_ms).unwrap_or(i64::MAX);
        let runner = Runner::new(
            store.clone(),
            ReplayCache::new(config.replay_cache_entries, config.key_retention_ms()),
            metrics.clone(),
            lease_ms,
        );
        let payments = Arc::new(Payments {
            payments: store.clone(),
            sales: store.clone(),
            gateway: gateway.clone(),
            metrics: metrics.clone(),
            key_retention_ms: config.key_retention_ms(),
        });
        let provider: Option<Arc<dyn PixProvider>> =
            config.pix.pix_provider_url.as_deref().map(|url| {
                let credentials = Credentials::OAuth2 {
                    token_url: config.pix.pix_token_url.clone(),
                    client_id: config.pix.pix_client_id.clone(),
                    client_secret: config.pix.pix_client_secret.clone(),
                    scope: crate::pix::provider::SCOPES.to_string(),
                };
                Arc::new(HttpPixProvider::new(
                    url,
                    credentials,
                    &config.pix.client_tls(),
                    &config.pix.pix_key,
                )) as Arc<dyn PixProvider>
            });
        let machine_provider: Option<Arc<dyn MachineProvider>> =
            config.maquininha.maquininha_url.as_deref().map(|url| {
                Arc::new(HttpMachineProvider::new(
                    url,
                    &config.maquininha.maquininha_token,
                )) as Arc<dyn MachineProvider>
            });
        let (capture, undo) =
            AuthorizationSteps::operations(store.clone(), gateway.clone(), metrics.clone());
        let refunds = Arc::new(Refunds {
            refunds: store.clone(),
            payments: store.clone(),
            gateway,
            pix: provider.clone(),
            machine: machine_provider.clone(),
            metrics: metrics.clone(),
        });
        let cancel = Cancel::new(store.clone(), store.clone(), payments.clone(), lease_ms)
            .declare::<Pix>(Some(Arc::new(AwaitedKeys::<PixCharge>::new(
                Pix::KIND,
                store.clone(),
            ))))
            .declare::<Maquininha>(Some(Arc::new(AwaitedKeys::<MachineOrder>::new(
                Maquininha::KIND,
                store.clone(),
            ))));
        let machine = machine_provider.map(|provider| MachineParts {
            op: Arc::new(Maquininha::new(Parts {
                store: store.clone(),
                sales: store.clone(),
                provider: provider.clone(),
                key_retention_ms: config.key_retention_ms(),
            })),
            settler: Arc::new(MachineSettler::new(store.clone(), provider)),
            verifier: NotificationVerifier::new(&config.maquininha.maquininha_secret),
        });
        let pix = provider.map(|provider| {
            let settings = PixSettings {
                expiry_secs: config.pix.pix_expiry_secs,
                merchant: crate::pix::brcode::Merchant {
                    name: config.pix.merchant_name.clone(),
                    city: config.pix.merchant_city.clone(),
                },
            };
            PixParts {
                op: Arc::new(Pix::new(
                    Parts {
                        store: store.clone(),
                        sales: store.clone(),
                        provider: provider.clone(),
                        key_retention_ms: config.key_retention_ms(),
                    },
                    settings,
                )),
                settler: Arc::new(Settler::new(store.clone(), provider)),
                verifier: Verifier::parse(&config.pix.pix_webhook_secrets)
                    .expect("validated with the configuration"),
            }
        });
        // Every operation whose resources settle later, each on its own timer.
        let mut settlements: Vec<Arc<dyn Settlement>> = vec![Arc::new(capture.lapse(
            std::time::Duration::from_secs(config.reaper_interval_secs.max(1)),
        ))];
        if let Some(pix) = &pix {
            settlements.push(Arc::new(PixPoll::new(
                pix.settler.clone(),
                metrics.clone(),
                std::time::Duration::from_millis(config.pix.pix_poll_ms),
                std::time::Duration::from_secs(config.pix.pix_reconcile_secs.max(1)),
                config.pix.pix_webhook_url.clone(),
            )));
        }
        if let Some(machine) = &machine {
            settlements.push(Arc::new(MachinePoll::new(
                machine.settler.clone(),
                std::time::Duration::from_millis(config.maquininha.maquininha_poll_ms),
            )));
        }
        Self(Arc::new(Shared {
            store,
            runner,
            payments,
            refunds,
            cancel,
            capture,
            undo,
            pix,
            machine,
            settlements,
            ledger,
            api_keys,
            admin_token: config.admin_token.clone().filter(|t| !t.is_empty()),
            faults: RwLock::new(config.faults.clone()),
            metrics,
            key_retention_secs: config.key_retention_secs,
            max_body_bytes: config.max_body_bytes,
            max_header_bytes: config.max_header_bytes,
            body_timeout: std::time::Duration::from_millis(config.body_timeout_ms),
            embedded: config.embedded,
            cors_origins: config.cors_origins.clone(),
        }))
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.0.store
    }

    /// The runner every keyed operation goes through.
    pub fn runner(&self) -> &Runner {
        &self.0.runner
    }

    /// The payment operation.
    pub fn payments(&self) -> &Arc<Payments> {
        &self.0.payments
    }

    /// The refund operation.
    pub fn refunds(&self) -> &Arc<Refunds> {
        &self.0.refunds
    }

    /// Cancellation by key.
    pub fn cancel(&self) -> &Cancel {
        &self.0.cancel
    }

    /// The capture of an authorization (and, through it, the pass that lapses them).
    pub fn capture(&self) -> &Capture {
        &self.0.capture
    }

    /// The undo of an authorization.
    pub fn undo(&self) -> &Undo {
        &self.0.undo
    }

    /// The Pix operation and its settlement, when a Pix provider is configured.
    pub fn pix(&self) -> Option<&PixParts> {
        self.0.pix.as_ref()
    }

    /// The card-machine operation and its settler (off unless `--maquininha-url` is given).
    pub fn machine(&self) -> Option<&MachineParts> {
        self.0.machine.as_ref()
    }

    /// The later settlements of every operation whose resources settle after their first
    /// answer; the server runs each on its own timer.
    pub fn settlements(&self) -> &[Arc<dyn Settlement>] {
        &self.0.settlements
    }

    /// What the recovery worker settles abandoned keys with.
    pub fn recoverers(&self) -> Vec<&dyn Recover> {
        let mut all: Vec<&dyn Recover> = vec![
            self.0.payments.as_ref(),
            self.0.refunds.as_ref(),
            &self.0.cancel,
            &self.0.capture,
            &self.0.undo,
        ];
        if let Some(pix) = &self.0.pix {
            all.push(pix.op.as_ref());
        }
        if let Some(machine) = &self.0.machine {
            all.push(machine.op.as_ref());
        }
        all
    }

    /// The gateway simulator's ledger, when the simulator is the gateway.
    pub fn ledger(&self) -> Option<&Arc<dyn SimulatorLedger>> {
        self.0.ledger.as_ref()
    }

    /// The merchant an API key belongs to.
    pub fn merchant_for(&self, api_key: &str) -> Option<MerchantId> {
        self.0.api_keys.get(api_key).cloned()
    }

    /// The admin token, when admin routes are on.
    pub fn admin_token(&self) -> Option<&str> {
        self.0.admin_token.as_deref()
    }

    /// A snapshot of the fault profile.
    pub fn faults(&self) -> Faults {
        self.0.faults.read().expect("faults lock").clone()
    }

    /// Replaces the fault profile.
    pub fn set_faults(&self, faults: Faults) {
        *self.0.faults.write().expect("faults lock") = faults;
    }

    /// Metrics (clone the `Arc` for a task that outlives this borrow).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
    }

    /// How long completed keys are kept (advertised in `GET /health` for clients).
    pub fn key_retention_secs(&self) -> u64 {
        self.0.key_retention_secs
    }

    /// Body limit.
    pub fn max_body_bytes(&self) -> usize {
        self.0.max_body_bytes
    }

    /// Longest time to receive a request body.
    pub fn body_timeout(&self) -> std::time::Duration {
        self.0.body_timeout
    }

    /// Web origins allowed by CORS (`*`, a list, or empty).
    pub fn cors_origins(&self) -> &str {
        &self.0.cors_origins
    }

    /// True inside another process (the app's sandbox).
    pub fn embedded(&self) -> bool {
        self.0.embedded
    }

    /// Header limit.
    pub fn max_header_bytes(&self) -> usize {
        self.0.max_header_bytes
    }
}
