//! A sale's payment attempts: written ahead, sent, retried, recorded, and — in review — looked
//! up until settled or their key cancelled before the sale may get another.

use super::*;
use crate::domain::{change, format_brl};

impl Outbox {
    /// One tender of a sale paid in parts (total `total`), like [`Outbox::pay`]: returns the
    /// sale's live tender if it has one (one at a time), or its last approved one when the sale
    /// is paid, or durably creates a new tender — refused when the approved tenders plus this one
    /// would pass the total ([`CoreError::TenderExceeds`]).
    pub async fn pay_tender(
        &self,
        sale: SaleId,
        total: Centavos,
        valor: Centavos,
        method: PayMethod,
        caps: Option<OfflineCaps>,
        now: UnixMillis,
    ) -> Result<(PayOutcome, QueueSummary)> {
        self.pay_unless(sale, valor, method, Some(total), caps, now, false)
            .await
            .map(Paid::done)
    }

    /// Returns the sale's live or approved attempt, or durably creates a new one. `caps` are
    /// given while offline.
    pub async fn pay(
        &self,
        sale: SaleId,
        valor: Centavos,
        method: PayMethod,
        caps: Option<OfflineCaps>,
        now: UnixMillis,
    ) -> Result<(PayOutcome, QueueSummary)> {
        self.pay_unless(sale, valor, method, None, caps, now, false)
            .await
            .map(Paid::done)
    }

