//! `sefaz`: the SEFAZ simulator as its own process (`--help` lists the flags).

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    provider_kit::run_until_signal(
        "sefaz",
        sefaz::start(sefaz::Config::parse()),
        |running| running.url(),
        async |running| running.shutdown().await,
    )
    .await
}
