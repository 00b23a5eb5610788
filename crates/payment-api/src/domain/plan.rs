//! How a card payment is taken: débito, crédito (à vista or parcelado) or voucher.
//!
//! The plan is part of the request body, so of its fingerprint: the same key sent with another
//! method or other installments is a different request (422), never a replay.

use super::{Centavos, FieldError};
use std::fmt;

use pagar_rules::Plan;
pub use pagar_rules::{CardMethod, Financing, MAX_PARCELAS};

/// A card payment's method and installments, valid for its amount: a [`Plan`] that
/// [`CardPlan::from_json`] or [`CardPlan::parse_stored`] accepted (its fields read through
/// `Deref`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CardPlan(Plan);

impl std::ops::Deref for CardPlan {
    type Target = Plan;

    fn deref(&self) -> &Plan {
        &self.0
    }
}

/// A stored plan no [`CardPlan`] accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plano de pagamento desconhecido: {0:?}")]
pub struct UnknownPlan(pub String);

impl CardPlan {
    /// The plan of a body's `metodo`, `parcelas` and `parcelamento`, for `valor`. `Ok(None)`: the
    /// body names no card method (no `metodo`, or the old `"cartao"`): a card charge à vista whose
    /// function the gateway decides. Every problem is reported.
    pub fn from_json(
        obj: &serde_json::Map<String, serde_json::Value>,
        valor: Option<Centavos>,
        errors: &mut Vec<FieldError>,
    ) -> Option<Self> {
        let before = errors.len();
        let method = match obj.get("metodo") {
            None | Some(serde_json::Value::Null) => None,
            Some(m) => match m.as_str() {
                Some("cartao") => None,
                Some("debito") => Some(CardMethod::Debito),
                Some("credito") => Some(CardMethod::Credito),
                Some("voucher") => Some(CardMethod::Voucher),
                _ => {
                    errors.push(FieldError::new(
                        "metodo",
                        "metodo deve ser \"debito\", \"credito\", \"voucher\", \"pix\" ou \"cartao\"",
                    ));
                    None
                }
            },
        };
        let parcelas = match obj.get("parcelas") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=12) => Some(n as u8),
                _ => {
                    errors.push(FieldError::new(
                        "parcelas",
                        format!("parcelas deve ser um número inteiro de 1 a {MAX_PARCELAS}"),
                    ));
                    None
                }
            },
        };
        let financing = match obj.get("parcelamento") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => match v.as_str().and_then(Financing::parse) {
                Some(f) => Some(f),
                None => {
                    errors.push(FieldError::new(
                        "parcelamento",
                        "parcelamento deve ser \"loja\" (sem juros) ou \"emissor\" (com juros)",
                    ));
                    None
                }
            },
        };
        if errors.len() > before {
            return None;
        }
        let n = parcelas.unwrap_or(1);
        match (method, n, financing) {
            (None, 1, None) if parcelas.is_none() => return None,
            (Some(CardMethod::Credito), 2.., None) => errors.push(FieldError::new(
                "parcelamento",
                "um crédito parcelado diz quem paga os juros: \"loja\" ou \"emissor\"",
            )),
            (Some(CardMethod::Credito), 1, Some(_)) => errors.push(FieldError::new(
                "parcelamento",
                "parcelamento só vale para crédito em 2 ou mais parcelas",
            )),
            (Some(CardMethod::Credito), _, _) => {}
            (None, _, _) => errors.push(FieldError::new(
                "metodo",
                "parcelas e parcelamento pedem \"metodo\": \"credito\"",
            )),
            (Some(m), _, _) if n > 1 || financing.is_some() => errors.push(FieldError::new(
                "parcelas",
                format!("{} é pago numa parcela só", m.as_str()),
            )),
            (Some(_), _, _) => {}
        }
        if let Some(valor) = valor {
            if n > 1 && installments(valor, n).is_none() {
                errors.push(FieldError::new(
                    "parcelas",
                    format!(
                        "{valor} centavos não se dividem em {n} parcelas de pelo menos 1 centavo"
                    ),
                ));
            }
        }
        (errors.len() == before).then(|| {
            Self(Plan {
                method: method.expect("checked above"),
                parcelas: n,
                financing,
            })
        })
    }

    /// Parses [`Plan::as_stored`] (`debito`, `credito`, `voucher`, or
    /// `credito:<n>:<loja|emissor>`: the till's form too).
    pub fn parse_stored(s: &str) -> Result<Self, UnknownPlan> {
        Plan::parse_stored(s)
            .map(Self)
            .ok_or_else(|| UnknownPlan(s.to_string()))
    }
}

