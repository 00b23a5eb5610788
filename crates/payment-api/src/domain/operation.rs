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
