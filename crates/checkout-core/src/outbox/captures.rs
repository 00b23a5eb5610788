//! Authorized tenders: the decision to capture or undo each, written ahead with its own key
//! before it is sent, and what the server said of it. One decision per authorization
//! (`attempts_captura_one_way`): a capture is never turned into an undo, nor back.

use super::*;
use crate::domain::Capture;

/// One capture or undo to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureJob {
    /// The tender.
    pub id: AttemptId,
    /// Its payment on the server (`pay_…`).
    pub payment_id: String,
    /// `Capturar` or `Desfazer`.
    pub step: Capture,
    /// The step's own `Idempotency-Key`, the same on every try.
    pub key: IdempotencyKey,
    /// Tries so far.
    pub tries: u32,
}

/// How a capture's or undo's try ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptureResult {
    /// The server said where the authorization stands now (captured, undone or lapsed).
    Settled(Capture),
    /// Try again at `next_try_at` with the same key.
    Retry {
        /// When.
        next_try_at: UnixMillis,
        /// Why this try did not end it (pt-BR).
        error: String,
    },
}

impl Outbox {
    /// Decides `step` (capture or undo) for every authorization of `sale` still undecided, each
    /// with a new key, durably, before anything is sent. Returns the tenders decided now.
    pub async fn decide_captures(
        &self,
        sale: &SaleId,
        step: Capture,
        now: UnixMillis,
    ) -> Result<Vec<Attempt>> {
        let by = if step == Capture::Capturar {
            "confirmacao"
        } else {
            "cancelamento"
        };
        let sale = sale.clone();
        self.db
            .write(move |c| {
                let open = select_attempts(
                    c,
                    "WHERE sale_id = ?1 AND kind = 'pagamento' AND captura = 'pendente' ORDER BY seq",
                    [sale.as_ref()],
                )?;
                decide(c, open, step, by, now)
            })
            .await
    }

    /// Decides an undo for every authorization nobody decided yet, whatever its sale: what a
    /// till starting again does, since none of them was confirmed (never captured silently).
    pub async fn undo_unconfirmed(&self, now: UnixMillis) -> Result<Vec<Attempt>> {
        self.db
            .write(move |c| {
                let open = select_attempts(
                    c,
                    "WHERE kind = 'pagamento' AND captura = 'pendente' ORDER BY seq",
                    [],
                )?;
                decide(c, open, Capture::Desfazer, "reinicio", now)
            })
            .await
    }

    /// Captures and undos due now, oldest first, at most `limit`.
    pub async fn captures_due(&self, now: UnixMillis, limit: usize) -> Result<Vec<CaptureJob>> {
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT id, payment_id, captura, captura_key, captura_tries FROM attempts
                     WHERE captura IN ('capturar', 'desfazer') AND captura_next_at <= ?1
                     ORDER BY captura_next_at LIMIT ?2",
                )?;
                let jobs = st
                    .query_map(params![now, limit as i64], |r| {
                        let step: String = r.get(2)?;
                        Ok(CaptureJob {
                            id: AttemptId::from_stored(r.get::<_, String>(0)?),
                            payment_id: r.get(1)?,
                            step: Capture::parse(&step).unwrap_or(Capture::Desfazer),
                            key: IdempotencyKey::from_stored(r.get(3)?),
                            tries: r.get(4)?,
                        })
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(jobs)
            })
            .await
    }

    /// When the next capture or undo is due, if one is waiting.
    pub async fn next_capture_at(&self) -> Result<Option<UnixMillis>> {
        self.db
            .read(|c| {
                Ok(c.query_row(
                    "SELECT min(captura_next_at) FROM attempts WHERE captura IN ('capturar', 'desfazer')",
                    [],
                    |r| r.get(0),
                )?)
            })
            .await
    }

    /// Records how a capture's or undo's try ended; only a decided, unsettled one changes.
    /// Returns the tender as it is now.
    pub async fn record_capture(
        &self,
        id: &AttemptId,
        result: CaptureResult,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        let id = id.clone();
        self.db
            .write(move |c| {
                match result {
                    CaptureResult::Settled(state) => exec(
                        c,
                        "UPDATE attempts SET captura = ?2, captura_error = NULL,
                                captura_tries = captura_tries + 1, updated_at = ?3
                         WHERE id = ?1 AND captura IN ('capturar', 'desfazer')",
                        params![id.as_ref(), state.as_str(), now],
                    )?,
                    CaptureResult::Retry { next_try_at, error } => exec(
                        c,
                        "UPDATE attempts SET captura_next_at = ?2, captura_error = ?3,
                                captura_tries = captura_tries + 1, updated_at = ?4
                         WHERE id = ?1 AND captura IN ('capturar', 'desfazer')",
                        params![id.as_ref(), next_try_at, error, now],
                    )?,
                };
                after_change(c, &id)
            })
            .await
    }
}

/// Writes `step` and a new key for each of `open` (authorizations still `pendente`, read in the
/// same write); returns them as they are now.
fn decide(
    c: &rusqlite::Connection,
    open: Vec<Attempt>,
    step: Capture,
    by: &str,
    now: UnixMillis,
) -> Result<Vec<Attempt>> {
    let mut decided = Vec::with_capacity(open.len());
    for a in open {
        exec(
            c,
            "UPDATE attempts SET captura = ?2, captura_key = ?3, captura_next_at = ?4,
                    captura_error = NULL, captura_por = ?5, updated_at = ?4
             WHERE id = ?1 AND captura = 'pendente'",
            params![
                a.id.as_ref(),
                step.as_str(),
                IdempotencyKey::generate().as_ref(),
                now,
                by
            ],
        )?;
        decided.push(get_attempt(c, &a.id)?.expect("read in this write"));
    }
    Ok(decided)
}