    /// [`Outbox::pay`], except that with `stop_for_reviews` a sale that would get a new attempt
    /// while it has attempts in `revisao` is left as it is and those attempts are returned: the
    /// engine asks the server about them first. Without it, such a sale is refused
    /// ([`CoreError::KeyNotCancelled`]) until its reviews are settled: no new key while an old one
    /// could still charge. The check runs in the same write (one indexed read by sale).
    ///
    /// With `sale_total`, the attempt is one part (tender) of a sale paid in parts, of that total:
    /// the sale takes that total at its first tender (a sale already being paid at once, or with
    /// another total, is refused); approved tenders do not block the next one, a live one does;
    /// and the approved tenders (less what was paid back) plus this one may not pass the total.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn pay_unless(
        &self,
        sale: SaleId,
        valor: Centavos,
        method: PayMethod,
        sale_total: Option<Centavos>,
        caps: Option<OfflineCaps>,
        now: UnixMillis,
        stop_for_reviews: bool,
    ) -> Result<Paid> {
        let page_limit = self.page_limit;
        let authorize = self.authorize_cards;
        let day = self.day_of(now);
        let terminal = self.terminal.clone();
        let write_ahead = move |c: &rusqlite::Connection| -> Result<Paid> {
            let existing = c
                .prepare_cached(&format!(
                    "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE sale_id = ?1 AND {BLOCKS_SALE}
                         ORDER BY seq DESC LIMIT 1"
                ))?
                .query_row([sale.as_ref()], attempt_from_row)
                .optional()?;
            let number = set_till(c, &sale, now, &day)?;
            let total: Option<i64> = c
                .prepare_cached("SELECT total FROM sales WHERE sale_id = ?1")?
                .query_row([sale.as_ref()], |r| r.get(0))?;
            match (sale_total, total, &existing) {
                    (None, None, Some(a)) => {
                        return Ok(Paid::Done(PayOutcome::Existing(a.clone()), queue(c)?))
                    }
                    (None, None, None) => {}
                    (None, Some(total), _) => {
                        return Err(CoreError::Invalid(format!(
                            "esta venda é paga em partes (total {}); informe o total para pagar o que falta",
                            format_brl(total)
                        )))
                    }
                    (Some(_), None, Some(a)) => {
                        return Err(CoreError::Invalid(format!(
                            "esta venda já tem um pagamento de {} de uma vez; ela não pode ser dividida",
                            a.valor
                        )))
                    }
                    (Some(asked), Some(total), _) if asked.get() != total => {
                        return Err(CoreError::Invalid(format!(
                            "esta venda tem total {}; não pode mudar para {asked} depois do primeiro pagamento",
                            format_brl(total)
                        )))
                    }
                    (Some(sale_total), _, existing) => {
                        let live = existing.as_ref().filter(|a| a.is_undecided());
                        let paid = tenders_paid(c, &sale)?;
                        if let Some(a) = live.or(existing.as_ref().filter(|_| paid >= sale_total.get())) {
                            return Ok(Paid::Done(PayOutcome::Existing(a.clone()), queue(c)?));
                        }
                        let releasing = tenders_releasing(c, &sale)?;
                        if paid + valor.get() <= sale_total.get() && paid + releasing + valor.get() > sale_total.get() {
                            return Err(CoreError::Invalid(format!(
                                "uma autorização desta venda está sendo desfeita ({}); aguarde o servidor confirmar antes de cobrar de novo",
                                format_brl(releasing)
                            )));
                        }
                        if paid + valor.get() > sale_total.get() {
                            return Err(CoreError::TenderExceeds {
                                asked: valor,
                                falta: Total::new(sale_total.get() - paid).unwrap_or_default(),
                            });
                        }
                        exec(c, "UPDATE sales SET total = ?2 WHERE sale_id = ?1 AND total IS NULL", params![sale.as_ref(), sale_total.get()])?;
                    }
                }
            let reviews = select_attempts(
                c,
                "WHERE sale_id = ?1 AND kind = 'pagamento' AND state = 'revisao' ORDER BY seq",
                [sale.as_ref()],
            )?;
            if let Some(review) = reviews.first() {
                if !stop_for_reviews {
                    // The trigger `attempts_no_new_key_while_in_review` would refuse it too.
                    return Err(CoreError::KeyNotCancelled(review.id.clone()));
                }
                return Ok(Paid::ReviewFirst(reviews));
            }
            if let Some(caps) = caps {
                caps.check(valor, queue(c)?.total)?;
            }
            if let Some(limit) = page_limit {
                limit.check(c.query_row("PRAGMA page_count", [], |r| r.get(0))?)?;
            }
            let id = AttemptId::generate();
            let key = IdempotencyKey::generate();
            let sale_ref = (&sale, number);
            let (body, cartao, plano, state, recebido) = match &method {
                PayMethod::Card(cartao, plano) => (
                    PaymentBody::new(valor, &id, sale_ref, terminal.as_deref(), sale_total)
                        .card(cartao, *plano, authorize),
                    cartao.as_ref(),
                    plano.map(|p| p.as_stored()),
                    "pendente",
                    None,
                ),
                PayMethod::Pix => (
                    PaymentBody::new(valor, &id, sale_ref, terminal.as_deref(), sale_total).pix(),
                    "",
                    None,
                    "pendente",
                    None,
                ),
                PayMethod::Machine { maquininha, plano } => (
                    PaymentBody::new(valor, &id, sale_ref, terminal.as_deref(), sale_total)
                        .machine(maquininha, *plano),
                    "",
                    plano.map(|p| p.as_stored()),
                    "pendente",
                    None,
                ),
                // Cash is paid when handed over: nothing to send, so no request bytes.
                PayMethod::Cash { recebido } => {
                    change(valor, *recebido).map_err(|e| CoreError::Invalid(e.to_string()))?;
                    (Vec::new(), "", None, "aprovado", Some(recebido.get()))
                }
            };
            exec(
                    c,
                    "INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, metodo, plano, request_body, state,
                                           next_try_at, created_at, updated_at, recebido)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?9, ?7, ?10, ?8, ?8, ?8, ?11)",
                    params![id.as_ref(), sale.as_ref(), key.as_ref(), valor.get(), cartao, method.means().as_str(), body, now, plano, state, recebido],
                )?;
            let created = get_attempt(c, &id)?.expect("just inserted");
            Ok(Paid::Done(PayOutcome::Created(created), queue(c)?))
        };
        // Durable before the first byte goes out. The trials' mutation check builds it relaxed
        // (feature `mutant-relaxed-write-ahead`, never in a build that takes money) and must see
        // a power cut lose an attempt the till had reported stored.
        if cfg!(feature = "mutant-relaxed-write-ahead") {
            self.db.write_relaxed(write_ahead).await
        } else {
            self.db.write(write_ahead).await
        }
    }

    /// Attempts due now, oldest first, at most `limit`.
    pub async fn due(&self, now: UnixMillis, limit: usize) -> Result<Vec<SendJob>> {
        self.dispatch_reads.fetch_add(1, Ordering::Relaxed);
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT id, idempotency_key, request_body, created_at, tries, refund_payment,
                            COALESCE((SELECT payment_id FROM pix WHERE pix.attempt_id = attempts.id),
                                     (SELECT payment_id FROM machine_orders m WHERE m.attempt_id = attempts.id))
                                AS waiting_payment
                     FROM attempts
                     WHERE state = 'pendente' AND next_try_at <= ?1 ORDER BY seq LIMIT ?2",
                )?;
                let jobs = st
                    .query_map(params![now, limit as i64], |r| {
                        Ok(SendJob {
                            id: AttemptId::from_stored(r.get::<_, String>(0)?),
                            target: Target::of(refund_payment(r)?),
                            key: IdempotencyKey::from_stored(r.get(1)?),
                            body: r.get(2)?,
                            created_at: r.get(3)?,
                            tries: r.get(4)?,
                            waiting_payment: r.get(6)?,
                        })
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(jobs)
            })
            .await
    }

    /// The earliest `limit` (id, next_try_at) of pending attempts.
    pub async fn upcoming(&self, limit: usize) -> Result<Vec<(AttemptId, UnixMillis)>> {
        self.dispatch_reads.fetch_add(1, Ordering::Relaxed);
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT id, next_try_at FROM attempts WHERE state = 'pendente' ORDER BY next_try_at LIMIT ?1",
                )?;
                let rows = st
                    .query_map([limit as i64], |r| {
                        Ok((AttemptId::from_stored(r.get::<_, String>(0)?), r.get(1)?))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(rows)
            })
            .await
    }

    /// Records how a try ended. Only a `pendente` attempt changes; returns it as it is now.
    ///
    /// Committed *relaxed* (see `durable_sqlite`): it survives a crash of the app, and a power
    /// cut can only lose it together with the records after it. Losing it is safe by design: the
    /// attempt is `pendente` again and is replayed with its same key and bytes, and the server
    /// answers with the stored outcome (or, past its key retention, is asked by `referencia`).
    /// What must survive a power cut, the attempt itself, was written durably before it was sent.
    pub async fn record(
        &self,
        id: &AttemptId,
        result: TryResult,
        now: UnixMillis,
    ) -> Result<(Attempt, QueueSummary)> {
        let id = id.clone();
        self.db
            .write_relaxed(move |c| {
            match result {
                TryResult::Final(FinalAnswer {
                    state,
                    status,
                    body,
                    payment_id,
                    motivo,
                    pix,
                    maquininha,
                    authorized,
                }) => {
                    // A Pix paid after the server closed it pays a sale that still waited for
                    // it — but never a part of a divided sale: the server holds a divided sale's
                    // parts to its total and counts no such Pix among them, so the part is
                    // closed unpaid and its Pix shown to give back (as `keep_late_pix` refuses).
                    let n = exec(
                        c,
                        "UPDATE attempts SET
                                state = CASE WHEN ?6 = 'recebido_apos_cancelamento'
                                              AND EXISTS (SELECT 1 FROM sales s WHERE s.sale_id = attempts.sale_id
                                                            AND s.total IS NOT NULL)
                                             THEN 'recusado' ELSE ?2 END,
                                response_status = ?3, response_body = ?4, payment_id = ?5,
                                motivo = ?6, last_error = NULL, tries = tries + 1, last_tried_at = ?7, updated_at = ?7,
                                captura = CASE WHEN ?8 THEN 'pendente' ELSE captura END
                         WHERE id = ?1 AND state = 'pendente'",
                        params![id.as_ref(), state.as_str(), status, body, payment_id, motivo, now, authorized],
                    )?;
                    if let Some(pix) = pix.filter(|_| n == 1) {
                        upsert_pix(c, &id, &pix, now)?;
                    }
                    if let Some(order) = maquininha.filter(|_| n == 1) {
                        upsert_machine(c, &id, &order, now)?;
                    }
                    n
                }
                waiting @ (TryResult::PixWaiting(_) | TryResult::MachineWaiting(_)) => {
                    // Answered: the next read is due at once (it waits on the server); what the
                    // server said of the resource is kept beside the attempt.
                    let payment = match &waiting {
                        TryResult::PixWaiting(pix) => pix.payment_id.clone(),
                        TryResult::MachineWaiting(order) => order.payment_id.clone(),
                        _ => unreachable!("matched above"),
                    };
                    let n = exec(
                        c,
                        "UPDATE attempts SET payment_id = ?2, next_try_at = ?3, last_error = NULL,
                                tries = tries + 1, last_tried_at = ?3, updated_at = ?3
                         WHERE id = ?1 AND state = 'pendente'",
                        params![id.as_ref(), payment, now],
                    )?;
                    match waiting {
                        TryResult::PixWaiting(pix) if n == 1 => upsert_pix(c, &id, &pix, now)?,
                        TryResult::MachineWaiting(order) if n == 1 => {
                            upsert_machine(c, &id, &order, now)?
                        }
                        _ => {}
                    }
                    n
                }
                TryResult::Retry { next_try_at, error } => exec(
                    c,
                    "UPDATE attempts SET next_try_at = ?2, last_error = ?3, tries = tries + 1,
                            last_tried_at = ?4, updated_at = ?4
                     WHERE id = ?1 AND state = 'pendente'",
                    params![id.as_ref(), next_try_at, error, now],
                )?,
                TryResult::Review { reason, status, body, checked } => exec(
                    c,
                    "UPDATE attempts SET state = 'revisao', last_error = ?2, response_status = ?3,
                            response_body = ?4, tries = tries + 1, last_tried_at = ?5, updated_at = ?5,
                            review_checked_at = CASE WHEN ?6 THEN ?5 END
                     WHERE id = ?1 AND state = 'pendente'",
                    params![id.as_ref(), reason, status, body, now, checked],
                )?,
            };
            after_change(c, &id)
        })
        .await
    }

    /// Makes every pending attempt due at `now` (the server is reachable again).
    pub async fn make_all_due(&self, now: UnixMillis) -> Result<usize> {
        self.db
            .write(move |c| {
                exec(
                    c,
                    "UPDATE attempts SET captura_next_at = ?1
                     WHERE captura IN ('capturar', 'desfazer') AND captura_next_at > ?1",
                    [now],
                )?;
                Ok(exec(
                    c,
                    "UPDATE attempts SET next_try_at = ?1 WHERE state = 'pendente' AND next_try_at > ?1",
                    [now],
                )?)
            })
            .await
    }

    /// The payment attempts of one sale, oldest first.
    pub async fn attempts_of(&self, sale: &SaleId) -> Result<Vec<Attempt>> {
        self.of_sale(sale, "AND kind = 'pagamento'").await
    }

    /// Every attempt of one sale, its refunds included, oldest first.
    pub async fn sale_attempts(&self, sale: &SaleId) -> Result<Vec<Attempt>> {
        self.of_sale(sale, "").await
    }

    async fn of_sale(&self, sale: &SaleId, only: &'static str) -> Result<Vec<Attempt>> {
        let sale = sale.clone();
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    &format!("WHERE sale_id = ?1 {only} ORDER BY seq"),
                    [sale.as_ref()],
                )?)
            })
            .await
    }

    /// The latest payment attempt of every sale that is not settled (`pendente`, or `revisao`),
    /// and every refund that is not.
    pub async fn unfinished(&self) -> Result<Vec<Attempt>> {
        self.db
            .read(|c| {
                Ok(select_attempts(
                    c,
                    "WHERE state IN ('pendente', 'revisao')
                     AND (kind = 'estorno' OR seq = (SELECT max(seq) FROM attempts b
                                                   WHERE b.sale_id = attempts.sale_id AND b.kind = 'pagamento'))
                     ORDER BY seq",
                    [],
                )?)
            })
            .await
    }
}

/// What a sale's approved tenders paid, less what was paid back of them, in centavos.
pub(super) fn tenders_paid(c: &rusqlite::Connection, sale: &SaleId) -> rusqlite::Result<i64> {
    c.prepare_cached(
        "SELECT COALESCE(SUM(CASE kind WHEN 'pagamento' THEN valor ELSE -valor END), 0)
           FROM attempts WHERE sale_id = ?1 AND state = 'aprovado'
            AND (captura IS NULL OR captura IN ('pendente', 'capturar', 'capturada'))",
    )?
    .query_row([sale.as_ref()], |r| r.get(0))
}

/// What a sale's authorizations being undone still hold at the server until it confirms.
fn tenders_releasing(c: &rusqlite::Connection, sale: &SaleId) -> rusqlite::Result<i64> {
    c.prepare_cached(
        "SELECT COALESCE(SUM(valor), 0) FROM attempts
          WHERE sale_id = ?1 AND kind = 'pagamento' AND captura = 'desfazer'",
    )?
    .query_row([sale.as_ref()], |r| r.get(0))
}
