//! Memory as the bench reads it: a process tree's resident and proportional sizes by process,
//! memory pressure that makes the kernel take back what it can, and the web process's JS heap.

use super::*;

pub(super) fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// `pid` and every process below it.
pub(super) fn tree(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let child: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // pid (comm) state ppid …: comm may hold spaces, so read after its ')'.
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((child, ppid))
        })
        .collect();
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        let p = all[i];
        all.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    all
}

/// Proportional set size of `pid` and its children, in MiB.
pub(super) fn tree_pss_mib(pid: u32) -> f64 {
    by_process(pid).iter().map(|(_, pss)| pss[0]).sum()
}

/// Per process of `pid`'s tree: (name, PSS, anonymous PSS, file-backed PSS) in MiB — where the
/// memory is, and whether it is heap-like or mapped code and data.
pub(super) fn by_process(pid: u32) -> Vec<(String, [f64; 3])> {
    tree(pid)
        .into_iter()
        .filter_map(|p| {
            let name = std::fs::read_to_string(format!("/proc/{p}/comm")).ok()?;
            let rollup = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")).ok()?;
            let field = |f: &str| -> f64 {
                rollup
                    .lines()
                    .find_map(|l| l.strip_prefix(f))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
                    / 1024.0
            };
            Some((
                name.trim().to_string(),
                [field("Pss:"), field("Pss_Anon:"), field("Pss_File:")],
            ))
        })
        .collect()
}

/// The `blank_window` example next to the bench's own binary (`target/release/examples/`).
pub(super) fn blank_window() -> PathBuf {
    let exe = Path::new(env!("CARGO_BIN_EXE_pagar"));
    exe.parent()
        .expect("the binary's folder")
        .join("examples/blank_window")
}

/// (RSS of the process, PSS of the process and its children) of `binary` idle after its window
/// opened, started without WebDriver, and where that PSS is.
pub(super) async fn plain_idle(binary: &Path) -> ((f64, f64), Vec<(String, [f64; 3])>) {
    let dir = tempfile::tempdir().unwrap();
    let window = PlainWindow::launch(binary, dir.path(), Duration::from_secs(6)).await;
    let pid = window
        .pid
        .unwrap_or_else(|| panic!("{} is running", binary.display()));
    ((rss_mib(pid), tree_pss_mib(pid)), by_process(pid))
}

/// Prints `from -> to` per process: (PSS, anonymous, file-backed) MiB. The first process of each
/// is the app itself (whatever its name); its children are paired by name.
pub(super) fn compare(from: &[(String, [f64; 3])], to: &[(String, [f64; 3])]) {
    for (i, (name, a)) in to.iter().enumerate() {
        let w = if i == 0 {
            from.first()
        } else {
            from.iter().find(|(n, _)| n == name)
        }
        .map(|(_, w)| *w)
        .unwrap_or_default();
        println!(
            "  {name:<22} {:6.1} {:6.1} {:6.1}  ->  {:6.1} {:6.1} {:6.1}   (+{:.1} anonymous)",
            w[0],
            w[1],
            w[2],
            a[0],
            a[1],
            a[2],
            a[1] - w[1]
        );
    }
}

/// WebKit's own memory-pressure signal, sent on purpose, so that a memory figure is what the app
/// holds rather than what its garbage collector has not got round to. WebKitGTK's UI process (the
/// app) watches the memory cgroup it runs in (`MemoryPressureMonitor`, every 1–5 s) and, when
/// the cgroup uses 95 % of its limit or more, sends its web and network processes a critical
/// memory-pressure event: they collect garbage and drop their caches. The bench moves itself
/// into a memory cgroup (v1) of its own before it starts the measured app, so the app and its
/// WebKit processes are in it too; [`Pressure::signal`] holds the group's limit just above what
/// it uses until the monitor has seen it, then lifts the limit.
pub(super) struct Pressure {
    pub(super) group: PathBuf,
    pub(super) parent: PathBuf,
}

/// Samples of the app's memory, each after a signal; the figure is their median.
pub(super) const PRESSURE_SAMPLES: usize = 3;

