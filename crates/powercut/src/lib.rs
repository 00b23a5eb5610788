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

fn errno(e: &io::Error) -> libc::c_int {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn time_of(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

fn attr_of(m: &fs::Metadata) -> FileAttr {
    let ft = m.file_type();
    let kind = if ft.is_dir() {
        FileType::Directory
    } else if ft.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    };
    FileAttr {
        size: m.size(),
        blocks: m.blocks(),
        atime: time_of(m.atime(), m.atime_nsec()),
        mtime: time_of(m.mtime(), m.mtime_nsec()),
        ctime: time_of(m.ctime(), m.ctime_nsec()),
        crtime: time_of(m.ctime(), m.ctime_nsec()),
        kind,
        perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev() as u32,
        flags: 0,
    }
}

/// Open options for the flags `open(2)` was called with (`O_CREAT`/`O_EXCL` are the kernel's
/// `create`, not this).
fn options_of(flags: u32) -> OpenOptions {
    let flags = flags as i32;
    let mut o = OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => o.write(true),
        libc::O_RDWR => o.read(true).write(true),
        _ => o.read(true),
    };
    o.custom_flags(flags & !(libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC));
    o
}

impl FilesystemMT for Volatile {
    fn init(&self, _req: RequestInfo) -> ResultEmpty {
        Ok(())
    }

    fn getattr(&self, _req: RequestInfo, path: &Path, fh: Option<u64>) -> ResultEntry {
        if let Some(fh) = fh {
            if let Some(f) = self.lock().open.get(&fh) {
                return f
                    .metadata()
                    .map(|m| (TTL, attr_of(&m)))
                    .map_err(|e| errno(&e));
            }
        }
        self.attr(path)
    }

    fn chmod(&self, _req: RequestInfo, path: &Path, _fh: Option<u64>, mode: u32) -> ResultEmpty {
        fs::set_permissions(self.real(path), fs::Permissions::from_mode(mode))
            .map_err(|e| errno(&e))
    }

