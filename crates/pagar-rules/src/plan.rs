//! Card plans: how a card pays, and the installments of a parcelado.

/// Most installments a plan may have.
pub const MAX_PARCELAS: u8 = 12;

/// What the card pays with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CardMethod {
    /// Débito: from the account, at once.
    Debito,
    /// Crédito: à vista (1 parcela) or parcelado.
    Credito,
    /// Meal or food voucher (VA/VR): only a voucher card pays it.
    Voucher,
}

impl CardMethod {
    /// Every method.
    pub const ALL: [CardMethod; 3] = [CardMethod::Debito, CardMethod::Credito, CardMethod::Voucher];

    /// The wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            CardMethod::Debito => "debito",
            CardMethod::Credito => "credito",
            CardMethod::Voucher => "voucher",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// Who pays for the installments of a parcelado: the store's choice in its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Financing {
    /// Parcelado lojista, "sem juros": the store takes the cost; the buyer's installments sum to
    /// the sale's amount.
    Loja,
    /// Parcelado emissor, "com juros": the buyer's bank finances it and sets the installments;
    /// the store receives the sale's amount.
    Emissor,
}

impl Financing {
    /// The wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Financing::Loja => "loja",
            Financing::Emissor => "emissor",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        [Financing::Loja, Financing::Emissor]
            .into_iter()
            .find(|f| f.as_str() == s)
    }
}

/// A card plan's shape: a method, its installments (1 unless a crédito parcelado) and who
/// finances a parcelado. Whether it fits an amount is [`installments`]'s to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Plan {
    /// The method.
    pub method: CardMethod,
    /// Installments: 1, or 2..=[`MAX_PARCELAS`] for a crédito parcelado.
    pub parcelas: u8,
    /// Who finances a parcelado (`None` for one payment).
    pub financing: Option<Financing>,
}

impl Plan {
    /// One payment by `method`.
    pub const fn single(method: CardMethod) -> Self {
        Self {
            method,
            parcelas: 1,
            financing: None,
        }
    }

    /// The stored form: `debito`, `credito`, `voucher`, or `credito:<n>:<loja|emissor>`.
    pub fn as_stored(self) -> String {
        match self.financing {
            Some(f) => format!("{}:{}:{}", self.method.as_str(), self.parcelas, f.as_str()),
            None => self.method.as_str().to_string(),
        }
    }

    /// Parses [`Plan::as_stored`]: only a crédito is parcelado, in 2..=[`MAX_PARCELAS`].
    pub fn parse_stored(s: &str) -> Option<Self> {
        let mut parts = s.split(':');
        let method = CardMethod::parse(parts.next()?)?;
        match (parts.next(), parts.next(), parts.next()) {
            (None, None, None) => Some(Self::single(method)),
            (Some(n), Some(f), None) if method == CardMethod::Credito => {
                let parcelas = n.parse().ok().filter(|n| (2..=MAX_PARCELAS).contains(n))?;
                Some(Self {
                    method,
                    parcelas,
                    financing: Some(Financing::parse(f)?),
                })
            }
            _ => None,
        }
    }
}

/// The installments of `total` centavos in `n`: each rounded up to the centavo, the last
/// absorbing the rounding so they sum exactly to `total` (R$ 100,00 in 3: `33,34 + 33,34 +
/// 33,32`). `(each, last)`; `None` when the last would not be at least a centavo.
pub fn installments(total: i64, n: u8) -> Option<(i64, i64)> {
    let n = i64::from(n.max(1));
    let each = (total + n - 1) / n;
    let last = total - each * (n - 1);
    (total > 0 && last > 0).then_some((each, last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_hundred_reais_in_three_is_two_of_33_34_and_one_of_33_32() {
        assert_eq!(installments(10_000, 3), Some((3_334, 3_332)));
        assert_eq!(installments(10_000, 4), Some((2_500, 2_500)));
        assert_eq!(installments(5, 12), None);
        assert_eq!(installments(12, 12), Some((1, 1)));
    }

    #[test]
    fn every_plan_round_trips_through_its_stored_form_and_nothing_else_parses() {
        let mut plans: Vec<Plan> = CardMethod::ALL.into_iter().map(Plan::single).collect();
        for n in 2..=MAX_PARCELAS {
            for f in [Financing::Loja, Financing::Emissor] {
                plans.push(Plan {
                    method: CardMethod::Credito,
                    parcelas: n,
                    financing: Some(f),
                });
            }
        }
        for p in plans {
            assert_eq!(Plan::parse_stored(&p.as_stored()), Some(p));
        }
        for bad in [
            "",
            "cartao",
            "credito:1:loja",
            "credito:13:loja",
            "debito:2:loja",
            "credito:3:banco",
            "credito:3:loja:x",
        ] {
            assert_eq!(Plan::parse_stored(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn installments_sum_to_the_total_and_differ_by_less_than_n_centavos(
            total in prop_oneof![1i64..=200, 1i64..=crate::MAX_CENTAVOS], n in 1u8..=MAX_PARCELAS
        ) {
            match installments(total, n) {
                Some((each, last)) => {
                    prop_assert_eq!(each * (i64::from(n) - 1) + last, total);
                    prop_assert!(last >= 1 && last <= each);
                    prop_assert!(each - last < i64::from(n));
                }
                // Only a total too small for n parts rounded up: at most n·(n − 1) centavos.
                None => prop_assert!(n > 1 && total <= i64::from(n) * (i64::from(n) - 1)),
            }
        }
    }
}
