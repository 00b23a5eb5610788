//! What a closing reads (a day's attempts) and keeps (the closing itself, the last one counts).

use super::*;

impl Outbox {
    /// The attempts of a store day, oldest first: the payments of the sales opened that day and
    /// of sales from before numbering existed that were made in `bounds`, and the refunds made
    /// in `bounds` (a refund counts the day the money went back, whatever day the sale was).
    pub async fn attempts_of_day(
        &self,
        day: &str,
        bounds: (UnixMillis, UnixMillis),
    ) -> Result<Vec<Attempt>> {
        let day = day.to_string();
        self.db
            .read(move |c| {
                Ok(select_attempts(
                    c,
                    "WHERE (kind = 'pagamento' AND (sale_id IN (SELECT sale_id FROM sales WHERE day = ?1)
                                                    OR (sale_id NOT IN (SELECT sale_id FROM sales)
                                                        AND created_at >= ?2 AND created_at < ?3)))
                        OR (kind = 'estorno' AND created_at >= ?2 AND created_at < ?3)
                     ORDER BY seq",
                    params![day, bounds.0, bounds.1],
                )?)
            })
            .await
    }

    /// Keeps the closing of `day` (the last one counts: a till may be closed again).
    pub async fn save_closing(
        &self,
        day: &str,
        closed_at: UnixMillis,
        report: String,
    ) -> Result<()> {
        let day = day.to_string();
        self.db
            .write(move |c| {
                exec(
                    c,
                    "INSERT INTO closings (day, closed_at, report) VALUES (?1, ?2, ?3)
                     ON CONFLICT (day) DO UPDATE SET closed_at = excluded.closed_at, report = excluded.report",
                    params![day, closed_at, report],
                )?;
                Ok(())
            })
            .await
    }

    /// The closing kept for `day`, as `(closed_at, report)`.
    pub async fn closing(&self, day: &str) -> Result<Option<(UnixMillis, String)>> {
        let day = day.to_string();
        self.db
            .read(move |c| {
                Ok(
                    c.prepare_cached("SELECT closed_at, report FROM closings WHERE day = ?1")?
                        .query_row([day], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()?,
                )
            })
            .await
    }
}
