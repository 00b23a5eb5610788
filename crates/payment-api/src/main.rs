//! `payment-api`: starts the server from flags and environment variables (`--help` lists them).

use clap::Parser;
use payment_api::Config;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Every request allocates and frees many small buffers on whichever runtime thread runs it:
/// mimalloc's per-thread heaps serve that with less CPU than glibc's arenas shared by the
/// runtime's threads, as a profile of a first execution shows (`make bench`, CPU per request).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let config = Config::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Lines are written off the request path in batches (`payment_api::logging`); the guard
    // writes what is pending at exit.
    let (logs, _flush_at_exit) = payment_api::logging::layer(config.log_json);
    tracing_subscriber::registry()
        .with(logs)
        .with(filter)
        .init();
    let server = match payment_api::start(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("payment-api: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // Tests and scripts read this line to learn the port when started with port 0.
    println!("listening on {}", server.url());
    shutdown_signal().await;
    server.shutdown().await;
    std::process::ExitCode::SUCCESS
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
}
