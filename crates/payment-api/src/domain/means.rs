//! The means a payment was taken by (`meio`): a stored column of every payment, so nothing has to
//! guess it from the shape of an id.

use std::fmt;

/// What took a payment's money, and so who pays it back: the card gateway, the Pix provider or
/// the card machine's provider.
/// A new means is a new variant: the compiler then names every place that treats them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Means {
    /// A card, through the gateway (`cobranca_id`: the gateway's charge id).
    Cartao,
    /// A Pix received by the Pix provider (`cobranca_id`: the Pix's `endToEndId`).
    Pix,
    /// A card at the card machine (`cobranca_id`: the machine provider's order id).
    Maquininha,
}

/// A stored `meio` this server does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("meio de pagamento desconhecido: {0:?}")]
pub struct UnknownMeans(pub String);

impl Means {
    /// Every means, for tests that go through them all.
    pub const ALL: [Means; 3] = [Means::Cartao, Means::Pix, Means::Maquininha];

    /// The column and JSON form.
    pub fn as_str(self) -> &'static str {
        match self {
            Means::Cartao => "cartao",
            Means::Pix => "pix",
            Means::Maquininha => "maquininha",
        }
    }

    /// Parses the column form.
    pub fn parse(s: &str) -> Result<Self, UnknownMeans> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownMeans(s.to_string()))
    }
}

impl fmt::Display for Means {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_means_round_trips_through_its_stored_form_and_nothing_else_parses() {
        for m in Means::ALL {
            assert_eq!(Means::parse(m.as_str()), Ok(m));
        }
        for bad in ["", "Pix", "card", "pix:"] {
            assert!(Means::parse(bad).is_err(), "{bad:?}");
        }
    }
}
