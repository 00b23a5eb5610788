//! Log lines that cost a request as little as a line can: formatted on the request's thread,
//! appended to one shared buffer under a short lock, and written by a thread of its own in
//! batches.
//!
//! Kept for one figure of `make bench`: `Pagar replays, logging on / logging off`.
//! `tracing-appender`'s non-blocking writer sends each line through a channel whose receiver
//! parks when it catches up, so under load nearly every line pays a futex wake-up and the writer
//! thread a `write`. Here a line wakes the writer only when it is the first of a batch; the writer then lets the batch gather for [`GATHER`] and writes it with one
//! call. A line is out within about that long, also when the server is quiet.
//!
//! Not lossy: when [`MAX_PENDING`] bytes wait (a stalled pipe), a request waits for room rather
//! than a line being dropped. [`FlushGuard`] writes what is pending when it is dropped.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use tracing_subscriber::fmt::MakeWriter;

/// How long the writer lets a batch gather after its first line.
pub const GATHER: Duration = Duration::from_millis(10);

/// Bytes that may wait for the writer before a request waits for room.
pub const MAX_PENDING: usize = 8 * 1024 * 1024;

/// The lines waiting for the writer thread.
#[derive(Default)]
struct Pending {
    buf: Vec<u8>,
    closed: bool,
    /// Producers waiting for room (so the writer wakes them only when there are any).
    waiting: usize,
}

#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
    /// The writer waits here for a first line, or for the guard to close.
    lines: Condvar,
    /// Producers wait here for room.
    room: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves only bytes behind: keep logging.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn append(&self, line: &[u8]) {
        let mut p = self.lock();
        while p.buf.len() >= MAX_PENDING && !p.closed {
            p.waiting += 1;
            p = self.room.wait(p).unwrap_or_else(|e| e.into_inner());
            p.waiting -= 1;
        }
        let first = p.buf.is_empty();
        p.buf.extend_from_slice(line);
        drop(p);
        if first {
            self.lines.notify_one();
        }
    }
}

/// Where the fmt layer writes: a [`MakeWriter`] over the shared buffer. Cheap to clone.
#[derive(Clone)]
pub struct BatchWriter(Arc<Shared>);

/// One line's writer (the fmt layer writes each formatted line with one `write_all`).
pub struct LineWriter<'a>(&'a Shared);

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.append(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for BatchWriter {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter(&self.0)
    }
}

/// Stops the writer thread after it wrote every pending line. Keep it until the process exits.
#[must_use = "dropping the guard stops the log writer"]
pub struct FlushGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.lines.notify_one();
        self.shared.room.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A batching writer over `out` and the guard that flushes it.
pub fn batch_writer<W: Write + Send + 'static>(out: W) -> (BatchWriter, FlushGuard) {
    let shared = Arc::new(Shared::default());
    let thread = std::thread::Builder::new()
        .name("log-writer".into())
        .spawn({
            let shared = shared.clone();
            move || write_batches(&shared, out)
        })
        .expect("the log writer thread starts");
    (
        BatchWriter(shared.clone()),
        FlushGuard {
            shared,
            thread: Some(thread),
        },
    )
}

fn write_batches<W: Write>(shared: &Shared, mut out: W) {
    let mut batch = Vec::new();
    loop {
        let mut p = shared.lock();
        while p.buf.is_empty() && !p.closed {
            p = shared.lines.wait(p).unwrap_or_else(|e| e.into_inner());
        }
        if p.buf.is_empty() {
            return; // closed, and everything written
        }
        if !p.closed {
            drop(p);
            std::thread::sleep(GATHER);
            p = shared.lock();
        }
        std::mem::swap(&mut p.buf, &mut batch);
        let waiting = p.waiting > 0;
        drop(p);
        if waiting {
            shared.room.notify_all();
        }
        // A log that cannot be written (a closed stderr) must not stop the server.
        let _ = out.write_all(&batch).and_then(|()| out.flush());
        batch.clear();
        if batch.capacity() > 1024 * 1024 {
            batch = Vec::new(); // give back what a burst took
        }
    }
}

