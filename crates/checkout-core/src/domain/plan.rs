//! How a card pays: débito, crédito à vista or parcelado, voucher — chosen by the cashier after
//! the amount, sent in the request (so in its fingerprint) and printed on the receipt.

use super::Centavos;
use serde::{Serialize, Serializer};
use std::fmt;

use pagar_rules::Plan;
pub use pagar_rules::{CardMethod, Financing, MAX_PARCELAS};

/// A card plan the cashier cannot choose.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidPlan(pub String);

/// A card payment's method and installments: a [`Plan`] the cashier may choose (its fields
/// and stored form are the plan's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CardPlan(Plan);

impl std::ops::Deref for CardPlan {
    type Target = Plan;

    fn deref(&self) -> &Plan {
        &self.0
    }
}

impl CardPlan {
    /// Débito.
    pub const DEBITO: CardPlan = CardPlan::single(CardMethod::Debito);
    /// Crédito à vista.
    pub const CREDITO: CardPlan = CardPlan::single(CardMethod::Credito);
    /// Voucher.
    pub const VOUCHER: CardPlan = CardPlan::single(CardMethod::Voucher);

    const fn single(method: CardMethod) -> Self {
        Self(Plan::single(method))
    }

    /// Crédito parcelado in `parcelas` (2–12) installments of `valor`, financed as `financing`.
    /// Refused when `valor` does not split into that many installments of at least a centavo.
    pub fn parcelado(
        valor: Centavos,
        parcelas: u8,
        financing: Financing,
    ) -> Result<Self, InvalidPlan> {
        if !(2..=MAX_PARCELAS).contains(&parcelas) {
            return Err(InvalidPlan(format!(
                "parcelado é de 2 a {MAX_PARCELAS} parcelas, não {parcelas}"
            )));
        }
        if installments(valor, parcelas).is_none() {
            return Err(InvalidPlan(format!(
                "{valor} não se divide em {parcelas} parcelas"
            )));
        }
        Ok(Self(Plan {
            method: CardMethod::Credito,
            parcelas,
            financing: Some(financing),
        }))
    }

    /// The plan the window asks for: `forma` is `debito`, `credito`, `voucher` or `parcelado`
    /// (with `parcelas` and the store's `financing`).
    pub fn choose(
        forma: &str,
        valor: Centavos,
        parcelas: Option<u8>,
        financing: Financing,
    ) -> Result<Self, InvalidPlan> {
        match (forma, parcelas) {
            ("debito", _) => Ok(Self::DEBITO),
            ("credito", None | Some(1)) => Ok(Self::CREDITO),
            ("voucher", _) => Ok(Self::VOUCHER),
            ("credito" | "parcelado", Some(n)) => Self::parcelado(valor, n, financing),
            ("parcelado", None) => Err(InvalidPlan("escolha em quantas parcelas".into())),
            _ => Err(InvalidPlan(format!(
                "forma de pagamento desconhecida: {forma:?} (débito, crédito, parcelado ou voucher)"
            ))),
        }
    }

    /// Parses [`Plan::as_stored`] (`debito`, `credito`, `voucher`, or
    /// `credito:<n>:<loja|emissor>`: the payment API's form too).
    pub fn parse_stored(s: &str) -> Option<Self> {
        Plan::parse_stored(s).map(Self)
    }

    /// How the cashier and the receipt name it: `Débito`, `Crédito à vista`, `Crédito 3× sem
    /// juros`, `Crédito 3× com juros do emissor`, `Voucher`.
    pub fn label(self) -> String {
        match (self.method, self.financing) {
            (CardMethod::Debito, _) => "Débito".into(),
            (CardMethod::Voucher, _) => "Voucher".into(),
            (CardMethod::Credito, None) => "Crédito à vista".into(),
            (CardMethod::Credito, Some(Financing::Loja)) => {
                format!("Crédito {}× sem juros", self.parcelas)
            }
            (CardMethod::Credito, Some(Financing::Emissor)) => {
                format!("Crédito {}× com juros do emissor", self.parcelas)
            }
        }
    }
}

impl CardPlan {
    /// The installments as the cashier and the receipt read them, for a parcelado of `valor`:
    /// `3× de R$ 33,34 (última de R$ 33,32)`, `4× de R$ 25,00`; a parcelado com juros says the
    /// bank sets them. `None` for one payment.
    pub fn installments_text(self, valor: Centavos) -> Option<String> {
        match self.financing? {
            Financing::Emissor => Some(format!(
                "{}× com juros — o valor das parcelas é o banco do cliente que define",
                self.parcelas
            )),
            Financing::Loja => {
                let (each, last) = installments(valor, self.parcelas)?;
                Some(if each == last {
                    format!("{}× de {each}", self.parcelas)
                } else {
                    format!("{}× de {each} (última de {last})", self.parcelas)
                })
            }
        }
    }
}

