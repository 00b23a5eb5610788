//! Time as the server sees it. Leases and retention read this clock, so tests can move it.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> Millis;
}

/// The machine's clock, shifted by a fixed offset (zero in production; non-zero to test skew).
#[derive(Debug, Default)]
pub struct SystemClock {
    offset_ms: Millis,
}

impl SystemClock {
    /// A clock `offset_ms` ahead of (or, when negative, behind) the machine's.
    pub fn with_offset(offset_ms: Millis) -> Self {
        Self { offset_ms }
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is after 1970");
        d.as_millis() as Millis + self.offset_ms
    }
}

/// A clock that only moves when told to; for tests of leases and retention.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// Starts at the machine's current time.
    pub fn new() -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(SystemClock::default().now_ms())))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: std::time::Duration) {
        self.0.fetch_add(by.as_millis() as Millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

/// Formats epoch milliseconds as RFC 3339 (UTC).
pub fn rfc3339(ms: Millis) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .expect("UTC times always format")
}

/// Reads an RFC 3339 time as epoch milliseconds; `None` when it is not one.
pub fn parse_rfc3339(s: &str) -> Option<Millis> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}
