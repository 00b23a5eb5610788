//! The merchant an API key belongs to.

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

pagar_rules::text_newtype!(MerchantId);