/// What the store accepts, from its settings: which plans the till offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanRules {
    /// Who pays a parcelado's interest.
    pub financing: Financing,
    /// Most installments offered (1: no parcelado).
    pub max_parcelas: u8,
    /// Least amount of one installment (the last included).
    pub parcela_minima: Centavos,
    /// Whether the store takes meal/food vouchers.
    pub voucher: bool,
}

impl Default for PlanRules {
    /// Parcelado sem juros up to 12×, installments of at least R$ 5,00, vouchers accepted.
    fn default() -> Self {
        Self {
            financing: Financing::Loja,
            max_parcelas: MAX_PARCELAS,
            parcela_minima: Centavos::new(500).expect("positive"),
            voucher: true,
        }
    }
}

/// One choice of the "forma de pagamento" list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanOffer {
    /// `debito`, `credito`, `parcelado` or `voucher` (what the window sends back).
    pub forma: &'static str,
    /// Installments (1 unless parcelado).
    pub parcelas: u8,
    /// What the list shows: `Débito`, or for a parcelado (listed under "Crédito parcelado")
    /// `3× de R$ 33,34 sem juros`.
    pub rotulo: String,
    /// What the line under the list says of the choice: a parcelado's installments exactly
    /// (`3× de R$ 33,34 (última de R$ 33,32)`); empty otherwise.
    pub detalhe: String,
}

impl PlanRules {
    /// The ways the till offers to pay `valor`, in the order the list shows them: dinheiro (not a
    /// card plan: the window pays it with `pay_cash`), débito, crédito à vista, each parcelado
    /// whose installments are all at least the minimum, voucher.
    pub fn offers(self, valor: Centavos) -> Vec<PlanOffer> {
        let mut out = vec![
            PlanOffer {
                forma: "dinheiro",
                parcelas: 1,
                rotulo: "Dinheiro".into(),
                detalhe: String::new(),
            },
            PlanOffer {
                forma: "debito",
                parcelas: 1,
                rotulo: "Débito".into(),
                detalhe: String::new(),
            },
            PlanOffer {
                forma: "credito",
                parcelas: 1,
                rotulo: "Crédito à vista".into(),
                detalhe: String::new(),
            },
        ];
        for n in 2..=self.max_parcelas.min(MAX_PARCELAS) {
            let Ok(plan) = self.plan("parcelado", Some(n), valor) else {
                break;
            };
            let rotulo = match self.financing {
                Financing::Loja => {
                    let (each, _) = installments(valor, n).expect("a valid parcelado");
                    format!("{n}× de {each} sem juros")
                }
                Financing::Emissor => format!("{n}× com juros do emissor"),
            };
            let detalhe = plan.installments_text(valor).expect("a parcelado");
            out.push(PlanOffer {
                forma: "parcelado",
                parcelas: n,
                rotulo,
                detalhe,
            });
        }
        if self.voucher {
            out.push(PlanOffer {
                forma: "voucher",
                parcelas: 1,
                rotulo: "Voucher (refeição/alimentação)".into(),
                detalhe: String::new(),
            });
        }
        out
    }

    /// The plan the cashier chose, if the store offers it for `valor`; otherwise why not.
    pub fn plan(
        self,
        forma: &str,
        parcelas: Option<u8>,
        valor: Centavos,
    ) -> Result<CardPlan, InvalidPlan> {
        let plan = CardPlan::choose(forma, valor, parcelas, self.financing)?;
        if plan.method == CardMethod::Voucher && !self.voucher {
            return Err(InvalidPlan("esta loja não aceita voucher".into()));
        }
        let n = plan.parcelas;
        if n > self.max_parcelas {
            return Err(InvalidPlan(format!(
                "esta loja parcela em até {}×",
                self.max_parcelas
            )));
        }
        if n > 1 {
            let (_, last) = installments(valor, n).expect("a valid parcelado");
            if last < self.parcela_minima {
                return Err(InvalidPlan(format!(
                    "{valor} em {n}× dá parcelas abaixo do mínimo de {} desta loja",
                    self.parcela_minima
                )));
            }
        }
        Ok(plan)
    }
}

impl fmt::Display for CardPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// The window and the exports see a plan as `{metodo, parcelas, parcelamento, rotulo}`.
impl Serialize for CardPlan {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("CardPlan", 4)?;
        st.serialize_field("metodo", self.method.as_str())?;
        st.serialize_field("parcelas", &self.parcelas)?;
        st.serialize_field("parcelamento", &self.financing.map(Financing::as_str))?;
        st.serialize_field("rotulo", &self.label())?;
        st.end()
    }
}

