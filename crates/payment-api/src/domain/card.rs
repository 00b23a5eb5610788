//! Card tokens the gateway knows.

use std::fmt;

/// A `cartao` that is not one of the gateway's tokens.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cartao desconhecido: use um token de cartão válido")]
pub struct UnknownCard;

/// A card token the gateway knows. Unknown tokens are rejected before anything is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardToken {
    /// `tok_aprovado`: approved.
    Aprovado,
    /// `tok_recusado`: declined with `cartao_recusado`.
    Recusado,
    /// `tok_saldo_insuficiente`: declined with `saldo_insuficiente`.
    SaldoInsuficiente,
    /// `tok_lento`: approved after the gateway's slow delay.
    Lento,
    /// `tok_estorno_recusado`: approved; every refund of it is declined with `estorno_recusado`.
    EstornoRecusado,
    /// `tok_estorno_lento`: approved; each refund of it takes the gateway's slow delay.
    EstornoLento,
    /// `tok_somente_debito`: a debit-only card; crédito and voucher are declined with
    /// `metodo_nao_aceito`.
    SomenteDebito,
    /// `tok_voucher`: a meal/food voucher card (VA/VR); it pays only a voucher.
    Voucher,
    /// `tok_sem_parcelamento`: débito and crédito à vista; a parcelado is declined with
    /// `parcelamento_nao_permitido`.
    SemParcelamento,
}

impl CardToken {
    /// Every token the simulator knows, in the order a UI would list them.
    pub const ALL: [CardToken; 9] = [
        CardToken::Aprovado,
        CardToken::Recusado,
        CardToken::SaldoInsuficiente,
        CardToken::Lento,
        CardToken::EstornoRecusado,
        CardToken::EstornoLento,
        CardToken::SomenteDebito,
        CardToken::Voucher,
        CardToken::SemParcelamento,
    ];

    /// Parses a token string.
    pub fn parse(s: &str) -> Result<Self, UnknownCard> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or(UnknownCard)
    }

    /// The wire form of the token.
    pub fn as_str(self) -> &'static str {
        match self {
            CardToken::Aprovado => "tok_aprovado",
            CardToken::Recusado => "tok_recusado",
            CardToken::SaldoInsuficiente => "tok_saldo_insuficiente",
            CardToken::Lento => "tok_lento",
            CardToken::EstornoRecusado => "tok_estorno_recusado",
            CardToken::EstornoLento => "tok_estorno_lento",
            CardToken::SomenteDebito => "tok_somente_debito",
            CardToken::Voucher => "tok_voucher",
            CardToken::SemParcelamento => "tok_sem_parcelamento",
        }
    }
}

impl fmt::Display for CardToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