impl Pressure {
    /// Creates the group and moves this process into it; `None` where there is no writable
    /// cgroup v1 memory controller (the figures are then taken without the signal, and say so).
    pub(super) fn join() -> Option<Self> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let path = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            controllers
                .split(',')
                .any(|c| c == "memory")
                .then(|| path.trim_start_matches('/').to_string())
        })?;
        let parent = Path::new("/sys/fs/cgroup/memory").join(path);
        let group = parent.join(format!("pagar-bench-{}", std::process::id()));
        std::fs::create_dir_all(&group).ok()?;
        let pressure = Self { group, parent };
        std::fs::write(
            pressure.group.join("cgroup.procs"),
            std::process::id().to_string(),
        )
        .ok()?;
        Some(pressure)
    }

    fn usage(&self) -> Option<u64> {
        std::fs::read_to_string(self.group.join("memory.usage_in_bytes"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Holds the limit at 97 % above the usage for 7 s (the monitor polls every 5 s while memory
    /// is plentiful, every second once it is not), following the usage as it moves, then lifts it.
    async fn signal(&self) -> bool {
        let limit = self.group.join("memory.limit_in_bytes");
        let mut held = false;
        for _ in 0..14 {
            if let Some(usage) = self.usage() {
                let at = (usage * 100 / 97).div_ceil(4096) * 4096;
                held |= std::fs::write(&limit, at.to_string()).is_ok();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let lifted = std::fs::write(&limit, "-1").is_ok();
        held && lifted
    }
}

impl Drop for Pressure {
    /// Every process still in the group back to the parent group, then the group removed; for
    /// up to 5 s, while the app's processes finish exiting (a group with a task cannot go).
    fn drop(&mut self) {
        let _ = std::fs::write(self.group.join("memory.limit_in_bytes"), "-1");
        for _ in 0..50 {
            let procs =
                std::fs::read_to_string(self.group.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines() {
                let _ = std::fs::write(self.parent.join("cgroup.procs"), pid);
            }
            if std::fs::remove_dir(&self.group).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("{} could not be removed", self.group.display());
    }
}

/// The app's memory (RSS of the process, PSS of its tree, where that PSS is) after a memory
/// pressure signal, [`PRESSURE_SAMPLES`] times: the sample of median PSS, and the tree's PSS
/// before the first signal (what the signals released is the difference).
pub(super) async fn after_pressure(pressure: Option<&Pressure>, pid: u32) -> Memory {
    let before = tree_pss_mib(pid);
    let mut samples = Vec::new();
    for _ in 0..PRESSURE_SAMPLES {
        if let Some(p) = pressure {
            assert!(p.signal().await, "the memory cgroup's limit could be set");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        samples.push(((rss_mib(pid), tree_pss_mib(pid)), by_process(pid)));
    }
    samples.sort_by(|a, b| a.0 .1.total_cmp(&b.0 .1));
    let (memory, by) = samples.swap_remove(samples.len() / 2);
    (memory, by, before)
}

/// The page's JavaScript heap (MiB live after JavaScriptCore's last full collection) from JSC's
/// own log (`JSC_logGC=1`): a full collection starts on a line `START … => FullCollection` and
/// ends on a line `… => <live>kb, … END]`.
pub(super) fn js_heap_mib(log: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(log).ok()?;
    let (mut full, mut last) = (false, None);
    for line in text.lines().filter(|l| l.starts_with("[GC<")) {
        if line.contains(" START ") {
            full = line.contains("=> FullCollection");
        }
        if full && line.ends_with("END]") {
            let live = line
                .rsplit_once("=> ")
                .and_then(|(_, r)| r.split_once("kb"));
            if let Some(kb) = live.and_then(|(n, _)| n.trim().parse::<f64>().ok()) {
                last = Some(kb / 1024.0);
            }
            full = false;
        }
    }
    last
}

/// `1.9 MiB`, or that the log had no full collection.
pub(super) fn mib(v: Option<f64>) -> String {
    v.map_or_else(
        || "no full collection logged".into(),
        |m| format!("{m:.1} MiB"),
    )
}

/// The anonymous memory (MiB, PSS) of the web process in a [`by_process`] list (`comm` keeps 15
/// characters: `WebKitWebProces`).
pub(super) fn web_anonymous(by: &[(String, [f64; 3])]) -> f64 {
    by.iter()
        .filter(|(name, _)| name.contains("WebProces"))
        .map(|(_, m)| m[1])
        .sum()
}
