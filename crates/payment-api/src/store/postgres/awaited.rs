//! The tables of resources paid later, on PostgreSQL (see `store::awaited`).

use super::*;
use tokio_postgres::types::{IsNull, ToSql, Type};

impl ToSql for Cell {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Cell::Text(v) => v.to_sql(ty, out),
            Cell::Int(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <String as ToSql>::accepts(ty) || <i64 as ToSql>::accepts(ty)
    }

    // Each kind checks the column's type itself: a text value for a BIGINT is refused, not
    // written as bytes the column would misread.
    fn to_sql_checked(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Cell::Text(v) => v.to_sql_checked(ty, out),
            Cell::Int(v) => v.to_sql_checked(ty, out),
        }
    }
}

/// The SQL type a parameter of this kind is cast to.
fn pg_type(cell: &Cell) -> &'static str {
    match cell {
        Cell::Text(_) => "text",
        Cell::Int(_) => "bigint",
    }
}

fn stored_row(r: &Row) -> StoreResult<StoredRow> {
    let mut cells = Vec::with_capacity(r.len());
    for (i, column) in r.columns().iter().enumerate() {
        let cell = match *column.type_() {
            Type::TEXT | Type::VARCHAR => Cell::Text(r.try_get(i)?),
            Type::INT8 => Cell::Int(r.try_get(i)?),
            Type::INT4 => Cell::Int(r.try_get::<_, Option<i32>>(i)?.map(i64::from)),
            ref other => return Err(corrupt(column.name(), format!("tipo {other} inesperado"))),
        };
        cells.push((column.name().to_string(), cell));
    }
    Ok(StoredRow::new(cells))
}

#[async_trait::async_trait]
impl AwaitedStore for PgStore {
    async fn finish_row(&self, row: AwaitedRow) -> StoreResult<FinishOutcome> {
        // The key's parameters come first ($1…$7), the row's after them, each cast to its kind.
        const KEY_PARAMS: usize = 7;
        let values: Vec<_> = (row.cells.iter().enumerate())
            .map(|(i, (_, cell))| format!("${}::{}", i + 1 + KEY_PARAMS, pg_type(cell)))
            .collect();
        let sql = format!(
            "WITH done AS ({COMPLETE_KEY} RETURNING 1)
             INSERT INTO {} ({}) SELECT {} FROM done",
            row.table,
            row.columns(),
            values.join(", ")
        );
        let (status, shift) = (i32::from(row.response.status), self.shift());
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![
            &row.merchant,
            &row.key,
            &row.fence,
            &status,
            &row.response.body,
            &row.payment_id,
            &shift,
        ];
        params.extend(
            row.cells
                .iter()
                .map(|(_, cell)| cell as &(dyn ToSql + Sync)),
        );
        let c = self.conn().await?;
        let st = c.prepare_cached(&sql).await?;
        Ok(if c.execute(&st, &params).await? == 1 {
            FinishOutcome::Stored
        } else {
            FinishOutcome::LeaseLost
        })
    }

    async fn select_rows(
        &self,
        table: &'static str,
        filter: String,
        params: Vec<Cell>,
    ) -> StoreResult<Vec<StoredRow>> {
        let c = self.conn().await?;
        let st = c
            .prepare_cached(&format!("SELECT * FROM {table} WHERE {filter}"))
            .await?;
        let params: Vec<&(dyn ToSql + Sync)> =
            params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let rows = c.query(&st, &params).await?;
        rows.iter().map(stored_row).collect()
    }
}
