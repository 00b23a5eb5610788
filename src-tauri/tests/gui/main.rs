//! The real Pagar window under Xvfb, driven through tauri-driver and WebKitWebDriver
//! (`../shared/recipes/gui-e2e.md`). Every test counts charges in the embedded sandbox's ledger
//! and writes screenshots to `target/screenshots/`.

mod cashier;
mod data_at_rest;
mod day;
mod faults;
mod harness;
mod maquininha;
mod nfce;
mod package;
mod pix;
mod plans;
mod recovery;
mod refunds;
