//! The power-cut filesystem simulates something: SQLite in WAL mode keeps every commit made with
//! `synchronous=FULL` through a cut, and loses those made with `synchronous=OFF`.

use powercut::Volatile;
use rusqlite::Connection;
use std::path::Path;
use std::time::Duration;

/// Twenty commits of one row each, then the connection closed as a killed program's would be
/// (no checkpoint: the WAL is left as it is).
fn commit_twenty(db: &Path, synchronous: &str) {
    let c = Connection::open(db).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "synchronous", synchronous).unwrap();
    c.execute_batch("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
        .unwrap();
    for n in 0..20 {
        c.execute("INSERT INTO t (n) VALUES (?1)", [n]).unwrap();
    }
    // A killed process does not checkpoint on close.
    c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    std::mem::forget(c);
}

/// Rows of `t` after a cut, or `None` when even the table was lost.
fn rows_after_cut(synchronous: &str) -> (Option<i64>, powercut::CutReport) {
    let backing = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let fs = Volatile::new(backing.path(), Duration::ZERO);
    let mounted = fs
        .mount(mnt.path())
        .expect("mounting needs /dev/fuse and fusermount3");
    let db = mnt.path().join("cut.db");
    // In a child process, killed after its commits: its file handles go with it.
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_commits", "--nocapture", "--ignored"])
        .env("POWERCUT_DB", &db)
        .env("POWERCUT_SYNC", synchronous)
        .status()
        .unwrap();
    assert!(child.success(), "the child committed");
    mounted.unmount();
    let report = fs.cut().unwrap();
    let mounted = fs.mount(mnt.path()).unwrap();
    let c = Connection::open(&db).unwrap();
    let rows = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).ok();
    drop(c);
    mounted.unmount();
    (rows, report)
}

/// Run by [`rows_after_cut`] in a child process, not on its own.
#[test]
#[ignore = "the self-test runs it in a child process"]
fn child_commits() {
    let db = std::env::var("POWERCUT_DB").expect("run by the self-test");
    let sync = std::env::var("POWERCUT_SYNC").unwrap();
    commit_twenty(Path::new(&db), &sync);
    // Gone without closing anything, like `kill -9`.
    std::process::exit(0);
}

#[test]
fn synced_commits_survive_a_cut_and_unsynced_ones_do_not() {
    powercut::within(Duration::from_secs(60), the_self_test);
}

fn the_self_test() {
    let (full, kept) = rows_after_cut("FULL");
    assert_eq!(
        full,
        Some(20),
        "synchronous=FULL: every commit survives ({kept:?})"
    );
    let (off, dropped) = rows_after_cut("OFF");
    println!("FULL: {full:?} rows after the cut ({kept:?}); OFF: {off:?} rows ({dropped:?})");
    assert_ne!(
        off,
        Some(20),
        "synchronous=OFF: the cut lost nothing ({dropped:?}): the filesystem simulates nothing"
    );
    assert!(
        dropped.files > 0 && dropped.bytes_dropped > 0,
        "{dropped:?}"
    );
}
