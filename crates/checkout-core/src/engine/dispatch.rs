//! Sending and retrying: due attempts oldest first, one request per key, full-jitter backoff.

use super::{now_ms, Connectivity, Inner};
use crate::client::{Answer, Reach};
use crate::domain::{AttemptState, UnixMillis};
use crate::outbox::{SendJob, TryResult};
use rand::Rng;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::Instrument;

/// The longest `Retry-After` the dispatcher honours.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(3600);

/// Full-jitter exponential backoff: a uniform delay below `base · 2^(tries-1)`, capped; never
/// shorter than what the server asked for with `Retry-After` (itself capped at an hour).
pub fn retry_delay(
    tries: u32,
    base: Duration,
    cap: Duration,
    retry_after: Option<Duration>,
) -> Duration {
    let exp = tries.saturating_sub(1).min(30);
    let ceiling = base.saturating_mul(1u32 << exp).min(cap);
    let jitter = rand::thread_rng().gen_range(0..=ceiling.as_millis() as u64);
    let asked = retry_after.unwrap_or_default().min(RETRY_AFTER_MAX);
    Duration::from_millis(jitter).max(asked)
}

/// Sends due attempts, oldest first, at most `max_in_flight` at once and one per key, and sleeps
/// until the next is due or something changes. The tries it starts are its own: when it stops, it
/// ends them (an unfinished try leaves its attempt `pendente`, replayed with the same key on the
/// next start), so that after [`Checkout::shutdown`] nothing holds the outbox any more.
pub(super) async fn dispatch(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    let max = inner.config.max_in_flight.max(1);
    let mut probed = inner.probed.subscribe();
    tokio::select! {
        _ = probed.wait_for(|p| *p) => {}
        _ = stop.changed() => return,
    }
    let mut tries = tokio::task::JoinSet::new();
    loop {
        if inner.stopped() {
            break;
        }
        while tries.try_join_next().is_some() {}
        let busy = inner.in_flight.lock().expect("in-flight lock").ids.len();
        if !inner.connectivity().is_down() && max.saturating_sub(busy) >= refill_at(max) {
            inner
                .in_flight
                .lock()
                .expect("in-flight lock")
                .read_starts();
            let due = inner.outbox.due(now_ms(), max + busy).await;
            let mut in_flight = inner.in_flight.lock().expect("in-flight lock");
            let ended = in_flight.read_ends();
            match due {
                Ok(jobs) => {
                    for job in jobs {
                        if in_flight.ids.len() >= max {
                            break;
                        }
                        if !ended.contains(&job.id) && in_flight.ids.insert(job.id.clone()) {
                            let span = tracing::info_span!("attempt", attempt = %job.id, key = %job.key, tries = job.tries);
                            tries.spawn(run_try(inner.clone(), job).instrument(span));
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not read the outbox"),
            }
        }
        let sleep = next_wake(&inner).await;
        tokio::select! {
            _ = inner.wake.notified() => {}
            _ = tokio::time::sleep(sleep) => {}
            _ = stop.changed() => break,
        }
    }
    tries.shutdown().await;
}

/// How long the server may hold a read of a waiting Pix: well inside the request timeout.
fn pix_wait(inner: &Inner) -> Duration {
    inner
        .config
        .request_timeout
        .saturating_sub(Duration::from_secs(5))
        .clamp(Duration::from_secs(1), Duration::from_secs(25))
}

/// How many slots must be free before the dispatcher reads the outbox again. Each read returns
/// the attempts in flight too (they are still due in the file), so refilling one slot at a time
/// would read about `2 × max` rows per try during a drain; refilling a quarter at a time reads
/// a quarter as often and still keeps three quarters of the slots busy. A lone attempt (the
/// cashier's) always finds every slot free.
fn refill_at(max: usize) -> usize {
    (max / 4).max(1)
}

async fn next_wake(inner: &Inner) -> Duration {
    const IDLE: Duration = Duration::from_secs(60);
    if inner.connectivity().is_down() {
        return IDLE; // the prober wakes the dispatcher when the server is back
    }
    let busy = inner.in_flight.lock().expect("in-flight lock").ids.len();
    let max = inner.config.max_in_flight.max(1);
    if max.saturating_sub(busy) < refill_at(max) {
        // Too few slots free to read for: each try wakes the dispatcher when it ends. Reading
        // the outbox now would mostly find due work it cannot send.
        return IDLE;
    }
    let Ok(upcoming) = inner.outbox.upcoming(busy + 1).await else {
        return Duration::from_secs(1);
    };
    // Every attempt waits longer than any wait the dispatcher sets: only a wall clock that ran
    // ahead and was set right (by hand, or by NTP) puts them there, and they would wait as long
    // as it had run ahead. They are due now.
    let longest = (RETRY_AFTER_MAX + inner.config.backoff_cap).as_millis() as UnixMillis;
    if upcoming
        .first()
        .is_some_and(|(_, at)| at - now_ms() > longest)
    {
        match inner.outbox.make_all_due(now_ms()).await {
            Ok(moved) => {
                tracing::warn!(moved, "the clock went back: the queue is due now");
                return Duration::ZERO;
            }
            Err(e) => tracing::warn!(error = %e, "could not reschedule the queue"),
        }
    }
    let in_flight = inner.in_flight.lock().expect("in-flight lock");
    upcoming
        .into_iter()
        .find(|(id, _)| !in_flight.ids.contains(id))
        .map(|(_, at)| Duration::from_millis((at - now_ms()).max(0) as u64).min(IDLE))
        .unwrap_or(IDLE)
}

async fn run_try(inner: Arc<Inner>, job: SendJob) {
    let lookup_after = inner.config.lookup_after(inner.advertised_retention());
    let lookup_first = now_ms() - job.created_at > lookup_after.as_millis() as UnixMillis;
    let answer = if let Some(payment) = &job.waiting_payment {
        // A Pix or a card-machine order the server answered: read its state (the server holds
        // the read until it changes), never send it again.
        inner.client.waiting_status(payment, pix_wait(&inner)).await
    } else if lookup_first {
        match inner.client.find(&job.target, job.id.as_ref()).await {
            Ok(Some(found)) => {
                tracing::info!(
                    "older than the server's key retention: found by referencia, not sent again"
                );
                found
            }
            Ok(None) => {
                tracing::info!("older than the server's key retention and unknown to it: sending");
                inner.client.send(&job).await
            }
            Err(retry) => retry,
        }
    } else {
        inner.client.send(&job).await
    };
    let (reach, problem) = match &answer {
        Answer::Retry { reach, error, .. } => (*reach, Some(error.clone())),
        _ => (Reach::Answered, None),
    };
    inner.observe(Connectivity::of(reach), problem).await;
    let tries = job.tries + 1;
    let result = match answer {
        Answer::Final(answer) => TryResult::Final(answer),
        Answer::PixWaiting(pix) => TryResult::PixWaiting(pix),
        Answer::MachineWaiting(order) => TryResult::MachineWaiting(order),
        Answer::Retry {
            retry_after, error, ..
        } => {
            let delay = retry_delay(
                tries,
                inner.config.backoff_base,
                inner.config.backoff_cap,
                retry_after,
            );
            tracing::info!(%error, delay_ms = delay.as_millis() as u64, "try failed; will retry with the same key");
            TryResult::Retry {
                next_try_at: now_ms() + delay.as_millis() as UnixMillis,
                error,
            }
        }
        Answer::Review {
            reason,
            status,
            body,
        } => {
            // An earlier try may have charged and lost its answer: before anything says
            // "review", ask the server whether it has a payment for this attempt.
            tracing::warn!(%reason, "server refused the attempt; looking it up by referencia");
            match inner.client.find(&job.target, job.id.as_ref()).await {
                Ok(Some(Answer::Final(found))) => {
                    tracing::warn!(payment = ?found.payment_id, "refused now, but an earlier try was charged: settled from the server's payment");
                    TryResult::Final(found)
                }
                Ok(None) => TryResult::Review {
                    reason,
                    status: Some(status),
                    body: Some(body),
                    checked: true,
                },
                _ => {
                    inner.reviews_due.notify_one();
                    TryResult::Review {
                        reason,
                        status: Some(status),
                        body: Some(body),
                        checked: false,
                    }
                }
            }
        }
    };
    match inner.outbox.record(&job.id, result, now_ms()).await {
        Ok((attempt, queue)) => {
            if attempt.state != AttemptState::Pendente {
                tracing::info!(state = attempt.state.as_str(), payment = ?attempt.payment_id, "attempt final");
            }
            inner.announce(attempt, queue);
        }
        Err(e) => {
            // The try's outcome is not stored; the attempt stays due and is tried again with the
            // same key, which the server answers idempotently. Pause so a failing disk is not hammered.
            tracing::error!(error = %e, "could not record the try");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    inner
        .in_flight
        .lock()
        .expect("in-flight lock")
        .try_ended(job.id);
    inner.wake.notify_one();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_stays_under_its_ceiling_and_honours_retry_after() {
        let base = Duration::from_millis(100);
        let cap = Duration::from_secs(2);
        for tries in 1..20 {
            let d = retry_delay(tries, base, cap, None);
            let ceiling = (base * 2u32.pow(tries.min(20) - 1)).min(cap);
            assert!(d <= ceiling, "try {tries}: {d:?} > {ceiling:?}");
        }
        let asked = Duration::from_secs(5);
        assert!(retry_delay(1, base, cap, Some(asked)) >= asked);
    }
}
