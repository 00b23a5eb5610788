//! Domain newtypes of the checkout: parse, don't validate.

mod capture;
mod cash;
mod machine;
mod means;
mod money;
mod pix;
mod plan;
mod situacao;

pub use capture::Capture;
pub use cash::{change, CashShort};
pub use machine::{MachineCharge, MachineStatus};
pub use means::{Means, PayMethod, UnknownMeans};
pub use money::{format_brl, AmountError, Centavos, Net, Tally, Total};
pub use pix::{PixCharge, PixStatus};
pub use plan::{
    installments, CardMethod, CardPlan, Financing, InvalidPlan, PlanOffer, PlanRules, MAX_PARCELAS,
};
pub use situacao::Situacao;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch: every instant the engine stores or compares.
pub type UnixMillis = i64;

/// The calendar day of `at` in the store's time zone, `YYYY-MM-DD`: what sale numbers and the
/// till's closing go by.
pub fn store_day(at: UnixMillis, offset: time::UtcOffset) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(at) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
        .to_offset(offset);
    format!("{:04}-{:02}-{:02}", t.year(), u8::from(t.month()), t.day())
}

/// The instants a store day covers: from its midnight (inclusive) to the next (exclusive).
pub fn day_bounds(day: &str, offset: time::UtcOffset) -> Option<(UnixMillis, UnixMillis)> {
    let date = time::Date::parse(
        day,
        time::macros::format_description!("[year]-[month]-[day]"),
    )
    .ok()?;
    let start = date.midnight().assume_offset(offset);
    let ms = |t: time::OffsetDateTime| (t.unix_timestamp_nanos() / 1_000_000) as UnixMillis;
    Some((ms(start), ms(start + time::Duration::days(1))))
}

/// A sale's number as the cashier says it: `0042`.
pub fn sale_number(n: u32) -> String {
    format!("{n:04}")
}

/// A sale id that is not 1–64 visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("identificador de venda inválido: {0:?}")]
pub struct InvalidSaleId(pub String);

/// A card token that is not 1–64 of `[A-Za-z0-9_]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("token de cartão inválido: {0:?}")]
pub struct InvalidCard(pub String);

/// The sale a payment is for, as the point of sale names it: 1–64 visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SaleId(String);

impl SaleId {
    /// Parses a sale id.
    pub fn parse(s: &str) -> Result<Self, InvalidSaleId> {
        if !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_graphic()) {
            Ok(Self(s.to_string()))
        } else {
            Err(InvalidSaleId(s.to_string()))
        }
    }

    /// A fresh random sale id (`venda-…`), for screens that start a new sale.
    pub fn generate() -> Self {
        Self(format!("venda-{}", uuid::Uuid::now_v7().simple()))
    }
}

pagar_rules::text_serde!(SaleId, InvalidSaleId);

pagar_rules::text_newtype!(SaleId);

/// A card token as the payment API knows it (`tok_…`): 1–64 of `[A-Za-z0-9_]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CardToken(String);

/// A card token as exports and logs may show it: its kind prefix and last four characters
/// (`tok_…vado`), never the whole token.
pub fn mask_card(token: &str) -> String {
    let chars: Vec<char> = token.chars().collect();
    let show = if chars.len() > 8 { 4 } else { chars.len() / 4 };
    let tail: String = chars[chars.len() - show..].iter().collect();
    let prefix = token
        .split_once('_')
        .map(|(p, _)| format!("{p}_"))
        .filter(|p| p.len() <= 5 && p.chars().count() + show < chars.len())
        .unwrap_or_default();
    format!("{prefix}…{tail}")
}

impl CardToken {
    /// Parses a card token.
    pub fn parse(s: &str) -> Result<Self, InvalidCard> {
        if !s.is_empty()
            && s.len() <= 64
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            Ok(Self(s.to_string()))
        } else {
            Err(InvalidCard(s.to_string()))
        }
    }

    /// The token as exports and logs may show it (see [`mask_card`]).
    pub fn masked(&self) -> String {
        mask_card(&self.0)
    }
}

pagar_rules::text_serde!(CardToken, InvalidCard);

impl AsRef<str> for CardToken {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// An attempt's local id, `att_` and a UUIDv7; also the `referencia` the server stores, so an
/// attempt whose answer was lost can be found again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AttemptId(String);

impl AttemptId {
    /// A new, time-ordered id.
    pub fn generate() -> Self {
        Self(format!("att_{}", uuid::Uuid::now_v7().simple()))
    }

