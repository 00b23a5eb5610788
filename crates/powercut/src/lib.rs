//! A power cut for the tests: a FUSE passthrough over a folder in which **file data is volatile
//! until it is synced** — `fsync`/`fdatasync` of that file makes what it holds durable — and a
//! [`Volatile::cut`] that drops every write not synced since, as a machine losing power would.
//!
//! `kill -9` does not test durability: the page cache survives a killed process, so every write
//! the kernel had not flushed still reaches the disk. Mounted here, a program's files keep only
//! what it synced once the power is cut: SQLite in WAL mode with `synchronous=FULL` keeps every
//! commit, with `synchronous=OFF` it loses them (the self-test checks both, so the filesystem is
//! known to simulate something).
//!
//! **What is durable at once**: creating, renaming and unlinking a file, making and removing a
//! folder, and a file's permissions and times. A real filesystem may also lose those when the
//! power goes unless the folder is synced; treating them as durable makes a cut *kinder* than a
//! real one about names, never about data. That is the safe side for these tests: what they
//! check is that a program syncs the **data** it acknowledges (SQLite's WAL and database files are
//! made once and never renamed; its journal's unlink after a commit is the commit's own last
//! step), so a failure found here is a real one, and a pass says nothing about renames.
//!
//! How it keeps the difference: the first time a file's data changes after its last sync (a
//! write, a truncation, an open with `O_TRUNC`), the file as it was is copied aside; a sync of
//! the file drops that copy; a cut writes every copy back. Files are expected to be small (test
//! databases): a copy is the whole file.
//!
//! **Serve it from a process of its own** ([`serve`], the `powercut` binary, [`Daemon`]): a
//! process must never use a FUSE mount it serves itself. Unmapping a shared mapping (SQLite's
//! `-shm` wal-index) writes its dirty pages back while holding the process's memory lock, and the
//! daemon, in that same process, needs that lock to read the request: both wait forever.
//!
//! Mount with [`Volatile::mount`]; a cut is made with the filesystem **unmounted** (the programs
//! using it killed first), so the kernel's caches of the mount go with it: [`Mounted::unmount`],
//! [`Volatile::cut`], then mount again.

use fuse_mt::{
    CallbackResult, CreatedEntry, DirectoryEntry, FileAttr, FileType, FilesystemMT, FuseMT,
    RequestInfo, ResultCreate, ResultData, ResultEmpty, ResultEntry, ResultOpen, ResultReaddir,
    ResultSlice, ResultStatfs, ResultWrite, Statfs,
};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod daemon;
mod passthrough;

pub use daemon::*;
use passthrough::*;

/// How long the kernel may cache what this filesystem answers about names and attributes.
const TTL: Duration = Duration::from_secs(0);

/// A folder whose files, seen through the mount, lose what they did not sync when the power is
/// cut. Cheap to clone; clones share the state.
#[derive(Debug, Clone)]
pub struct Volatile {
    backing: PathBuf,
    state: Arc<Mutex<State>>,
    fsync_delay: Duration,
}

#[derive(Debug, Default)]
struct State {
    /// The durable content of each file written since its last sync, by path in the folder.
    durable: HashMap<PathBuf, Vec<u8>>,
    /// Open files by handle.
    open: HashMap<u64, File>,
    next_fh: u64,
    /// Syncs made (each one waited `fsync_delay`).
    syncs: u64,
}

/// What a cut dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CutReport {
    /// Files put back as they were at their last sync.
    pub files: u64,
    /// Bytes that were never synced: those that differed from the synced content, and those
    /// past its end (SQLite's `-shm` wal-index, never synced and rebuilt at open, left out).
    pub bytes_dropped: u64,
    /// The 4 KiB pages those bytes lie in (SQLite's default page size: what a database lost).
    pub pages_dropped: u64,
}

/// The page size [`CutReport::pages_dropped`] counts in.
pub const PAGE: usize = 4096;

/// The mount: unmounted when dropped.
pub struct Mounted {
    session: Option<fuser::BackgroundSession>,
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mounted")
    }
}

impl Mounted {
    /// Unmounts and waits until no request is being served (what dropping it does).
    pub fn unmount(self) {}
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(mut session) = self.session.take() {
            // `BackgroundSession::join` panics when its loop ended with an error; a connection
            // the kernel ended without a clean unmount (aborted, say) ends it with one, and the
            // mount is gone all the same. So: unmount (dropping the session), then wait for the
            // loop, whatever it answers.
            let serving = std::mem::replace(&mut session.guard, std::thread::spawn(|| Ok(())));
            drop(session);
            let _ = serving.join();
        }
    }
}

impl Volatile {
    /// Volatile writes over `backing` (a folder that exists). Every sync waits `fsync_delay`
    /// first (zero: as fast as the folder's own disk, which this does not sync: a cut is the
    /// only power loss these tests know).
    pub fn new(backing: impl Into<PathBuf>, fsync_delay: Duration) -> Self {
        Self {
            backing: backing.into(),
            state: Arc::default(),
            fsync_delay,
        }
    }

