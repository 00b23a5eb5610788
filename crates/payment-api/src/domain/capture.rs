//! A card payment authorized first and captured (or undone) later: Square's and Stripe's
//! two-step payments, the TEF rule of Brazilian terminals (final only once confirmed; an
//! unconfirmed one is undone).

use std::fmt;

/// Where an authorization stands. A payment captured with its charge (the default) has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureState {
    /// Authorized: the amount is held on the card, not taken; capture or undo decides.
    Pendente,
    /// Captured: the amount is taken, like a payment captured at once.
    Capturada,
    /// Undone before capture: nothing was taken, and nothing can be.
    Desfeita,
    /// Not captured in time: the hold lapsed at the gateway; nothing was taken, nothing can be.
    Expirada,
}

/// A stored capture state no variant spells.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("estado de captura desconhecido: {0:?}")]
pub struct UnknownCapture(pub String);

impl CaptureState {
    /// Every state.
    pub const ALL: [CaptureState; 4] = [
        CaptureState::Pendente,
        CaptureState::Capturada,
        CaptureState::Desfeita,
        CaptureState::Expirada,
    ];

    /// The wire and column form.
    pub fn as_str(self) -> &'static str {
        match self {
            CaptureState::Pendente => "pendente",
            CaptureState::Capturada => "capturada",
            CaptureState::Desfeita => "desfeita",
            CaptureState::Expirada => "expirada",
        }
    }

    /// Parses the wire and column form.
    pub fn parse(s: &str) -> Result<Self, UnknownCapture> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownCapture(s.to_string()))
    }

    /// True once nothing can change it any more (every state but `pendente`).
    pub fn is_final(self) -> bool {
        self != CaptureState::Pendente
    }

    /// True when the amount was or may still be taken (what a sale's tender holds).
    pub fn holds_money(self) -> bool {
        matches!(self, CaptureState::Pendente | CaptureState::Capturada)
    }
}

impl fmt::Display for CaptureState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The step asked of an authorization: `POST /pagamentos/{id}/captura` or `/desfazimento`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureStep {
    /// Take the amount held.
    Capturar,
    /// Release it; nothing is taken.
    Desfazer,
}

impl CaptureStep {
    /// The state the step leads to when the authorization was still pending and in time.
    pub fn target(self) -> CaptureState {
        match self {
            CaptureStep::Capturar => CaptureState::Capturada,
            CaptureStep::Desfazer => CaptureState::Desfeita,
        }
    }

    /// Its path segment (`captura`, `desfazimento`), also the operation its key row records.
    pub fn path_segment(self) -> &'static str {
        match self {
            CaptureStep::Capturar => "captura",
            CaptureStep::Desfazer => "desfazimento",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_and_only_pendente_is_open() {
        for s in CaptureState::ALL {
            assert_eq!(CaptureState::parse(s.as_str()), Ok(s));
            assert_eq!(s.is_final(), s != CaptureState::Pendente);
        }
        assert!(CaptureState::parse("autorizado").is_err());
        assert!(!CaptureState::Desfeita.holds_money());
        assert!(!CaptureState::Expirada.holds_money());
    }
}