/// RFC 3339 UTC timestamps with microseconds (`2026-12-01T15:37:43.123456Z`), as the default
/// timer writes them, from a per-thread copy of the current second's date and time: a line in
/// the same second as its thread's last one formats only its microseconds. (In `perf` of a
/// replay run the default timer's calendar arithmetic and digit formatting were a tenth of the
/// cost of a line.)
#[derive(Debug, Clone, Copy, Default)]
pub struct CachedSecondTimer;

impl tracing_subscriber::fmt::time::FormatTime for CachedSecondTimer {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        use std::cell::RefCell;
        thread_local! {
            static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        SECOND.with(|second| {
            let mut second = second.borrow_mut();
            if second.0 != now.as_secs() {
                let format = time::macros::format_description!(
                    "[year]-[month]-[day]T[hour]:[minute]:[second]"
                );
                second.1 = i64::try_from(now.as_secs())
                    .ok()
                    .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
                    .and_then(|t| t.format(format).ok())
                    .unwrap_or_default();
                second.0 = now.as_secs();
            }
            let mut micros = *b".000000Z";
            let mut n = now.subsec_micros();
            for d in micros[1..7].iter_mut().rev() {
                *d = b'0' + (n % 10) as u8;
                n /= 10;
            }
            w.write_str(&second.1)?;
            w.write_str(std::str::from_utf8(&micros).map_err(|_| std::fmt::Error)?)
        })
    }
}

/// A log layer over a subscriber `S`, boxed (text or JSON are different types).
pub type Layer<S> = Box<dyn tracing_subscriber::Layer<S> + Send + Sync>;

/// The server's log layer as the binary has it (text on stderr, colours only at a terminal, or
/// JSON on stdout), writing through a [`BatchWriter`].
pub fn layer<S>(json: bool) -> (Layer<S>, FlushGuard)
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    if json {
        let (writer, guard) = batch_writer(std::io::stdout());
        let layer = tracing_subscriber::fmt::layer()
            .json()
            .with_timer(CachedSecondTimer)
            .with_writer(writer);
        (Box::new(layer), guard)
    } else {
        // Colour codes only for a person at a terminal: in a file or a pipe they are bytes to
        // format and write on every request.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        text_layer(batch_writer(std::io::stderr()), ansi)
    }
}

/// The text line without colours, as the default `Full` format writes it — timestamp, level, the
/// spans from the root with their fields, target, fields — without the styling calls that format
/// makes even with colours off. Kept for the same figure as the batch writer (`Pagar replays,
/// logging on / logging off` in `make bench`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for PlainLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut w: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_log::NormalizeEvent as _;
        use tracing_subscriber::fmt::time::FormatTime as _;
        use tracing_subscriber::fmt::FormatFields as _;
        CachedSecondTimer.format_time(&mut w)?;
        // A record from the `log` crate (rusqlite_migration's, refinery's) names its own target.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        w.write_str(match *meta.level() {
            tracing::Level::ERROR => " ERROR ",
            tracing::Level::WARN => "  WARN ",
            tracing::Level::INFO => "  INFO ",
            tracing::Level::DEBUG => " DEBUG ",
            tracing::Level::TRACE => " TRACE ",
        })?;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                w.write_str(span.name())?;
                let ext = span.extensions();
                if let Some(fields) = ext.get::<tracing_subscriber::fmt::FormattedFields<N>>() {
                    if !fields.is_empty() {
                        write!(w, "{{{fields}}}")?;
                    }
                }
                w.write_char(':')?;
            }
            w.write_char(' ')?;
        }
        w.write_str(meta.target())?;
        w.write_str(": ")?;
        ctx.format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// The text layer over a batch writer (the bench passes one over a file).