    /// Mounts the folder at `mountpoint` (an empty folder). Needs `/dev/fuse` and `fusermount3`.
    pub fn mount(&self, mountpoint: &Path) -> io::Result<Mounted> {
        let fs = FuseMT::new(self.clone(), 0);
        let options = [
            fuser::MountOption::FSName("powercut".into()),
            fuser::MountOption::DefaultPermissions,
        ];
        let session = fuser::spawn_mount2(fs, mountpoint, &options)?;
        Ok(Mounted {
            session: Some(session),
        })
    }

    /// [`Volatile::mount`] again after an unmount: on a loaded machine the kernel may still be
    /// tearing the last mount down (the mountpoint busy for a moment), so it tries for up to 10 s
    /// before it gives up with the last error.
    pub fn remount(&self, mountpoint: &Path) -> io::Result<Mounted> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match self.mount(mountpoint) {
                Ok(m) => return Ok(m),
                Err(e) if std::time::Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// The power goes: every file written since its last sync is put back as it was then.
    /// Make it with the filesystem unmounted (see the crate's documentation).
    pub fn cut(&self) -> io::Result<CutReport> {
        let mut state = self.lock();
        state.open.clear();
        let mut report = CutReport::default();
        for (rel, durable) in state.durable.drain() {
            let path = self.backing.join(&rel);
            let now = match fs::read(&path) {
                Ok(now) => now,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let differing = now
                .iter()
                .zip(durable.iter())
                .filter(|(a, b)| a != b)
                .count() as u64;
            let grown = (now.len() as u64).saturating_sub(durable.len() as u64);
            report.files += 1;
            fs::write(&path, &durable)?;
            // SQLite's `-shm` wal-index is never synced and is rebuilt when the database is
            // opened after a cut: what it loses is no data.
            if rel.to_string_lossy().ends_with("-shm") {
                continue;
            }
            report.bytes_dropped += differing + grown;
            report.pages_dropped += now
                .chunks(PAGE)
                .enumerate()
                .filter(|(i, page)| durable.get(i * PAGE..).is_none_or(|d| !d.starts_with(page)))
                .count() as u64;
        }
        Ok(report)
    }

    /// Files written and not synced since.
    pub fn unsynced_files(&self) -> usize {
        self.lock().durable.len()
    }

    /// Syncs made so far.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn real(&self, path: &Path) -> PathBuf {
        self.backing.join(path.strip_prefix("/").unwrap_or(path))
    }

    fn rel(path: &Path) -> PathBuf {
        path.strip_prefix("/").unwrap_or(path).to_path_buf()
    }

    /// Copies the file aside before its first change since its last sync.
    fn before_change(&self, state: &mut State, path: &Path) -> Result<(), libc::c_int> {
        if let std::collections::hash_map::Entry::Vacant(v) = state.durable.entry(Self::rel(path)) {
            let content = match fs::read(self.real(path)) {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(errno(&e)),
            };
            v.insert(content);
        }
        Ok(())
    }

    fn attr(&self, path: &Path) -> ResultEntry {
        let m = fs::symlink_metadata(self.real(path)).map_err(|e| errno(&e))?;
        Ok((TTL, attr_of(&m)))
    }
}

/// Aborts the kernel's connection to every `powercut` mount this machine has, so that whatever
/// waits on one (a request its daemon will never answer) fails with an error instead of waiting
/// forever: a test's last resort before it reports a hang. Mounts the kernel's `fusectl` first if
/// it is not (as root). Returns how many connections were aborted.
pub fn abort_all() -> io::Result<usize> {
    let ctl = Path::new("/sys/fs/fuse/connections");
    if fs::read_dir(ctl)?.next().is_none() {
        let _ = std::process::Command::new("mount")
            .args(["-t", "fusectl", "none"])
            .arg(ctl)
            .status();
    }
    let mut aborted = 0;
    for line in fs::read_to_string("/proc/self/mountinfo")?.lines() {
        // `… major:minor root mountpoint … - fstype source …`
        let mut halves = line.split(" - ");
        let (Some(left), Some(right)) = (halves.next(), halves.next()) else {
            continue;
        };
        let mut right = right.split(' ');
        let (Some(fstype), Some(source)) = (right.next(), right.next()) else {
            continue;
        };
        if !fstype.starts_with("fuse") || source != "powercut" {
            continue;
        }
        let Some(minor) = left.split(' ').nth(2).and_then(|d| d.split(':').nth(1)) else {
            continue;
        };
        if fs::write(ctl.join(minor).join("abort"), "1").is_ok() {
            aborted += 1;
        }
        if let Some(mountpoint) = left.split(' ').nth(4) {
            let _ = std::process::Command::new("umount")
                .args(["-l", mountpoint])
                .status();
        }
    }
    Ok(aborted)
}

/// Runs `body` and fails (instead of hanging) when it takes longer than `limit`: every
/// `powercut` connection is then aborted, which releases whatever waits on one, and this panics.
pub fn within<T: Send + 'static>(limit: Duration, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let out = body();
        let _ = tx.send(());
        out
    });
    if rx.recv_timeout(limit).is_err() && !worker.is_finished() {
        let aborted = abort_all();
        panic!(
            "no answer in {limit:?} on the power-cut filesystem: {aborted:?} connection(s) aborted"
        );
    }
    match worker.join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