impl fmt::Display for CardPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_stored())
    }
}

/// The installments of `total` in `n` parts, rounded up to the centavo, the last absorbing the
/// rounding so they sum exactly to `total`: `(each, last)` ([`pagar_rules::installments`], the
/// till's arithmetic too). `None` when the last would not be at least one centavo.
pub fn installments(total: Centavos, n: u8) -> Option<(Centavos, Centavos)> {
    let (each, last) = pagar_rules::installments(total.get(), n)?;
    Some((
        Centavos::new(each).expect("between 1 and total"),
        Centavos::new(last).expect("positive and at most total"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(body: serde_json::Value) -> Result<Option<CardPlan>, Vec<FieldError>> {
        let mut errors = Vec::new();
        let obj = body.as_object().unwrap();
        let valor = obj.get("valor").and_then(|v| Centavos::from_json(v).ok());
        let p = CardPlan::from_json(obj, valor, &mut errors);
        if errors.is_empty() {
            Ok(p)
        } else {
            Err(errors)
        }
    }

    #[test]
    fn every_method_and_plan_round_trips_through_its_stored_form() {
        for body in [
            json!({"metodo": "debito"}),
            json!({"metodo": "credito"}),
            json!({"metodo": "credito", "parcelas": 1}),
            json!({"metodo": "voucher"}),
            json!({"valor": 10000, "metodo": "credito", "parcelas": 3, "parcelamento": "loja"}),
            json!({"valor": 10000, "metodo": "credito", "parcelas": 12, "parcelamento": "emissor"}),
        ] {
            let p = plan(body.clone()).unwrap().expect("a plan");
            assert_eq!(CardPlan::parse_stored(&p.as_stored()), Ok(p), "{body}");
        }
        assert_eq!(plan(json!({})).unwrap(), None);
        assert_eq!(plan(json!({"metodo": "cartao"})).unwrap(), None);
    }

    #[test]
    fn a_plan_that_does_not_fit_its_method_or_amount_is_refused_with_the_field() {
        for (body, field) in [
            (json!({"metodo": "boleto"}), "metodo"),
            (json!({"metodo": "credito", "parcelas": 0}), "parcelas"),
            (json!({"metodo": "credito", "parcelas": 13}), "parcelas"),
            (json!({"metodo": "credito", "parcelas": 2.5}), "parcelas"),
            (json!({"metodo": "credito", "parcelas": "3"}), "parcelas"),
            (json!({"metodo": "credito", "parcelas": 3}), "parcelamento"),
            (
                json!({"metodo": "credito", "parcelamento": "loja"}),
                "parcelamento",
            ),
            (
                json!({"metodo": "credito", "parcelas": 3, "parcelamento": "banco"}),
                "parcelamento",
            ),
            (
                json!({"metodo": "debito", "parcelas": 3, "parcelamento": "loja"}),
                "parcelas",
            ),
            (
                json!({"metodo": "voucher", "parcelas": 2, "parcelamento": "loja"}),
                "parcelas",
            ),
            (json!({"parcelas": 3, "parcelamento": "loja"}), "metodo"),
            (
                json!({"valor": 3, "metodo": "credito", "parcelas": 4, "parcelamento": "loja"}),
                "parcelas",
            ),
        ] {
            let errors = plan(body.clone()).unwrap_err();
            assert_eq!(errors[0].campo, field, "{body}");
        }
    }

    #[test]
    fn installments_sum_to_the_total_for_every_total_and_plan() {
        for t in 1..=5_000 {
            for n in 1..=MAX_PARCELAS {
                let total = Centavos::new(t).unwrap();
                match installments(total, n) {
                    Some((each, last)) => {
                        assert_eq!(each.get() * i64::from(n - 1) + last.get(), t);
                        assert!(last.get() > 0 && last <= each, "{t} in {n}");
                    }
                    None => assert!(n > 1 && t <= i64::from(n - 1).pow(2), "{t} in {n}"),
                }
            }
        }
        let (each, last) = installments(Centavos::new(10_000).unwrap(), 3).unwrap();
        assert_eq!((each.get(), last.get()), (3334, 3332));
    }
}
