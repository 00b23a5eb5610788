//! Launches Xvfb, tauri-driver and the app; one window at a time (tests take a global lock).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Serialises the GUI tests: one display, one window at a time.
static ONE_WINDOW: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long the UI gets to reach a state before a test fails.
pub const UI_WAIT: Duration = Duration::from_secs(40);

/// A port free now for tauri-driver or WebKitWebDriver to listen on, each call another one, from
/// below the kernel's ephemeral range (`ip_local_port_range`). A port the kernel hands out for
/// `127.0.0.1:0` is free again the moment the probe closes, and the next outgoing connection of
/// any process may take it before the driver binds it (seen: WebKitWebDriver's "Unable to listen
/// for HTTP server at host 127.0.0.1 and port 45451"); no connection takes a port below that range.
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let (low, span) = (10_000, ephemeral_low.saturating_sub(10_000).max(1));
    // Test processes start apart (by pid) and each walks on from where it was.
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let port = low + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = u16::try_from(port).expect("below the ephemeral range");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port below the ephemeral range");
}

/// A process group we kill whole on drop (tauri-driver, WebKitWebDriver and the app below it).
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Screenshots go to `<target>/screenshots/` (named in the README).
/// WebDriver key codes for [`GuiApp::press`].
pub const ENTER: &str = "\u{E007}";
pub const ESC: &str = "\u{E00C}";
pub const F2: &str = "\u{E032}";
pub const F3: &str = "\u{E033}";
pub const F4: &str = "\u{E034}";
pub const F6: &str = "\u{E036}";
pub const F7: &str = "\u{E037}";
pub const F8: &str = "\u{E038}";
pub const F9: &str = "\u{E039}";
pub const DOWN: &str = "\u{E015}";
pub const UP: &str = "\u{E013}";

pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
        });
    target.join("screenshots")
}

// Field order is drop order: the processes go first, so a failed test never waits on a session.
pub struct GuiApp {
    driver: Group,
    xvfb: Group,
    pub data_dir: PathBuf,
    env: Vec<(String, String)>,
    display: String,
    http: reqwest::Client,
    session_url: String,
    _lock: tokio::sync::MutexGuard<'static, ()>,
}

impl GuiApp {
    /// Starts the app on `data_dir` with the embedded API and waits until its screen is ready.
    pub async fn launch(data_dir: &Path) -> Self {
        Self::launch_with(data_dir, &[]).await
    }

    /// Starts the app with these extra environment variables (e.g. `PAGAR_API_URL`).
    pub async fn launch_with(data_dir: &Path, env: &[(&str, &str)]) -> Self {
        Self::launch_env(data_dir, env, true).await
    }

    /// Starts the app and waits only for the page (the app may have refused to start).
    pub async fn launch_unready(data_dir: &Path, env: &[(&str, &str)]) -> Self {
        Self::launch_env(data_dir, env, false).await
    }

    async fn launch_env(data_dir: &Path, env: &[(&str, &str)], ready: bool) -> Self {
        let lock = ONE_WINDOW.lock().await;
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Self::launch_locked(data_dir, env, lock, ready).await
    }