    /// An id as stored or as a window sent it back (an unknown id simply finds nothing).
    pub fn from_stored(s: impl Into<String>) -> Self {
        Self(s.into())
    }
}

pagar_rules::text_newtype!(AttemptId);

/// The `Idempotency-Key` of one attempt: a random UUIDv4, made once when the attempt is stored
/// and carried by every try of it. There is no other way to make one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// A fresh key (only [`crate::outbox::Outbox::pay`] makes one, with its attempt).
    pub(crate) fn generate() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    /// A key as stored.
    pub(crate) fn from_stored(s: String) -> Self {
        Self(s)
    }
}

pagar_rules::text_newtype!(IdempotencyKey);

/// Where an attempt stands. Labels are pt-BR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttemptState {
    /// Stored, not yet confirmed: sending, waiting to retry, or offline. Never charge again.
    Pendente,
    /// Approved by the server (final).
    Aprovado,
    /// Declined by the server (final); the sale may be paid with a new attempt.
    Recusado,
    /// Needs a person: the server refused the request, or the outcome cannot be resolved safely.
    Revisao,
}

impl AttemptState {
    /// Every state, in the order a screen lists them. [`AttemptState::position`] is an exhaustive
    /// match, and a test checks `ALL[s.position()] == s` for every entry: a new variant that is not
    /// added here fails to compile there or fails that test. The outbox's `CHECK` constraint and
    /// the window's labels (`ui/state.js`) are checked against this list by tests too.
    pub const ALL: [AttemptState; 4] = [
        AttemptState::Pendente,
        AttemptState::Aprovado,
        AttemptState::Recusado,
        AttemptState::Revisao,
    ];

    /// This state's index in [`AttemptState::ALL`].
    pub const fn position(self) -> usize {
        match self {
            AttemptState::Pendente => 0,
            AttemptState::Aprovado => 1,
            AttemptState::Recusado => 2,
            AttemptState::Revisao => 3,
        }
    }

    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptState::Pendente => "pendente",
            AttemptState::Aprovado => "aprovado",
            AttemptState::Recusado => "recusado",
            AttemptState::Revisao => "revisao",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// How a sentence names it: "este está em revisão".
    pub fn label(self) -> &'static str {
        match self {
            AttemptState::Pendente => "pendente",
            AttemptState::Aprovado => "aprovado",
            AttemptState::Recusado => "recusado",
            AttemptState::Revisao => "em revisão",
        }
    }

    /// True for states the engine will not change by itself.
    pub fn is_final(self) -> bool {
        match self {
            AttemptState::Pendente => false,
            AttemptState::Aprovado | AttemptState::Recusado | AttemptState::Revisao => true,
        }
    }
}

/// What an attempt asks the server for: a charge, or paying back (part of) an approved one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttemptKind {
    /// `POST /pagamentos`: one press of Pagar for one sale.
    Pagamento,
    /// `POST /pagamentos/{id}/estornos`: one press of "Estornar" for one approved payment.
    Estorno,
}

impl AttemptKind {
    /// Every kind; the outbox's `CHECK` on `attempts.kind` is checked against it by a test.
    pub const ALL: [AttemptKind; 2] = [AttemptKind::Pagamento, AttemptKind::Estorno];

    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptKind::Pagamento => "pagamento",
            AttemptKind::Estorno => "estorno",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The cashier's reason for a refund, as the server will take it: trimmed, at most
/// [`RefundReason::MAX_CHARS`] characters, no control character (a tab or a line break the server
/// would refuse after the refund was written ahead, leaving it in review for good).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundReason(String);

/// Why a refund reason was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidReason {
    /// Over the limit.
    #[error("o motivo do estorno passa de {} caracteres", RefundReason::MAX_CHARS)]
    TooLong,
    /// A tab, a line break or another control character.
    #[error("o motivo do estorno não pode ter tabulação, quebra de linha nem outros caracteres de controle")]
    ControlCharacter,
}

impl RefundReason {
    /// The server's limit for free text.
    pub const MAX_CHARS: usize = 255;

    /// `None` for a reason that is empty once trimmed.
    pub fn parse(s: &str) -> Result<Option<Self>, InvalidReason> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(None);
        }
        if s.chars().any(char::is_control) {
            return Err(InvalidReason::ControlCharacter);
        }
        if s.chars().count() > Self::MAX_CHARS {
            return Err(InvalidReason::TooLong);
        }
        Ok(Some(Self(s.to_string())))
    }
}

