//! The servers of the rounds beside the peer, each a release process of its own, started fresh
//! for each run, as each would be deployed: Pagar (the `payment-api` binary, on this machine's
//! disk, or with every fsync made to wait a fixed delay: a slow disk made on purpose), the peer
//! and the ceiling (this bench started again with [`SERVE`] set, each in a
//! runtime of its own), and the acquirer both charge at (the `adquirente` binary, its ledger on
//! a file of its own). In-process, a peer shares the bench's runtime and measures the bench's
//! scheduling as much as itself.

use super::API_KEY;
use pagar_testkit::AcquirerProcess;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Set to `peer`, `ceiling` or `raw-commits`, this bench does that instead of measuring.
pub(crate) const SERVE: &str = "PAGAR_BENCH_SERVE";
/// The ceiling's one answer.
pub(crate) const BODY: &str = "PAGAR_BENCH_BODY";
/// The raw commits on the slow disk: `<database>|<count>`.
pub(crate) const RAW: &str = "PAGAR_BENCH_RAW";

/// A server process, killed when dropped.
pub(crate) struct Server {
    child: Child,
    /// Its `POST /pagamentos`.
    pub url: String,
    /// Where its charges are counted: the acquirer's ledger file and the merchant it charges
    /// for there (none for the ceiling).
    pub ledger: Option<(PathBuf, &'static str)>,
    /// The peer: the session cookie every request sends.
    pub cookie: String,
}

impl Server {
    /// Starts `command` and reads the address it prints (`listening on http://…`).
    pub(crate) fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("the server process starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("the server prints its address");
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the server printed {line:?}"))
            .to_string();
        Self {
            child,
            url: format!("{base}/pagamentos"),
            ledger: None,
            cookie: String::new(),
        }
    }

