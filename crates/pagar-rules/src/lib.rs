//! The money rules the till (`checkout-core`) and the payment API share, decided once: the
//! largest amount, the card plans (débito, crédito à vista or parcelado, voucher), their stored
//! and wire form, and how a parcelado splits into installments. The server checks a plan with
//! the same arithmetic the till shows it with.
//!
//! Each crate keeps its own edge types over these (its `Centavos` parses what its edge receives:
//! a cashier's `1.234,56`, a JSON integer) and its own wire: this crate is rules, not a protocol.

pub mod decimal;
mod plan;
mod words;

pub use plan::{installments, CardMethod, Financing, Plan, MAX_PARCELAS};

/// Largest amount one payment may carry, in centavos: R$ 1.000.000,00.
pub const MAX_CENTAVOS: i64 = 100_000_000;
