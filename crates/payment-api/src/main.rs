//! `payment-api`: starts the server from flags and environment variables (`--help` lists them).

use clap::Parser;
use payment_api::Config;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let config = Config::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Log lines are formatted on the request's thread and written by a thread of their own, so a
    // slow terminal or pipe never holds a request. Not lossy: when the queue is full, a request
    // waits rather than a line being dropped. The guard flushes what is queued at exit. The
    // writer thread drains the queue into a buffer and flushes it when the queue is empty: one
    // `write` for many lines under load instead of one per line (in `perf`, those syscalls were
    // about a tenth of the server's CPU during a replay run), each line still out at once when
    // the server is quiet.
    let logs = tracing_appender::non_blocking::NonBlockingBuilder::default().lossy(false);
    fn buffered<W: std::io::Write>(w: W) -> std::io::BufWriter<W> {
        std::io::BufWriter::with_capacity(64 * 1024, w)
    }
    let _flush_at_exit = if config.log_json {
        let (writer, guard) = logs.finish(buffered(std::io::stdout()));
        tracing_subscriber::fmt()
            .json()
            .with_writer(writer)
            .with_env_filter(filter)
            .init();
        guard
    } else {
        let (writer, guard) = logs.finish(buffered(std::io::stderr()));
        // Colour codes only for a person at a terminal: in a file or a pipe they are bytes to
        // format and write on every request (a few per cent of a replay in `perf`).
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        tracing_subscriber::fmt()
            .with_ansi(ansi)
            .with_writer(writer)
            .with_env_filter(filter)
            .init();
        guard
    };
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
