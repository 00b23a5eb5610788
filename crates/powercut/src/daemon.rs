//! A `Volatile` in a process of its own (`serve`, `Daemon`), answering `cut`, `syncs` and `quit`
//! on standard input.

use super::*;

/// Serves `folder` at `mountpoint` with volatile writes until `commands` ends or says `quit`:
/// the loop of the `powercut` binary (and of a test's child process). It answers on `answers`:
/// `powercut: mounted` once the mount serves; for `cut`, it unmounts, drops every unsynced write,
/// answers `powercut: cut <files> <bytes> <pages>`, mounts again and answers `powercut: mounted`; for
/// `syncs`, answers `powercut: syncs <n>`, the syncs made so far (lines
/// without the prefix, a test harness's say, are not answers).
///
/// It runs in a process of its own, never in one that uses the mount: a shared mapping's
/// write-back holds the using process's memory lock while it waits for this daemon, which needs
/// that same lock to read the request when both are one process.
pub fn serve(
    folder: &Path,
    mountpoint: &Path,
    fsync_delay: Duration,
    commands: impl io::BufRead,
    answers: impl io::Write,
) -> io::Result<()> {
    serve_with(
        Volatile::new(folder, fsync_delay),
        mountpoint,
        commands,
        answers,
    )
}

/// [`serve`] for a filesystem made by the caller.
pub fn serve_with(
    fs: Volatile,
    mountpoint: &Path,
    commands: impl io::BufRead,
    mut answers: impl io::Write,
) -> io::Result<()> {
    let mut mounted = Some(fs.mount(mountpoint)?);
    writeln!(answers, "powercut: mounted")?;
    answers.flush()?;
    for line in commands.lines() {
        match line?.trim() {
            "cut" => {
                if let Some(m) = mounted.take() {
                    m.unmount();
                }
                let r = fs.cut()?;
                writeln!(
                    answers,
                    "powercut: cut {} {} {}",
                    r.files, r.bytes_dropped, r.pages_dropped
                )?;
                match fs.remount(mountpoint) {
                    Ok(m) => {
                        mounted = Some(m);
                        writeln!(answers, "powercut: mounted")?;
                    }
                    Err(e) => writeln!(answers, "powercut: error mount again: {e}")?,
                }
            }
            "syncs" => writeln!(answers, "powercut: syncs {}", fs.syncs())?,
            "quit" => break,
            other => writeln!(answers, "powercut: error unknown command {other:?}")?,
        }
        answers.flush()?;
    }
    drop(mounted);
    Ok(())
}

/// The body of a test's child process that serves the filesystem: when the environment
/// variable `var` says `<folder>|<mountpoint>`, serves it on standard input and output (see
/// [`serve`]) and returns true; otherwise (the test run as an ordinary test) returns false.
pub fn serve_if_asked(var: &str) -> io::Result<bool> {
    let Ok(args) = std::env::var(var) else {
        return Ok(false);
    };
    let (folder, mountpoint) = args
        .split_once('|')
        .ok_or_else(|| io::Error::other(format!("{var} must be <folder>|<mountpoint>")))?;
    serve(
        Path::new(folder),
        Path::new(mountpoint),
        Duration::ZERO,
        io::stdin().lock(),
        io::stdout().lock(),
    )?;
    Ok(true)
}

/// A [`serve`] loop in another process, driven from this one.
#[derive(Debug)]
pub struct Daemon {
    pub(super) child: std::process::Child,
    pub(super) commands: std::process::ChildStdin,
    pub(super) answers: io::BufReader<std::process::ChildStdout>,
    pub(super) mountpoint: PathBuf,
}

impl Daemon {
    /// Starts `command` (which runs [`serve`] for `mountpoint`) and waits until it serves.
    pub fn start(mut command: std::process::Command, mountpoint: &Path) -> io::Result<Self> {
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        let commands = child.stdin.take().expect("piped");
        let answers = io::BufReader::new(child.stdout.take().expect("piped"));
        let mut d = Self {
            child,
            commands,
            answers,
            mountpoint: mountpoint.to_path_buf(),
        };
        d.expect("mounted")?;
        Ok(d)
    }

    /// The power goes: unmount, drop every unsynced write, mount again. Kill the programs using
    /// the mount first.
    pub fn cut(&mut self) -> io::Result<CutReport> {
        use io::Write;
        writeln!(self.commands, "cut")?;
        self.commands.flush()?;
        let line = self.answer()?;
        let mut parts = line.split(' ');
        let report = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("cut"), Some(files), Some(bytes), Some(pages)) => CutReport {
                files: files.parse().map_err(io::Error::other)?,
                bytes_dropped: bytes.parse().map_err(io::Error::other)?,
                pages_dropped: pages.parse().map_err(io::Error::other)?,
            },
            _ => return Err(io::Error::other(format!("powercut answered {line:?}"))),
        };
        self.expect("mounted")?;
        Ok(report)
    }

    /// The syncs (`fsync`/`fdatasync`) the programs on it made so far, each of which waited the
    /// filesystem's fsync delay.
    pub fn syncs(&mut self) -> io::Result<u64> {
        use io::Write;
        writeln!(self.commands, "syncs")?;
        self.commands.flush()?;
        let line = self.answer()?;
        line.strip_prefix("syncs ")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| io::Error::other(format!("powercut answered {line:?}")))
    }

    pub(super) fn answer(&mut self) -> io::Result<String> {
        use io::BufRead;
        loop {
            let mut line = String::new();
            if self.answers.read_line(&mut line)? == 0 {
                return Err(io::Error::other("powercut ended"));
            }
            if let Some(answer) = line.trim().strip_prefix("powercut: ") {
                return Ok(answer.to_string());
            }
        }
    }

    pub(super) fn expect(&mut self, what: &str) -> io::Result<()> {
        match self.answer()? {
            line if line == what => Ok(()),
            line => Err(io::Error::other(format!(
                "powercut answered {line:?}, not {what:?}"
            ))),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        use io::Write;
        let _ = writeln!(self.commands, "quit");
        let _ = self.commands.flush();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.mountpoint)
            .status();
    }
}
