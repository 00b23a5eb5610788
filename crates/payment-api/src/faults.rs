//! Fault injection for tests and manual QA (SPEC §2.4). Off by default.

use crate::conn::ConnHandle;
use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The fault profile. Each fault fires independently with its probability (0.0–1.0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Delay before executing each request, in milliseconds.
    #[arg(
        long = "fault-latency-ms",
        env = "PAGAR_FAULT_LATENCY_MS",
        default_value_t = 0
    )]
    pub latency_ms: u64,
    /// Probability that a request gets the delay.
    #[arg(
        long = "fault-latency-probability",
        env = "PAGAR_FAULT_LATENCY_PROBABILITY",
        default_value_t = 1.0
    )]
    pub latency_probability: f64,
    /// Probability of dropping the response after the payment is committed: the server charged,
    /// the client never hears.
    #[arg(
        long = "fault-drop-response",
        env = "PAGAR_FAULT_DROP_RESPONSE",
        default_value_t = 0.0
    )]
    pub drop_response_probability: f64,
    /// Probability of answering 503 before executing (nothing stored, key stays free).
    #[arg(long = "fault-5xx", env = "PAGAR_FAULT_5XX", default_value_t = 0.0)]
    pub error_5xx_probability: f64,
    /// Probability of answering 429 (rate limited, `Retry-After: 2`) before executing.
    #[arg(long = "fault-429", env = "PAGAR_FAULT_429", default_value_t = 0.0)]
    pub rate_limit_probability: f64,
    /// Probability of resetting the connection before reading the request body.
    #[arg(
        long = "fault-reset-before-body",
        env = "PAGAR_FAULT_RESET_BEFORE_BODY",
        default_value_t = 0.0
    )]
    pub reset_before_body_probability: f64,
    /// Probability of aborting the whole server process after the gateway charged and before
    /// the payment is stored (crash tests). Never offered by the desktop app's embedded server.
    #[arg(
        long = "fault-crash-after-charge",
        env = "PAGAR_FAULT_CRASH_AFTER_CHARGE",
        default_value_t = 0.0
    )]
    pub crash_after_charge_probability: f64,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            latency_ms: 0,
            latency_probability: 1.0,
            drop_response_probability: 0.0,
            error_5xx_probability: 0.0,
            rate_limit_probability: 0.0,
            reset_before_body_probability: 0.0,
            crash_after_charge_probability: 0.0,
        }
    }
}

impl Faults {
    /// Checks every probability is within 0.0–1.0 and the latency is at most 10 minutes.
    pub fn validate(&self) -> Result<(), String> {
        let probabilities = [
            ("latency_probability", self.latency_probability),
            ("drop_response_probability", self.drop_response_probability),
            ("error_5xx_probability", self.error_5xx_probability),
            ("rate_limit_probability", self.rate_limit_probability),
            (
                "reset_before_body_probability",
                self.reset_before_body_probability,
            ),
            (
                "crash_after_charge_probability",
                self.crash_after_charge_probability,
            ),
        ];
        for (name, p) in probabilities {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} deve estar entre 0 e 1, não {p}"));
            }
        }
        if self.latency_ms > 600_000 {
            return Err("latency_ms deve ser no máximo 600000".into());
        }
        Ok(())
    }

    /// True when no fault can fire.
    pub fn is_off(&self) -> bool {
        self.latency_ms == 0
            && self.drop_response_probability == 0.0
            && self.error_5xx_probability == 0.0
            && self.rate_limit_probability == 0.0
            && self.reset_before_body_probability == 0.0
            && self.crash_after_charge_probability == 0.0
    }
}

/// The seam: the four places a request can meet a fault, in the order it passes them. Nothing
/// else in the server reads a probability.
impl Faults {
    /// Before the body is read: the connection may be reset (the client sees a reset, nothing is
    /// stored).
    pub fn before_body(&self, conn: Option<&ConnHandle>) -> Result<(), ApiError> {
        match conn {
            Some(conn) if fires(self.reset_before_body_probability) => {
                tracing::warn!("fault: reset before reading the body");
                conn.reset();
                Err(ApiError::InjectedFault)
            }
            _ => Ok(()),
        }
    }

    /// Before execution: latency, then a 429 or a 503 (nothing stored, the key stays free).
    pub async fn before_execution(&self) -> Result<(), ApiError> {
        if self.latency_ms > 0 && fires(self.latency_probability) {
            tokio::time::sleep(Duration::from_millis(self.latency_ms)).await;
        }
        if fires(self.rate_limit_probability) {
            tracing::warn!("fault: 429 before execution");
            return Err(ApiError::RateLimited);
        }
        if fires(self.error_5xx_probability) {
            tracing::warn!("fault: 503 before execution");
            return Err(ApiError::InjectedFault);
        }
        Ok(())
    }

    /// Between the gateway's charge and storing the payment: the process may abort (the
    /// recovery worker and the downstream key must then settle the charge).
    pub fn after_charge(&self) {
        if fires(self.crash_after_charge_probability) {
            tracing::error!("fault: aborting the process after the gateway charged");
            // The log is written by another thread that dies with the process: say it here too.
            eprintln!("payment-api: fault: aborting the process after the gateway charged");
            std::process::abort();
        }
    }

    /// After a first execution's answer is durable: the connection may be cut, so the client
    /// never hears an answer the server keeps.
    pub fn after_commit(&self, conn: Option<&ConnHandle>) {
        if let Some(conn) = conn {
            if fires(self.drop_response_probability) {
                tracing::warn!("fault: dropping the response after commit");
                conn.close();
            }
        }
    }
}

/// Draws whether a fault with probability `p` fires now.
fn fires(p: f64) -> bool {
    p > 0.0 && (p >= 1.0 || rand::random::<f64>() < p)
}
