//! A disk whose fsync is slow on purpose, for `make bench`: loaded with `LD_PRELOAD`, this
//! library makes every `fsync` and `fdatasync` of the process wait `SLOWSYNC_DELAY_US`
//! microseconds and then sync for real. Reads and writes are left alone: they reach the page
//! cache as on any disk, so a figure measured with it is what a slower flush costs and nothing
//! else (a FUSE filesystem that delays fsync also makes every write a round trip through its
//! daemon, which on two cores costs more than the delay). With `SLOWSYNC_COUNT=<file>`, the
//! number of syncs so far is written to that file (8 bytes, little-endian) after each one.
//!
//! The symbols replace libc's for the whole process (SQLite's unix VFS calls them by name);
//! the real sync is the system call itself, so nothing here needs libc's own entry points.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

struct Settings {
    delay: Duration,
    /// Where the count is kept, opened once.
    count: Option<c_int>,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();
static SYNCS: AtomicU64 = AtomicU64::new(0);

fn settings() -> &'static Settings {
    SETTINGS.get_or_init(|| {
        let delay = std::env::var("SLOWSYNC_DELAY_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Duration::ZERO, Duration::from_micros);
        let count = std::env::var("SLOWSYNC_COUNT").ok().and_then(|path| {
            let path = std::ffi::CString::new(path).ok()?;
            // SAFETY: a valid NUL-terminated path; the flags and mode are plain integers.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                    0o600,
                )
            };
            (fd >= 0).then_some(fd)
        });
        Settings { delay, count }
    })
}

/// Waits the delay, makes the sync `call` does, counts it.
fn slow(call: impl FnOnce() -> libc::c_long) -> c_int {
    let s = settings();
    std::thread::sleep(s.delay);
    let rc = call() as c_int;
    let n = SYNCS.fetch_add(1, Ordering::Relaxed) + 1;
    if let Some(fd) = s.count {
        let bytes = n.to_le_bytes();
        // The count is a figure, not data: a failed write leaves the last one. The errno of the
        // sync is kept for the caller.
        // SAFETY: `bytes` is 8 readable bytes for the duration of the call.
        unsafe {
            let errno = *libc::__errno_location();
            libc::pwrite(fd, bytes.as_ptr().cast(), bytes.len(), 0);
            *libc::__errno_location() = errno;
        }
    }
    rc
}

/// `fsync(2)`, slowed.
#[no_mangle]
pub extern "C" fn fsync(fd: c_int) -> c_int {
    // SAFETY: the system call takes a file descriptor and touches no memory of ours.
    slow(|| unsafe { libc::syscall(libc::SYS_fsync, fd) })
}

/// `fdatasync(2)`, slowed.
#[no_mangle]
pub extern "C" fn fdatasync(fd: c_int) -> c_int {
    // SAFETY: as for `fsync`.
    slow(|| unsafe { libc::syscall(libc::SYS_fdatasync, fd) })
}
