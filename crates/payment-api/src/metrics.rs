//! Prometheus metrics served at `/metrics`.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::time::Instant;

/// How a `POST /pagamentos` ended.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum RequestOutcome {
    /// Executed for the first time (or taken over after a lease expired).
    first,
    /// Stored response replayed.
    replay,
    /// A concurrent request held the key (409).
    in_progress,
    /// Key reused with a different request (422).
    mismatch,
    /// Rejected before execution (400, 401, 413, 415, 422 validation, injected 503).
    rejected,
    /// Failed during execution (store error, lost lease).
    failed,
    /// The key was cancelled: it can never charge (422).
    cancelled,
}

impl RequestOutcome {
    /// Every outcome, in declaration order (`outcome as usize` indexes it).
    pub const ALL: [RequestOutcome; 7] = [
        RequestOutcome::first,
        RequestOutcome::replay,
        RequestOutcome::in_progress,
        RequestOutcome::mismatch,
        RequestOutcome::rejected,
        RequestOutcome::failed,
        RequestOutcome::cancelled,
    ];
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: RequestOutcome,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabel {
    op: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PassLabel {
    settlement: &'static str,
    status: &'static str,
}

/// The server's metrics, one registry per server instance.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `payment_requests`' counter of each outcome, resolved once: a replay increments one
    /// atomic instead of looking its label up under the family's lock.
    requests: [Counter; RequestOutcome::ALL.len()],
    charges: Family<StatusLabel, Counter>,
    refunds: Family<StatusLabel, Counter>,
    store_latency: Family<OpLabel, Histogram>,
    purged: Counter,
    recovered: Family<StatusLabel, Counter>,
    cancellations: Family<StatusLabel, Counter>,
    reconciliations: Family<StatusLabel, Counter>,
    reconciled: Counter,
    settlement_passes: Family<PassLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("pagar");
        let requests = Family::<OutcomeLabel, Counter>::default();
        let charges = Family::<StatusLabel, Counter>::default();
        let refunds = Family::<StatusLabel, Counter>::default();
        let store_latency = Family::<OpLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_05, 2.0, 18))
        });
        let purged = Counter::default();
        let recovered = Family::<StatusLabel, Counter>::default();
        let cancellations = Family::<StatusLabel, Counter>::default();
        let reconciliations = Family::<StatusLabel, Counter>::default();
        let reconciled = Counter::default();
        let settlement_passes = Family::<PassLabel, Counter>::default();
        registry.register(
            "settlement_passes",
            "Passes of each later settlement (pix, maquininha, captures) by result (ok, failed)",
            settlement_passes.clone(),
        );
        registry.register(
            "pix_reconciliations",
            "Reconciliations with the Pix provider's list of Pix received, by result (ok, failed)",
            reconciliations.clone(),
        );
        registry.register(
            "pix_reconciled",
            "Pix received that only a reconciliation found (no webhook or poll had recorded them)",
            reconciled.clone(),
        );
        registry.register(
            "recovered_keys",
            "Abandoned keys the recovery worker settled (completed, released) or could not (failed)",
            recovered.clone(),
        );
        registry.register(
            "key_cancellations",
            "POST /pagamentos/cancelamentos by result (cancelada, pagamento)",
            cancellations.clone(),
        );
        registry.register(
            "payment_requests",
            "POST /pagamentos by outcome",
            requests.clone(),
        );
        let requests = RequestOutcome::ALL
            .map(|outcome| requests.get_or_create(&OutcomeLabel { outcome }).clone());
        registry.register(
            "gateway_charges",
            "Gateway executions (ledger rows written or found) by status",
            charges.clone(),
        );
        registry.register(
            "gateway_refunds",
            "Refunds the gateway executed (refund ledger rows written) by status",
            refunds.clone(),
        );
        registry.register(
            "store_seconds",
            "Store operation latency",
            store_latency.clone(),
        );
        registry.register(
            "purged_keys",
            "Idempotency keys purged by the reaper",
            purged.clone(),
        );
        Self {
            registry,
            requests,
            charges,
            refunds,
            store_latency,
            purged,
            recovered,
            cancellations,
            reconciliations,
            reconciled,
            settlement_passes,
        }
    }
}

impl Metrics {
    /// Counts one payment request.
    pub fn request(&self, outcome: RequestOutcome) {
        self.requests[outcome as usize].inc();
    }

    /// Counts one refund the gateway executed.
    pub fn refund(&self, approved: bool) {
        let status = if approved { "aprovado" } else { "recusado" };
        self.refunds.get_or_create(&StatusLabel { status }).inc();
    }

    /// Counts one gateway execution.
    pub fn charge(&self, approved: bool) {
        let status = if approved { "aprovado" } else { "recusado" };
        self.charges.get_or_create(&StatusLabel { status }).inc();
    }

    /// Records how long a store operation took.
    pub fn store_op(&self, op: &'static str, started: Instant) {
        self.store_latency
            .get_or_create(&OpLabel { op })
            .observe(started.elapsed().as_secs_f64());
    }

    /// Counts one abandoned key the recovery worker `status`: `completed`, `released`, `failed`.
    pub fn recovered(&self, status: &'static str) {
        self.recovered.get_or_create(&StatusLabel { status }).inc();
    }

    /// Counts one cancellation by its result: `cancelada` or `pagamento`.
    pub fn cancellation(&self, status: &'static str) {
        self.cancellations
            .get_or_create(&StatusLabel { status })
            .inc();
    }

    /// Counts one reconciliation with the Pix provider, and the Pix only it found.
    pub fn reconciled(&self, ok: bool, found: u64) {
        let status = if ok { "ok" } else { "failed" };
        self.reconciliations
            .get_or_create(&StatusLabel { status })
            .inc();
        self.reconciled.inc_by(found);
    }

    /// Counts one finished pass of the settlement named `settlement`.
    pub fn settlement_pass(&self, settlement: &'static str, ok: bool) {
        let status = if ok { "ok" } else { "failed" };
        self.settlement_passes
            .get_or_create(&PassLabel { settlement, status })
            .inc();
    }

    /// Counts purged keys.
    pub fn purged(&self, n: u64) {
        self.purged.inc_by(n);
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

impl RequestOutcome {
    /// The outcome an error stands for.
    pub fn rejected_or_failed(e: &crate::error::ApiError) -> Self {
        use crate::error::ApiError::*;
        match e {
            KeyInProgress { .. } => RequestOutcome::in_progress,
            KeyCancelled => RequestOutcome::cancelled,
            FingerprintMismatch => RequestOutcome::mismatch,
            LeaseLost | Store(_) | GatewayUnavailable(_) | Internal(_) => RequestOutcome::failed,
            _ => RequestOutcome::rejected,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_outcome_indexes_its_own_counter() {
        for (i, outcome) in RequestOutcome::ALL.into_iter().enumerate() {
            assert_eq!(outcome as usize, i, "{outcome:?}");
        }
        let metrics = Metrics::default();
        metrics.request(RequestOutcome::replay);
        metrics.request(RequestOutcome::replay);
        metrics.request(RequestOutcome::mismatch);
        let text = metrics.encode();
        assert!(
            text.contains(r#"pagar_payment_requests_total{outcome="replay"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"pagar_payment_requests_total{outcome="mismatch"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"pagar_payment_requests_total{outcome="first"} 0"#),
            "{text}"
        );
    }
}
