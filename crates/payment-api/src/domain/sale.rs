//! The sale a payment is one tender of ("pagamento misto"): the till's reference for it and its
//! total. The server keeps the sale and refuses a tender that would take what its tenders hold
//! above that total.

use super::request::MAX_TEXT_LEN;
use super::{Centavos, FieldError};

/// `venda` of a request: the sale this payment is a tender of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleRef {
    /// The till's id of the sale (1–255 characters, no control character), unique per merchant
    /// and terminal.
    pub referencia: String,
    /// The sale's total.
    pub total: Centavos,
}

impl SaleRef {
    /// `venda`, optional: `{"referencia": "…", "total": <centavos>}`, with `valor` (the tender)
    /// no more than the total. Every problem is reported.
    pub fn from_json(
        obj: &serde_json::Map<String, serde_json::Value>,
        valor: Option<Centavos>,
        errors: &mut Vec<FieldError>,
    ) -> Option<Self> {
        let venda = match obj.get("venda") {
            None | Some(serde_json::Value::Null) => return None,
            Some(serde_json::Value::Object(v)) => v,
            Some(_) => {
                errors.push(FieldError::new(
                    "venda",
                    "venda deve ser um objeto {\"referencia\", \"total\"}",
                ));
                return None;
            }
        };
        let before = errors.len();
        let referencia = match venda.get("referencia") {
            Some(serde_json::Value::String(s))
                if !s.is_empty()
                    && s.chars().count() <= MAX_TEXT_LEN
                    && !s.chars().any(char::is_control) =>
            {
                Some(s.clone())
            }
            _ => {
                errors.push(FieldError::new(
                    "venda.referencia",
                    format!("venda.referencia deve ser um texto de 1 a {MAX_TEXT_LEN} caracteres, sem caracteres de controle"),
                ));
                None
            }
        };
        let total = match venda.get("total") {
            None => {
                errors.push(FieldError::new("venda.total", "venda.total é obrigatório"));
                None
            }
            Some(v) => Centavos::from_json(v)
                .map_err(|e| errors.push(FieldError::new("venda.total", format!("venda.{e}"))))
                .ok(),
        };
        for k in venda.keys().filter(|k| *k != "referencia" && *k != "total") {
            errors.push(FieldError::new(format!("venda.{k}"), "campo desconhecido"));
        }
        if let (Some(total), Some(valor)) = (total, valor) {
            if valor > total {
                errors.push(FieldError::new(
                    "valor",
                    format!(
                        "o pagamento ({valor} centavos) passa do total da venda ({total} centavos)"
                    ),
                ));
            }
        }
        match (referencia, total) {
            (Some(referencia), Some(total)) if errors.len() == before => {
                Some(Self { referencia, total })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sale(body: serde_json::Value) -> (Option<SaleRef>, Vec<FieldError>) {
        let mut errors = Vec::new();
        let obj = body.as_object().unwrap();
        let valor = obj.get("valor").and_then(|v| Centavos::from_json(v).ok());
        (SaleRef::from_json(obj, valor, &mut errors), errors)
    }

    #[test]
    fn a_tender_names_its_sale_and_may_not_be_more_than_its_total() {
        let (s, e) =
            sale(json!({"valor": 5000, "venda": {"referencia": "venda-1", "total": 15000}}));
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(s.unwrap().total.get(), 15000);
        assert_eq!(sale(json!({"valor": 5000})).0, None);
        for (body, field) in [
            (json!({"valor": 5000, "venda": "venda-1"}), "venda"),
            (
                json!({"valor": 5000, "venda": {"total": 15000}}),
                "venda.referencia",
            ),
            (
                json!({"valor": 5000, "venda": {"referencia": "", "total": 15000}}),
                "venda.referencia",
            ),
            (
                json!({"valor": 5000, "venda": {"referencia": "v"}}),
                "venda.total",
            ),
            (
                json!({"valor": 5000, "venda": {"referencia": "v", "total": 0}}),
                "venda.total",
            ),
            (
                json!({"valor": 5000, "venda": {"referencia": "v", "total": 15000, "x": 1}}),
                "venda.x",
            ),
            (
                json!({"valor": 20000, "venda": {"referencia": "v", "total": 15000}}),
                "valor",
            ),
        ] {
            let (s, e) = sale(body.clone());
            assert_eq!(s, None, "{body}");
            assert_eq!(e[0].campo, field, "{body}: {e:?}");
        }
    }
}
