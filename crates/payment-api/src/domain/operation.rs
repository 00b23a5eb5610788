//! Which money operation a key executes, recorded on the key's row when it is claimed.

use std::borrow::Cow;
use std::fmt;

/// What a key was claimed for: the name of an `idempotency::Operation` (`pagamento`, `estorno`,
/// `cancelamento`, and whatever later operations add). A key is its merchant's whatever it
/// executes; the row says which operation holds it, so nothing has to guess from a stored body.
/// A name this server does not know (a newer replica's operation) is kept as it is: the recovery
/// worker leaves such a key to a replica that knows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyOperation(Cow<'static, str>);

/// A stored operation name that is not one (empty, too long, or not `[a-z_]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nome de operação inválido: {0:?}")]
pub struct UnknownOperation(pub String);

impl KeyOperation {
    /// `POST /pagamentos`: a charge.
    pub const PAGAMENTO: KeyOperation = KeyOperation::named("pagamento");
    /// `POST /pagamentos/{id}/estornos`: a refund.
    pub const ESTORNO: KeyOperation = KeyOperation::named("estorno");
    /// `POST /pagamentos/cancelamentos` on a key nothing had claimed: the key is being burned.
    pub const CANCELAMENTO: KeyOperation = KeyOperation::named("cancelamento");
    /// Capturing an authorized payment (`POST /pagamentos/{id}/captura`).
    pub const CAPTURA: KeyOperation = KeyOperation::named("captura");
    /// Undoing an authorized payment (`POST /pagamentos/{id}/desfazimento`).
    pub const DESFAZIMENTO: KeyOperation = KeyOperation::named("desfazimento");

    /// An operation's name, as its module declares it (`[a-z_]`, at most 32 characters: checked
    /// by the tests of each operation and by [`KeyOperation::parse`] on the way back).
    pub const fn named(name: &'static str) -> Self {
        Self(Cow::Borrowed(name))
    }

    /// The column form.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses the column form.
    pub fn parse(s: &str) -> Result<Self, UnknownOperation> {
        let valid = !s.is_empty()
            && s.len() <= 32
            && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        if !valid {
            return Err(UnknownOperation(s.to_string()));
        }
        Ok(match s {
            "pagamento" => Self::PAGAMENTO,
            "estorno" => Self::ESTORNO,
            "cancelamento" => Self::CANCELAMENTO,
            other => Self(Cow::Owned(other.to_string())),
        })
    }
}

/// What a cancellation by key (`POST /pagamentos/cancelamentos`) does to a key an operation
/// claimed: each operation declares it (`idempotency::Operation::CANCEL_BY_KEY`), the claim
/// decides with it (`store::claim::decide_cancel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelByKey {
    /// Not a payment key (a refund, a capture): refused, 422 `not-a-payment-key`.
    NotAPayment,
    /// A charge made at once under its downstream key (a card): a completed key answers its
    /// payment; an unfinished one is taken over and voided downstream (or completed with the
    /// charge found there), so it can never charge.
    VoidDownstream,
    /// A charge whose resource outlives its key and answers for itself (a Pix the customer can
    /// still pay): the operation's resource is asked first; a key still executing is in
    /// progress (409) until it made its resource, never voided.
    AskResource,
}

/// Each operation's [`CancelByKey`], as the server's operations declared them; an operation not
/// listed is not a payment.
#[derive(Debug, Clone, Default)]
pub struct CancelRules(Vec<(KeyOperation, CancelByKey)>);

impl CancelRules {
    /// Adds what a cancellation does to `op`'s keys.
    pub fn with(mut self, op: KeyOperation, rule: CancelByKey) -> Self {
        self.0.retain(|(o, _)| *o != op);
        self.0.push((op, rule));
        self
    }

    /// What a cancellation does to a key `op` claimed. A key a cancellation itself claimed is
    /// voided like a card's (it never made anything else).
    pub fn of(&self, op: &KeyOperation) -> CancelByKey {
        if *op == KeyOperation::CANCELAMENTO {
            return CancelByKey::VoidDownstream;
        }
        self.0
            .iter()
            .find(|(o, _)| o == op)
            .map_or(CancelByKey::NotAPayment, |(_, r)| *r)
    }
}

impl fmt::Display for KeyOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_round_trips_through_its_stored_form() {
        for op in [
            KeyOperation::PAGAMENTO,
            KeyOperation::ESTORNO,
            KeyOperation::CANCELAMENTO,
            KeyOperation::named("captura"),
        ] {
            assert_eq!(KeyOperation::parse(op.as_str()), Ok(op));
        }
        for bad in ["", "Pagamento", "pix;drop", &"a".repeat(33)] {
            assert!(KeyOperation::parse(bad).is_err(), "{bad:?}");
        }
    }
}