/// The installments of `total` in `n`: each rounded up to the centavo, the last absorbing the
/// rounding so they sum exactly to `total` (`R$ 100,00` in 3: `33,34 + 33,34 + 33,32`).
/// `(each, last)`; `None` when the last would not be at least a centavo. The arithmetic is
/// [`pagar_rules::installments`], the one the server checks a parcelado with.
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

    #[test]
    fn every_plan_round_trips_through_its_stored_form_and_is_named_in_pt_br() {
        let valor = Centavos::new(10_000).unwrap();
        let plans = [
            (CardPlan::DEBITO, "Débito"),
            (CardPlan::CREDITO, "Crédito à vista"),
            (CardPlan::VOUCHER, "Voucher"),
            (
                CardPlan::parcelado(valor, 3, Financing::Loja).unwrap(),
                "Crédito 3× sem juros",
            ),
            (
                CardPlan::parcelado(valor, 12, Financing::Emissor).unwrap(),
                "Crédito 12× com juros do emissor",
            ),
        ];
        for (plan, label) in plans {
            assert_eq!(CardPlan::parse_stored(&plan.as_stored()), Some(plan));
            assert_eq!(plan.label(), label);
        }
        // What the stored form refuses is pagar-rules' `Plan::parse_stored`, tested there.
        assert_eq!(CardPlan::parse_stored("credito:13:loja"), None);
    }

    #[test]
    fn the_window_chooses_a_plan_by_name_and_a_bad_choice_says_why() {
        let valor = Centavos::new(5_000).unwrap();
        let f = Financing::Loja;
        assert_eq!(
            CardPlan::choose("debito", valor, None, f),
            Ok(CardPlan::DEBITO)
        );
        assert_eq!(
            CardPlan::choose("credito", valor, Some(1), f),
            Ok(CardPlan::CREDITO)
        );
        assert_eq!(
            CardPlan::choose("parcelado", valor, Some(4), f).map(|p| p.parcelas),
            Ok(4)
        );
        assert!(CardPlan::choose("parcelado", valor, None, f).is_err());
        assert!(CardPlan::choose("parcelado", valor, Some(13), f).is_err());
        assert!(CardPlan::choose("boleto", valor, None, f).is_err());
        let tiny = Centavos::new(3).unwrap();
        assert!(CardPlan::choose("parcelado", tiny, Some(4), f).is_err());
    }

    #[test]
    fn the_store_offers_each_plan_whose_installments_reach_its_minimum() {
        let rules = PlanRules::default();
        let offers = rules.offers(Centavos::new(10_000).unwrap());
        let labels: Vec<&str> = offers.iter().map(|o| o.rotulo.as_str()).collect();
        assert_eq!(
            labels[..4],
            [
                "Dinheiro",
                "Débito",
                "Crédito à vista",
                "2× de R$ 50,00 sem juros"
            ]
        );
        assert_eq!(labels[4], "3× de R$ 33,34 sem juros");
        assert_eq!(offers[4].detalhe, "3× de R$ 33,34 (última de R$ 33,32)");
        assert_eq!(labels.last(), Some(&"Voucher (refeição/alimentação)"));
        // R$ 100,00 in installments of at least R$ 5,00: up to 12× (R$ 8,34).
        assert_eq!(offers.iter().filter(|o| o.forma == "parcelado").count(), 11);
        // R$ 12,00: 2× of R$ 6,00 only.
        let small = rules.offers(Centavos::new(1_200).unwrap());
        assert_eq!(small.iter().filter(|o| o.forma == "parcelado").count(), 1);
        let strict = PlanRules {
            financing: Financing::Emissor,
            max_parcelas: 3,
            voucher: false,
            ..rules
        };
        let labels: Vec<String> = strict
            .offers(Centavos::new(10_000).unwrap())
            .into_iter()
            .map(|o| o.rotulo)
            .collect();
        assert_eq!(
            labels,
            [
                "Dinheiro",
                "Débito",
                "Crédito à vista",
                "2× com juros do emissor",
                "3× com juros do emissor"
            ]
        );
        let valor = Centavos::new(10_000).unwrap();
        assert!(strict.plan("voucher", None, valor).is_err());
        assert!(strict.plan("parcelado", Some(4), valor).is_err());
        assert!(rules
            .plan("parcelado", Some(3), Centavos::new(1_200).unwrap())
            .is_err());
        assert_eq!(
            rules.plan("parcelado", Some(3), valor).map(|p| p.parcelas),
            Ok(3)
        );
    }

    #[test]
    fn installments_of_r_100_in_3_are_33_34_twice_and_33_32() {
        let (each, last) = installments(Centavos::new(10_000).unwrap(), 3).unwrap();
        assert_eq!((each.get(), last.get()), (3334, 3332));
    }
}
