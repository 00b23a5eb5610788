//! Which money operation a key executes, recorded on the key's row when it is claimed.

use std::fmt;

/// What a key was claimed for. A key is its merchant's whatever it executes; the row says which
/// operation holds it, so nothing has to guess from a stored body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyOperation {
    /// `POST /pagamentos`: a charge.
    Pagamento,
    /// `POST /pagamentos/{id}/estornos`: a refund.
    Estorno,
    /// `POST /pagamentos/cancelamentos` on a key nothing had claimed: the key is being burned.
    Cancelamento,
}

/// A stored operation this server does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("operação de chave desconhecida: {0:?}")]
pub struct UnknownOperation(pub String);

impl KeyOperation {
    /// Every operation, for exhaustiveness checks.
    pub const ALL: [KeyOperation; 3] = [
        KeyOperation::Pagamento,
        KeyOperation::Estorno,
        KeyOperation::Cancelamento,
    ];

    /// The column form.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyOperation::Pagamento => "pagamento",
            KeyOperation::Estorno => "estorno",
            KeyOperation::Cancelamento => "cancelamento",
        }
    }

    /// Parses the column form.
    pub fn parse(s: &str) -> Result<Self, UnknownOperation> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownOperation(s.to_string()))
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
        for op in KeyOperation::ALL {
            assert_eq!(KeyOperation::parse(op.as_str()), Ok(op));
        }
        assert!(KeyOperation::parse("captura").is_err());
    }
}
