//! The `Idempotency-Key` header and the key derived from it for the gateway.

use super::MerchantId;
use sha2::{Digest, Sha256};

/// Why an `Idempotency-Key` header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No header at all.
    #[error("o cabeçalho Idempotency-Key é obrigatório")]
    Missing,
    /// More than one header field.
    #[error("envie exatamente um cabeçalho Idempotency-Key")]
    Duplicate,
    /// Empty value (bare or `""`).
    #[error("Idempotency-Key não pode ser vazio")]
    Empty,
    /// Over 255 characters.
    #[error("Idempotency-Key deve ter no máximo 255 caracteres")]
    TooLong,
    /// Not visible ASCII, or a malformed structured-field string.
    #[error("Idempotency-Key deve conter apenas ASCII visível")]
    BadCharacters,
}

/// An idempotency key: 1–255 visible ASCII characters. The structured-field string form
/// (`"abc"`) and the bare form (`abc`) parse to the same key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Largest key length, in characters.
    pub const MAX_LEN: usize = 255;

    /// Parses one header value (raw bytes, as they arrived).
    pub fn parse(raw: &[u8]) -> Result<Self, KeyError> {
        if raw.is_empty() {
            return Err(KeyError::Empty);
        }
        if !raw.iter().all(|b| (0x21..=0x7e).contains(b)) {
            // Header values may carry spaces only inside the quoted form.
            if !(raw.first() == Some(&b'"') && raw.iter().all(|b| (0x20..=0x7e).contains(b))) {
                return Err(KeyError::BadCharacters);
            }
        }
        let inner = if raw.len() >= 2 && raw[0] == b'"' && raw[raw.len() - 1] == b'"' {
            Self::unquote(&raw[1..raw.len() - 1])?
        } else if raw.contains(&b'"') && raw[0] == b'"' {
            return Err(KeyError::BadCharacters);
        } else {
            String::from_utf8(raw.to_vec()).map_err(|_| KeyError::BadCharacters)?
        };
        if inner.is_empty() {
            return Err(KeyError::Empty);
        }
        if inner.len() > Self::MAX_LEN {
            return Err(KeyError::TooLong);
        }
        if !inner.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(KeyError::BadCharacters);
        }
        Ok(Self(inner))
    }

    /// RFC 8941 sf-string body: `\"` and `\\` are the only escapes; a bare `"` is not allowed.
    fn unquote(body: &[u8]) -> Result<String, KeyError> {
        let mut out = String::with_capacity(body.len());
        let mut it = body.iter();
        while let Some(&b) = it.next() {
            match b {
                b'\\' => match it.next() {
                    Some(&e @ (b'"' | b'\\')) => out.push(e as char),
                    _ => return Err(KeyError::BadCharacters),
                },
                b'"' => return Err(KeyError::BadCharacters),
                _ => out.push(b as char),
            }
        }
        Ok(out)
    }
}

impl AsRef<str> for IdempotencyKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// SHA-256 of method, path and the canonical JSON body. Equal requests have equal fingerprints
/// of one idempotency key, including a takeover after a crash, charges the gateway at most once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownstreamKey(String);

impl DownstreamKey {
    /// Derives the downstream key.
    pub fn derive(merchant: &MerchantId, key: &IdempotencyKey) -> Self {
        let mut h = Sha256::new();
        h.update(b"pagar-downstream-v1\0");
        h.update(merchant.as_ref().as_bytes());
        h.update(b"\0");
        h.update(key.as_ref().as_bytes());
        Self(format!("dk_{}", hex::encode(&h.finalize()[..16])))
    }

    /// A key as a gateway receives it on the wire (an `X-Idempotency-Key`): 1 to 255 visible
    /// ASCII characters; `None` for anything else.
    pub fn received(s: &str) -> Option<Self> {
        (!s.is_empty() && s.len() <= 255 && s.bytes().all(|b| b.is_ascii_graphic()))
            .then(|| Self(s.to_string()))
    }

    /// The key of a refund the gateway is asked for under (merchant, idempotency key): another
    /// namespace than charges, so a key used for a charge and for a refund never collide.
    pub fn derive_refund(merchant: &MerchantId, key: &IdempotencyKey) -> Self {
        let mut h = Sha256::new();
        h.update(b"pagar-downstream-refund-v1\0");
        h.update(merchant.as_ref().as_bytes());
        h.update(b"\0");
        h.update(key.as_ref().as_bytes());
        Self(format!("dr_{}", hex::encode(&h.finalize()[..16])))
    }
}

impl AsRef<str> for DownstreamKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_key_and_its_quoted_form_are_the_same_key() {
        assert_eq!(
            IdempotencyKey::parse(b"abc-123").unwrap(),
            IdempotencyKey::parse(b"\"abc-123\"").unwrap()
        );
    }

    #[test]
    fn a_key_longer_than_255_chars_is_rejected() {
        assert_eq!(
            IdempotencyKey::parse(&[b'a'; 255]).unwrap().as_ref().len(),
            255
        );
        assert_eq!(IdempotencyKey::parse(&[b'a'; 256]), Err(KeyError::TooLong));
    }

    #[test]
    fn empty_and_non_visible_keys_are_rejected() {
        assert_eq!(IdempotencyKey::parse(b""), Err(KeyError::Empty));
        assert_eq!(IdempotencyKey::parse(b"\"\""), Err(KeyError::Empty));
        assert_eq!(IdempotencyKey::parse(b"a b"), Err(KeyError::BadCharacters));
        assert_eq!(
            IdempotencyKey::parse(b"\"a b\""),
            Err(KeyError::BadCharacters)
        );
        assert_eq!(
            IdempotencyKey::parse("chave-ç".as_bytes()),
            Err(KeyError::BadCharacters)
        );
        assert_eq!(
            IdempotencyKey::parse(b"\"abc"),
            Err(KeyError::BadCharacters)
        );
        assert_eq!(
            IdempotencyKey::parse(b"\"a\"b\""),
            Err(KeyError::BadCharacters)
        );
    }

    #[test]
    fn escapes_in_the_quoted_form_are_decoded() {
        assert_eq!(
            IdempotencyKey::parse(br#""a\"b""#).unwrap().as_ref(),
            "a\"b"
        );
    }

    #[test]
    fn the_downstream_key_differs_per_merchant() {
        let k = IdempotencyKey::parse(b"k").unwrap();
        let a = DownstreamKey::derive(&MerchantId::parse("a").unwrap(), &k);
        let b = DownstreamKey::derive(&MerchantId::parse("b").unwrap(), &k);
        assert_ne!(a, b);
    }
}
