//! The group commit's durability on a filesystem that loses every write not synced when the
//! power is cut (`powercut`): a durable write survives, with every relaxed write committed before
//! it (the WAL is appended in order, so its sync covers them); relaxed writes alone may be lost.

use durable_sqlite::{Db, Error, Options};
use powercut::Daemon;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const CHILD: &str = "DURABLE_SQLITE_POWER_CUT";
const DAEMON: &str = "DURABLE_SQLITE_POWER_CUT_DAEMON";

/// A test that waits longer on the filesystem fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(60);

/// The child: ten relaxed writes, then (mode `durable`) one durable write, then gone without
/// closing anything, like a process killed or a machine losing power.
#[tokio::test]
async fn writer_child() {
    let Ok(args) = std::env::var(CHILD) else {
        return; // run as an ordinary test: nothing to do
    };
    let (db, mode) = args.split_once('|').unwrap();
    let options = Options {
        // No checkpoint in the background: it would sync what the test wants unsynced.
        checkpoint_every: Duration::from_secs(3600),
        ..Options::default()
    };
    let db = Db::open(db, options, |c| {
        c.execute_batch("CREATE TABLE IF NOT EXISTS t (n INTEGER NOT NULL)")
            .map_err(Error::from)
    })
    .unwrap();
    for n in 0..10 {
        db.write_relaxed(move |c| Ok::<_, Error>(c.execute("INSERT INTO t (n) VALUES (?1)", [n])?))
            .await
            .unwrap();
    }
    if mode == "durable" {
        db.write(|c| Ok::<_, Error>(c.execute("INSERT INTO t (n) VALUES (10)", [])?))
            .await
            .unwrap();
    }
    std::process::exit(0);
}

/// The filesystem's daemon, in a child process of its own (a process never uses a mount it
/// serves: see the `powercut` crate).
#[test]
fn daemon_child() {
    powercut::serve_if_asked(DAEMON).unwrap();
}

/// Rows after the child wrote in `mode` and the power was cut.
fn rows_after_cut(mode: &str) -> (i64, powercut::CutReport) {
    let backing = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let mut serve = Command::new(std::env::current_exe().unwrap());
    serve.args(["--exact", "daemon_child", "--nocapture"]).env(
        DAEMON,
        format!("{}|{}", backing.path().display(), mnt.path().display()),
    );
    let mut daemon =
        Daemon::start(serve, mnt.path()).expect("mounting needs /dev/fuse and fusermount3");
    let db = mnt.path().join("group.db");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "writer_child", "--nocapture"])
        .env(CHILD, format!("{}|{mode}", db.display()))
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let report = daemon.cut().unwrap();
    let rows = count(&db);
    drop(daemon);
    (rows, report)
}

fn count(db: &Path) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_durable_write_survives_a_power_cut_with_every_relaxed_write_before_it() {
    let (rows, report) = powercut::within(LIMIT, || rows_after_cut("durable"));
    assert_eq!(rows, 11, "{report:?}");
}

#[test]
fn relaxed_writes_alone_are_lost_by_a_power_cut() {
    // The table was made by the durable migration; the relaxed rows after it were never synced.
    let (rows, report) = powercut::within(LIMIT, || rows_after_cut("relaxed"));
    assert_eq!(rows, 0, "{report:?}");
    assert!(report.bytes_dropped > 0, "{report:?}");
}
