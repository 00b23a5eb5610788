//! The writer thread: the queued writes of callers running at the same time, each in its own
//! SAVEPOINT of one transaction, committed relaxed first or durable first, each caller answered
//! after its COMMIT; background writes held until nothing else waits.

use super::*;

pub(super) fn in_savepoint<T, E: From<Error>>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T, E>,
) -> Result<T, E> {
    exec(conn, "SAVEPOINT op", []).map_err(|e| E::from(e.into()))?;
    match f(conn) {
        Ok(v) => match exec(conn, "RELEASE op", []) {
            Ok(_) => Ok(v),
            Err(e) => {
                SAVEPOINT_BROKEN.with(|b| b.set(true));
                Err(E::from(e.into()))
            }
        },
        Err(e) => {
            // After some errors (SQLITE_FULL, SQLITE_IOERR…) SQLite has already rolled the whole
            // transaction back and the savepoint is gone; the writer loop notices that.
            if !conn.is_autocommit() && conn.execute_batch("ROLLBACK TO op; RELEASE op").is_err() {
                SAVEPOINT_BROKEN.with(|b| b.set(true));
            }
            Err(e)
        }
    }
}

/// The error every job of an aborted batch hears.
pub(super) fn batch_aborted(why: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
        Some(why.into()),
    )
}

pub(super) fn writer_loop(
    conn: Connection,
    rx: mpsc::Receiver<Queued>,
    options: &Options,
    profile: &Profile,
    tail: &LogTail,
) {
    let max_batch = options.max_batch.max(1);
    // `connect` set synchronous=FULL.
    let mut synced = true;
    // The writer's scheduling counters, read only while a profile is on.
    let sched = SchedReader::default();
    // A write taken from the queue while looking whether it was empty.
    let mut next = None;
    // Background writes not yet committed, and when the oldest of them was queued.
    let mut held: Vec<(Job, Instant)> = Vec::new();
    loop {
        let idle = profile.is_on().then(|| sched.read());
        let first = match next.take() {
            Some(q) => q,
            None => match rx.recv() {
                Ok(q) => q,
                Err(_) => break,
            },
        };
        // Each phase's counters are read inside its clock readings (the counters after the
        // clock where a phase starts, before it where one ends), so what the kernel counts in a
        // phase is within the phase's time even when the thread is preempted between the two
        // readings. Only the boundary between running and committing is shared: a preemption
        // there counts in the first's counters and the second's time.
        let taken_sched = if profile.is_on() {
            sched.read()
        } else {
            Sched::default()
        };
        let taken = Instant::now();
        // A profile started while the writer waited counts no wait for a core in this batch.
        let idle = idle.unwrap_or(taken_sched);
        let (mut durable, mut relaxed) = (Vec::new(), Vec::new());
        let mut add = |q: Queued| match q.kind {
            Kind::Durable => durable.push((q.job, q.at)),
            Kind::Relaxed => relaxed.push((q.job, q.at)),
            Kind::Background => held.push((q.job, q.at)),
        };
        add(first);
        for _ in 1..max_batch {
            match rx.try_recv() {
                Ok(q) => add(q),
                Err(_) => break,
            }
        }
        // Each kind in a commit of its own, in the order the options say. The writes of one
        // batch come from callers running at the same time (a caller awaits each write), so
        // committing them in two groups orders nothing that was ordered.
        let groups = match options.first {
            First::Relaxed => [(relaxed, false), (durable, true)],
            First::Durable => [(durable, true), (relaxed, false)],
        };
        let mut run = |jobs: Vec<(Job, Instant)>, sync: bool| {
            if jobs.is_empty() {
                return;
            }
            let (jobs, queued): (Vec<Job>, Vec<Instant>) = jobs.into_iter().unzip();
            if !profile.is_on() {
                commit(&conn, &mut synced, sync, jobs, None);
                return;
            }
            let began = Instant::now();
            let began_sched = sched.read();
            let log_before = LOG_PAGES.with(|p| p.get());
            let checkpointed = profile.read();
            let (ran, ran_sched) = commit(&conn, &mut synced, sync, jobs, Some(&sched));
            let committed_sched = sched.read();
            let clock = BatchClock {
                taken,
                began,
                ran,
                committed: Instant::now(),
                frames: appended(log_before),
                beside_checkpoint: profile.ran_since(checkpointed),
                sched: [idle, taken_sched, began_sched, ran_sched, committed_sched],
            };
            profile.with(|t| t.record(sync, &queued, &clock));
        };
        for (jobs, sync) in groups {
            run(jobs, sync);
        }
        // The background writes, relaxed, once no other write waits, or once the oldest has
        // waited a checkpoint period (a writer that is never idle still gets to them). Held
        // writes only outlive this batch with a write in `next`: the writer never blocks on an
        // empty queue while it holds any.
        if let Some(&(_, oldest)) = held.first() {
            if next.is_none() {
                next = rx.try_recv().ok();
            }
            if next.is_none() || oldest.elapsed() >= options.checkpoint_every {
                run(std::mem::take(&mut held), false);
            }
        }
        // The rest of a long log, once no write waits (or once it has waited a checkpoint
        // period): the checkpoint thread copied the bulk of it, so what is left is short, and
        // with nothing appended while this runs the copy is complete and the next commit
        // starts the log again.
        if let Some(since) = tail.left_since() {
            if next.is_none() {
                next = rx.try_recv().ok();
            }
            if next.is_none() || since.elapsed() >= options.checkpoint_every {
                tail.take();
                let restarted = profile.checkpoint(|| restart_log(&conn, options.busy_timeout));
                if let Err(e) = restarted {
                    tracing::warn!(error = %e, "sqlite: the writer's checkpoint failed");
                }
            }
        }
    }
}

