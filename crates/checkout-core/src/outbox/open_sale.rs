//! The sale open at the till, and the numbering of sales per store day.

use super::*;

impl Outbox {
    /// The sale open at the till, if one was opened.
    /// With its number that day (`None` for a sale opened before numbering existed).
    pub async fn current_sale(&self) -> Result<Option<(SaleId, Option<u32>)>> {
        self.db
            .read(|c| {
                let row: Option<(String, Option<u32>)> = c
                    .prepare_cached(
                        "SELECT till.sale_id, sales.number FROM till
                         LEFT JOIN sales ON sales.sale_id = till.sale_id WHERE till.id = 1",
                    )?
                    .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                row.map(|(s, number)| {
                    SaleId::parse(&s)
                        .map(|sale| (sale, number))
                        .map_err(|e| CoreError::Storage(e.to_string()))
                })
                .transpose()
            })
            .await
    }

    /// Opens `sale` at the till; returns its number that day.
    pub async fn start_sale(&self, sale: SaleId, now: UnixMillis) -> Result<u32> {
        let day = self.day_of(now);
        self.db
            .write(move |c| Ok(set_till(c, &sale, now, &day)?))
            .await
    }
}
