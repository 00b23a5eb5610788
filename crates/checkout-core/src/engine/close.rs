//! Closing the till: the day's attempts reconciled with the server's payments and kept.

use super::*;

impl Checkout {
    /// Closes the till for `day` (today when `None`, in the store's time zone): reconciles every
    /// attempt of the day with the server's payments by `referencia` and keeps the result. Refused
    /// with [`CoreError::PendingAtClose`] while attempts are pending, unless `anyway` (then they
    /// are listed in the closing). Needs the server: [`CoreError::Unreachable`] otherwise.
    pub async fn close_day(&self, day: Option<&str>, anyway: bool) -> Result<Closing> {
        let now = now_ms();
        let outbox = &self.inner.outbox;
        let day = day.map_or_else(|| outbox.day_of(now), str::to_string);
        let bounds = day_bounds(&day, self.inner.config.utc_offset)
            .ok_or_else(|| CoreError::Invalid(format!("dia inválido: {day:?} (use AAAA-MM-DD)")))?;
        // A Pix paid after the till closed it is recorded before the day is read, so the closing
        // lists it to give back rather than as a mismatch with the server.
        if let Err(e) = late_pix::check_wide(&self.inner).await {
            tracing::warn!(error = %e, "closing without asking about late Pix");
        }
        let attempts = outbox.attempts_of_day(&day, bounds).await?;
        let pending = |refunds: bool| {
            attempts
                .iter()
                .filter(move |a| a.state == AttemptState::Pendente && a.is_refund() == refunds)
        };
        let (count, refunds) = (pending(false).count(), pending(true).count());
        if count + refunds > 0 && !anyway {
            return Err(CoreError::PendingAtClose {
                count,
                total: pending(false).map(|a| a.valor).sum(),
                refunds,
            });
        }
        // A payment queued offline may reach the server after the day ended: list up to now (a
        // closing a long time later stops at the server's longest range).
        let to = bounds.1.max(now + 60_000).min(bounds.0 + 92 * 86_400_000);
        let terminal = self.inner.config.terminal.as_deref();
        let mut server = self
            .inner
            .client
            .payments_between(bounds.0, to, terminal)
            .await?;
        let listed: HashSet<String> = server.iter().filter_map(|p| p.referencia.clone()).collect();
        for a in attempts.iter().filter(|a| !a.is_refund()) {
            // Sent without this till's name, or after the range: asked for one by one.
            if !listed.contains(a.id.as_ref()) {
                server.extend(
                    self.inner
                        .client
                        .payments_by_referencia(a.id.as_ref())
                        .await?,
                );
            }
        }
        // Refunds are listed with their payment: each payment refunded today by this till, and
        // each of the day's approved payments (it may have been paid back elsewhere), is asked
        // for once.
        let today: HashSet<&str> = attempts.iter().map(|a| a.id.as_ref()).collect();
        let mut refunded: Vec<PaymentId> = Vec::new();
        let day_payments = server
            .iter()
            .filter(|p| p.status == RemoteStatus::Aprovado)
            .filter(|p| p.referencia.as_deref().is_some_and(|r| today.contains(r)))
            .filter_map(|p| PaymentId::parse(&p.id).ok());
        for p in attempts
            .iter()
            .filter_map(|a| a.refund_payment.clone())
            .chain(day_payments)
        {
            if !refunded.contains(&p) {
                refunded.push(p);
            }
        }
        let mut server_refunds = Vec::new();
        for p in &refunded {
            server_refunds.extend(self.inner.client.refunds_of(p).await?);
        }
        // What the server lists that this till made on another day is that day's business.
        let mut other_days = HashSet::new();
        let strangers = server
            .iter()
            .filter_map(|p| p.referencia.as_deref())
            .chain(
                server_refunds
                    .iter()
                    .filter_map(|r| r.referencia.as_deref()),
            )
            .filter(|r| !today.contains(r));
        for r in strangers {
            if !other_days.contains(r) && outbox.get(&AttemptId::from_stored(r)).await?.is_some() {
                other_days.insert(r.to_string());
            }
        }
        let evidence = Evidence {
            payments: &server,
            refunds: &server_refunds,
            other_days: &other_days,
            bounds,
        };
        let drawer = outbox.drawer(&day, bounds).await?;
        let mut closing = reconcile(&day, now, terminal, &attempts, &evidence).with_drawer(drawer);
        if let Some(fiscal) = &self.inner.config.fiscal {
            closing.notas = Some(crate::closing::NotasDoFechamento::of(
                &outbox.notas_entre(bounds.0, bounds.1).await?,
                &outbox.notas_abertas().await?,
                fiscal.prazo_contingencia,
                now,
                self.inner.config.utc_offset,
            ));
        }
        let report = serde_json::to_string(&closing).expect("a closing serialises");
        outbox.save_closing(&day, now, report).await?;
        tracing::info!(
            day = %closing.day,
            discrepancies = closing.discrepancies.len(),
            pending = closing.pending.len(),
            "till closed"
        );
        Ok(closing)
    }
}
