//! What the engine tells the app: connectivity, every attempt's change, the queue, and the open
//! sale a window shows after a start, a crash or a reload.

use super::*;

/// Whether the payment API can be reached, as the engine last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Connectivity {
    /// Nothing has answered yet (the first probe is under way). Counts as offline for the caps.
    Unknown,
    /// The last request reached the server.
    Online,
    /// The server could not be reached; attempts wait and `/health` is probed.
    Offline,
    /// A server answered with a certificate the till does not trust (unknown authority, expired,
    /// another host's name): attempts wait with their keys as when offline, but the cause is a
    /// configuration to fix, not the network. Shown as `certificado`.
    #[serde(rename = "certificado")]
    Untrusted,
}

impl Connectivity {
    pub(super) fn from_u8(v: u8) -> Self {
        match v {
            1 => Connectivity::Online,
            2 => Connectivity::Offline,
            3 => Connectivity::Untrusted,
            _ => Connectivity::Unknown,
        }
    }

    pub(super) fn as_u8(self) -> u8 {
        match self {
            Connectivity::Unknown => 0,
            Connectivity::Online => 1,
            Connectivity::Offline => 2,
            Connectivity::Untrusted => 3,
        }
    }

    /// The server cannot be used now: nothing is sent, and `/health` is probed until it answers.
    pub fn is_down(self) -> bool {
        matches!(self, Connectivity::Offline | Connectivity::Untrusted)
    }

    pub(super) fn of(reach: Reach) -> Self {
        match reach {
            Reach::Answered => Connectivity::Online,
            Reach::Unreachable => Connectivity::Offline,
            Reach::Untrusted => Connectivity::Untrusted,
        }
    }
}

/// Everything the app is told, in order.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// An attempt was created or changed.
    AttemptChanged {
        /// It, as it is now.
        attempt: Box<Attempt>,
    },
    /// The queue of pending attempts changed.
    QueueChanged {
        /// Count and total.
        queue: QueueSummary,
    },
    /// Connectivity changed.
    ConnectivityChanged {
        /// The new state.
        connectivity: Connectivity,
        /// Why the server cannot be used, in pt-BR, while it cannot.
        problema: Option<String>,
    },
    /// A sale's NFC-e was issued or changed.
    NotaChanged {
        /// It, as it is now (without its XML).
        nota: Box<crate::outbox::NotaRegistro>,
        /// In contingência and not yet authorized: by when it must reach SEFAZ.
        enviar_ate: Option<UnixMillis>,
    },
}

/// What the till shows: the open sale and the others still unsettled.
#[derive(Debug, Clone, Serialize)]
pub struct OpenSale {
    /// The sale open at the till.
    pub sale: SaleId,
    /// Its number that day (`42` is "Venda nº 0042").
    pub numero: Option<u32>,
    /// Its latest attempt, if it was paid.
    pub attempt: Option<Attempt>,
    /// The latest attempt of every other sale that is `pendente` or in `revisao`, oldest first.
    pub unfinished: Vec<Attempt>,
}
