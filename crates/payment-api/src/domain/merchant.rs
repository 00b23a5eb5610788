//! The merchant an API key belongs to.

use std::fmt;

/// A merchant id that is not 1–64 characters of `[A-Za-z0-9_-]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("merchant id inválido: {0:?} (1–64 caracteres de A-Z, a-z, 0-9, _ ou -)")]
pub struct InvalidMerchant(pub String);

/// The merchant that owns an API key; idempotency keys and payments are scoped to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MerchantId(String);

impl MerchantId {
    /// Parses a merchant id: 1–64 characters of `[A-Za-z0-9_-]`.
    pub fn parse(s: &str) -> Result<Self, InvalidMerchant> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(InvalidMerchant(s.to_string()))
        }
    }
}

impl AsRef<str> for MerchantId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MerchantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