pub fn text_layer<S>(
    (writer, guard): (BatchWriter, FlushGuard),
    ansi: bool,
) -> (Layer<S>, FlushGuard)
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_timer(CachedSecondTimer)
        .with_writer(writer);
    if ansi {
        (Box::new(layer), guard)
    } else {
        (Box::new(layer.event_format(PlainLine)), guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Write` the test can read back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_from_every_thread_is_written_once_in_its_threads_order() {
        let sink = Sink::default();
        let (writer, guard) = batch_writer(sink.clone());
        std::thread::scope(|s| {
            for t in 0..4 {
                let writer = writer.clone();
                s.spawn(move || {
                    for n in 0..5_000 {
                        writer
                            .make_writer()
                            .write_all(format!("{t} {n}\n").as_bytes())
                            .unwrap();
                    }
                });
            }
        });
        drop(guard);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let mut next = [0usize; 4];
        for line in text.lines() {
            let (t, n) = line.split_once(' ').unwrap();
            let (t, n): (usize, usize) = (t.parse().unwrap(), n.parse().unwrap());
            assert_eq!(
                n, next[t],
                "thread {t}'s lines in order, none lost or doubled"
            );
            next[t] += 1;
        }
        assert_eq!(next, [5_000; 4]);
    }

    #[test]
    fn a_line_is_written_soon_without_a_flush_or_more_lines() {
        let sink = Sink::default();
        let (writer, _guard) = batch_writer(sink.clone());
        writer.make_writer().write_all(b"one line\n").unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while sink.0.lock().unwrap().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the line never came out"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(&*sink.0.lock().unwrap(), b"one line\n");
    }

    #[test]
    fn the_cached_timer_writes_what_the_default_timer_writes() {
        use tracing_subscriber::fmt::format::Writer;
        use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
        for _ in 0..3 {
            let (mut ours, mut theirs) = (String::new(), String::new());
            CachedSecondTimer
                .format_time(&mut Writer::new(&mut ours))
                .unwrap();
            SystemTime
                .format_time(&mut Writer::new(&mut theirs))
                .unwrap();
            assert_eq!(ours.len(), "2026-12-01T15:37:43.123456Z".len(), "{ours}");
            // Taken a moment apart: the same up to the tenths of a second, unless a second
            // turned in between (then the next round compares again).
            if ours[..19] == theirs[..19] {
                assert_eq!(ours[..21], theirs[..21], "{ours} against {theirs}");
                assert!(ours.ends_with('Z'));
                return;
            }
        }
        panic!("three seconds turned over in three rounds");
    }

    #[test]
    fn the_plain_line_is_the_default_format_without_colours() {
        use tracing_subscriber::layer::SubscriberExt;
        let (ours, theirs) = (Sink::default(), Sink::default());
        let (a, b) = (ours.clone(), theirs.clone());
        let subscriber = tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .event_format(PlainLine)
                    .with_writer(move || a.clone()),
            )
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(move || b.clone()),
            );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(status = 201u16, key = %"k-1", "outside a span");
            let outer = tracing::info_span!("execution", merchant = %"loja", key = "k 2");
            let _outer = outer.enter();
            let inner = tracing::warn_span!("step");
            let _inner = inner.enter();
            tracing::warn!(fence = 3, "inside two spans");
            tracing::error!(why = ?Some("x"), "an error");
            tracing::debug!("filtered out? no: no filter here");
        });
        let (ours, theirs) = (
            String::from_utf8(ours.0.lock().unwrap().clone()).unwrap(),
            String::from_utf8(theirs.0.lock().unwrap().clone()).unwrap(),
        );
        let after_time = |text: &str| -> Vec<String> {
            text.lines()
                .map(|l| l["2026-12-01T15:37:43.123456Z".len()..].to_string())
                .collect()
        };
        assert_eq!(after_time(&ours), after_time(&theirs), "{ours}\n{theirs}");
        assert_eq!(after_time(&ours).len(), 4, "{ours}");
    }

    /// A `Write` that blocks until released: a stalled pipe.
    struct Stalled(Arc<(Mutex<bool>, Condvar)>, Sink);

    impl Write for Stalled {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let (open, cv) = &*self.0;
            let mut o = open.lock().unwrap();
            while !*o {
                o = cv.wait(o).unwrap();
            }
            self.1.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_output_makes_writers_wait_and_loses_nothing() {
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let sink = Sink::default();
        let (writer, guard) = batch_writer(Stalled(gate.clone(), sink.clone()));
        let line = vec![b'x'; 1023];
        let lines = 3 * MAX_PENDING / 1024;
        let producer = std::thread::spawn({
            let writer = writer.clone();
            move || {
                for _ in 0..lines {
                    let mut l = line.clone();
                    l.push(b'\n');
                    writer.make_writer().write_all(&l).unwrap();
                }
            }
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !producer.is_finished(),
            "more than MAX_PENDING waiting: the producer waits for room"
        );
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        producer.join().unwrap();
        drop(guard);
        assert_eq!(sink.0.lock().unwrap().len(), lines * 1024);
    }
}
