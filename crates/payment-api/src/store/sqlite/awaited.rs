//! The tables of resources paid later, on SQLite (see `store::awaited`).

use super::*;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::ToSql;

impl ToSql for Cell {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Cell::Text(v) => v.to_sql(),
            Cell::Int(v) => v.to_sql(),
        }
    }
}

/// `$1`, `$2`, … as SQLite numbers them (`?1`, `?2`, …).
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        let numbers = c == '$' && chars.peek().is_some_and(char::is_ascii_digit);
        out.push(if numbers { '?' } else { c });
    }
    out
}

fn stored_row(r: &Row<'_>) -> rusqlite::Result<StoredRow> {
    let names = r.as_ref().column_names();
    let mut cells = Vec::with_capacity(names.len());
    for (i, name) in names.into_iter().enumerate() {
        let cell = match r.get_ref(i)? {
            ValueRef::Null => Cell::Text(None),
            ValueRef::Integer(v) => Cell::Int(Some(v)),
            ValueRef::Text(t) => Cell::Text(Some(String::from_utf8_lossy(t).into_owned())),
            other => {
                return Err(rusqlite::Error::InvalidColumnType(
                    i,
                    name.to_string(),
                    other.data_type(),
                ))
            }
        };
        cells.push((name.to_string(), cell));
    }
    Ok(StoredRow::new(cells))
}

#[async_trait::async_trait]
impl AwaitedStore for SqliteStore {
    async fn finish_row(&self, row: AwaitedRow) -> StoreResult<FinishOutcome> {
        let now = self.now_ms();
        self.db
            .write(move |c| {
                let (m, k, id) = (&row.merchant, &row.key, &row.payment_id);
                if !complete_key(c, m, k, row.fence, &row.response, id, now)? {
                    return Ok(FinishOutcome::LeaseLost);
                }
                let places: Vec<_> = (1..=row.cells.len()).map(|i| format!("?{i}")).collect();
                let sql = format!(
                    "INSERT INTO {} ({}) VALUES ({})",
                    row.table,
                    row.columns(),
                    places.join(", ")
                );
                let values = row.cells.iter().map(|(_, cell)| cell);
                c.prepare_cached(&sql)?
                    .execute(rusqlite::params_from_iter(values))?;
                Ok(FinishOutcome::Stored)
            })
            .await
    }

    async fn select_rows(
        &self,
        table: &'static str,
        filter: String,
        params: Vec<Cell>,
    ) -> StoreResult<Vec<StoredRow>> {
        let sql = numbered(&format!("SELECT * FROM {table} WHERE {filter}"));
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(&sql)?;
                let rows = st.query_map(rusqlite::params_from_iter(params.iter()), stored_row)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::numbered;

    #[test]
    fn numbered_parameters_become_sqlites_and_nothing_else_changes() {
        assert_eq!(
            numbered("a = $1 AND b = '$x' AND c > $12"),
            "a = ?1 AND b = '$x' AND c > ?12"
        );
    }
}
