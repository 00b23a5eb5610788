//! Money: a positive amount ([`Centavos`]), a sum of amounts that is never negative ([`Total`]:
//! totals, balances, what is left) and a signed difference of two sums ([`Net`]: a closing's
//! net). No bare integer carries money.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign};

/// Why a text is not an amount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    /// Nothing typed.
    #[error("informe o valor")]
    Empty,
    /// Zero or negative.
    #[error("o valor deve ser maior que zero")]
    NotPositive,
    /// Over R$ 1.000.000,00 (or too many digits to count).
    #[error("o valor deve ser no máximo R$ 1.000.000,00")]
    TooLarge,
    /// Not written as `1.234,56`.
    #[error("valor inválido: {0:?} (use o formato 1.234,56)")]
    Format(String),
}

/// An amount in centavos (BRL). Positive, at most R$ 1.000.000,00.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "i64", into = "i64")]
pub struct Centavos(i64);

impl Centavos {
    /// Largest amount a payment may carry.
    pub const MAX: i64 = pagar_rules::MAX_CENTAVOS;

    /// An amount of `v` centavos, `1..=MAX`.
    pub fn new(v: i64) -> Result<Self, AmountError> {
        if v <= 0 {
            Err(AmountError::NotPositive)
        } else if v > Self::MAX {
            Err(AmountError::TooLarge)
        } else {
            Ok(Self(v))
        }
    }

    /// Parses what a cashier types: `1234,56`, `1.234,56`, `R$ 10`, `10,5`. At most two decimals.
    pub fn parse_brl(input: &str) -> Result<Self, AmountError> {
        Self::new(brl_centavos(input)?)
    }

    /// The amount in centavos.
    pub fn get(self) -> i64 {
        self.0
    }
}

/// Centavos of what a cashier typed, zero included (see [`Centavos::parse_brl`]).
fn brl_centavos(input: &str) -> Result<i64, AmountError> {
    let s = input.trim().trim_start_matches("R$").trim();
    if s.is_empty() {
        return Err(AmountError::Empty);
    }
    let invalid = || AmountError::Format(input.to_string());
    let (int, frac) = match s.split_once(',') {
        Some((i, f)) => (i, Some(f)),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    // Dots only group thousands: "1.234" is a thousand and more, "10.00" is refused.
    let mut groups = int.split('.');
    let head = groups.next().unwrap_or("");
    let grouped_ok = digits(head) && groups.all(|g| g.len() == 3 && digits(g));
    let frac = frac.unwrap_or("00");
    if !grouped_ok || !digits(frac) || frac.len() > 2 || (int.contains('.') && head.len() > 3) {
        return Err(invalid());
    }
    let int: String = int.chars().filter(|c| *c != '.').collect();
    let reais: i64 = int.parse().map_err(|_| AmountError::TooLarge)?;
    let cents: i64 = format!("{frac:0<2}").parse().unwrap_or(0);
    let total = reais
        .checked_mul(100)
        .and_then(|v| v.checked_add(cents))
        .ok_or(AmountError::TooLarge)?;
    Ok(total)
}

pagar_rules::i64_newtype!(Centavos, AmountError);

/// Formats centavos the Brazilian way: `R$ 1.234,56`.
pub fn format_brl(centavos: i64) -> String {
    let sign = if centavos < 0 { "-" } else { "" };
    let c = centavos.unsigned_abs();
    let reais = (c / 100).to_string();
    let mut grouped = String::new();
    for (i, ch) in reais.chars().enumerate() {
        if i > 0 && (reais.len() - i).is_multiple_of(3) {
            grouped.push('.');
        }
        grouped.push(ch);
    }
    format!("{sign}R$ {grouped},{:02}", c % 100)
}

impl fmt::Display for Centavos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_brl(self.0))
    }
}

/// A sum of amounts in centavos: a total, a balance, what is left to refund. Never negative: a
/// difference that would be is refused ([`Total::checked_sub`]) or floored
/// ([`Total::saturating_sub`]) by the caller's choice.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(try_from = "i64", into = "i64")]
pub struct Total(i64);

/// A total that would be negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("um total não pode ser negativo: {0}")]
pub struct NegativeTotal(pub i64);

