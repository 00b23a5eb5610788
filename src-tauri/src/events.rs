//! The window's event stream, asked for by the window: [`Streams::open`] keeps the engine's
//! events for a window from then on, and the `events` command answers those that came since the
//! window last asked, waiting for the next one when there are none (a long poll).
//!
//! Not a Tauri `Channel`: a channel delivers each message by evaluating a new script in the page
//! (`webview.eval`, the message in the script's text), and the web process's memory kept growing
//! with them, sale after sale, even after a memory-pressure signal (`make bench` measures the
//! growth from 100 to 1 000 sales). An `invoke`'s answer comes back as the body of a fetch
//! (Tauri's IPC custom protocol), which evaluates nothing.

use checkout_core::Event;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

/// How long an `events` call waits for the next event before it answers with none (the window
/// asks again at once). A window that went away stops asking within this.
pub const EVENTS_WAIT: Duration = Duration::from_secs(20);

/// Most events one answer carries (the rest come with the next).
pub const EVENTS_BATCH: usize = 256;

/// What one `events` call answers.
pub type EventBatch = Batch<Event>;

/// The events since the last call, over any event type (the tests use numbers).
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct Batch<T> {
    /// The events, oldest first.
    pub events: Vec<T>,
    /// Events were dropped before these (the window did not ask for long enough that the
    /// engine's buffer overflowed): the window takes a fresh snapshot after applying these.
    pub lagged: bool,
    /// The engine stopped: no event will come again.
    pub closed: bool,
}

/// A window's receiver, shared by its calls (one at a time).
type Receiver = Arc<tokio::sync::Mutex<broadcast::Receiver<Event>>>;

/// The open streams, by webview label.
#[derive(Debug, Default)]
pub struct Streams(Mutex<HashMap<String, Receiver>>);

impl Streams {
    /// Keeps events for `label` from now on; a webview that opens again (a reload) starts afresh.
    pub fn open(&self, label: &str, events: broadcast::Receiver<Event>) {
        self.lock()
            .insert(label.to_string(), Arc::new(tokio::sync::Mutex::new(events)));
    }

    /// The stream of `label`, if it opened one.
    pub fn get(&self, label: &str) -> Option<Receiver> {
        self.lock().get(label).cloned()
    }

    /// Forgets the stream of `label` (its webview is gone): its events are no longer kept.
    pub fn close(&self, label: &str) {
        self.lock().remove(label);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Receiver>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The events waiting in `events`, at most `max`; when there are none, waits up to `wait` for
/// the first.
pub async fn next_batch<T: Clone>(
    events: &mut broadcast::Receiver<T>,
    wait: Duration,
    max: usize,
) -> Batch<T> {
    let mut batch = Batch {
        events: Vec::new(),
        lagged: false,
        closed: false,
    };
    match tokio::time::timeout(wait, events.recv()).await {
        Err(_) => return batch,
        Ok(Ok(e)) => batch.events.push(e),
        Ok(Err(RecvError::Lagged(_))) => batch.lagged = true,
        Ok(Err(RecvError::Closed)) => {
            batch.closed = true;
            return batch;
        }
    }
    while batch.events.len() < max {
        match events.try_recv() {
            Ok(e) => batch.events.push(e),
            Err(TryRecvError::Lagged(_)) => batch.lagged = true,
            Err(TryRecvError::Empty) => break,
            Err(TryRecvError::Closed) => {
                batch.closed = batch.events.is_empty();
                break;
            }
        }
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_WAIT: Duration = Duration::from_millis(20);

    #[tokio::test]
    async fn events_come_in_order_in_batches_of_at_most_max() {
        let (tx, mut rx) = broadcast::channel(64);
        for i in 0..5 {
            tx.send(i).unwrap();
        }
        let first = next_batch(&mut rx, NO_WAIT, 3).await;
        assert_eq!(first.events, vec![0, 1, 2]);
        assert!(!first.lagged && !first.closed);
        assert_eq!(next_batch(&mut rx, NO_WAIT, 3).await.events, vec![3, 4]);
    }

    #[tokio::test]
    async fn with_nothing_waiting_it_waits_for_the_next_event_or_answers_none() {
        let (tx, mut rx) = broadcast::channel(8);
        let empty = next_batch(&mut rx, NO_WAIT, 8).await;
        assert_eq!(empty.events, Vec::<u32>::new());
        assert!(!empty.lagged && !empty.closed);
        let later = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.send(7u32).unwrap();
            tx
        });
        let woke = next_batch(&mut rx, Duration::from_secs(5), 8).await;
        assert_eq!(woke.events, vec![7]);
        drop(later.await.unwrap());
        assert!(next_batch(&mut rx, NO_WAIT, 8).await.closed);
    }

    #[tokio::test]
    async fn a_stream_that_overflowed_says_so_with_what_is_left() {
        let (tx, mut rx) = broadcast::channel(4);
        for i in 0..10u32 {
            tx.send(i).unwrap();
        }
        let b = next_batch(&mut rx, NO_WAIT, 100).await;
        assert!(b.lagged);
        assert_eq!(b.events, vec![6, 7, 8, 9]);
        assert!(!next_batch(&mut rx, NO_WAIT, 100).await.lagged);
    }

    #[test]
    fn a_webview_that_opens_again_starts_afresh_and_a_closed_one_is_forgotten() {
        let (tx, rx) = broadcast::channel::<Event>(4);
        let streams = Streams::default();
        streams.open("main", rx);
        let first = streams.get("main").unwrap();
        streams.open("main", tx.subscribe());
        assert!(!Arc::ptr_eq(&first, &streams.get("main").unwrap()));
        streams.close("main");
        assert!(streams.get("main").is_none());
    }
}
