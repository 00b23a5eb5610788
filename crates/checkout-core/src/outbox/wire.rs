//! The bytes an attempt sends: made once, when the attempt is stored, and never again.

use crate::domain::{
    sale_number, AttemptId, CardMethod, CardPlan, CardToken, Centavos, Means, SaleId,
};
use serde::Serialize;

/// The request body of a payment the payment API receives, for every means: a card (`cartao`),
/// a Pix (`"metodo": "pix"`, no card) or a card at the machine (`maquininha`, no card: the
/// customer's is at the machine). Field order is fixed, so the bytes are too.
#[derive(Serialize)]
pub(super) struct PaymentBody<'a> {
    valor: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cartao: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    maquininha: Option<&'a str>,
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
    /// `false` for a card part of a divided sale (and every card payment when the store
    /// confirms after the receipt): authorized now, captured once the sale is paid and its
    /// receipt shown, undone if it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    captura: Option<bool>,
}

/// `venda` of a part of a divided sale: the sale it is part of and the sale's total, which the
/// server holds its parts to.
#[derive(Serialize)]
struct Venda<'a> {
    referencia: &'a str,
    total: i64,
}

impl<'a> PaymentBody<'a> {
    /// What every payment says: its amount, its attempt id as `referencia` (so a lost answer can
    /// be found by it), the sale's number and id in `descricao`, the till as `terminal`, and
    /// with `sale_total` the divided sale it is a part of.
    pub fn new(
        valor: Centavos,
        id: &'a AttemptId,
        sale: (&'a SaleId, u32),
        terminal: Option<&'a str>,
        sale_total: Option<Centavos>,
    ) -> Self {
        PaymentBody {
            valor: valor.get(),
            cartao: None,
            maquininha: None,
            metodo: None,
            parcelas: None,
            parcelamento: None,
            referencia: id.as_ref(),
            descricao: format!("Venda nº {} ({})", sale_number(sale.1), sale.0.as_ref()),
            terminal,
            venda: sale_total.map(|total| Venda {
                referencia: sale.0.as_ref(),
                total: total.get(),
            }),
            captura: None,
        }
    }

    /// A card's: its token and plan (`metodo`, and for crédito `parcelas` and a parcelado's
    /// `parcelamento`); authorized only (`"captura": false`) when asked or a part of a sale.
    pub fn card(self, cartao: &'a CardToken, plano: Option<CardPlan>, authorize: bool) -> Vec<u8> {
        let captura = (authorize || self.venda.is_some()).then_some(false);
        PaymentBody {
            cartao: Some(cartao.as_ref()),
            parcelas: plano
                .filter(|p| p.method == CardMethod::Credito)
                .map(|p| p.parcelas),
            captura,
            ..self.planned(plano)
        }
        .bytes()
    }

    /// A Pix's: `"metodo": "pix"` and no card.
    pub fn pix(self) -> Vec<u8> {
        PaymentBody {
            metodo: Some(Means::Pix.as_str()),
            ..self
        }
        .bytes()
    }

    /// A card at the machine's: the machine, and the plan it offers first (none: the customer
    /// chooses there).
    pub fn machine(self, maquininha: &'a str, plano: Option<CardPlan>) -> Vec<u8> {
        PaymentBody {
            maquininha: Some(maquininha),
            parcelas: plano.map(|p| p.parcelas),
            ..self.planned(plano)
        }
        .bytes()
    }

    fn planned(self, plano: Option<CardPlan>) -> Self {
        PaymentBody {
            metodo: plano.map(|p| p.method.as_str()),
            parcelamento: plano.and_then(|p| p.financing).map(|f| f.as_str()),
            ..self
        }
    }

    fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a request body always serialises")
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
