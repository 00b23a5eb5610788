//! Pagar, the cashier app: a Tauri v2 shell over `checkout-core`. `main.rs` only calls [`run`];
//! [`app`] builds the app generic over the runtime so tests can use `tauri::test::mock_builder()`.

pub mod admin;
pub mod commands;
pub mod error;
pub mod link;
pub mod secrets;
pub mod session;
pub mod settings;
pub mod till;

use session::Session;
use settings::Settings;
use tauri::{Manager, Runtime};

/// Registers the commands and, on setup, starts the session from the environment.
pub fn app<R: Runtime>(builder: tauri::Builder<R>) -> tauri::Builder<R> {
    with_commands(builder).setup(|app| {
        let default_dir = app
            .path()
            .app_data_dir()
            .unwrap_or_else(|_| std::env::temp_dir().join("pagar"));
        let session =
            tauri::async_runtime::block_on(Session::start(Settings::resolve(default_dir)));
        app.manage(session);
        Ok(())
    })
}

/// Registers the commands only (tests manage their own session).
pub fn with_commands<R: Runtime>(builder: tauri::Builder<R>) -> tauri::Builder<R> {
    builder.invoke_handler(tauri::generate_handler![
        commands::app_info,
        commands::ui_ready,
        commands::till,
        commands::new_sale,
        commands::receipt,
        commands::close_till,
        commands::pay,
        commands::refund_info,
        commands::refund_preview,
        commands::refund,
        commands::attempts,
        commands::subscribe,
        commands::export_attempts,
        commands::retry_review,
        commands::qa_set_offline,
        commands::qa_get_faults,
        commands::qa_set_faults,
        commands::qa_export_log,
    ])
}

/// When the process started, for the startup figure `ui_ready` records.
pub static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Runs the app.
pub fn run() {
    STARTED.get_or_init(std::time::Instant::now);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
    app(tauri::Builder::default())
        .run(tauri::generate_context!())
        .expect("error while running Pagar");
}
