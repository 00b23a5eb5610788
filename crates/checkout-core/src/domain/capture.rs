//! A card tender authorized first (`"captura": false`) and captured or undone later, as the
//! till sees it. The TEF rule: a transaction is final only once the sale is paid and its
//! receipt shown; one left unconfirmed is undone, never captured silently.

use serde::{Deserialize, Serialize};

pagar_rules::words! {
    /// Where an authorized tender's capture stands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Capture / UnknownCapture("estado de captura desconhecido") {
        /// Authorized: the amount is held on the card; nothing decided yet.
        Pendente = "pendente",
        /// Decided: capture (written ahead with its own key; being sent).
        Capturar = "capturar",
        /// Decided: undo (written ahead with its own key; being sent).
        Desfazer = "desfazer",
        /// Captured: the money is taken.
        Capturada = "capturada",
        /// Undone: nothing was taken.
        Desfeita = "desfeita",
        /// Lapsed before capture: nothing was taken.
        Expirada = "expirada",
    }
}

impl Capture {
    /// True when the tender still pays its sale: held, being captured or captured. An undo
    /// decided (even before the server confirmed it) no longer does.
    pub fn pays(self) -> bool {
        matches!(
            self,
            Capture::Pendente | Capture::Capturar | Capture::Capturada
        )
    }

    /// True once the server has said (captured, undone or lapsed).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Capture::Capturada | Capture::Desfeita | Capture::Expirada
        )
    }

    /// The step a decision sends (`captura`, `desfazimento`), for a decided one.
    pub fn step_path(self) -> Option<&'static str> {
        match self {
            Capture::Capturar => Some("captura"),
            Capture::Desfazer => Some("desfazimento"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_and_only_held_or_captured_pays() {
        for c in Capture::ALL {
            assert_eq!(Capture::parse(c.as_str()), Ok(c));
            assert_eq!(
                c.pays(),
                matches!(
                    c,
                    Capture::Pendente | Capture::Capturar | Capture::Capturada
                )
            );
        }
        assert!(Capture::parse("autorizado").is_err());
    }
}
