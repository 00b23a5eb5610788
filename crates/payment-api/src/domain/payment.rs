//! A payment's identity and outcome.

pagar_rules::words! {
    /// The two outcomes of a charge. A payment is final when it exists: there is no pending payment.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum PaymentStatus / UnknownStatus("status de pagamento desconhecido") {
        /// The gateway approved the charge (answered 201).
        Aprovado = "aprovado",
        /// The gateway declined it (answered 402).
        Recusado = "recusado",
    }
}

impl PaymentStatus {
    /// The HTTP status a first execution answers with, and its replays repeat.
    pub fn http_status(self) -> u16 {
        match self {
            PaymentStatus::Aprovado => 201,
            PaymentStatus::Recusado => 402,
        }
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

    /// An id read back from the store.
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }

    /// An id from a URL path: `None` for what no payment id can be (empty, over 100 characters,
    /// anything but letters, digits, `_` and `-`), so a NUL or a control character never reaches
    /// a store that cannot hold it; such a path finds nothing, like any unknown id.
    pub fn from_path(s: &str) -> Option<Self> {
        let plausible = !s.is_empty()
            && s.len() <= 100
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        plausible.then(|| Self(s.to_string()))
    }
}

impl Default for PaymentId {
    fn default() -> Self {
        Self::new()
    }
}

pagar_rules::text_newtype!(PaymentId);

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

    #[test]
    fn a_path_id_with_a_nul_or_a_control_character_is_no_payment_id() {
        for bad in ["pay_\u{0}", "pay\t1", "", "pay 1", &"a".repeat(101)] {
            assert_eq!(PaymentId::from_path(bad), None, "{bad:?}");
        }
        let id = PaymentId::new();
        assert_eq!(PaymentId::from_path(id.as_ref()), Some(id));
    }
}
