//! The means of payment ("meio de pagamento"): what takes a sale's money at this till. Every place
//! that treats the means apart matches on [`Means`] (the compiler lists them when one is added);
//! the outbox stores its name in `attempts.metodo`, whose `CHECK` a schema test holds to
//! [`Means::ALL`].

use super::{CardPlan, CardToken, Centavos};
use serde::Serialize;

pagar_rules::words! {
    /// A means of payment.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Means / UnknownMeans("meio de pagamento desconhecido") {
        /// A card, charged through the payment API (`cartao`).
        Cartao = "cartao",
        /// A Pix: a dynamic QR the payment API makes and settles later.
        Pix = "pix",
        /// Cash at the till: local, never sent.
        Dinheiro = "dinheiro",
        /// A card at the card machine beside the cashier: the payment API orders it there and
        /// settles it later (`maquininha`).
        Maquininha = "maquininha",
    }
}

impl Means {
    /// How the cashier and the receipt name it.
    pub fn label(self) -> &'static str {
        match self {
            Means::Cartao => "Cartão",
            Means::Pix => "Pix",
            Means::Dinheiro => "Dinheiro",
            Means::Maquininha => "Cartão na maquininha",
        }
    }

    /// True when its attempts go to the payment API (cash is approved when made, never sent).
    pub fn is_sent(self) -> bool {
        !matches!(self, Means::Dinheiro)
    }
}

/// How the customer pays one attempt: its means and what that means needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayMethod {
    /// A card, by its token, with the method and installments the cashier chose (`None`: the
    /// request names none, and the gateway charges crédito à vista).
    Card(CardToken, Option<CardPlan>),
    /// Pix: a dynamic QR the customer pays from their bank's app.
    Pix,
    /// Cash handed over at the till (`recebido`, at least the amount): local, nothing to charge.
    Cash {
        /// What the customer handed over.
        recebido: Centavos,
    },
    /// A card at the card machine `maquininha`, offered first as `plano` (`None`: the customer
    /// chooses at the machine).
    Machine {
        /// The machine's id at its provider.
        maquininha: String,
        /// What the machine offers first.
        plano: Option<CardPlan>,
    },
}

impl PayMethod {
    /// Its means.
    pub fn means(&self) -> Means {
        match self {
            PayMethod::Card(..) => Means::Cartao,
            PayMethod::Pix => Means::Pix,
            PayMethod::Cash { .. } => Means::Dinheiro,
            PayMethod::Machine { .. } => Means::Maquininha,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_means_round_trips_through_its_stored_name_and_nothing_else_parses() {
        for m in Means::ALL {
            assert_eq!(Means::parse(m.as_str()), Ok(m));
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
        for bad in ["", "Pix", "card", "boleto"] {
            assert!(Means::parse(bad).is_err(), "{bad:?}");
        }
    }
}
