//! Checkpoints: passive ones on a thread of their own, and the restart of a long log the writer
//! does between two batches.

use super::*;

/// Log pages past which the checkpoint thread, after its passive checkpoint, leaves the writer
/// the rest of the log to copy (what the writer appended while it ran), between two batches, so
/// that its next commit starts the log again from its first page: SQLite restarts a WAL only
/// after a checkpoint has copied all of it, and a log that only grows makes every commit extend
/// the file, whose durable commits then also wait for the file system's journal (a 12-page
/// commit, one after another: p50 1.5x and p99 1.4 to 2.5x with the log at 148 MB than at 4 MB).
/// The number is SQLite's own automatic checkpoint threshold.
pub(super) const RESTART_LOG_PAGES: i64 = 1000;

/// When the checkpoint thread last left the writer a tail of a long log to copy (`None`: none
/// left).
#[derive(Default)]
pub(super) struct LogTail(Mutex<Option<Instant>>);

impl LogTail {
    pub(super) fn leave(&self) {
        if let Ok(mut t) = self.0.lock() {
            t.get_or_insert_with(Instant::now);
        }
    }

    pub(super) fn left_since(&self) -> Option<Instant> {
        self.0.lock().ok().and_then(|t| *t)
    }

    pub(super) fn take(&self) {
        if let Ok(mut t) = self.0.lock() {
            *t = None;
        }
    }
}

/// On the writer's connection, between two batches: copies what is left of the log and, once no
/// reader is still reading an older snapshot of it, has the next commit start the log again
/// (`RESTART`). It waits for such readers at most a few milliseconds (Pagar's reads are short);
/// a reader that takes longer leaves the log as it is until the next time.
pub(super) fn restart_log(
    conn: &Connection,
    busy_timeout: Duration,
) -> rusqlite::Result<(i64, i64)> {
    conn.busy_timeout(RESTART_WAITS_AT_MOST)?;
    let done = checkpoint_as(conn, "RESTART");
    conn.busy_timeout(busy_timeout)?;
    done
}

/// The longest the writer waits for readers of an older snapshot when it restarts the log.
pub(super) const RESTART_WAITS_AT_MOST: Duration = Duration::from_millis(5);

/// A passive checkpoint on `conn`: (pages in the log, pages of it now in the database).
pub(super) fn checkpoint(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    checkpoint_as(conn, "PASSIVE")
}

/// A checkpoint of `mode` (`PASSIVE`, `RESTART`) on `conn`: (pages in the log, pages of it now
/// in the database).
pub(super) fn checkpoint_as(conn: &Connection, mode: &str) -> rusqlite::Result<(i64, i64)> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
        Ok((r.get(1)?, r.get(2)?))
    })
}

/// Passive checkpoints on a connection of its own, until the database is closed or dropped.
pub(super) fn checkpoint_loop(db: std::sync::Weak<Inner>) {
    let Some((path, options, profile, tail)) = db.upgrade().map(|i| {
        (
            i.path.clone(),
            i.options.clone(),
            i.profile.clone(),
            i.tail.clone(),
        )
    }) else {
        return;
    };
    let conn = match connect(&path, &options) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "sqlite: no checkpoint connection; the WAL will only grow");
            return;
        }
    };
    loop {
        std::thread::sleep(options.checkpoint_every);
        match db.upgrade() {
            Some(inner) if inner.writer.lock().map(|w| w.is_some()).unwrap_or(false) => {}
            _ => break,
        }
        match profile.checkpoint(|| checkpoint(&conn)) {
            // A long log: whatever the writer appended while this ran is the writer's to copy.
            Ok((log, _)) if log >= RESTART_LOG_PAGES => tail.leave(),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sqlite: checkpoint failed; will try again"),
        }
    }
    // One last checkpoint, so the next process starts from a short WAL.
    let _ = checkpoint(&conn);
}

thread_local! {
    /// The pages in the write-ahead log after the writer's last commit (SQLite's WAL hook runs
    /// on the committing thread, the writer).
    pub(super) static LOG_PAGES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };

    /// Set on the writer thread when a savepoint could not be closed cleanly (its `RELEASE` or
    /// `ROLLBACK TO` failed): the transaction may hold writes of a job that was told it failed,
    /// so the writer rolls the whole batch back instead of committing it.
    pub(super) static SAVEPOINT_BROKEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pub(super) fn log_grew(_: &rusqlite::hooks::Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
    LOG_PAGES.with(|p| p.set(u64::try_from(pages).unwrap_or(0)));
    Ok(())
}

/// Pages the commit just made appended to the log, given the log's pages before it: the log
/// restarts from its first page once a checkpoint has copied all of it.
pub(super) fn appended(before: u64) -> u64 {
    let now = LOG_PAGES.with(|p| p.get());
    if now >= before {
        now - before
    } else {
        now
    }
}
