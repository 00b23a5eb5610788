use super::*;

fn open(path: &Path, options: Options) -> Db {
    Db::open(path, options, |c| {
        c.execute_batch("CREATE TABLE IF NOT EXISTS t (v INTEGER UNIQUE)")
            .map_err(Error::from)
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_writes_all_commit_and_a_failing_one_does_not_spoil_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("t.db"), Options::default());
    let mut tasks = Vec::new();
    for v in 0..200 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            db.write(move |c| exec(c, "INSERT INTO t VALUES (?1)", [v % 100]).map_err(Error::from))
                .await
        }));
    }
    let mut ok = 0;
    for t in tasks {
        if t.await.unwrap().is_ok() {
            ok += 1;
        }
    }
    assert_eq!(ok, 100, "each value once; the duplicates fail alone");
    let n: i64 = db
        .read(|c| {
            c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .map_err(Error::from)
        })
        .await
        .unwrap();
    assert_eq!(n, 100);
}

/// Holds the writer in a slow durable write until the sender sends (or 5 s pass), so that
/// what is queued meanwhile lands in its next batch together; returns once the write runs.
async fn hold_writer(
    db: &Db,
) -> (
    std::sync::mpsc::Sender<()>,
    tokio::task::JoinHandle<Result<(), Error>>,
) {
    let (busy_tx, busy_rx) = std::sync::mpsc::channel::<()>();
    let blocker = tokio::spawn({
        let db = db.clone();
        async move {
            db.write(move |_| {
                let _ = busy_rx.recv_timeout(std::time::Duration::from_secs(5));
                Ok::<_, Error>(())
            })
            .await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    (busy_tx, blocker)
}

/// The connection's `PRAGMA synchronous`: 2 = FULL (the WAL synced at every commit),
/// 1 = NORMAL (synced at checkpoints).
fn synchronous(c: &Connection) -> Result<i64, Error> {
    Ok(c.query_row("PRAGMA synchronous", [], |r| r.get(0))?)
}

/// Queues ten durable and ten relaxed writes behind a slow write, so the writer's next batch
/// holds both kinds, and returns the timings once all 21 have committed (the slow one
/// durable); checks each write was committed with the sync its kind asked for.
async fn both_kinds_in_one_batch(first: First) -> Timings {
    let dir = tempfile::tempdir().unwrap();
    let db = open(
        &dir.path().join("t.db"),
        Options {
            first,
            ..Options::default()
        },
    );
    assert!(db.timings().is_none(), "no timings kept unless asked");
    db.profile();
    // The writer busy with a slow write while both kinds queue up behind it: the next
    // batch holds relaxed and durable writes together.
    let (busy_tx, blocker) = hold_writer(&db).await;
    let mut tasks = Vec::new();
    for v in 0..20 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            let durable = v % 2 == 0;
            let seen = if durable {
                db.write(insert(v)).await
            } else {
                db.write_relaxed(insert(v)).await
            };
            (durable, seen.unwrap())
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    busy_tx.send(()).unwrap();
    blocker.await.unwrap().unwrap();
    for t in tasks {
        let (durable, seen) = t.await.unwrap();
        // 2 = FULL, 1 = NORMAL.
        assert_eq!(seen, if durable { 2 } else { 1 }, "durable: {durable}");
    }

    // The timings say so: every write counted once, by its kind; the 20 waited behind
    // the slow write (50 ms at least); which kind went first is for the caller to check.
    // A batch is recorded just after its callers hear back: wait for the last ones.
    let mut t = db.timings().expect("profiled");
    for _ in 0..100 {
        if (t.durable.total.len(), t.relaxed.total.len()) == (11, 10) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        t = db.timings().expect("profiled");
    }
    assert_eq!((t.durable.total.len(), t.relaxed.total.len()), (11, 10));
    assert_eq!((t.durable.batches, t.relaxed.batches), (2, 1));
    assert_eq!(t.durable.frames.len(), 2);
    assert!(t.durable.frames.max() >= 1 && t.relaxed.frames.min() >= 1);
    assert!(
        t.relaxed.waited.min() >= 50_000,
        "{}",
        t.relaxed.waited.min()
    );
    assert!(t.durable.waited.value_at_quantile(0.5) >= 50_000);
    assert!(t.durable.total.max() >= t.durable.waited.max() + t.durable.committed.min());
    // Each write also one by one, its parts within their phases.
    assert_eq!((t.durable.writes.len(), t.relaxed.writes.len()), (11, 10));
    for w in t.durable.writes.iter().chain(&t.relaxed.writes) {
        assert!(
            w.total >= w.waited + w.behind + w.ran + w.committed,
            "{w:?}"
        );
        // Within their phases; running and committing share one boundary, where a preemption
        // counts in the first's counters and the second's time: those two are bound together.
        assert!(w.waited_for_core <= w.waited + 1, "{w:?}");
        assert!(
            w.ran_waiting_for_core + w.commit_on_core + w.commit_waiting_for_core
                <= w.ran + w.committed + 2,
            "{w:?}"
        );
    }
    let slow = |w: &&WriteTime| w.waited >= 50_000;
    assert_eq!(
        t.durable.writes.iter().filter(slow).count(),
        10,
        "all but the slow one"
    );
    #[cfg(target_os = "linux")]
    assert!(
        t.durable.writes.iter().any(|w| w.commit_on_core > 0),
        "a commit takes some time on a core"
    );
    t
}

#[tokio::test]
async fn a_relaxed_write_queued_with_durable_ones_never_waits_for_their_sync() {
    let t = both_kinds_in_one_batch(First::Relaxed).await;
    // The durable ones of the second batch waited behind the relaxed commit that went
    // first, which waited behind nothing of its batch.
    assert!(t.durable.behind.max() >= t.relaxed.ran.max() + t.relaxed.committed.max());
    assert!(t.relaxed.behind.max() < t.durable.behind.max());
}

#[tokio::test]
async fn durable_first_puts_a_durable_write_ahead_of_the_relaxed_ones_of_its_batch() {
    let t = both_kinds_in_one_batch(First::Durable).await;
    // The relaxed ones waited behind the durable commit (its sync included); the durable
    // ones behind nothing but their own batch's statements.
    let relaxed = &t.relaxed.writes;
    assert!(
        t.relaxed.behind.min() >= t.durable.committed.min(),
        "{relaxed:?}"
    );
    assert!(
        t.durable.behind.max() < t.relaxed.behind.min(),
        "{relaxed:?}"
    );
}

/// Inserts `v` and says which `synchronous` its commit ran with (2 = FULL, 1 = NORMAL).
fn insert(v: i64) -> impl FnOnce(&Connection) -> Result<i64, Error> + Send + 'static {
    move |c: &Connection| {
        exec(c, "INSERT INTO t VALUES (?1)", [v])?;
        synchronous(c)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_background_write_yields_to_the_writes_queued_with_it_and_commits_relaxed() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("t.db"), Options::default());
    // The writer busy with a slow write while a background write, then four others, queue up
    // behind it: the writer's next batch holds all five.
    let (busy_tx, blocker) = hold_writer(&db).await;
    let background = tokio::spawn({
        let db = db.clone();
        async move { db.write_background(insert(0)).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let mut others = Vec::new();
    for v in 1..=4 {
        let db = db.clone();
        others.push(tokio::spawn(async move {
            if v % 2 == 0 {
                db.write(insert(v)).await
            } else {
                db.write_relaxed(insert(v)).await
            }
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    busy_tx.send(()).unwrap();
    blocker.await.unwrap().unwrap();

    for o in others {
        o.await.unwrap().unwrap();
    }
    assert_eq!(background.await.unwrap().unwrap(), 1, "committed relaxed");
    let order: Vec<i64> = db
        .read(|c| {
            let mut st = c.prepare("SELECT v FROM t ORDER BY rowid")?;
            let rows = st.query_map([], |r| r.get(0))?;
            Ok::<_, Error>(rows.collect::<Result<_, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(order.len(), 5);
    assert_eq!(order[4], 0, "queued first, committed last: {order:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_writer_that_is_never_idle_still_commits_a_background_write() {
    let dir = tempfile::tempdir().unwrap();
    // One write a batch, and a queue that stays full: the writer never finds it empty.
    let db = open(
        &dir.path().join("t.db"),
        Options {
            max_batch: 1,
            checkpoint_every: std::time::Duration::from_millis(5),
            ..Options::default()
        },
    );
    let (busy_tx, blocker) = hold_writer(&db).await;
    let background = tokio::spawn({
        let db = db.clone();
        async move { db.write_background(insert(0)).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let others: Vec<_> = (1..=5_000)
        .map(|v| {
            let db = db.clone();
            tokio::spawn(async move { db.write_relaxed(insert(v)).await })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    busy_tx.send(()).unwrap();
    blocker.await.unwrap().unwrap();

    background.await.unwrap().unwrap();
    for o in others {
        o.await.unwrap().unwrap();
    }
    let position: i64 = db
        .read(|c| {
            c.query_row("SELECT rowid FROM t WHERE v = 0", [], |r| r.get(0))
                .map_err(Error::from)
        })
        .await
        .unwrap();
    assert!(
        position < 5_001,
        "committed once it had waited, with others still queued behind it (row {position})"
    );
}

#[tokio::test]
async fn a_log_written_without_a_pause_still_starts_again_from_its_first_page() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        checkpoint_every: Duration::from_millis(50),
        ..Options::default()
    };
    let db = open(&dir.path().join("t.db"), options);
    // One write after another, never a pause for a checkpoint to finish in: each appends
    // at least one page (4 KiB) to the log, 80 MB in all if it never started again.
    for n in 0..20_000 {
        let insert = move |c: &Connection| exec(c, "INSERT INTO t VALUES (?1)", [n]);
        if n % 10 == 0 {
            db.write(move |c| insert(c).map_err(Error::from)).await
        } else {
            db.write_relaxed(move |c| insert(c).map_err(Error::from))
                .await
        }
        .unwrap();
    }
    let log = std::fs::metadata(dir.path().join("t.db-wal"))
        .unwrap()
        .len();
    assert!(log < 20 << 20, "the log grew to {} MiB", log >> 20);
    let rows: i64 = db
        .read(|c| Ok::<_, Error>(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(rows, 20_000);
}

#[tokio::test]
async fn relaxed_writes_commit_without_a_sync_and_durable_ones_still_sync() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("t.db"), Options::default());
    // 2 = FULL (the WAL is synced at every commit), 1 = NORMAL (synced at checkpoints).
    assert_eq!(db.write(synchronous).await.unwrap(), 2);
    for v in 0..3 {
        let seen = db
            .write_relaxed(move |c| {
                exec(c, "INSERT INTO t VALUES (?1)", [v]).map_err(Error::from)?;
                synchronous(c)
            })
            .await
            .unwrap();
        assert_eq!(seen, 1, "a batch of relaxed writes only");
        assert_eq!(db.write(synchronous).await.unwrap(), 2, "back to FULL");
    }
    // Relaxed writes are committed: another connection (another process) sees them.
    let other = connect(&dir.path().join("t.db"), &Options::default()).unwrap();
    let n: i64 = other
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 3);
}

#[tokio::test]
async fn a_job_whose_savepoint_cannot_be_rolled_back_fails_its_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("t.db"), Options::default());
    // The job writes, closes its own savepoint (so `ROLLBACK TO op` fails) and reports an
    // error: its row must not be committed by the batch it was in.
    let err = db
        .write(|c| {
            exec(c, "INSERT INTO t VALUES (7)", []).map_err(Error::from)?;
            c.execute_batch("RELEASE op").map_err(Error::from)?;
            Err::<(), _>(Error::WriterGone)
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::WriterGone), "{err}");
    let n: i64 = db
        .read(|c| {
            c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .map_err(Error::from)
        })
        .await
        .unwrap();
    assert_eq!(n, 0, "a job reported failed committed nothing");
    db.write(|c| exec(c, "INSERT INTO t VALUES (8)", []).map_err(Error::from))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_write_blocked_by_another_process_lock_fails_as_busy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let db = open(
        &path,
        Options {
            busy_timeout: Duration::from_millis(100),
            ..Options::default()
        },
    );
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let err = db
        .write(|c| exec(c, "INSERT INTO t VALUES (1)", []).map_err(Error::from))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(rusqlite::ErrorCode::DatabaseBusy), "{err}");
    other.execute_batch("ROLLBACK").unwrap();
    db.write(|c| exec(c, "INSERT INTO t VALUES (1)", []).map_err(Error::from))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_full_database_fails_the_write_with_disk_full() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(
        &dir.path().join("t.db"),
        Options {
            max_page_count: Some(4),
            ..Options::default()
        },
    );
    let mut last = Ok(0);
    for v in 0..2_000 {
        last = db
            .write(move |c| exec(c, "INSERT INTO t VALUES (?1)", [v]).map_err(Error::from))
            .await;
        if last.is_err() {
            break;
        }
    }
    let err = last.unwrap_err();
    assert_eq!(err.code(), Some(rusqlite::ErrorCode::DiskFull), "{err:?}");
}

#[tokio::test]
async fn an_indexed_read_on_the_calling_thread_sees_every_committed_write_and_reuses_its_connection(
) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("t.db"), Options::default());
    let find = |v: i64| {
        db.read_indexed(|c| {
            c.query_row("SELECT count(*) FROM t WHERE v = ?1", [v], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(Error::from)
        })
        .unwrap()
    };
    assert_eq!(find(7), 0);
    db.write_relaxed(|c| exec(c, "INSERT INTO t VALUES (7)", []).map_err(Error::from))
        .await
        .unwrap();
    assert_eq!(find(7), 1, "a relaxed commit is seen at once");
    // A failing read gives its connection back like any other.
    let failed: Result<i64, Error> = db.read_indexed(|c| {
        c.query_row("SELECT v FROM no_such_table", [], |r| r.get(0))
            .map_err(Error::from)
    });
    assert!(failed.is_err());
    assert_eq!(
        db.inner.readers.lock().unwrap().len(),
        1,
        "one pooled reader, reused"
    );
}
