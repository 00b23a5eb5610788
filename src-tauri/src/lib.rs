//! Pagar, the cashier app: a Tauri v2 shell over `checkout-core`. `main.rs` only calls [`run`];
//! [`app`] builds the app generic over the runtime so tests can use `tauri::test::mock_builder()`.

pub mod admin;
pub mod commands;
pub mod error;
pub mod events;
pub mod link;
pub mod receipts;
pub mod secrets;
pub mod session;
pub mod settings;

use session::Session;
use settings::Settings;
use tauri::{Manager, Runtime};

/// A session started on a thread of its own: [`run`] starts it before GTK, so that the two
/// starts overlap; setup waits for it.
pub type Starting = std::thread::JoinHandle<Session>;

/// Starts the session from the environment on a thread of its own, in `default_dir` unless the
/// settings name another folder.
pub fn start_session(default_dir: std::path::PathBuf) -> Starting {
    std::thread::spawn(move || {
        tauri::async_runtime::block_on(Session::start(Settings::resolve(default_dir)))
    })
}

/// The app's data folder when the settings name none, as Tauri's `app_data_dir` resolves it
/// (the platform's data folder, then the app's identifier), known before the app is built.
pub fn default_data_dir(identifier: &str) -> std::path::PathBuf {
    dirs::data_dir()
        .map(|d| d.join(identifier))
        .unwrap_or_else(|| std::env::temp_dir().join("pagar"))
}

/// Registers the commands; on setup, waits for the `starting` session, then makes the window.
/// Generic over the runtime like [`with_commands`].
pub fn app<R: Runtime>(builder: tauri::Builder<R>, starting: Starting) -> tauri::Builder<R> {
    with_commands(builder)
        .setup(move |app| {
            let session = starting
                .join()
                .map_err(|_| "the session's start panicked".to_string())?;
            app.manage(session);
            // The window only now (`"create": false` in tauri.conf.json): made before the
            // session, WebKit would start its processes while this thread, GTK's, is blocked
            // above, and the page would wait for GTK to answer them.
            for window in app.config().app.windows.iter().filter(|w| !w.create) {
                tauri::WebviewWindowBuilder::from_config(app.handle(), window)?.build()?;
            }
            Ok(())
        })
        .on_window_event(|window, event| {
            // A window gone: its event stream is no longer kept.
            if let tauri::WindowEvent::Destroyed = event {
                if let Some(Ok(p)) = window.try_state::<Session>().map(|s| s.inner().get()) {
                    p.streams().close(window.label());
                }
            }
        })
}

/// Registers the commands only (tests manage their own session).
pub fn with_commands<R: Runtime>(builder: tauri::Builder<R>) -> tauri::Builder<R> {
    builder.invoke_handler(tauri::generate_handler![
        commands::app_info,
        commands::ui_ready,
        commands::open_sale,
        commands::new_sale,
        commands::receipt,
        commands::close_day,
        commands::pay,
        commands::pay_pix,
        commands::pay_maquininha,
        commands::card_plans,
        commands::pay_cash,
        commands::drawer,
        commands::drawer_move,
        commands::abandon_sale,
        commands::confirm_sale,
        commands::cancel_pix,
        commands::cancel_maquininha,
        commands::keep_late_pix,
        commands::pix_qr,
        commands::qa_pix_pay,
        commands::refund_info,
        commands::refund_preview,
        commands::refund,
        commands::attempts,
        commands::subscribe,
        commands::events,
        commands::export_attempts,
        commands::retry_review,
        commands::qa_set_offline,
        commands::qa_get_faults,
        commands::qa_set_faults,
        commands::qa_export_log,
        commands::notas,
        commands::danfe,
        commands::qa_sefaz,
    ])
}

/// When the process started, for the startup figure `ui_ready` records.
pub static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// What `pagar` is asked on its command line.
#[derive(Debug, PartialEq, Eq)]
pub enum Invocation {
    /// Open the window.
    Run,
    /// `--version`/`-V`: print the version.
    Version,
    /// `--help`/`-h`: print what the program is and how it is configured.
    Help,
    /// Anything else: refused with this message.
    Unknown(String),
}

impl Invocation {
    /// Reads the arguments after the program's name.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Self {
        match args.into_iter().next().as_deref() {
            None => Invocation::Run,
            Some("--version" | "-V") => Invocation::Version,
            Some("--help" | "-h") => Invocation::Help,
            Some(other) => Invocation::Unknown(other.to_string()),
        }
    }
}

