//! `maquininha`: the card machine simulator as its own process (`--help` lists the flags).

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    provider_kit::run_until_signal(
        "maquininha",
        maquininha::start(maquininha::Config::parse()),
        |running| running.url(),
        async |running| running.shutdown().await,
    )
    .await
}
