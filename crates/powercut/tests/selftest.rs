//! The power-cut filesystem simulates something: SQLite in WAL mode keeps every commit made with
//! `synchronous=FULL` through a cut, and loses those made with `synchronous=OFF`. The filesystem
//! is served by the `powercut` binary; the commits are made by a child process that exits
//! without closing anything; this process reads after the cut.

use powercut::{CutReport, Daemon};
use rusqlite::Connection;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Twenty commits of one row each, then gone without a checkpoint or a close (like `kill -9`).
fn commit_twenty(db: &Path, synchronous: &str) {
    let c = Connection::open(db).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "synchronous", synchronous).unwrap();
    c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    c.execute_batch("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
        .unwrap();
    for n in 0..20 {
        c.execute("INSERT INTO t (n) VALUES (?1)", [n]).unwrap();
    }
    std::process::exit(0);
}

/// The child of [`rows_after_cut`]; run as an ordinary test, it does nothing.
#[test]
fn child_commits() {
    let Ok(db) = std::env::var("POWERCUT_DB") else {
        return;
    };
    commit_twenty(Path::new(&db), &std::env::var("POWERCUT_SYNC").unwrap());
}

/// Rows of `t` after a cut (`None` when even the table was lost), and what the cut dropped.
fn rows_after_cut(synchronous: &str) -> (Option<i64>, CutReport) {
    let backing = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_powercut"));
    serve.arg(backing.path()).arg(mnt.path());
    let mut daemon =
        Daemon::start(serve, mnt.path()).expect("mounting needs /dev/fuse and fusermount3");
    let db = mnt.path().join("cut.db");
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_commits"])
        .env("POWERCUT_DB", &db)
        .env("POWERCUT_SYNC", synchronous)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(child.success(), "the child committed");
    let report = daemon.cut().unwrap();
    let c = Connection::open(&db).unwrap();
    let rows = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).ok();
    drop(c);
    drop(daemon);
    (rows, report)
}

#[test]
fn synced_commits_survive_a_cut_and_unsynced_ones_do_not() {
    powercut::within(Duration::from_secs(60), || {
        let (full, kept) = rows_after_cut("FULL");
        let (off, dropped) = rows_after_cut("OFF");
        println!("FULL: {full:?} rows after the cut ({kept:?}); OFF: {off:?} rows ({dropped:?})");
        assert_eq!(
            full,
            Some(20),
            "synchronous=FULL: every commit survives ({kept:?})"
        );
        assert_ne!(
            off,
            Some(20),
            "synchronous=OFF: the cut lost nothing ({dropped:?}): the filesystem simulates nothing"
        );
        assert!(
            dropped.files > 0 && dropped.bytes_dropped > 0,
            "{dropped:?}"
        );
    });
}