impl Total {
    /// Nothing.
    pub const ZERO: Total = Total(0);

    /// A total of `v` centavos, `v >= 0`.
    pub fn new(v: i64) -> Result<Self, NegativeTotal> {
        if v < 0 {
            Err(NegativeTotal(v))
        } else {
            Ok(Self(v))
        }
    }

    /// The total in centavos.
    pub fn get(self) -> i64 {
        self.0
    }

    /// `self - other`, if that is not negative.
    pub fn checked_sub(self, other: impl Into<Total>) -> Option<Total> {
        Total::new(self.0 - other.into().0).ok()
    }

    /// `self - other`, or nothing when `other` is more.
    pub fn saturating_sub(self, other: impl Into<Total>) -> Total {
        self.checked_sub(other).unwrap_or(Total::ZERO)
    }

    /// Parses what a cashier types, like [`Centavos::parse_brl`], zero included (an empty drawer
    /// counted is `0,00`).
    pub fn parse_brl(input: &str) -> Result<Self, AmountError> {
        Ok(Self(brl_centavos(input)?))
    }

    /// Whether it is nothing.
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

pagar_rules::i64_newtype!(Total, NegativeTotal);

impl From<Centavos> for Total {
    fn from(c: Centavos) -> Total {
        Total(c.get())
    }
}

impl<T: Into<Total>> Add<T> for Total {
    type Output = Total;
    fn add(self, other: T) -> Total {
        Total(self.0.saturating_add(other.into().0))
    }
}

impl<T: Into<Total>> AddAssign<T> for Total {
    fn add_assign(&mut self, other: T) {
        *self = *self + other;
    }
}

impl<T: Into<Total>> Sum<T> for Total {
    fn sum<I: Iterator<Item = T>>(iter: I) -> Total {
        iter.fold(Total::ZERO, |acc, v| acc + v)
    }
}

impl PartialEq<Centavos> for Total {
    fn eq(&self, other: &Centavos) -> bool {
        self.0 == other.get()
    }
}

impl PartialOrd<Centavos> for Total {
    fn partial_cmp(&self, other: &Centavos) -> Option<std::cmp::Ordering> {
        self.0.partial_cmp(&other.get())
    }
}

impl fmt::Display for Total {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_brl(self.0))
    }
}

/// What came in less what went out: a closing's net, which refunds made elsewhere can make
/// negative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Net(i64);

impl Net {
    /// `incoming` less every total in `outgoing`.
    pub fn of(incoming: Total, outgoing: &[Total]) -> Net {
        Net(outgoing
            .iter()
            .fold(incoming.get(), |acc, t| acc.saturating_sub(t.get())))
    }

    /// A net of `centavos` (negative: more went out than came in).
    pub fn new(centavos: i64) -> Net {
        Net(centavos)
    }

    /// The net in centavos.
    pub fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_brl(self.0))
    }
}

/// How many of something (attempts in one state, a kind of drawer movement) and their sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Tally {
    /// How many.
    pub count: usize,
    /// Their amounts.
    pub centavos: Total,
}

impl Tally {
    /// Counts one more of `valor`.
    pub fn add(&mut self, valor: Centavos) {
        self.count += 1;
        self.centavos += valor;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(v: i64) -> Centavos {
        Centavos::new(v).unwrap()
    }

    #[test]
    fn a_total_sums_amounts_and_is_never_negative() {
        let t: Total = [c(150), c(250)].into_iter().sum();
        assert_eq!(t.get(), 400);
        assert_eq!(t.checked_sub(c(400)), Some(Total::ZERO));
        assert_eq!(t.checked_sub(c(401)), None);
        assert_eq!(t.saturating_sub(c(1000)), Total::ZERO);
        assert!(Total::new(-1).is_err());
        assert!(serde_json::from_str::<Total>("-5").is_err());
        assert_eq!(serde_json::to_string(&(t + c(5))).unwrap(), "405");
        assert_eq!(t.to_string(), "R$ 4,00");
    }

    #[test]
    fn a_net_may_be_negative_and_says_so() {
        let net = Net::of(Total::new(1000).unwrap(), &[Total::new(1500).unwrap()]);
        assert_eq!(net.get(), -500);
        assert_eq!(net.to_string(), "-R$ 5,00");
    }
}
