//! `maquininha`: the card machine simulator as its own process (`--help` lists the flags).

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let provider = match maquininha::start(maquininha::Config::parse()).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("maquininha: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // Tests and scripts read this line to learn the port when started with port 0.
    println!("listening on {}", provider.url());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    provider.shutdown().await;
    std::process::ExitCode::SUCCESS
}
