//! How the customer pays, and a Pix charge as the server last reported it.

use super::UnixMillis;
use serde::{Deserialize, Serialize};

pagar_rules::words! {
    /// Where a Pix charge stands on the server.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum PixStatus / UnknownPixStatus("status de Pix desconhecido") {
        /// Shown to the customer, not paid yet.
        Aguardando = "aguardando",
        /// Paid: the sale is paid.
        Aprovado = "aprovado",
        /// Its time ran out unpaid.
        Expirado = "expirado",
        /// The cashier cancelled it.
        Cancelado = "cancelado",
        /// Paid after it expired or was cancelled: the money arrived and must not be lost.
        RecebidoAposCancelamento = "recebido_apos_cancelamento",
        /// A status this till does not know (a newer server): never taken as paid or unpaid.
        #[serde(other)]
        Desconhecido = "desconhecido",
    }
}

/// A Pix charge as the server last reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PixCharge {
    /// The server's payment id (`pay_…`).
    pub payment_id: String,
    /// The provider's charge id.
    pub txid: String,
    /// The BR Code: the QR's text, and what "Pix copia e cola" copies.
    pub copia_e_cola: String,
    /// When it expires (epoch ms).
    pub expira_em: UnixMillis,
    /// Where it stands.
    pub status: PixStatus,
    /// The end-to-end id of the Pix that paid it.
    pub e2eid: Option<String>,
    /// When it was paid (epoch ms).
    pub pago_em: Option<UnixMillis>,
}
