//! The body of `POST /pagamentos`, validated.

use super::{CardPlan, CardToken, Centavos, SaleRef, TerminalId};
use serde::Serialize;

/// What every `POST /pagamentos` body asks, whatever means pays it: the amount, the client's
/// words for it, the till, and the part of a divided sale it is. Read once for every means
/// ([`PaymentAsk::from_json`]); each means' request adds its own fields beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentAsk {
    /// Amount in centavos.
    pub valor: Centavos,
    /// Free text (on statements; a Pix shows it to the payer).
    pub descricao: Option<String>,
    /// The client's own reference (the checkout app sends its attempt id).
    pub referencia: Option<String>,
    /// The till that sent it, when it says.
    pub terminal: Option<TerminalId>,
    /// The sale this payment is one tender of, when the till pays a sale in parts.
    pub venda: Option<SaleRef>,
}

impl PaymentAsk {
    /// The fields [`from_json`](Self::from_json) reads.
    pub const FIELDS: [&'static str; 5] = ["valor", "descricao", "referencia", "terminal", "venda"];

    /// Reads the fields every means shares, each problem pushed to `errors`. `None` exactly when
    /// `valor` is missing or bad (a field after it that is bad is reported and left out).
    pub(crate) fn from_json(
        obj: &serde_json::Map<String, serde_json::Value>,
        errors: &mut Vec<FieldError>,
    ) -> Option<PaymentAsk> {
        let valor = required_valor(obj, errors);
        let descricao = optional_text(obj, "descricao", errors);
        let referencia = optional_text(obj, "referencia", errors);
        let terminal = optional_terminal(obj, errors);
        let venda = SaleRef::from_json(obj, valor, errors);
        Some(PaymentAsk {
            valor: valor?,
            descricao,
            referencia,
            terminal,
            venda,
        })
    }
}

/// One error for each field of `obj` that neither [`PaymentAsk`] nor the means (`own`) reads.
pub(crate) fn unknown_beside_ask(
    obj: &serde_json::Map<String, serde_json::Value>,
    own: &[&str],
    errors: &mut Vec<FieldError>,
) {
    let known: Vec<&str> = PaymentAsk::FIELDS.iter().chain(own).copied().collect();
    unknown_fields(obj, &known, errors);
}

/// A validated `POST /pagamentos` body for a card (a token).
#[derive(Debug, Clone)]
pub struct PaymentRequest {
    /// What every payment asks.
    pub ask: PaymentAsk,
    /// Card token.
    pub cartao: CardToken,
    /// Débito, crédito (à vista or parcelado) or voucher; `None` when the body names no method
    /// (a card charge à vista, as the first version of this API had it).
    pub plano: Option<CardPlan>,
    /// False: authorize only (`"captura": false`); the amount is taken by a later
    /// `POST /pagamentos/{id}/captura` or released by `/desfazimento`. Absent: captured at once.
    pub captura: bool,
}
/// Longest `descricao` and `referencia`, in characters.
pub const MAX_TEXT_LEN: usize = 255;

impl PaymentRequest {
    /// Validates a parsed JSON body. Every problem is reported, not just the first.
    pub fn from_json(body: &serde_json::Value) -> Result<Self, Vec<FieldError>> {
        let obj = json_object(body)?;
        let mut errors = Vec::new();
        let ask = PaymentAsk::from_json(obj, &mut errors);
        let valor = ask.as_ref().map(|a| a.valor);
        let cartao = match obj.get("cartao") {
            None | Some(serde_json::Value::Null) => Err("cartao é obrigatório".to_string()),
            Some(serde_json::Value::String(s)) => CardToken::parse(s).map_err(|e| e.to_string()),
            Some(_) => Err("cartao deve ser um texto".to_string()),
        }
        .map_err(|e| errors.push(FieldError::new("cartao", e)))
        .ok();
        // A card payment may name its method and installments; a Pix goes to its own operation.
        let plano = CardPlan::from_json(obj, valor, &mut errors);
        let captura = match obj.get("captura") {
            None | Some(serde_json::Value::Null) => true,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(_) => {
                errors.push(FieldError::new("captura", "captura deve ser true ou false"));
                true
            }
        };
        let own = ["cartao", "metodo", "parcelas", "parcelamento", "captura"];
        unknown_beside_ask(obj, &own, &mut errors);
        match (ask, cartao) {
            (Some(ask), Some(cartao)) if errors.is_empty() => Ok(Self {
                ask,
                cartao,
                plano,
                captura,
            }),
            _ => Err(errors),
        }
    }
}

/// The body as a JSON object, or the one error that it is not.
pub(crate) fn json_object(
    body: &serde_json::Value,
) -> Result<&serde_json::Map<String, serde_json::Value>, Vec<FieldError>> {
    body.as_object()
        .ok_or_else(|| vec![FieldError::new("", "o corpo deve ser um objeto JSON")])
}

/// `valor`, required: a positive integer of centavos.
pub(crate) fn required_valor(
    obj: &serde_json::Map<String, serde_json::Value>,
    errors: &mut Vec<FieldError>,
) -> Option<Centavos> {
    match obj.get("valor") {
        None => Err(super::AmountError::Missing),
        Some(v) => Centavos::from_json(v),
    }
    .map_err(|e| errors.push(FieldError::new("valor", e.to_string())))
    .ok()
}

/// `terminal`, optional: a till id.
pub(crate) fn optional_terminal(
    obj: &serde_json::Map<String, serde_json::Value>,
    errors: &mut Vec<FieldError>,
) -> Option<TerminalId> {
    match obj.get("terminal") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => TerminalId::parse(s)
            .map_err(|e| errors.push(FieldError::new("terminal", e.to_string())))
            .ok(),
        Some(_) => {
            errors.push(FieldError::new("terminal", "terminal deve ser um texto"));
            None
        }
    }
}

