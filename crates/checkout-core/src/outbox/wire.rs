//! The bytes an attempt sends: made once, when the attempt is stored, and never again.

use crate::domain::{AttemptId, CardToken, Centavos, SaleId};
use serde::Serialize;

/// The request body the payment API receives. Field order is fixed, so the bytes are too.
#[derive(Serialize)]
pub(super) struct RequestBody<'a> {
    valor: i64,
    cartao: &'a str,
    referencia: &'a str,
    descricao: String,
}

impl RequestBody<'_> {
    /// The body of an attempt: its amount and card, its id as `referencia` (so a lost answer can
    /// be found by it), and the sale in `descricao`.
    pub fn bytes(valor: Centavos, cartao: &CardToken, id: &AttemptId, sale: &SaleId) -> Vec<u8> {
        serde_json::to_vec(&RequestBody {
            valor: valor.get(),
            cartao: cartao.as_ref(),
            referencia: id.as_ref(),
            descricao: format!("venda {}", sale.as_ref()),
        })
        .expect("a request body always serialises")
    }
}