    /// Its base address (where `/metrics` is).
    pub fn base(&self) -> String {
        self.url.trim_end_matches("/pagamentos").to_string()
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its charges so far, counted in the acquirer's own ledger (read from its file).
    pub fn charges(&self) -> u64 {
        let (file, merchant) = self.ledger.as_ref().expect("a server that charges");
        let c = rusqlite::Connection::open(file).expect("the acquirer's ledger");
        c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        c.query_row(
            "SELECT count(*) FROM gateway_ledger WHERE merchant = ?1",
            [merchant],
            |r| r.get(0),
        )
        .expect("its ledger")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The merchant Pagar charges for (its API key's).
const PAGAR_MERCHANT: &str = "loja_bench";

/// The acquirer, the release binary, its ledger in `<folder>/<name>/`, fresh.
pub(crate) fn acquirer(folder: &Path, name: &str) -> AcquirerProcess {
    let dir = folder.join(name);
    std::fs::create_dir_all(&dir).expect("the acquirer's folder");
    AcquirerProcess::start(&dir)
}

/// Pagar, the release binary, on a fresh database `<folder>/<name>.db`, charging cards at
/// `acquirer`; request logging at INFO (to a file, as a deployment's log shipper would read it)
/// or off.
pub(crate) fn pagar(
    folder: &Path,
    name: &str,
    logging: bool,
    acquirer: &AcquirerProcess,
) -> Server {
    pagar_on(folder, name, logging, acquirer, None)
}

/// [`pagar`], its fsyncs made by `disk` when given (slowed, and counted).
pub(crate) fn pagar_on(
    folder: &Path,
    name: &str,
    logging: bool,
    acquirer: &AcquirerProcess,
    disk: Option<&SlowSync>,
) -> Server {
    pagar_with(folder, name, logging, acquirer, disk, &[])
}

/// [`pagar_on`] with more of the server's flags (`args`); its database is `<folder>/<name>.db`,
/// fresh unless the caller made it.
pub(crate) fn pagar_with(
    folder: &Path,
    name: &str,
    logging: bool,
    acquirer: &AcquirerProcess,
    disk: Option<&SlowSync>,
    args: &[String],
) -> Server {
    let database = folder.join(format!("{name}.db"));
    let log = std::fs::File::create(folder.join(format!("{name}.log"))).expect("a log file");
    let mut command = Command::new(env!("CARGO_BIN_EXE_payment-api"));
    command
        .args(["--listen", "127.0.0.1:0", "--api-key"])
        .arg(format!("{API_KEY}={PAGAR_MERCHANT}"))
        .arg("--database")
        .arg(&database)
        .args(acquirer.api_flags())
        .args(args)
        .env("RUST_LOG", if logging { "info" } else { "off" })
        .stderr(log);
    if let Some(disk) = disk {
        disk.apply(&mut command);
    }
    let mut server = Server::spawn(command);
    server.ledger = Some((acquirer.ledger_file(), PAGAR_MERCHANT));
    server
}

fn this_bench(serve: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the bench knows its path"));
    command.env(SERVE, serve).stderr(Stdio::inherit());
    command
}

/// The peer in a process of its own, charging cards at `acquirer`, with its merchant's session
/// open.
pub(crate) async fn peer(acquirer: &AcquirerProcess) -> Server {
    let mut command = this_bench("peer");
    command.env(super::peer::ACQUIRER, acquirer.url());
    let mut server = Server::spawn(command);
    server.cookie = super::peer::login(&server.url).await;
    server.ledger = Some((acquirer.ledger_file(), super::peer::MERCHANT));
    server
}

/// The ceiling in a process of its own, answering `body` to every request.
pub(crate) fn ceiling(body: &[u8]) -> Server {
    let mut command = this_bench("ceiling");
    command.env(BODY, String::from_utf8_lossy(body).as_ref());
    Server::spawn(command)
}

/// This machine's disk with every fsync made slower on purpose: the `slowsync` shim
/// (`crates/slowsync`, loaded with `LD_PRELOAD`) in a process makes each of its fsyncs wait a
/// fixed delay (none: the disk as it is) before it syncs, and counts them. Writes reach the page cache as on any disk, so
/// the figure is what a slow flush costs, and does not depend on this machine's disk.
pub(crate) struct SlowSync {
    library: PathBuf,
    count: PathBuf,
    delay_ms: u64,
}

impl SlowSync {
    /// Counting into `<dir>/<name>.syncs`.
    pub fn new(dir: &Path, name: &str, delay_ms: u64) -> Self {
        // The bench runs from target/release/deps/; the shim is built to target/release/.
        let exe = std::env::current_exe().expect("the bench knows its path");
        let library = exe
            .parent()
            .and_then(Path::parent)
            .expect("the bench's folder")
            .join("libslowsync.so");
        assert!(
            library.exists(),
            "{} is missing: cargo build --release -p slowsync (make bench does)",
            library.display()
        );
        Self {
            library,
            count: dir.join(format!("{name}.syncs")),
            delay_ms,
        }
    }

    /// Makes `command`'s process a user of the slow disk.
    pub fn apply(&self, command: &mut Command) {
        command
            .env("LD_PRELOAD", &self.library)
            .env("SLOWSYNC_DELAY_US", (self.delay_ms * 1_000).to_string())
            .env("SLOWSYNC_COUNT", &self.count);
    }

    /// The fsyncs made so far.
    pub fn syncs(&self) -> u64 {
        std::fs::read(&self.count)
            .ok()
            .and_then(|b| {
                b.get(..8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            })
            .unwrap_or(0)
    }

    /// A durable SQLite commit alone on this disk: the p50 of `n` in a row (ms), in a process
    /// of its own that uses the slow disk (this bench started again).
    pub fn raw_commit_p50_ms(&self, database: &Path, n: usize) -> f64 {
        let mut command = this_bench("raw-commits");
        command.env(RAW, format!("{}|{n}", database.display()));
        self.apply(&mut command);
        let out = command.output().expect("the raw commits run");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("raw commits printed {:?}", out.stdout))
    }
}

/// Serves what [`SERVE`] names, when it is set; returns false otherwise.
pub(crate) fn serve_if_asked() -> bool {
    let Ok(what) = std::env::var(SERVE) else {
        return false;
    };
    let runtime = || tokio::runtime::Runtime::new().expect("a runtime");
    match what.as_str() {
        "peer" => runtime().block_on(super::peer::serve()),
        "ceiling" => {
            let body = std::env::var(BODY).expect("the ceiling's answer");
            runtime().block_on(super::serve_constant(body.into_bytes()))
        }
        "raw-commits" => {
            let raw = std::env::var(RAW).expect("the raw commits' database and count");
            let (database, n) = raw.rsplit_once('|').expect("<database>|<n>");
            let latencies = durable_sqlite::reference::raw_commit_latencies(
                Path::new(database),
                n.parse().expect("a count"),
            )
            .expect("raw commits");
            println!(
                "{}",
                durable_sqlite::reference::percentile_ms(&latencies, 0.5)
            );
        }
        other => panic!("{SERVE}={other}: peer, ceiling or raw-commits"),
    }
    true
}
