//! The app's one error type; it crosses to the UI as `{kind, message}`.

use serde::Serialize;

/// Result alias for commands.
pub type Result<T> = std::result::Result<T, AppError>;

/// What a command can fail with. Messages are pt-BR, for the cashier.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The checkout engine refused or failed.
    #[error(transparent)]
    Core(#[from] checkout_core::CoreError),
    /// The app could not start (the message says why); nothing can be paid.
    #[error("o Pagar não pôde iniciar: {0}")]
    Startup(String),
    /// Another Pagar window (another process) already uses this data folder.
    #[error("o Pagar já está aberto em outra janela com esta pasta de dados ({0}); use aquela janela, ou feche-a e abra esta de novo")]
    OtherWindow(String),
    /// Input that does not parse.
    #[error("{0}")]
    Invalid(String),
    /// A QA action failed (fault profile, offline simulation, export).
    #[error("{0}")]
    Qa(String),
}

impl AppError {
    /// Input a domain type refused, with that type's message.
    pub fn invalid(e: impl std::fmt::Display) -> Self {
        AppError::Invalid(e.to_string())
    }
}

impl Serialize for AppError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            AppError::Core(e) => e.serialize(s),
            other => {
                use serde::ser::SerializeStruct;
                let kind = match other {
                    AppError::Startup(_) => "startup",
                    AppError::OtherWindow(_) => "other_window",
                    AppError::Invalid(_) => "invalid",
                    _ => "qa",
                };
                let mut st = s.serialize_struct("AppError", 2)?;
                st.serialize_field("kind", kind)?;
                st.serialize_field("message", &other.to_string())?;
                st.end()
            }
        }
    }
}
