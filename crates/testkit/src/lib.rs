//! Real parts for Pagar's end-to-end tests, shared by the engine's tests, the app's GUI tests and
//! the cross-crate tests:
//!
//! - [`FaultProxy`]: a TCP proxy of our own between a client and the API that fails the ways a
//!   shop's network does (nothing listening, accept-and-close, a swallowed request, the answer
//!   cut after the server committed, a middlebox answering `401`), switchable while running;
//! - [`TlsFront`]: a TLS endpoint with a certificate authority made in the test, in front of a
//!   plain-HTTP API, so a client can be made to trust it through a `ca_cert` file;
//! - [`ApiProcess`]: the `payment-api` binary started as its own process on port 0;
//! - [`PixProcess`]: the `pix-provider` simulator as its own process, with its QA controls;
//! - [`AcquirerProcess`] and [`MachineProcess`]: the acquirer and the card machine simulators as
//!   processes of their own;
//! - [`SefazProcess`]: the SEFAZ simulator for NFC-e as its own process, and a client of its
//!   web services;
//! - [`webdriver::Chromium`]: headless Chromium through `chromedriver`, for the simulators' web
//!   pages.
//!
//! Everything listens on loopback only.

mod acquirer_process;
mod api_process;
pub mod cpu_ticks;
mod fault_proxy;
mod machine_process;
mod pix_process;
mod sefaz_process;
mod tls_front;
pub mod webdriver;

pub use acquirer_process::{AcquirerProcess, ACQUIRER_TOKEN};
pub use api_process::{
    payment_api_binary, ApiDatabase, ApiOptions, ApiProcess, ADMIN_TOKEN, API_KEY, MERCHANT,
};
pub use fault_proxy::{Fault, FaultProxy};
pub use machine_process::{MachineProcess, MACHINE_SECRET, MACHINE_TOKEN};
pub use pix_process::{pix_oauth_token, PixProcess, PIX_SECRET, PIX_TOKEN};
pub use sefaz_process::{nfce_xsd_dir, SefazProcess};
pub use tls_front::TlsFront;

/// The URL a simulator started as `child` prints on its first line (`listening on <url>`), read
/// from its piped stdout; a start that failed (its stderr says why) panics naming `name`.
pub(crate) fn listening_url(child: &mut std::process::Child, name: &str) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout piped"))
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{name}'s first line: {e}"));
    line.trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{name} did not start: {line:?}"))
        .to_string()
}