    async fn launch_locked(
        data_dir: &Path,
        env: Vec<(String, String)>,
        lock: tokio::sync::MutexGuard<'static, ()>,
        ready: bool,
    ) -> Self {
        let (xvfb, display) = start_xvfb();
        let (port, native_port) = (free_port(), free_port());
        let driver = in_session(
            &display,
            data_dir,
            &env,
            &[
                "tauri-driver",
                "--port",
                &port.to_string(),
                "--native-port",
                &native_port.to_string(),
            ],
        )
        .spawn()
        .expect("tauri-driver is installed (make test installs it)");
        let driver = Group(driver);
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let started = Instant::now();
        while !http
            .get(format!("{url}/status"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "tauri-driver did not come up"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        // APP_BINARY: another build of the app (the one a .deb installed) instead of this one.
        let application = env.iter().find(|(k, _)| k == "APP_BINARY").map_or_else(
            || env!("CARGO_BIN_EXE_pagar").to_string(),
            |(_, v)| v.clone(),
        );
        let caps = json!({"capabilities": {"alwaysMatch": {
            "tauri:options": {"application": application, "args": []}
        }}});
        let created: Value = http
            .post(format!("{url}/session"))
            // The first start of a fresh data folder also migrates and starts the embedded API.
            .timeout(Duration::from_secs(90))
            .json(&caps)
            .send()
            .await
            .expect("a WebDriver session")
            .json()
            .await
            .unwrap();
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_string();
        let app = Self {
            driver,
            xvfb,
            data_dir: data_dir.to_path_buf(),
            env,
            display,
            http,
            session_url: format!("{url}/session/{session}"),
            _lock: lock,
        };
        if ready {
            app.wait_ready().await;
        }
        app
    }

    async fn wait_ready(&self) {
        self.wait_until("the screen is ready", |a| async move {
            a.prop("sale-id", "textContent")
                .await
                .is_some_and(|s| s.starts_with("venda-"))
        })
        .await;
    }

    /// Reloads the page, as a webview reload would, and waits until it is drawn again.
    pub async fn reload(&self) {
        self.js("document.getElementById('sale-id').textContent = ''; setTimeout(() => location.reload(), 0); return 1")
            .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.wait_ready().await;
    }

    /// Presses "Nova venda" (or "Próxima venda") and waits until the new sale is ready to charge.
    pub async fn next_sale(&self) {
        let before = self.sale_id().await;
        self.click("nova-venda").await;
        self.wait_until("a new sale", |a| {
            let before = before.clone();
            async move { a.sale_id().await != before && a.status().await == "Pronto para cobrar." }
        })
        .await;
    }

    /// The connectivity badge's text.
    pub async fn badge(&self) -> String {
        self.prop("connectivity", "textContent")
            .await
            .unwrap_or_default()
    }

    /// The current sale's id as the screen shows it.
    pub async fn sale_id(&self) -> String {
        self.prop("sale-id", "textContent")
            .await
            .unwrap_or_default()
    }

    /// Kills the app process with SIGKILL and starts it again on the same data folder.
    pub async fn kill_and_relaunch(self) -> Self {
        self.kill_and_relaunch_after(async {}).await
    }

    /// [`GuiApp::kill_and_relaunch`], with `meanwhile` done while no app runs (a customer paying
    /// at the machine while the till is down, say).
    pub async fn kill_and_relaunch_after(
        self,
        meanwhile: impl std::future::Future<Output = ()>,
    ) -> Self {
        let pid = app_pid(&self.data_dir).expect("the app process is running");
        let status = Command::new("kill")
            .args(["-s", "KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let data_dir = self.data_dir.clone();
        let GuiApp {
            driver,
            xvfb,
            env,
            _lock,
            ..
        } = self;
        drop(driver); // the session died with the app
        drop(xvfb);
        meanwhile.await;
        Self::launch_locked(&data_dir, env, _lock, true).await
    }

    /// Runs a synchronous script in the page (one fresh HTTP request per call).
    pub async fn js(&self, script: &str) -> Value {
        let res: Value = self
            .http
            .post(format!("{}/execute/sync", self.session_url))
            .json(&json!({"script": script, "args": []}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("script {script:?}: {e}"))
            .json()
            .await
            .unwrap();
        res["value"].clone()
    }

    async fn wd(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let res: Value = self
            .http
            .request(method, format!("{}{path}", self.session_url))
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {path}: {e}"))
            .json()
            .await
            .unwrap();
        if let Some(err) = res["value"].get("error") {
            panic!("WebDriver {path}: {err} {}", res["value"]["message"]);
        }
        res["value"].clone()
    }

    /// The WebDriver element reference of `#id`.
    async fn element(&self, id: &str) -> String {
        let found = self
            .wd(
                reqwest::Method::POST,
                "/element",
                json!({"using": "css selector", "value": format!("#{id}")}),
            )
            .await;
        found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap()
            .to_string()
    }

    /// A real WebDriver click (pointer events, focus, form submission).
    pub async fn click(&self, id: &str) {
        let el = self.element(id).await;
        self.wd(
            reqwest::Method::POST,
            &format!("/element/{el}/click"),
            json!({}),
        )
        .await;
    }

    /// Clicks without failing when the element refuses (a disabled button in a burst).
    pub async fn try_click(&self, id: &str) {
        let el = self.element(id).await;
        let _ = self
            .http
            .post(format!("{}/element/{el}/click", self.session_url))
            .json(&json!({}))
            .send()
            .await;
    }

    /// Types keys into the element (WebDriver key codes allowed, e.g. `\u{E007}` for Enter).
    pub async fn send_keys(&self, id: &str, text: &str) {
        let el = self.element(id).await;
        self.wd(
            reqwest::Method::POST,
            &format!("/element/{el}/value"),
            json!({"text": text}),
        )
        .await;
    }

    pub async fn type_into(&self, id: &str, text: &str) {
        // A field in a dialog that is still opening cannot be typed into yet: on a busy machine
        // the script that shows it may run after this call arrives.
        let ready = format!(
            "const e = document.getElementById('{id}'); \
             return !!e && !e.disabled && e.getClientRects().length > 0"
        );
        self.wait_until(&format!("#{id} ready for typing"), |a| {
            let ready = ready.clone();
            async move { a.js(&ready).await == Value::Bool(true) }
        })
        .await;
        let el = self.element(id).await;
        self.wd(
            reqwest::Method::POST,
            &format!("/element/{el}/clear"),
            json!({}),
        )
        .await;
        self.send_keys(id, text).await;
    }

    /// Presses keys on whatever has the focus, as a keyboard does (WebDriver key actions: a
    /// key down and up for each character; WebDriver codes such as `\u{E007}` for Enter).
    pub async fn press(&self, keys: &str) {
        let mut actions = Vec::new();
        for k in keys.chars() {
            actions.push(json!({"type": "keyDown", "value": k.to_string()}));
            actions.push(json!({"type": "keyUp", "value": k.to_string()}));
        }
        self.wd(
            reqwest::Method::POST,
            "/actions",
            json!({"actions": [{"type": "key", "id": "teclado", "actions": actions}]}),
        )
        .await;
        let _ = self
            .http
            .delete(format!("{}/actions", self.session_url))
            .send()
            .await;
    }

    /// Replaces the webview's print with a counter: WebKitGTK's print dialog is a modal GTK
    /// window WebDriver cannot drive. What a test checks is that printing was asked for
    /// ([`GuiApp::prints`]) and what the page shows and saves.
    pub async fn count_prints(&self) {
        self.js("window.__printed = 0; window.print = () => { window.__printed += 1; }; return 1")
            .await;
    }

    /// How many times the page asked to print since [`GuiApp::count_prints`].
    pub async fn prints(&self) -> i64 {
        self.js("return window.__printed")
            .await
            .as_i64()
            .unwrap_or(-1)
    }

    /// Waits until the till's closing says something containing `text`.
    pub async fn wait_verdict(&self, text: &str) {
        let text = text.to_string();
        self.wait_until(&format!("the closing says {text:?}"), |a| {
            let text = text.clone();
            async move {
                a.prop("closing-verdict", "textContent")
                    .await
                    .unwrap_or_default()
                    .contains(&text)
            }
        })
        .await;
    }

    /// The id of the element that has the focus.
    pub async fn focused(&self) -> String {
        self.js("return document.activeElement ? document.activeElement.id : ''")
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Chooses an option of a `<select>` the way a user does: the value changes, then `change` fires.
    pub async fn select(&self, id: &str, value: &str) {
        self.js(&format!(
            "const s = document.getElementById('{id}'); s.value = '{value}'; \
             s.dispatchEvent(new Event('change', {{bubbles: true}})); return s.value"
        ))
        .await;
    }

    /// A DOM property of the element with this id.
    pub async fn prop(&self, id: &str, prop: &str) -> Option<String> {
        self.js(&format!(
            "const e = document.getElementById('{id}'); return e ? String(e['{prop}']) : null"
        ))
        .await
        .as_str()
        .map(str::to_string)
    }

    /// Read through the DOM.
    pub async fn enabled(&self, id: &str) -> bool {
        self.js(&format!("return !document.getElementById('{id}').disabled"))
            .await
            == Value::Bool(true)
    }

    pub async fn hidden(&self, id: &str) -> bool {
        self.js(&format!("return document.getElementById('{id}').hidden"))
            .await
            == Value::Bool(true)
    }

    /// The status region's label.
    pub async fn status(&self) -> String {
        self.prop("status-label", "textContent")
            .await
            .unwrap_or_default()
    }

    /// Polls `cond` every 100 ms until it holds; fails the test after [`UI_WAIT`].
    pub async fn wait_until<'a, F, Fut>(&'a self, what: &str, cond: F)
    where
        F: Fn(&'a Self) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = Instant::now();
        while !cond(self).await {
            if started.elapsed() > UI_WAIT {
                let _ = self
                    .screenshot(&format!("failed-{}", what.replace(' ', "-")))
                    .await;
                panic!(
                    "timed out waiting for: {what} (status: {:?})",
                    self.status().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn wait_status(&self, prefix: &str) {
        self.wait_until(&format!("status '{prefix}'"), |a| async move {
            a.status().await.starts_with(prefix)
        })
        .await;
    }

    /// Writes a PNG of the window to the screenshot folder.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        // WebKitWebDriver's screenshot command never answers under Xvfb here; ImageMagick's
        // `import` grabs the same pixels from the X server.
        // What the DOM says is on screen only once WebKit has painted it: wait two frames
        // (the first may be the one already under way), then grab the X screen.
        self.execute_async(
            "const done = arguments[arguments.length - 1];
             requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done, 50)));",
            json!([]),
        )
        .await;
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        let status = Command::new("import")
            .args(["-window", "root", "-display", &self.display])
            .arg(&path)
            .status()
            .expect("ImageMagick is installed (make test installs it)");
        assert!(status.success(), "import failed for {name}");
        path
    }

    /// The embedded sandbox's acquirer ledger: its own database file, beside the API's.
    pub fn acquirer_ledger(&self) -> rusqlite::Connection {
        let db = self.data_dir.join("sandbox").join("adquirente.db");
        let c = rusqlite::Connection::open(db).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        c
    }

    /// Charges in the embedded sandbox's acquirer ledger.
    pub fn ledger_rows(&self) -> i64 {
        self.acquirer_ledger()
            .query_row("SELECT count(*) FROM gateway_ledger", [], |r| r.get(0))
            .unwrap()
    }

    /// The embedded acquirer's authorizations: `(valor, captura)`, oldest first.
    pub fn authorizations(&self) -> Vec<(i64, String)> {
        let c = self.acquirer_ledger();
        let mut st = c
            .prepare(
                "SELECT valor, captura FROM gateway_ledger WHERE captura IS NOT NULL ORDER BY seq",
            )
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// Refunds in the embedded acquirer's ledger, oldest first: `(valor, status)`.
    pub fn refund_ledger(&self) -> Vec<(i64, String)> {
        let c = self.acquirer_ledger();
        let mut st = c
            .prepare("SELECT valor, status FROM gateway_refunds ORDER BY seq")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// Calls one of the app's commands from the page, as the UI would.
    pub async fn invoke(&self, cmd: &str, args: Value) -> Value {
        self.execute_async(
            "const [cmd, args, done] = arguments; \
             window.__TAURI__.core.invoke(cmd, args).then(v => done({ok: v}), e => done({err: e}));",
            json!([cmd, args]),
        )
        .await
    }

    /// Runs an asynchronous script in the page: its last argument is the callback that ends it
    /// with a value (within WebDriver's script timeout, 30 s).
    pub async fn execute_async(&self, script: &str, args: Value) -> Value {
        self.wd(
            reqwest::Method::POST,
            "/execute/async",
            json!({"script": script, "args": args}),
        )
        .await
    }

    pub async fn close(self) {
        let _ = self.http.delete(&self.session_url).send().await;
        drop(self.driver);
        drop(self.xvfb);
    }
}

/// A private X display; `(its process group, ":N")`.
fn start_xvfb() -> (Group, String) {
    use std::os::unix::process::CommandExt;
    let mut xvfb = Command::new("Xvfb")
        .args([
            "-displayfd",
            "1",
            "-screen",
            "0",
            "1280x860x24",
            "-nolisten",
            "tcp",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("Xvfb is installed (make test installs it)");
    let mut line = String::new();
    BufReader::new(xvfb.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (Group(xvfb), format!(":{}", line.trim()))
}

/// `command` in its own process group on a private D-Bus session, on `display`, with the app's
/// data in `data_dir` and the embedded API. The bus has no activatable services: GTK and WebKit
/// would otherwise start xdg-desktop-portal, which can hang on a headless machine (seen in CI).
fn in_session(
    display: &str,
    data_dir: &Path,
    env: &[(String, String)],
    command: &[&str],
) -> Command {
    use std::os::unix::process::CommandExt;
    let bus_config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gui/dbus-session.conf");
    // `UMASK` and `STDERR_FILE` in `env` are not passed on: the whole session runs under that
    // umask, and its log (the app's included) goes to that file.
    let umask = env
        .iter()
        .find(|(k, _)| k == "UMASK")
        .map(|(_, v)| v.as_str());
    let stderr = env
        .iter()
        .find(|(k, _)| k == "STDERR_FILE")
        .map(|(_, v)| Stdio::from(std::fs::File::create(v).expect("the log file")))
        .unwrap_or_else(Stdio::inherit);
    let mut c = match umask {
        Some(mask) => {
            let mut c = Command::new("sh");
            c.args([
                "-c",
                "umask \"$0\" && exec \"$@\"",
                mask,
                "dbus-run-session",
            ]);
            c
        }
        None => Command::new("dbus-run-session"),
    };
    c.arg(format!("--config-file={}", bus_config.display()))
        .arg("--")
        .args(command)
        .env("DISPLAY", display)
        .env("PAGAR_DATA_DIR", data_dir)
        .env("NO_AT_BRIDGE", "1")
        .env("WEBKIT_DISABLE_COMPOSITING_MODE", "1")
        .env("WEBKIT_DISABLE_DMABUF_RENDERER", "1")
        .env("RUST_LOG", "warn")
        .env("GTK_USE_PORTAL", "0")
        .env_remove("PAGAR_API_URL")
        .env_remove("PAGAR_API_KEY")
        .env_remove("PAGAR_CA_CERT")
        .env_remove("PAGAR_QA")
        .envs(
            env.iter()
                .filter(|(k, _)| k != "UMASK" && k != "STDERR_FILE")
                .map(|(k, v)| (k, v)),
        )
        .stdout(Stdio::null())
        .stderr(stderr)
        .process_group(0);
    c
}

/// A window started without WebDriver (for memory figures): the same display, bus and
/// environment as [`GuiApp`]. Killed with its display when dropped.
#[allow(dead_code)] // used by benches/startup.rs, which includes this file
pub struct PlainWindow {
    _app: Group,
    _xvfb: Group,
    pub pid: Option<u32>,
}

#[allow(dead_code)]
impl PlainWindow {
    /// Starts `binary` on `data_dir` and gives it `settle` to open and paint its window.
    pub async fn launch(binary: &Path, data_dir: &Path, settle: Duration) -> Self {
        Self::launch_with(binary, data_dir, &[], settle).await
    }

    /// [`PlainWindow::launch`] with `env` set for the binary.
    pub async fn launch_with(
        binary: &Path,
        data_dir: &Path,
        env: &[(String, String)],
        settle: Duration,
    ) -> Self {
        let lock = ONE_WINDOW.lock().await;
        let (xvfb, display) = start_xvfb();
        let app = in_session(&display, data_dir, env, &[&binary.display().to_string()])
            .spawn()
            .expect("dbus-run-session is installed");
        let app = Group(app);
        tokio::time::sleep(settle).await;
        drop(lock);
        Self {
            pid: pid_of(binary, data_dir),
            _app: app,
            _xvfb: xvfb,
        }
    }
}

/// The pid of the app running on `data_dir`, found in /proc.
pub fn app_pid(data_dir: &Path) -> Option<u32> {
    pid_of(Path::new(env!("CARGO_BIN_EXE_pagar")), data_dir)
}

/// The app's page process (WebKit's web process, which inherits the app's environment as the
/// app left it before starting GTK): `name`'s value in its environment, `None` when unset.
pub fn page_process_env(data_dir: &Path, name: &str) -> Option<String> {
    let web = Path::new("/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/WebKitWebProcess");
    let pid = pid_of(web, data_dir).expect("the app's web process is running");
    let env = std::fs::read(format!("/proc/{pid}/environ")).expect("its environment");
    let prefix = format!("{name}=");
    env.split(|b| *b == 0).find_map(|kv| {
        let kv = std::str::from_utf8(kv).ok()?;
        kv.strip_prefix(&prefix).map(str::to_string)
    })
}

/// The pid of `binary` running with `PAGAR_DATA_DIR=data_dir`, found in /proc.
pub fn pid_of(binary: &Path, data_dir: &Path) -> Option<u32> {
    let exe = std::fs::canonicalize(binary).ok()?;
    let needle = format!("PAGAR_DATA_DIR={}", data_dir.display());
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let this = std::fs::read_link(entry.path().join("exe")).ok()?;
            let env = std::fs::read(entry.path().join("environ")).ok()?;
            let has_dir = env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes());
            (this == exe && has_dir).then_some(pid)
        })
}