/// One error for each field of `obj` not in `known`.
pub(crate) fn unknown_fields(
    obj: &serde_json::Map<String, serde_json::Value>,
    known: &[&str],
    errors: &mut Vec<FieldError>,
) {
    for k in obj.keys().filter(|k| !known.contains(&k.as_str())) {
        errors.push(FieldError::new(k.clone(), "campo desconhecido"));
    }
}

/// An optional free-text field (`descricao`, `referencia`, a refund's `motivo`): absent or null,
/// or a text of at most [`MAX_TEXT_LEN`] characters with no control character. Control characters
/// (NUL above all: PostgreSQL cannot store it in text) are refused here, before any charge, so
/// that no request can charge and then fail to be stored.
pub(crate) fn optional_text(
    obj: &serde_json::Map<String, serde_json::Value>,
    name: &'static str,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let problem = match obj.get(name) {
        None | Some(serde_json::Value::Null) => return None,
        Some(serde_json::Value::String(s)) if s.chars().any(char::is_control) => {
            format!("{name} não pode ter caracteres de controle (como \\u0000)")
        }
        Some(serde_json::Value::String(s)) if s.chars().count() <= MAX_TEXT_LEN => {
            return Some(s.clone())
        }
        Some(serde_json::Value::String(_)) => {
            format!("{name} deve ter no máximo {MAX_TEXT_LEN} caracteres")
        }
        Some(_) => format!("{name} deve ser um texto"),
    };
    errors.push(FieldError::new(name, problem));
    None
}

/// One invalid field of a request body.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// The field's name (empty for the body as a whole).
    pub campo: String,
    /// What is wrong with it, in pt-BR.
    pub erro: String,
}

impl FieldError {
    /// An error on one field.
    pub fn new(campo: impl Into<String>, erro: impl Into<String>) -> Self {
        Self {
            campo: campo.into(),
            erro: erro.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unknown_card_token_is_a_validation_error() {
        let err = PaymentRequest::from_json(&json!({"valor": 100, "cartao": "tok_qualquer"}))
            .unwrap_err();
        assert_eq!(err[0].campo, "cartao");
    }

    #[test]
    fn the_articles_body_is_a_valid_request() {
        let req =
            PaymentRequest::from_json(&json!({"valor": 100, "cartao": "tok_aprovado"})).unwrap();
        assert_eq!(req.ask.valor.get(), 100);
        assert_eq!(req.cartao, CardToken::Aprovado);
    }
}
