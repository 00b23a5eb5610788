//! The crate's one error type.

/// What can go wrong making, signing or reading a note.
#[derive(Debug, thiserror::Error)]
pub enum NfceError {
    /// A value the note's layout does not accept (what, and the value).
    #[error("{0} inválido: {1:?}")]
    Invalid(&'static str, String),
    /// The sale cannot make a note (no item, payments that do not cover it, …).
    #[error("venda sem nota possível: {0}")]
    Sale(String),
    /// The certificate could not be read, or does not sign.
    #[error("certificado: {0}")]
    Certificate(String),
}

impl From<openssl::error::ErrorStack> for NfceError {
    fn from(e: openssl::error::ErrorStack) -> Self {
        NfceError::Certificate(e.to_string())
    }
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, NfceError>;
