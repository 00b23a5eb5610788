//! A payment's identity and outcome.

use std::fmt;

/// The two outcomes of a charge. A payment is final when it exists: there is no pending payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentStatus {
    /// The gateway approved the charge (answered 201).
    Aprovado,
    /// The gateway declined it (answered 402).
    Recusado,
}

/// A stored status that is neither `aprovado` nor `recusado`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status de pagamento desconhecido: {0:?}")]
pub struct UnknownStatus(pub String);

impl PaymentStatus {
    /// Every status, for exhaustiveness checks against the schema.
    pub const ALL: [PaymentStatus; 2] = [PaymentStatus::Aprovado, PaymentStatus::Recusado];

    /// The wire and column form.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::Aprovado => "aprovado",
            PaymentStatus::Recusado => "recusado",
        }
    }

    /// Parses the wire and column form.
    pub fn parse(s: &str) -> Result<Self, UnknownStatus> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_string()))
    }

    /// The HTTP status a first execution answers with, and its replays repeat.
    pub fn http_status(self) -> u16 {
        match self {
            PaymentStatus::Aprovado => 201,
            PaymentStatus::Recusado => 402,
        }
    }
}

impl fmt::Display for PaymentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A payment's id, `pay_` and a UUIDv7 (time-ordered).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PaymentId(String);

impl PaymentId {
    /// A new, time-ordered id.
    pub fn new() -> Self {
        Self(format!("pay_{}", uuid::Uuid::now_v7().simple()))
    }

    /// An id read back from the store (or from a URL: a lookup of an id that does not exist
    /// simply finds nothing).
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }
}

impl Default for PaymentId {
    fn default() -> Self {
        Self::new()
    }
}

impl AsRef<str> for PaymentId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PaymentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips_and_nothing_else_parses() {
        for s in PaymentStatus::ALL {
            assert_eq!(PaymentStatus::parse(s.as_str()), Ok(s));
        }
        assert!(PaymentStatus::parse("pendente").is_err());
    }
}
