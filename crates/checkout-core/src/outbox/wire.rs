//! The bytes an attempt sends: made once, when the attempt is stored, and never again.

use crate::domain::{sale_number, AttemptId, CardMethod, CardPlan, CardToken, Centavos, SaleId};
use serde::Serialize;

/// The request body the payment API receives. Field order is fixed, so the bytes are too.
#[derive(Serialize)]
pub(super) struct RequestBody<'a> {
    valor: i64,
    cartao: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    metodo: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parcelas: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parcelamento: Option<&'static str>,
    referencia: &'a str,
    descricao: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    terminal: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    venda: Option<Venda<'a>>,
    /// `false` for a tender of a divided sale (and every card payment when the store confirms
    /// after the receipt): authorized now, captured once the sale is paid and its receipt
    /// shown, undone if it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    captura: Option<bool>,
}

/// `venda` of a tender: the sale it is part of and the sale's total, which the server holds
/// its tenders to.
#[derive(Serialize)]
struct Venda<'a> {
    referencia: &'a str,
    total: i64,
}

impl RequestBody<'_> {
    /// The body of an attempt: its amount, card and plan (`metodo`, and for crédito `parcelas`
    /// and a parcelado's `parcelamento`), its id as `referencia` (so a lost answer can be found
    /// by it), the sale's number and id in `descricao`, and the till as `terminal`.
    // Each argument is one field of the body; a struct for them would be this struct again.
    #[allow(clippy::too_many_arguments)]
    pub fn bytes(
        valor: Centavos,
        cartao: &CardToken,
        plano: Option<CardPlan>,
        id: &AttemptId,
        sale: (&SaleId, u32),
        terminal: Option<&str>,
        sale_total: Option<Centavos>,
        authorize: bool,
    ) -> Vec<u8> {
        serde_json::to_vec(&RequestBody {
            valor: valor.get(),
            cartao: cartao.as_ref(),
            metodo: plano.map(|p| p.method().as_str()),
            parcelas: plano
                .filter(|p| p.method() == CardMethod::Credito)
                .map(CardPlan::parcelas),
            parcelamento: plano.and_then(CardPlan::financing).map(|f| f.as_str()),
            referencia: id.as_ref(),
            descricao: format!("Venda nº {} ({})", sale_number(sale.1), sale.0.as_ref()),
            terminal,
            venda: sale_total.map(|total| Venda {
                referencia: sale.0.as_ref(),
                total: total.get(),
            }),
            captura: (authorize || sale_total.is_some()).then_some(false),
        })
        .expect("a request body always serialises")
    }
}

/// The request body of a Pix: like a card payment's, with `"metodo": "pix"` and no card.
#[derive(Serialize)]
pub(super) struct PixRequestBody<'a> {
    valor: i64,
    metodo: &'static str,
    referencia: &'a str,
    descricao: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    terminal: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    venda: Option<Venda<'a>>,
}

impl PixRequestBody<'_> {
    /// The body of a Pix attempt (with `sale_total`, one tender of a divided sale of that total).
    pub fn bytes(
        valor: Centavos,
        id: &AttemptId,
        sale: (&SaleId, u32),
        terminal: Option<&str>,
        sale_total: Option<Centavos>,
    ) -> Vec<u8> {
        serde_json::to_vec(&PixRequestBody {
            valor: valor.get(),
            metodo: crate::domain::Means::Pix.as_str(),
            referencia: id.as_ref(),
            descricao: format!("Venda nº {} ({})", sale_number(sale.1), sale.0.as_ref()),
            terminal,
            venda: sale_total.map(|total| Venda {
                referencia: sale.0.as_ref(),
                total: total.get(),
            }),
        })
        .expect("a request body always serialises")
    }
}

/// The request body of a card at the card machine: the machine, what it offers first, and no
/// card (the customer's is at the machine).
#[derive(Serialize)]
pub(super) struct MachineRequestBody<'a> {
    valor: i64,
    maquininha: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    metodo: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parcelas: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parcelamento: Option<&'static str>,
    referencia: &'a str,
    descricao: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    terminal: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    venda: Option<Venda<'a>>,
}

impl MachineRequestBody<'_> {
    /// The body of a card-machine attempt (with `sale_total`, one part of a divided sale).
    pub fn bytes(
        valor: Centavos,
        maquininha: &str,
        plano: Option<CardPlan>,
        id: &AttemptId,
        sale: (&SaleId, u32),
        terminal: Option<&str>,
        sale_total: Option<Centavos>,
    ) -> Vec<u8> {
        serde_json::to_vec(&MachineRequestBody {
            valor: valor.get(),
            maquininha,
            metodo: plano.map(|p| p.method().as_str()),
            parcelas: plano.map(CardPlan::parcelas),
            parcelamento: plano.and_then(CardPlan::financing).map(|f| f.as_str()),
            referencia: id.as_ref(),
            descricao: format!("Venda nº {} ({})", sale_number(sale.1), sale.0.as_ref()),
            terminal,
            venda: sale_total.map(|total| Venda {
                referencia: sale.0.as_ref(),
                total: total.get(),
            }),
        })
        .expect("a request body always serialises")
    }
}

/// The body of a refund: its amount, its attempt id as `referencia` (so a lost answer can be
/// found among the payment's refunds) and the cashier's reason.
#[derive(Serialize)]
pub(super) struct RefundBody<'a> {
    valor: i64,
    referencia: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    motivo: Option<&'a str>,
}

impl RefundBody<'_> {
    /// The bytes of a refund attempt.
    pub fn bytes(valor: Centavos, id: &AttemptId, motivo: Option<&str>) -> Vec<u8> {
        serde_json::to_vec(&RefundBody {
            valor: valor.get(),
            referencia: id.as_ref(),
            motivo,
        })
        .expect("a refund body always serialises")
    }
}
