//! A refund (estorno): its request, its identity and its outcome.

use super::request::{json_object, optional_text, required_valor, unknown_fields};
use super::{Centavos, FieldError};

/// A validated `POST /pagamentos/{id}/estornos` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRequest {
    /// Amount to pay back, in centavos: part of the payment or all of what is left.
    pub valor: Centavos,
    /// Why (free text the merchant keeps, e.g. "devolução").
    pub motivo: Option<String>,
    /// The client's own reference (the checkout app sends its attempt id).
    pub referencia: Option<String>,
}

impl RefundRequest {
    /// Validates a parsed JSON body. Every problem is reported, not just the first.
    pub fn from_json(body: &serde_json::Value) -> Result<Self, Vec<FieldError>> {
        let obj = json_object(body)?;
        let mut errors = Vec::new();
        let valor = required_valor(obj, &mut errors);
        let motivo = optional_text(obj, "motivo", &mut errors);
        let referencia = optional_text(obj, "referencia", &mut errors);
        unknown_fields(obj, &["valor", "motivo", "referencia"], &mut errors);
        match valor {
            Some(valor) if errors.is_empty() => Ok(Self {
                valor,
                motivo,
                referencia,
            }),
            _ => Err(errors),
        }
    }
}

/// A refund's id, `est_` and a UUIDv7 (time-ordered).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RefundId(String);

impl RefundId {
    /// A new, time-ordered id.
    pub fn new() -> Self {
        Self(format!("est_{}", uuid::Uuid::now_v7().simple()))
    }

    /// An id read back from the store.
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }
}

impl Default for RefundId {
    fn default() -> Self {
        Self::new()
    }
}

pagar_rules::text_newtype!(RefundId);

pagar_rules::words! {
    /// Where a refund stands. `pendente` only while its key is being executed: its amount is then
    /// held against the payment, so no concurrent refund can take it too.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum RefundStatus / UnknownRefundStatus("status de estorno desconhecido") {
        /// Amount held; the gateway has not answered yet.
        Pendente = "pendente",
        /// The gateway paid it back (answered 201).
        Aprovado = "aprovado",
        /// The gateway refused (answered 402); the amount is free again.
        Recusado = "recusado",
    }
}

impl RefundStatus {
    /// The HTTP status a finished refund is answered with (a pending one is never answered).
    pub fn http_status(self) -> u16 {
        match self {
            RefundStatus::Aprovado | RefundStatus::Pendente => 201,
            RefundStatus::Recusado => 402,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_refund_needs_a_positive_valor_and_nothing_unknown() {
        let ok = RefundRequest::from_json(&json!({"valor": 500, "motivo": "troca"})).unwrap();
        assert_eq!((ok.valor.get(), ok.motivo.as_deref()), (500, Some("troca")));
        for bad in [
            json!({}),
            json!({"valor": 0}),
            json!({"valor": 1.5}),
            json!({"valor": "10"}),
            json!({"valor": 10, "cartao": "tok_aprovado"}),
            json!({"valor": 10, "motivo": "a\u{0}b"}),
        ] {
            assert!(RefundRequest::from_json(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn statuses_round_trip() {
        for s in RefundStatus::ALL {
            assert_eq!(RefundStatus::parse(s.as_str()).unwrap(), s);
        }
    }
}
