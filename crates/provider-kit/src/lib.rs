//! What every provider simulator (`pix-provider`, `maquininha`, `adquirente`) shares as a
//! process: a router served on a bound address until shut down ([`Served`]), the body of its
//! `main` ([`run_until_signal`]), the access token Mercado Pago's APIs ask of every request
//! ([`require_access_token`]), and the RFC 3339 times their answers carry ([`rfc3339`]). The simulators' own routes, ledgers and rules stay in their crates.

mod tls;

pub use tls::TlsFiles;

use std::future::Future;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Epoch milliseconds as RFC 3339 in UTC, as the providers' APIs write their times; empty for
/// one out of range.
pub fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// Makes `path` the owner's alone (mode 0600) before SQLite opens it, creating it empty when it
/// is missing: the `-wal` and `-shm` files SQLite makes beside it take the same mode. A
/// simulator's ledger is data at rest like the till's.
pub fn own_file(path: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// The access token a simulator in Mercado Pago's shape asks of every request of its API.
#[derive(Debug, Clone)]
pub struct AccessToken(pub std::sync::Arc<str>);

/// Middleware (`axum::middleware::from_fn_with_state(AccessToken(..), require_access_token)`):
/// a request without `Authorization: Bearer <the token>` is answered 401 in Mercado Pago's
/// error body, and goes no further.
pub async fn require_access_token(
    axum::extract::State(token): axum::extract::State<AccessToken>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let ok = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t == &*token.0);
    if !ok {
        return (
            axum::http::StatusCode::UNAUTHORIZED,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            r#"{"errors":[{"code":"unauthorized","message":"invalid access token","details":[]}]}"#,
        )
            .into_response();
    }
    next.run(req).await
}

/// A router being served, until [`Served::shutdown`].
pub struct Served {
    addr: SocketAddr,
    scheme: &'static str,
    stop: Option<oneshot::Sender<()>>,
    serve: Option<JoinHandle<()>>,
}

impl Served {
    /// Serves `app` on `listener` in the background.
    pub fn start(listener: TcpListener, app: axum::Router) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let serve = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self {
            addr,
            scheme: "http",
            stop: Some(stop),
            serve: Some(serve),
        })
    }

    /// Serves `app` on `listener` over mutual TLS with `files` (every client must present a
    /// certificate the files' CA signed), in the background.
    pub fn start_tls(
        listener: TcpListener,
        app: axum::Router,
        files: &TlsFiles,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let acceptor = tokio_rustls::TlsAcceptor::from(files.server_config()?);
        let tls = tls::TlsListener {
            tcp: listener,
            acceptor,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let serve = tokio::spawn(async move {
            let _ = axum::serve(tls, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self {
            addr,
            scheme: "https",
            stop: Some(stop),
            serve: Some(serve),
        })
    }

    /// Its base URL (`http://127.0.0.1:port`, or `https://` over TLS).
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and waits for it.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(serve) = self.serve.take() {
            let _ = serve.await;
        }
    }
}

/// A simulator's `main`: logs to stderr (`RUST_LOG`, `info` by default), starts it, prints
/// `listening on <url>` (tests and scripts read that line to learn a port 0's port), and stops
/// it on SIGTERM or Ctrl-C. A start that fails prints `<name>: <error>` and exits 1.
pub async fn run_until_signal<S, E, F>(
    name: &str,
    start: F,
    url: impl FnOnce(&S) -> String,
    stop: impl AsyncFnOnce(S),
) -> std::process::ExitCode
where
    E: std::fmt::Display,
    F: Future<Output = Result<S, E>>,
{
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let running = match start.await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{name}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!("listening on {}", url(&running));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    stop(running).await;
    std::process::ExitCode::SUCCESS
}
