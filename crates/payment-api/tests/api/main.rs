//! Integration tests of the payment API: the real server on a real port on a real database: a SQLite file and
//! a PostgreSQL database (the same tests, parameterised by store).
//! Charges are counted in the gateway ledger, never trusted from responses.

use rstest_reuse::template;

/// Every conformance test runs once per store: `#[apply(stores)]` on an
/// `async fn name(#[case] backend: Backend)`.
#[template]
#[rstest::rstest]
#[case::sqlite(crate::helpers::Backend::Sqlite)]
#[case::postgres(crate::helpers::Backend::Postgres)]
#[tokio::test]
async fn stores(#[case] backend: crate::helpers::Backend) {}

mod acquirer;
mod bad_input;
mod cancel;
mod captures;
mod concurrency;
mod crash;
mod edges;
mod faults;
mod helpers;
mod key_syntax;
mod listing;
mod logs;

mod lookups;
mod maquininha;
mod openapi;
mod pix;
mod pix_edges;
mod plans;
mod refunds;
mod rejections;
mod replay;
mod replicas;
mod retention;
mod sales;
mod waiting_operation;
