//! The processes of a trial: tills (with their clocks), power-cut disks, API servers and their
//! ports.

use super::*;

/// A running till.
pub(crate) struct Till {
    pub(crate) outbox: PathBuf,
    pub(crate) child: Option<Child>,
    /// What it printed, across its restarts (beside the power-cut filesystem, never on it).
    pub(crate) log: PathBuf,
    /// The power-cut filesystem its outbox is on, if the trial has them.
    pub(crate) disk: Option<Disk>,
    /// The card machine beside it, if the trial has one.
    pub(crate) machine: Option<String>,
    /// The trial's SEFAZ and this till's série, if the trial issues NFC-e.
    pub(crate) sefaz: Option<(String, u16)>,
}

/// A power-cut filesystem: the folder behind it, where it is mounted, and the daemon serving it
/// (this runner, started again with `--serve-powercut`: a process of its own).
pub(crate) struct Disk {
    pub(crate) backing: PathBuf,
    pub(crate) mountpoint: PathBuf,
    pub(crate) daemon: Daemon,
}

impl Disk {
    /// A filesystem over `<dir>/<name>-disk`, mounted at `<dir>/<name>`.
    pub(crate) fn mount(dir: &Path, name: &str) -> Result<Self, String> {
        let backing = dir.join(format!("{name}-disk"));
        let mountpoint = dir.join(name);
        let made = std::fs::create_dir_all(&backing).and(std::fs::create_dir_all(&mountpoint));
        made.map_err(|e| format!("setup: {}: {e}", mountpoint.display()))?;
        let mut serve = Command::new(std::env::current_exe().map_err(|e| format!("setup: {e}"))?);
        serve
            .arg("--serve-powercut")
            .arg(&backing)
            .arg(&mountpoint)
            .stderr(Stdio::null());
        let daemon =
            tokio::task::block_in_place(|| Daemon::start(serve, &mountpoint)).map_err(|e| {
                format!(
                    "setup: power-cut filesystem at {}: {e}",
                    mountpoint.display()
                )
            })?;
        Ok(Self {
            backing,
            mountpoint,
            daemon,
        })
    }

    /// The power goes: what the programs on it did not sync is lost. Kill them first.
    pub(crate) fn cut(&mut self) -> Result<CutReport, String> {
        tokio::task::block_in_place(|| self.daemon.cut())
            .map_err(|e| format!("power cut at {}: {e}", self.mountpoint.display()))
    }

    /// A copy of the database `name` as it stands on the disk right now, WAL included (its
    /// index is rebuilt by the copy), opened in `to`; `None` before the database was made.
    /// Reading the copy leaves the disk as it is: closing the last connection of the original
    /// would checkpoint it and make its unsynced writes durable.
    pub(crate) fn snapshot(&self, name: &str, to: &Path) -> Option<rusqlite::Connection> {
        let _ = std::fs::remove_dir_all(to);
        std::fs::create_dir_all(to).ok()?;
        for file in [name.to_string(), format!("{name}-wal")] {
            let from = self.backing.join(&file);
            if from.exists() {
                std::fs::copy(&from, to.join(&file)).ok()?;
            }
        }
        to.join(name)
            .exists()
            .then(|| rusqlite::Connection::open(to.join(name)).ok())
            .flatten()
    }
}

/// What the power cuts of a trial did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PowerCuts {
    pub(crate) server: u32,
    pub(crate) tills: u32,
    pub(crate) acquirer: u32,
    pub(crate) files: u64,
    pub(crate) bytes: u64,
    pub(crate) pages: u64,
    /// Attempts final at a till before a cut and `pendente` after it (their outcome was
    /// recorded relaxed): each is replayed with its key.
    pub(crate) back_to_pending: u32,
    /// Keys the server had claimed before a cut that the cut lost (claims are relaxed).
    pub(crate) claims_lost: u32,
}

impl PowerCuts {
    pub(crate) fn add(&mut self, other: &PowerCuts) {
        self.server += other.server;
        self.tills += other.tills;
        self.acquirer += other.acquirer;
        self.files += other.files;
        self.bytes += other.bytes;
        self.pages += other.pages;
        self.back_to_pending += other.back_to_pending;
        self.claims_lost += other.claims_lost;
    }