impl AsRef<str> for RefundReason {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A server payment id (`pay_…`) as the till keeps it for refunding: it goes into a URL path,
/// so only letters, digits and `_` are taken.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PaymentId(String);

/// A payment id that cannot go into a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("id de pagamento inválido: {0:?}")]
pub struct InvalidPaymentId(pub String);

impl PaymentId {
    /// Checks `s`: 1–100 characters of `[A-Za-z0-9_]`.
    pub fn parse(s: &str) -> Result<Self, InvalidPaymentId> {
        let ok = !s.is_empty()
            && s.len() <= 100
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(InvalidPaymentId(s.to_string()))
        }
    }
}

pagar_rules::text_serde!(PaymentId, InvalidPaymentId);

pagar_rules::text_newtype!(PaymentId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refund_reason_with_a_tab_or_a_line_break_is_refused_and_an_empty_one_is_none() {
        for bad in ["troca\tde produto", "linha\noutra", "nul\u{0}"] {
            assert_eq!(
                RefundReason::parse(bad),
                Err(InvalidReason::ControlCharacter),
                "{bad:?}"
            );
        }
        assert_eq!(RefundReason::parse("   "), Ok(None));
        assert_eq!(
            RefundReason::parse(" devolução ")
                .unwrap()
                .unwrap()
                .as_ref(),
            "devolução"
        );
        assert_eq!(
            RefundReason::parse(&"é".repeat(256)),
            Err(InvalidReason::TooLong)
        );
        assert!(RefundReason::parse(&"é".repeat(255)).unwrap().is_some());
    }

    #[test]
    fn a_card_token_is_shown_masked() {
        assert_eq!(mask_card("tok_aprovado"), "tok_…vado");
        assert_eq!(mask_card("tok_saldo_insuficiente"), "tok_…ente");
        assert_eq!(mask_card("abcd"), "…d");
        assert!(!mask_card("tok_4111111111111111").contains("41111111"));
    }

    #[test]
    fn brl_amounts_are_parsed_the_way_a_cashier_types_them() {
        assert_eq!(Centavos::parse_brl("1.234,56").unwrap().get(), 123_456);
        assert_eq!(Centavos::parse_brl("R$ 10").unwrap().get(), 1_000);
        assert_eq!(Centavos::parse_brl("10,5").unwrap().get(), 1_050);
        assert_eq!(Centavos::parse_brl("0,01").unwrap().get(), 1);
        assert_eq!(Centavos::parse_brl("1.000").unwrap().get(), 100_000);
        for bad in [
            "",
            "abc",
            "10,555",
            "0",
            "0,00",
            "-5",
            "1,2,3",
            "10.00,",
            "10.00",
            "10,",
            "1.000.000,01",
            "1234.567",
        ] {
            assert!(
                Centavos::parse_brl(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn a_store_day_is_the_local_calendar_day_and_covers_24_hours() {
        let offset = time::macros::offset!(-3);
        // 2026-12-02T02:30Z is still the 1st in São Paulo.
        assert_eq!(store_day(1_796_178_600_000, offset), "2026-12-01");
        assert_eq!(
            store_day(1_796_178_600_000, time::UtcOffset::UTC),
            "2026-12-02"
        );
        let (from, to) = day_bounds("2026-12-01", offset).unwrap();
        assert_eq!(from, 1_796_094_000_000);
        assert_eq!(to - from, 86_400_000);
        assert!(day_bounds("01/12/2026", offset).is_none());
        assert_eq!(sale_number(42), "0042");
    }

    #[test]
    fn amounts_are_formatted_as_reais() {
        assert_eq!(format_brl(123_456), "R$ 1.234,56");
        assert_eq!(format_brl(5), "R$ 0,05");
        assert_eq!(format_brl(100_000_000), "R$ 1.000.000,00");
    }

    #[test]
    fn a_state_round_trips_through_its_stored_form() {
        for (i, s) in AttemptState::ALL.into_iter().enumerate() {
            assert_eq!(
                s.position(),
                i,
                "AttemptState::ALL lists {s:?} once, in place"
            );
            assert_eq!(AttemptState::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::json!(s.as_str()),
                "the window reads the stored form"
            );
        }
        assert!(!AttemptState::Pendente.is_final());
    }
}
