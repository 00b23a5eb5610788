//! A W3C WebDriver session over plain HTTP, and headless Chromium through Debian's
//! `chromium-driver` (`chromedriver`): how a web page (the card machine simulator's) is tested in
//! a real browser. `make test` installs both.

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a page gets to reach a state before a test fails.
pub const PAGE_WAIT: Duration = Duration::from_secs(20);

/// One WebDriver session.
pub struct Session {
    http: reqwest::Client,
    url: String,
}

impl Session {
    /// Opens a session at the driver `driver_url` with `capabilities`.
    pub async fn open(driver_url: &str, capabilities: Value) -> Result<Self, String> {
        let http = reqwest::Client::new();
        let res: Value = http
            .post(format!("{driver_url}/session"))
            .json(&json!({"capabilities": {"alwaysMatch": capabilities}}))
            .send()
            .await
            .map_err(|e| format!("WebDriver session: {e}"))?
            .json()
            .await
            .map_err(|e| format!("WebDriver session: {e}"))?;
        let id = res["value"]["sessionId"]
            .as_str()
            .ok_or_else(|| format!("no WebDriver session: {res}"))?;
        Ok(Self {
            url: format!("{driver_url}/session/{id}"),
            http,
        })
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.url));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res: Value = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {path}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {path}: {e}"));
        if let Some(err) = res["value"].get("error") {
            panic!("WebDriver {path}: {err} {}", res["value"]["message"]);
        }
        res["value"].clone()
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// The element reference of the first match of a CSS selector.
    async fn element(&self, css: &str) -> String {
        let found = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_string()
    }

    /// A real click (pointer events) on the first match of `css`.
    pub async fn click(&self, css: &str) {
        let el = self.element(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{el}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// The rendered text of the first match of `css`.
    pub async fn text(&self, css: &str) -> String {
        let el = self.element(css).await;
        self.call(reqwest::Method::GET, &format!("/element/{el}/text"), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Whether the first match of `css` is enabled.
    pub async fn enabled(&self, css: &str) -> bool {
        let el = self.element(css).await;
        self.call(
            reqwest::Method::GET,
            &format!("/element/{el}/enabled"),
            None,
        )
        .await
        .as_bool()
        .unwrap_or(false)
    }

    /// Waits until the text of `css` contains `wanted`, and returns it.
    pub async fn wait_text(&self, css: &str, wanted: &str) -> String {
        let deadline = Instant::now() + PAGE_WAIT;
        let mut seen = String::new();
        while Instant::now() < deadline {
            seen = self.text(css).await;
            if seen.contains(wanted) {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{css} never showed {wanted:?}; it shows {seen:?}");
    }

    /// Saves a PNG of the page at `path`.
    pub async fn screenshot(&self, path: &Path) {
        let b64 = self.call(reqwest::Method::GET, "/screenshot", None).await;
        use base64::Engine as _;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or_default())
            .expect("a base64 screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }

    /// Ends the session (closes the browser).
    pub async fn close(&self) {
        let _ = self.http.delete(&self.url).send().await;
    }
}

/// Headless Chromium driven by `chromedriver` on a free loopback port; both stop on drop.
pub struct Chromium {
    driver: Child,
    pub session: Session,
    _profile: tempfile::TempDir,
}

impl Chromium {
    /// Starts `chromedriver` and a headless Chromium session with a fresh profile, the window
    /// `width`×`height`.
    pub async fn start(width: u32, height: u32) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver; `make test` installs it)");
        let url = format!("http://127.0.0.1:{port}");
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let session = loop {
            match Session::open(&url, caps.clone()).await {
                Ok(s) => break s,
                Err(e) if Instant::now() > deadline => panic!("{e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        Self {
            driver,
            session,
            _profile: profile,
        }
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
