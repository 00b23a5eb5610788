//! The till a payment came from: a store's terminals told apart on the server.

/// A terminal id that is not 1–64 characters of `[A-Za-z0-9_.-]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("terminal deve ter de 1 a 64 caracteres de A-Z, a-z, 0-9, _, . ou -")]
pub struct InvalidTerminal;

/// The terminal (till) that sent a payment, as the till names itself (`caixa-01`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TerminalId(String);

impl TerminalId {
    /// Parses a terminal id.
    pub fn parse(s: &str) -> Result<Self, InvalidTerminal> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(InvalidTerminal)
        }
    }
}

pagar_rules::text_newtype!(TerminalId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_id_is_a_short_plain_name() {
        for ok in ["caixa-01", "a", "loja.centro_2", &"x".repeat(64)] {
            assert!(TerminalId::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "caixa 1", "caixa/1", "ç", &"x".repeat(65)] {
            assert_eq!(TerminalId::parse(bad), Err(InvalidTerminal), "{bad}");
        }
    }
}
