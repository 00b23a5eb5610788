//! One process per outbox: an OS lock on a file beside the database.

use crate::error::{CoreError, Result};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The path of the lock file that marks an outbox as owned.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// Takes the lock of the outbox at `db` (creating its file 0600), or fails with `AlreadyOpen`
/// while another process holds it. The lock lasts as long as the returned file is open.
pub(super) fn acquire(db: &Path) -> Result<File> {
    let lock_file = lock_path(db);
    durable_sqlite::private::create_file(&lock_file)
        .map_err(|e| CoreError::Storage(format!("{}: {e}", lock_file.display())))?;
    let lock = File::options()
        .write(true)
        .open(&lock_file)
        .map_err(|e| CoreError::Storage(format!("{}: {e}", lock_file.display())))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(CoreError::AlreadyOpen(db.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(CoreError::Storage(format!("{}: {e}", lock_file.display())))
        }
    }
}
