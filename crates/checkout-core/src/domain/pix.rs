//! How the customer pays, and a Pix charge as the server last reported it.

use super::UnixMillis;
use serde::{Deserialize, Serialize};

/// Where a Pix charge stands on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PixStatus {
    /// Shown to the customer, not paid yet.
    Aguardando,
    /// Paid: the sale is paid.
    Aprovado,
    /// Its time ran out unpaid.
    Expirado,
    /// The cashier cancelled it.
    Cancelado,
    /// Paid after it expired or was cancelled: the money arrived and must not be lost.
    RecebidoAposCancelamento,
    /// A status this till does not know (a newer server): never taken as paid or unpaid.
    #[serde(other)]
    Desconhecido,
}

impl PixStatus {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            PixStatus::Aguardando => "aguardando",
            PixStatus::Aprovado => "aprovado",
            PixStatus::Expirado => "expirado",
            PixStatus::Cancelado => "cancelado",
            PixStatus::RecebidoAposCancelamento => "recebido_apos_cancelamento",
            PixStatus::Desconhecido => "desconhecido",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        [
            PixStatus::Aguardando,
            PixStatus::Aprovado,
            PixStatus::Expirado,
            PixStatus::Cancelado,
            PixStatus::RecebidoAposCancelamento,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
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
