//! The servers of the rounds beside the peer, each a release process of its own, started fresh
//! for each run, as each would be deployed: Pagar (the `payment-api` binary, its database on the
//! disk or on a power-cut filesystem whose every fsync waits a fixed delay: a slow disk made on
//! purpose), the peer and the ceiling (this bench started again with [`SERVE`] set, each in a
//! runtime of its own). In-process, a peer shares the bench's runtime and measures the bench's
//! scheduling as much as itself.

use super::API_KEY;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Set to `peer`, `ceiling` or `powercut`, this bench serves that instead of measuring.
pub(crate) const SERVE: &str = "PAGAR_BENCH_SERVE";
/// The ceiling's one answer.
pub(crate) const BODY: &str = "PAGAR_BENCH_BODY";
/// The slow disk: `<folder>|<mountpoint>|<fsync delay in ms>`.
pub(crate) const DISK: &str = "PAGAR_BENCH_DISK";

/// A server process, killed when dropped.
pub(crate) struct Server {
    child: Child,
    /// Its `POST /pagamentos`.
    pub url: String,
    /// Pagar: its database file (the charges are counted in its ledger).
    pub database: Option<PathBuf>,
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
            database: None,
            cookie: String::new(),
        }
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Charges in Pagar's ledger (read from its database file).
    pub fn charges(&self) -> u64 {
        let db = self.database.as_ref().expect("a Pagar server");
        let c = rusqlite::Connection::open(db).expect("Pagar's database");
        c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        c.query_row("SELECT count(*) FROM gateway_ledger", [], |r| r.get(0))
            .expect("its ledger")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pagar, the release binary, on a fresh database `<folder>/<name>.db`; request logging at INFO
/// (to a file, as a deployment's log shipper would read it) or off.
pub(crate) fn pagar(folder: &Path, logs: &Path, name: &str, logging: bool) -> Server {
    let database = folder.join(format!("{name}.db"));
    let log = std::fs::File::create(logs.join(format!("{name}.log"))).expect("a log file");
    let mut command = Command::new(env!("CARGO_BIN_EXE_payment-api"));
    command
        .args(["--listen", "127.0.0.1:0", "--api-key"])
        .arg(format!("{API_KEY}=loja_bench"))
        .arg("--database")
        .arg(&database)
        .env("RUST_LOG", if logging { "info" } else { "off" })
        .stderr(log);
    let mut server = Server::spawn(command);
    server.database = Some(database);
    server
}

fn this_bench(serve: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the bench knows its path"));
    command.env(SERVE, serve).stderr(Stdio::inherit());
    command
}

/// The peer in a process of its own, with its merchant's session open.
pub(crate) async fn peer() -> Server {
    let mut server = Server::spawn(this_bench("peer"));
    server.cookie = super::peer::login(&server.url).await;
    server
}

/// The ceiling in a process of its own, answering `body` to every request.
pub(crate) fn ceiling(body: &[u8]) -> Server {
    let mut command = this_bench("ceiling");
    command.env(BODY, String::from_utf8_lossy(body).as_ref());
    Server::spawn(command)
}

/// A folder on a `powercut` filesystem in its slow-disk mode: every fsync waits `delay_ms`,
/// nothing is copied aside or cut. A disk made slow on purpose, so the figure does not depend on
/// this machine's disk; with `delay_ms` 0 it measures what the FUSE passthrough itself costs.
pub(crate) struct SlowDisk {
    daemon: powercut::Daemon,
    pub mountpoint: PathBuf,
}

impl SlowDisk {
    pub fn mount(dir: &Path, name: &str, delay_ms: u64) -> Self {
        let backing = dir.join(format!("{name}-disk"));
        let mountpoint = dir.join(name);
        std::fs::create_dir_all(&backing).unwrap();
        std::fs::create_dir_all(&mountpoint).unwrap();
        let mut command = this_bench("powercut");
        command.env(
            DISK,
            format!("{}|{}|{delay_ms}", backing.display(), mountpoint.display()),
        );
        let daemon = powercut::Daemon::start(command, &mountpoint)
            .expect("the slow disk mounts (make deps-fuse)");
        Self { daemon, mountpoint }
    }

    /// The fsyncs made on it so far.
    pub fn syncs(&mut self) -> u64 {
        self.daemon.syncs().expect("the slow disk answers")
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
        "powercut" => {
            let disk = std::env::var(DISK).expect("the slow disk's folders");
            let parts: Vec<&str> = disk.split('|').collect();
            let [folder, mountpoint, delay] = parts.as_slice() else {
                panic!("{DISK}: <folder>|<mountpoint>|<ms>");
            };
            let delay = std::time::Duration::from_millis(delay.parse().expect("milliseconds"));
            powercut::serve_with(
                powercut::Volatile::slow_disk(folder, delay),
                Path::new(mountpoint),
                std::io::stdin().lock(),
                std::io::stdout().lock(),
            )
            .expect("the slow disk serves");
        }
        other => panic!("{SERVE}={other}: peer, ceiling or powercut"),
    }
    true
}
