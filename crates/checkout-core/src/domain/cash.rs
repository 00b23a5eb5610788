//! Cash ("dinheiro"): what the customer hands over and the change given back.

use super::{Centavos, Total};

/// Cash handed over that does not pay the amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("recebido {recebido} não paga {valor}: faltam {falta}")]
pub struct CashShort {
    /// The amount to pay.
    pub valor: Centavos,
    /// What the customer handed over.
    pub recebido: Centavos,
    /// What is missing.
    pub falta: Centavos,
}

/// The change ("troco") for `valor` paid with `recebido`: `recebido - valor`, never negative —
/// refused when `recebido` is less than `valor`.
pub fn change(valor: Centavos, recebido: Centavos) -> Result<Total, CashShort> {
    Total::new(recebido.get() - valor.get()).map_err(|_| CashShort {
        valor,
        recebido,
        falta: Centavos::new(valor.get() - recebido.get()).expect("recebido is less"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_is_what_was_handed_over_less_the_amount_and_never_negative() {
        let c = |v: i64| Centavos::new(v).unwrap();
        assert_eq!(change(c(10_000), c(12_000)).unwrap().get(), 2_000);
        assert_eq!(change(c(10_000), c(10_000)).unwrap().get(), 0);
        let short = change(c(10_000), c(5_000)).unwrap_err();
        assert_eq!(short.falta.get(), 5_000);
        assert_eq!(
            short.to_string(),
            "recebido R$ 50,00 não paga R$ 100,00: faltam R$ 50,00"
        );
    }
}
