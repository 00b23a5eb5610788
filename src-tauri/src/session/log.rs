//! The QA session log: one line per engine event and QA action, kept in memory (the newest
//! lines) and exported on request.

use checkout_core::{Checkout, Event};
use std::sync::{Arc, Mutex};

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Lines the session log keeps: the newest, so a till left open for months does not grow with
/// every sale (a QA session's lines fit many times over).
const SESSION_LOG_LINES: usize = 5_000;

/// The QA session log: one line per engine event and QA action, the newest
/// [`SESSION_LOG_LINES`] of them, and how many older ones were let go.
#[derive(Debug, Default)]
pub(super) struct SessionLog {
    lines: std::collections::VecDeque<String>,
    dropped: u64,
}

impl SessionLog {
    fn push(&mut self, line: String) {
        if self.lines.len() == SESSION_LOG_LINES {
            self.lines.pop_front();
            self.dropped += 1;
        }
        self.lines.push_back(line);
    }

    /// The lines kept, after one that says how many older ones were let go, if any were.
    pub(super) fn lines(&self) -> Vec<String> {
        let dropped = (self.dropped > 0).then(|| {
            format!(
                "… {} linhas mais antigas não guardadas (o registro guarda as últimas {SESSION_LOG_LINES})",
                self.dropped
            )
        });
        dropped
            .into_iter()
            .chain(self.lines.iter().cloned())
            .collect()
    }
}

pub(super) fn push_log(log: &Mutex<SessionLog>, line: String) {
    log.lock()
        .expect("log lock")
        .push(format!("{} {line}", now_rfc3339()));
}

/// Records every engine event in the session log, whether or not a window is listening.
pub(super) fn spawn_logger(checkout: &Checkout, log: Arc<Mutex<SessionLog>>) {
    let mut events = checkout.subscribe();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(Event::AttemptChanged { attempt: a }) => push_log(
                    &log,
                    format!(
                        "tentativa {} venda {} chave {} estado {} tentativas {} erro {}",
                        a.id,
                        a.sale_id,
                        a.idempotency_key,
                        a.state.as_str(),
                        a.tries,
                        a.last_error.as_deref().unwrap_or("-")
                    ),
                ),
                Ok(Event::QueueChanged { queue }) => push_log(
                    &log,
                    format!("fila {} pagamentos, {}", queue.count, queue.total),
                ),
                Ok(Event::ConnectivityChanged {
                    connectivity,
                    problema,
                }) => push_log(
                    &log,
                    match problema {
                        Some(why) => format!("conectividade {connectivity:?}: {why}"),
                        None => format!("conectividade {connectivity:?}"),
                    },
                ),
                Ok(Event::NotaChanged { nota, .. }) => push_log(
                    &log,
                    format!(
                        "nfc-e {} venda {} número {} tpEmis {} estado {:?} tentativas {} motivo {}",
                        nota.chave,
                        nota.sale_id,
                        nota.numero,
                        nota.tp_emis,
                        nota.estado,
                        nota.tentativas,
                        nota.motivo.as_deref().unwrap_or("-")
                    ),
                ),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => push_log(
                    &log,
                    format!("{n} eventos não registrados (fila de eventos cheia)"),
                ),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_log_keeps_its_newest_lines_and_says_how_many_older_ones_went() {
        let mut log = SessionLog::default();
        for i in 0..SESSION_LOG_LINES {
            log.push(format!("linha {i}"));
        }
        assert_eq!(log.lines().len(), SESSION_LOG_LINES);
        assert_eq!(log.lines()[0], "linha 0");
        log.push("mais uma".into());
        log.push("e outra".into());
        let lines = log.lines();
        assert_eq!(lines.len(), SESSION_LOG_LINES + 1);
        assert!(
            lines[0].starts_with("… 2 linhas mais antigas"),
            "{}",
            lines[0]
        );
        assert_eq!(lines[1], "linha 2");
        assert_eq!(lines.last().unwrap(), "e outra");
    }
}
