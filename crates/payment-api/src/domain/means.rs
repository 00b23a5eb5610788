//! The means a payment was taken by (`meio`): a stored column of every payment, so nothing has to
//! guess it from the shape of an id.

pagar_rules::words! {
    /// What took a payment's money, and so who pays it back: the card gateway, the Pix provider or
    /// the card machine's provider.
    /// A new means is a new variant: the compiler then names every place that treats them apart.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Means / UnknownMeans("meio de pagamento desconhecido") {
        /// A card, through the gateway (`cobranca_id`: the gateway's charge id).
        Cartao = "cartao",
        /// A Pix received by the Pix provider (`cobranca_id`: the Pix's `endToEndId`).
        Pix = "pix",
        /// A card at the card machine (`cobranca_id`: the machine provider's order id).
        Maquininha = "maquininha",
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