/// Runs `batch` in one transaction, each job in its own savepoint, and commits it with
/// `synchronous=FULL` when `durable` (`NORMAL` otherwise); then tells every job how it ended.
/// Returns when its statements had run (the `COMMIT` began), with the writer's scheduling
/// counters then when `sched` is given.
pub(super) fn commit(
    conn: &Connection,
    synced: &mut bool,
    durable: bool,
    batch: Vec<Job>,
    sched: Option<&SchedReader>,
) -> (Instant, Sched) {
    let now = || (Instant::now(), sched.map(|s| s.read()).unwrap_or_default());
    if durable != *synced {
        let level = if durable {
            "PRAGMA synchronous = FULL"
        } else {
            "PRAGMA synchronous = NORMAL"
        };
        match exec(conn, level, []) {
            Ok(_) => *synced = durable,
            // Still FULL: stricter than a relaxed batch asked, which is fine.
            Err(e) if !durable => {
                tracing::warn!(error = %e, "sqlite: cannot set synchronous=NORMAL")
            }
            // Still NORMAL: a durable write must not be committed so.
            Err(e) => {
                tracing::warn!(error = %e, "sqlite: cannot set synchronous=FULL");
                for job in batch {
                    job(Err(&e))(Err(&e));
                }
                return now();
            }
        }
    }
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE", []) {
        tracing::warn!(error = %e, "sqlite: cannot begin a write transaction");
        for job in batch {
            job(Err(&e))(Err(&e));
        }
        return now();
    }
    let mut completers: Vec<Completer> = Vec::with_capacity(batch.len());
    let mut jobs = batch.into_iter();
    SAVEPOINT_BROKEN.with(|b| b.set(false));
    for job in jobs.by_ref() {
        completers.push(job(Ok(conn)));
        if conn.is_autocommit() || SAVEPOINT_BROKEN.with(|b| b.get()) {
            break;
        }
    }
    if SAVEPOINT_BROKEN.with(|b| b.replace(false)) {
        // A job was told it failed but its writes could not be undone alone: undo the batch.
        let broken =
            batch_aborted("a savepoint could not be closed; the whole batch was rolled back");
        tracing::error!("sqlite: a savepoint could not be closed; failing its batch");
        let _ = conn.execute_batch("ROLLBACK");
        completers.extend(jobs.map(|job| job(Err(&broken))));
        completers.into_iter().for_each(|done| done(Err(&broken)));
        return now();
    }
    if conn.is_autocommit() {
        // SQLite rolled the transaction back on its own: nothing of this batch is durable.
        let lost =
            batch_aborted("the transaction was rolled back by SQLite after an error in its batch");
        tracing::error!("sqlite: transaction rolled back by SQLite; failing its batch");
        completers.extend(jobs.map(|job| job(Err(&lost))));
        completers.into_iter().for_each(|done| done(Err(&lost)));
        return now();
    }
    let ran = now();
    match exec(conn, "COMMIT", []) {
        Ok(_) => completers.into_iter().for_each(|done| done(Ok(()))),
        Err(e) => {
            tracing::error!(error = %e, "sqlite: commit failed; the batch is rolled back");
            let _ = conn.execute_batch("ROLLBACK");
            completers.into_iter().for_each(|done| done(Err(&e)));
        }
    }
    ran
}
