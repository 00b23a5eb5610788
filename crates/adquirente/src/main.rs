//! `adquirente`: the card acquirer simulator as its own process (`--help` lists the flags).

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    provider_kit::run_until_signal(
        "adquirente",
        adquirente::start(adquirente::Config::parse()),
        |running| running.url(),
        async |running| running.shutdown().await,
    )
    .await
}