    pub(crate) fn dropped(&mut self, r: CutReport) {
        self.files += r.files;
        self.bytes += r.bytes_dropped;
        self.pages += r.pages_dropped;
    }
}

/// Ports for servers and proxies, below the kernel's ephemeral range (32768–60999) so that a
/// port freed by a killed server or a refusing proxy cannot be taken by an outgoing connection
/// before it is bound again; handed out round robin and checked free.
pub(crate) fn next_port() -> std::net::SocketAddr {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 20_000;
        let addr: std::net::SocketAddr = format!("127.0.0.1:{}", 10_000 + n)
            .parse()
            .expect("an address");
        if std::net::TcpListener::bind(addr).is_ok() {
            return addr;
        }
    }
}

/// A server on a port of its own; a few tries, since a start can fail for reasons outside the
/// trial (PostgreSQL out of connections while many trials run at once).
pub(crate) fn start_server(options: &ApiOptions) -> Result<ApiProcess, String> {
    let mut last = String::new();
    for _ in 0..5 {
        match ApiProcess::try_spawn(ApiOptions {
            listen: Some(next_port()),
            ..options.clone()
        }) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(last)
}

/// Brings a server back on its own address (it was killed, or aborted itself).
pub(crate) fn revive(server: &mut ApiProcess, notes: &mut Vec<String>) {
    for _ in 0..5 {
        if server.try_restart().is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    notes.push(format!(
        "setup: a server on {} did not start again",
        server.addr()
    ));
}

pub(crate) fn last_lines(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

pub(crate) fn trial_client() -> PathBuf {
    CLIENT.get().cloned().unwrap_or_else(|| {
        let exe = std::env::current_exe().expect("the runner knows its path");
        exe.with_file_name("trial-client")
    })
}

/// libfaketime, which shifts a process's wall clock (not its monotonic clock, so its timers run).
pub(crate) const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

pub(crate) fn start_till(till: &Till, url: &str, key: &str, plan: &str, drain_secs: u64) -> Child {
    start_till_at(till, url, key, plan, drain_secs, 0)
}

/// A till whose wall clock is `shift_secs` off (0: the real clock).
pub(crate) fn start_till_at(
    till: &Till,
    url: &str,
    key: &str,
    plan: &str,
    drain_secs: u64,
    shift_secs: i64,
) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&till.log)
        .expect("the till's log");
    let mut command = Command::new(trial_client());
    if shift_secs != 0 {
        command
            .env("LD_PRELOAD", FAKETIME)
            .env("FAKETIME", format!("{shift_secs:+}s"))
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    }
    command
        .arg(&till.outbox)
        .arg(url)
        .arg(key)
        .arg(if plan.is_empty() { "-" } else { plan })
        .arg(drain_secs.to_string())
        .envs(till.machine.iter().map(|m| ("TRIAL_MAQUININHA", m.clone())))
        .envs(till.sefaz.iter().flat_map(|(url, serie)| {
            [
                ("TRIAL_SEFAZ", url.clone()),
                ("TRIAL_SERIE", serie.to_string()),
            ]
        }))
        .env("RUST_LOG", "off")
        .stdout(log)
        .stderr(Stdio::null())
        .spawn()
        .expect("trial-client starts")
}

pub(crate) fn kill(child: &mut Child) {
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
}

/// Starts each till once more, once the customer is done, until it says it settled (`drained`)
/// — it asks about the Pix it closed only then; under load a run may give up first (`pending`)
/// and is started again, as in the drain. A till that never did in [`LAST_CHECK_SECS`] is named.
pub(crate) async fn ask_about_closed_pix(
    tills: &mut [Till],
    url: &str,
    key: &str,
    notes: &mut Vec<String>,
) {
    for (t, till) in tills.iter_mut().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(LAST_CHECK_SECS);
        let asked = loop {
            let mut child = start_till(till, url, key, "", 10);
            let run_ends = Instant::now() + Duration::from_secs(15);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < run_ends {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            kill(&mut child);
            if last_lines(&till.log).ends_with("drained") {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
        };
        if !asked {
            notes.push(format!(
                "till {t} did not ask about its closed Pix in {LAST_CHECK_SECS} s"
            ));
        }
    }
}
