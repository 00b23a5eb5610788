//! The card machine's payment as the API answers it.

use super::{AwaitedHeadBody, RefundBody};
use crate::domain::Financing;
use crate::store::{MachineOrder, Refund};
use serde::Serialize;

/// A card-machine payment as `POST /pagamentos` (with `"maquininha"`) answers it first
/// (`aguardando`, the bytes every replay repeats) and `GET /pagamentos/{id}` reads it later.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[schema(as = PagamentoMaquininha)]
pub struct MachinePaymentBody {
    /// `pay_…`
    pub id: String,
    /// `aguardando`, `aprovado`, `recusado`, `cancelado` or `expirado`.
    pub status: &'static str,
    /// Always `maquininha`.
    pub metodo: &'static str,
    /// What every payment paid later says (amount, the request's words, key, time, till).
    #[serde(flatten)]
    pub head: AwaitedHeadBody,
    /// The order at the machine.
    pub maquininha: MachineDetail,
    /// `GET` only: its refunds, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estornos: Option<Vec<RefundBody>>,
}

/// The machine's side of a card-machine payment.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct MachineDetail {
    /// The machine (its provider's `terminal_id`).
    pub id: String,
    /// The provider's order id.
    pub pedido: String,
    /// The provider's word for the order now: `created` (sent, the machine has not taken it),
    /// `at_terminal` (on the machine's screen), `processed`, `failed`, `canceled`, `expired`.
    pub estado: String,
    /// Why it was declined or cancelled (the provider's `status_detail`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub motivo: Option<String>,
    /// `debito`, `credito` or `voucher` offered first, when the request named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metodo: Option<&'static str>,
    /// Installments offered (1: à vista), when the request named a method.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parcelas: Option<u8>,
    /// Who finances a parcelado: `loja` or `emissor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parcelamento: Option<&'static str>,
    /// How the customer paid, once paid: `debito`, `credito` or `voucher`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pago_com: Option<&'static str>,
    /// Installments paid in, once paid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parcelas_pagas: Option<u8>,
}

impl From<&MachineOrder> for MachinePaymentBody {
    fn from(o: &MachineOrder) -> Self {
        Self {
            id: o.head.id.to_string(),
            status: o.status.as_str(),
            metodo: "maquininha",
            head: AwaitedHeadBody::from(&o.head),
            maquininha: MachineDetail {
                id: o.maquininha.to_string(),
                pedido: o.order_id.clone(),
                estado: o.estado.clone(),
                motivo: o.motivo.clone(),
                metodo: o.plano.map(|p| p.method.as_str()),
                parcelas: o.plano.map(|p| p.parcelas),
                parcelamento: o.plano.and_then(|p| p.financing).map(Financing::as_str),
                pago_com: o.plano_pago.map(|p| p.method.as_str()),
                parcelas_pagas: o.plano_pago.map(|p| p.parcelas),
            },
            estornos: None,
        }
    }
}

impl MachinePaymentBody {
    /// An order with its refunds, as `GET /pagamentos/{id}` reads it.
    pub fn with_refunds(o: &MachineOrder, refunds: &[Refund]) -> Self {
        Self {
            estornos: Some(refunds.iter().map(RefundBody::from).collect()),
            ..Self::from(o)
        }
    }

    /// The bytes an order is answered with at this moment.
    pub fn bytes_of(o: &MachineOrder) -> Vec<u8> {
        serde_json::to_vec(&Self::from(o)).expect("an order always serialises")
    }
}