/// GTK's own OpenGL off, unless the environment already says something (`GDK_GL` set to
/// anything): the variable to set, or `None`. With it on, GTK sets GL up before the first frame
/// (the display's GL visuals, then WebKit's composited frames presented through GL), which a
/// till without a GPU driver does in software, on the first frame's time, and which is where
/// WebKitGTK's blank windows on some drivers come from. Off, WebKit draws the page without
/// hardware acceleration (its log says so), which a form of a few hundred elements does not
/// need; the page is drawn the same. `make bench` measures the first frame.
pub fn gtk_gl_off(is_set: impl Fn(&str) -> bool) -> Option<(&'static str, &'static str)> {
    (cfg!(target_os = "linux") && !is_set("GDK_GL")).then_some(("GDK_GL", "disable"))
}

/// JavaScriptCore's optimizing compiler (DFG, and FTL above it) off for the page, unless the
/// environment already says something (`JSC_useDFGJIT` set to anything): the variable to set, or
/// `None`. The web process inherits it. The page is a form of a few hundred elements whose
/// scripts run when the cashier acts; its interpreter and baseline compiler keep up with that,
/// while the optimizing tiers, compiling the functions sales make hot, held 7–9 MiB of the web
/// process from the first hundred sales on (`make bench`'s memory after 100 and 1 000 sales).
pub fn jit_optimizer_off(is_set: impl Fn(&str) -> bool) -> Option<(&'static str, &'static str)> {
    (cfg!(target_os = "linux") && !is_set("JSC_useDFGJIT")).then_some(("JSC_useDFGJIT", "false"))
}

/// Why the window cannot open on this machine, when that can be told before trying: no display
/// to draw on. `None` when there is one (or the platform needs none).
pub fn missing_display(env: impl Fn(&str) -> Option<String>) -> Option<&'static str> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let set = |k: &str| env(k).is_some_and(|v| !v.is_empty());
    (!set("DISPLAY") && !set("WAYLAND_DISPLAY")).then_some(
        "pagar: nenhuma tela encontrada (DISPLAY e WAYLAND_DISPLAY vazios). Abra o Pagar numa sessão gráfica; num servidor sem monitor, use: xvfb-run pagar",
    )
}

/// Runs the app.
pub fn run() {
    STARTED.get_or_init(std::time::Instant::now);
    match Invocation::parse(std::env::args().skip(1)) {
        Invocation::Run => {}
        Invocation::Version => {
            println!("Pagar {}", env!("CARGO_PKG_VERSION"));
            return;
        }
        Invocation::Help => {
            println!(
                "Pagar {}: o caixa que nunca cobra duas vezes.\n\nUso: pagar [--version | --help]\n\nSem configuração, abre com a API de pagamentos embutida (sandbox). Para uma API real,\ndefina PAGAR_API_URL e PAGAR_API_KEY (ou api_url e api_key em <dados>/config.json);\nPAGAR_DATA_DIR escolhe a pasta de dados. Veja docs/ no repositório.",
                env!("CARGO_PKG_VERSION")
            );
            return;
        }
        Invocation::Unknown(arg) => {
            eprintln!("pagar: opção desconhecida {arg:?}; use pagar --help");
            std::process::exit(2);
        }
    }
    if let Some(why) = missing_display(|k| std::env::var(k).ok()) {
        eprintln!("{why}");
        std::process::exit(1);
    }
    // Before GTK starts, while this is the only thread: see `gtk_gl_off`, `jit_optimizer_off`.
    let is_set = |k: &str| std::env::var_os(k).is_some();
    for (name, value) in [gtk_gl_off(is_set), jit_optimizer_off(is_set)]
        .into_iter()
        .flatten()
    {
        std::env::set_var(name, value);
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: a log file (or a journal) gets plain text.
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colours)
        .with_env_filter(filter)
        .init();
    // A display named but unusable (no X server there) makes GTK fail inside the window library
    // with a panic: say it in one line instead of a backtrace.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info.to_string();
        if text.contains("Failed to initialize gtk") || text.contains("cannot open display") {
            eprintln!(
                "pagar: não foi possível abrir a tela ({}); confira DISPLAY ou use: xvfb-run pagar",
                std::env::var("DISPLAY").unwrap_or_default()
            );
            std::process::exit(1);
        }
        default_hook(info);
    }));
    let context = tauri::generate_context!();
    // The session (databases, the sandbox's servers) starts while GTK and WebKit do.
    let starting = start_session(default_data_dir(&context.config().identifier));
    app(tauri::Builder::default(), starting)
        .run(context)
        .expect("error while running Pagar");
}
