//! Money: an amount in centavos, never a float.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Largest amount one payment may carry: R$ 1.000.000,00.
pub const MAX_VALOR_CENTAVOS: i64 = pagar_rules::MAX_CENTAVOS;

/// Why a `valor` is not an amount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    /// Absent or `null`.
    #[error("valor é obrigatório")]
    Missing,
    /// Zero or negative.
    #[error("valor deve ser maior que zero")]
    NotPositive,
    /// Above [`MAX_VALOR_CENTAVOS`].
    #[error("valor deve ser no máximo {MAX_VALOR_CENTAVOS} centavos")]
    TooLarge,
    /// A number with a fraction or an exponent (`1.5`, `100.0`).
    #[error("valor deve ser um inteiro de centavos, não um número com casas decimais")]
    Fractional,
    /// Not a number at all.
    #[error("valor deve ser um inteiro de centavos")]
    NotANumber,
}

/// An amount of money in centavos (BRL). Always positive and at most [`MAX_VALOR_CENTAVOS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "i64", into = "i64")]
pub struct Centavos(i64);

impl Centavos {
    /// Parses an amount from a JSON value: it must be an integer in `1..=MAX_VALOR_CENTAVOS`.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, AmountError> {
        match value {
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(v) => Self::new(v),
                None if n.is_u64() => Err(AmountError::TooLarge),
                None => Err(AmountError::Fractional),
            },
            serde_json::Value::Null => Err(AmountError::Missing),
            _ => Err(AmountError::NotANumber),
        }
    }

    /// Builds an amount from centavos, enforcing the range.
    pub fn new(v: i64) -> Result<Self, AmountError> {
        if v <= 0 {
            Err(AmountError::NotPositive)
        } else if v > MAX_VALOR_CENTAVOS {
            Err(AmountError::TooLarge)
        } else {
            Ok(Self(v))
        }
    }

    /// The amount in centavos.
    pub fn get(self) -> i64 {
        self.0
    }

    /// The amount as the API Pix and the BR Code write it: reais with two decimals, `"12.34"`.
    pub fn as_reais(self) -> String {
        pagar_rules::decimal::format(self.0)
    }
}

pagar_rules::i64_newtype!(Centavos, AmountError);

impl fmt::Display for Centavos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn valor_must_be_a_positive_integer_up_to_the_limit() {
        for bad in [
            json!(0),
            json!(-1),
            json!(1.5),
            json!(100.0),
            json!("100"),
            json!(100_000_001),
            json!(u64::MAX),
        ] {
            assert!(
                Centavos::from_json(&bad).is_err(),
                "{bad} should be rejected"
            );
        }
        assert_eq!(
            Centavos::from_json(&json!(100_000_000)).unwrap().get(),
            100_000_000
        );
    }
}
