//! A card at the card machine beside the cashier ("maquininha"), as the server last reported it.

use serde::{Deserialize, Serialize};

pagar_rules::words! {
    /// Where a card-machine payment stands on the server.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum MachineStatus / UnknownMachineStatus("status de pagamento na maquininha desconhecido") {
        /// Sent to the machine; no card has paid it yet.
        Aguardando = "aguardando",
        /// A card paid it: the sale is paid.
        Aprovado = "aprovado",
        /// The card was declined at the machine.
        Recusado = "recusado",
        /// Cancelled before any card paid it (by the cashier, or on the machine).
        Cancelado = "cancelado",
        /// Nobody paid it in time.
        Expirado = "expirado",
        /// A status this till does not know (a newer server): never taken as paid or unpaid.
        #[serde(other)]
        Desconhecido = "desconhecido",
    }
}

/// A card-machine payment as the server last reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MachineCharge {
    /// The server's payment id (`pay_…`).
    pub payment_id: String,
    /// The machine it was sent to.
    pub maquininha: String,
    /// The provider's order id.
    pub pedido: String,
    /// The machine's own word for the order (`created`: sent, not taken yet; `at_terminal`: on
    /// the machine's screen; …), for the cashier's screen.
    pub estado: String,
    /// Where it stands.
    pub status: MachineStatus,
    /// Why it was declined or cancelled.
    pub motivo: Option<String>,
    /// How the customer paid, once paid: `debito`, `credito` or `voucher`.
    pub pago_com: Option<String>,
}

impl MachineCharge {
    /// True while the machine holds the order: a card may be presented, and only the machine
    /// can end it now.
    pub fn at_machine(&self) -> bool {
        self.status == MachineStatus::Aguardando && self.estado == "at_terminal"
    }
}