    fn chown(
        &self,
        _req: RequestInfo,
        path: &Path,
        _fh: Option<u64>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> ResultEmpty {
        std::os::unix::fs::chown(self.real(path), uid, gid).map_err(|e| errno(&e))
    }

    fn truncate(&self, _req: RequestInfo, path: &Path, fh: Option<u64>, size: u64) -> ResultEmpty {
        let mut state = self.lock();
        self.before_change(&mut state, path)?;
        match fh.and_then(|fh| state.open.get(&fh)) {
            Some(f) => f.set_len(size),
            None => OpenOptions::new()
                .write(true)
                .open(self.real(path))
                .and_then(|f| f.set_len(size)),
        }
        .map_err(|e| errno(&e))
    }

    fn utimens(
        &self,
        _req: RequestInfo,
        path: &Path,
        _fh: Option<u64>,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> ResultEmpty {
        let mut times = fs::FileTimes::new();
        if let Some(a) = atime {
            times = times.set_accessed(a);
        }
        if let Some(m) = mtime {
            times = times.set_modified(m);
        }
        File::options()
            .write(true)
            .open(self.real(path))
            .or_else(|_| File::open(self.real(path)))
            .and_then(|f| f.set_times(times))
            .map_err(|e| errno(&e))
    }

    fn readlink(&self, _req: RequestInfo, path: &Path) -> ResultData {
        fs::read_link(self.real(path))
            .map(|p| p.as_os_str().as_bytes().to_vec())
            .map_err(|e| errno(&e))
    }

    fn mkdir(&self, _req: RequestInfo, parent: &Path, name: &OsStr, mode: u32) -> ResultEntry {
        let path = parent.join(name);
        fs::create_dir(self.real(&path)).map_err(|e| errno(&e))?;
        fs::set_permissions(self.real(&path), fs::Permissions::from_mode(mode))
            .map_err(|e| errno(&e))?;
        self.attr(&path)
    }

    fn unlink(&self, _req: RequestInfo, parent: &Path, name: &OsStr) -> ResultEmpty {
        let path = parent.join(name);
        fs::remove_file(self.real(&path)).map_err(|e| errno(&e))?;
        // Durable at once (see the crate's documentation): nothing of it to put back.
        self.lock().durable.remove(&Self::rel(&path));
        Ok(())
    }

    fn rmdir(&self, _req: RequestInfo, parent: &Path, name: &OsStr) -> ResultEmpty {
        fs::remove_dir(self.real(&parent.join(name))).map_err(|e| errno(&e))
    }

    fn rename(
        &self,
        _req: RequestInfo,
        parent: &Path,
        name: &OsStr,
        newparent: &Path,
        newname: &OsStr,
    ) -> ResultEmpty {
        let (from, to) = (parent.join(name), newparent.join(newname));
        fs::rename(self.real(&from), self.real(&to)).map_err(|e| errno(&e))?;
        let mut state = self.lock();
        state.durable.remove(&Self::rel(&to));
        if let Some(d) = state.durable.remove(&Self::rel(&from)) {
            state.durable.insert(Self::rel(&to), d);
        }
        Ok(())
    }

    fn open(&self, _req: RequestInfo, path: &Path, flags: u32) -> ResultOpen {
        let mut state = self.lock();
        if flags as i32 & libc::O_TRUNC != 0 {
            self.before_change(&mut state, path)?;
        }
        let f = options_of(flags)
            .truncate(flags as i32 & libc::O_TRUNC != 0)
            .open(self.real(path))
            .map_err(|e| errno(&e))?;
        state.next_fh += 1;
        let fh = state.next_fh;
        state.open.insert(fh, f);
        Ok((fh, flags))
    }

    fn read(
        &self,
        _req: RequestInfo,
        _path: &Path,
        fh: u64,
        offset: u64,
        size: u32,
        callback: impl FnOnce(ResultSlice<'_>) -> CallbackResult,
    ) -> CallbackResult {
        let mut buf = vec![0u8; size as usize];
        let read = {
            let state = self.lock();
            match state.open.get(&fh) {
                Some(f) => read_at_most(f, &mut buf, offset),
                None => Err(io::Error::from_raw_os_error(libc::EBADF)),
            }
        };
        match read {
            Ok(n) => callback(Ok(&buf[..n])),
            Err(e) => callback(Err(errno(&e))),
        }
    }

    fn write(
        &self,
        _req: RequestInfo,
        path: &Path,
        fh: u64,
        offset: u64,
        data: Vec<u8>,
        _flags: u32,
    ) -> ResultWrite {
        let mut state = self.lock();
        self.before_change(&mut state, path)?;
        let f = state.open.get(&fh).ok_or(libc::EBADF)?;
        f.write_all_at(&data, offset).map_err(|e| errno(&e))?;
        Ok(data.len() as u32)
    }

    fn flush(&self, _req: RequestInfo, _path: &Path, _fh: u64, _lock_owner: u64) -> ResultEmpty {
        Ok(())
    }

    fn release(
        &self,
        _req: RequestInfo,
        _path: &Path,
        fh: u64,
        _flags: u32,
        _lock_owner: u64,
        _flush: bool,
    ) -> ResultEmpty {
        self.lock().open.remove(&fh);
        Ok(())
    }

    fn fsync(&self, _req: RequestInfo, path: &Path, _fh: u64, _datasync: bool) -> ResultEmpty {
        if !self.fsync_delay.is_zero() {
            std::thread::sleep(self.fsync_delay);
        }
        let mut state = self.lock();
        // What the file holds now is what survives a cut.
        state.durable.remove(&Self::rel(path));
        state.syncs += 1;
        Ok(())
    }

    fn opendir(&self, _req: RequestInfo, _path: &Path, _flags: u32) -> ResultOpen {
        Ok((0, 0))
    }

    fn readdir(&self, _req: RequestInfo, path: &Path, _fh: u64) -> ResultReaddir {
        let mut entries = vec![
            DirectoryEntry {
                name: OsString::from("."),
                kind: FileType::Directory,
            },
            DirectoryEntry {
                name: OsString::from(".."),
                kind: FileType::Directory,
            },
        ];
        for e in fs::read_dir(self.real(path)).map_err(|e| errno(&e))? {
            let e = e.map_err(|e| errno(&e))?;
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => FileType::Directory,
                Ok(t) if t.is_symlink() => FileType::Symlink,
                _ => FileType::RegularFile,
            };
            entries.push(DirectoryEntry {
                name: e.file_name(),
                kind,
            });
        }
        Ok(entries)
    }

    fn releasedir(&self, _req: RequestInfo, _path: &Path, _fh: u64, _flags: u32) -> ResultEmpty {
        Ok(())
    }

    fn fsyncdir(&self, _req: RequestInfo, _path: &Path, _fh: u64, _datasync: bool) -> ResultEmpty {
        Ok(())
    }

    fn statfs(&self, _req: RequestInfo, _path: &Path) -> ResultStatfs {
        let s = nix::sys::statvfs::statvfs(&self.backing).map_err(|e| e as libc::c_int)?;
        Ok(Statfs {
            blocks: s.blocks(),
            bfree: s.blocks_free(),
            bavail: s.blocks_available(),
            files: s.files(),
            ffree: s.files_free(),
            bsize: s.block_size() as u32,
            namelen: s.name_max() as u32,
            frsize: s.fragment_size() as u32,
        })
    }

    fn access(&self, _req: RequestInfo, path: &Path, _mask: u32) -> ResultEmpty {
        fs::symlink_metadata(self.real(path))
            .map(|_| ())
            .map_err(|e| errno(&e))
    }

    fn create(
        &self,
        _req: RequestInfo,
        parent: &Path,
        name: &OsStr,
        mode: u32,
        flags: u32,
    ) -> ResultCreate {
        let path = parent.join(name);
        let f = options_of(flags)
            .create(true)
            .write(true)
            .mode(mode)
            .truncate(flags as i32 & libc::O_TRUNC != 0)
            .open(self.real(&path))
            .map_err(|e| errno(&e))?;
        let attr = f.metadata().map(|m| attr_of(&m)).map_err(|e| errno(&e))?;
        let mut state = self.lock();
        state.next_fh += 1;
        let fh = state.next_fh;
        state.open.insert(fh, f);
        Ok(CreatedEntry {
            ttl: TTL,
            attr,
            fh,
            flags,
        })
    }
}

/// Reads up to `buf.len()` bytes at `offset`, fewer only at the end of the file.
fn read_at_most(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
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
    child: std::process::Child,
    commands: std::process::ChildStdin,
    answers: io::BufReader<std::process::ChildStdout>,
    mountpoint: PathBuf,
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

    fn answer(&mut self) -> io::Result<String> {
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

    fn expect(&mut self, what: &str) -> io::Result<()> {
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
