//! A card payment authorized first and captured (or undone) later: Square's and Stripe's
//! two-step payments, the TEF rule of Brazilian terminals (final only once confirmed; an
//! unconfirmed one is undone).

pagar_rules::words! {
    /// Where an authorization stands. A payment captured with its charge (the default) has none.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum CaptureState / UnknownCapture("estado de captura desconhecido") {
        /// Authorized: the amount is held on the card, not taken; capture or undo decides.
        Pendente = "pendente",
        /// Captured: the amount is taken, like a payment captured at once.
        Capturada = "capturada",
        /// Undone before capture: nothing was taken, and nothing can be.
        Desfeita = "desfeita",
        /// Not captured in time: the hold lapsed at the gateway; nothing was taken, nothing can be.
        Expirada = "expirada",
    }
}

impl CaptureState {
    /// True once nothing can change it any more (every state but `pendente`).
    pub fn is_final(self) -> bool {
        self != CaptureState::Pendente
    }

    /// True when the amount was or may still be taken (what a sale's tender holds).
    pub fn holds_money(self) -> bool {
        matches!(self, CaptureState::Pendente | CaptureState::Capturada)
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
