//! checkout-core against the real payment API on a real port, with real SQLite files on both
//! sides. Charges are counted in the gateway ledger.

mod cash;
mod closing;
mod delivery;
mod fiscal;
mod helpers;
mod maquininha;
mod network;
mod notas;
mod offline;
mod pix;
mod plans;
mod refunds;
mod refusals;
mod split;
mod storage;
