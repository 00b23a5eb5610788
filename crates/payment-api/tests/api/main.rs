//! Integration tests of the payment API: the real server on a real port with a real SQLite file.
//! Charges are counted in the gateway ledger, never trusted from responses.

mod concurrency;
mod crash;
mod faults;
mod helpers;
mod key_syntax;
mod lookups;
mod rejections;
mod replay;
mod retention;
