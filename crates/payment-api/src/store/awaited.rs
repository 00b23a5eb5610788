//! The tables of resources a customer pays later (a Pix charge, a card-machine order), written
//! once for every means and both dialects. A resource says what it stores — each column named
//! beside its value ([`AwaitedRecord::cells`]) — and how it is read back by name
//! ([`AwaitedRecord::read`]); no statement depends on the order of a column list, so a new column
//! is one line in each of those two functions and a migration. Each dialect gives two primitives
//! ([`AwaitedStore`]): the row inserted in the same transaction as its key's first answer, and
//! the rows a filter selects. The look-ups every such means needs (by payment id, by the
//! provider's id, by `referencia` or key, the ones still waiting) are made of those, in
//! [`Awaiting`].

use super::*;

/// A stored value as both drivers write and read it. A NULL read back is `Text(None)`: readers
/// take a missing value from either kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// A `TEXT` column.
    Text(Option<String>),
    /// A `BIGINT`/`INTEGER` column.
    Int(Option<i64>),
}

impl Cell {
    /// A text value.
    pub fn text(v: impl Into<String>) -> Self {
        Cell::Text(Some(v.into()))
    }

    /// An optional text value.
    pub fn opt_text<S: AsRef<str>>(v: Option<S>) -> Self {
        Cell::Text(v.map(|s| s.as_ref().to_string()))
    }

    /// An integer value.
    pub fn int(v: i64) -> Self {
        Cell::Int(Some(v))
    }
}

/// A stored row, its columns by name.
#[derive(Debug, Clone, Default)]
pub struct StoredRow {
    cells: Vec<(String, Cell)>,
}

impl StoredRow {
    /// A row of these columns.
    pub(crate) fn new(cells: Vec<(String, Cell)>) -> Self {
        StoredRow { cells }
    }

    fn cell(&self, column: &str) -> StoreResult<&Cell> {
        self.cells
            .iter()
            .find(|(name, _)| name == column)
            .map(|(_, cell)| cell)
            .ok_or_else(|| corrupt(column, "coluna ausente"))
    }

    /// A nullable text column.
    pub fn opt_text(&self, column: &str) -> StoreResult<Option<String>> {
        match self.cell(column)? {
            Cell::Text(v) => Ok(v.clone()),
            Cell::Int(None) => Ok(None),
            Cell::Int(Some(v)) => Err(corrupt(
                column,
                format!("número {v} onde se esperava texto"),
            )),
        }
    }

    /// A text column that is never NULL.
    pub fn text(&self, column: &str) -> StoreResult<String> {
        self.opt_text(column)?
            .ok_or_else(|| corrupt(column, "NULL"))
    }

    /// A nullable integer column.
    pub fn opt_int(&self, column: &str) -> StoreResult<Option<i64>> {
        match self.cell(column)? {
            Cell::Int(v) => Ok(*v),
            Cell::Text(None) => Ok(None),
            Cell::Text(Some(v)) => Err(corrupt(
                column,
                format!("texto {v:?} onde se esperava número"),
            )),
        }
    }

    /// An integer column that is never NULL.
    pub fn int(&self, column: &str) -> StoreResult<i64> {
        self.opt_int(column)?.ok_or_else(|| corrupt(column, "NULL"))
    }

    /// A text column parsed into its domain type.
    pub fn parsed<T, E: std::fmt::Display>(
        &self,
        column: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> StoreResult<T> {
        let v = self.text(column)?;
        parse(&v).map_err(|e| corrupt(column, e))
    }

    /// A nullable text column parsed into its domain type.
    pub fn opt_parsed<T, E: std::fmt::Display>(
        &self,
        column: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> StoreResult<Option<T>> {
        self.opt_text(column)?
            .map(|v| parse(&v).map_err(|e| corrupt(column, e)))
            .transpose()
    }
}

/// What every resource paid later stores beside its own columns: its payment id and the key
/// that made it, the amount asked, the request's words and till, and the store's times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwaitedHead {
    /// `pay_…` (resources paid later share the payments' id space and routes).
    pub id: PaymentId,
    /// Owner.
    pub merchant: MerchantId,
    /// The key that made it.
    pub idempotency_key: IdempotencyKey,
    /// Amount asked.
    pub valor: Centavos,
    /// Free text from the request.
    pub descricao: Option<String>,
    /// Client reference from the request.
    pub referencia: Option<String>,
    /// The till that sent it.
    pub terminal: Option<TerminalId>,
    /// Creation time (store clock).
    pub created_at: Millis,
    /// Last change (store clock).
    pub updated_at: Millis,
}

impl AwaitedHead {
    /// A new resource's head: a new payment id, made `now` (store clock) under `merchant`'s
    /// `key` for what `ask` asks.
    pub fn new(merchant: &MerchantId, key: &IdempotencyKey, ask: &PaymentAsk, now: Millis) -> Self {
        AwaitedHead {
            id: PaymentId::new(),
            merchant: merchant.clone(),
            idempotency_key: key.clone(),
            valor: ask.valor,
            descricao: ask.descricao.clone(),
            referencia: ask.referencia.clone(),
            terminal: ask.terminal.clone(),
            created_at: now,
            updated_at: now,
        }
    }

    /// Its columns, each named beside its value.
    fn cells(&self) -> [(&'static str, Cell); 9] {
        [
            ("id", Cell::text(self.id.as_ref())),
            ("merchant", Cell::text(self.merchant.as_ref())),
            ("idempotency_key", Cell::text(self.idempotency_key.as_ref())),
            ("valor", Cell::int(self.valor.get())),
            ("descricao", Cell::opt_text(self.descricao.as_ref())),
            ("referencia", Cell::opt_text(self.referencia.as_ref())),
            ("terminal", Cell::opt_text(self.terminal.as_ref())),
            ("created_at", Cell::int(self.created_at)),
            ("updated_at", Cell::int(self.updated_at)),
        ]
    }

    /// It again, from a stored row.
    pub fn read(r: &StoredRow) -> StoreResult<Self> {
        Ok(AwaitedHead {
            id: PaymentId::from_stored(r.text("id")?),
            merchant: r.parsed("merchant", MerchantId::parse)?,
            idempotency_key: r
                .parsed("idempotency_key", |k| IdempotencyKey::parse(k.as_bytes()))?,
            valor: Centavos::new(r.int("valor")?).map_err(|e| corrupt("valor", e))?,
            descricao: r.opt_text("descricao")?,
            referencia: r.opt_text("referencia")?,
            terminal: r.opt_parsed("terminal", TerminalId::parse)?,
            created_at: r.int("created_at")?,
            updated_at: r.int("updated_at")?,
        })
    }
}

/// A resource paid later, as its table stores it.
pub trait AwaitedRecord: Sized + Send + Sync + 'static {
    /// Its table.
    const TABLE: &'static str;
    /// The column of the provider's id for it (`UNIQUE`).
    const PROVIDER_ID: &'static str;
    /// What it stores as every resource paid later does.
    fn head(&self) -> &AwaitedHead;
    /// The provider's id for it (a txid, an order id): the value of [`AwaitedRecord::PROVIDER_ID`].
    fn provider_id(&self) -> &str;
    /// Its own columns, each named beside its value (the head's are added to them).
    fn own_cells(&self) -> Vec<(&'static str, Cell)>;
    /// It again, from a stored row and the head read from it.
    fn read_own(head: AwaitedHead, row: &StoredRow) -> StoreResult<Self>;
    /// Every column it stores, named beside its value.
    fn cells(&self) -> Vec<(&'static str, Cell)> {
        let mut cells = self.head().cells().to_vec();
        cells.extend(self.own_cells());
        cells
    }
    /// It again, from a stored row.
    fn read(row: &StoredRow) -> StoreResult<Self> {
        Self::read_own(AwaitedHead::read(row)?, row)
    }
}

/// A resource's row to insert as its key completes.
#[derive(Debug, Clone)]
pub struct AwaitedRow {
    /// Its table.
    pub table: &'static str,
    /// The key's merchant.
    pub merchant: String,
    /// The key.
    pub key: String,
    /// The payment id the key answers.
    pub payment_id: String,
    /// The key's fencing token.
    pub fence: i64,
    /// The key's first answer.
    pub response: StoredResponse,
    /// The row's columns (the request's fingerprint among them).
    pub cells: Vec<(&'static str, Cell)>,
}

impl AwaitedRow {
    /// The column names, comma-separated.
    pub(crate) fn columns(&self) -> String {
        let names: Vec<_> = self.cells.iter().map(|(name, _)| *name).collect();
        names.join(", ")
    }
}

/// What each dialect gives the tables of resources paid later.
#[async_trait::async_trait]
pub trait AwaitedStore: Clocked {
    /// Completes the key with its first answer and inserts the resource's row, in one
    /// transaction, if the fence still holds the key.
    async fn finish_row(&self, row: AwaitedRow) -> StoreResult<FinishOutcome>;
    /// `SELECT * FROM table WHERE filter`: the filter's parameters are `$1`, `$2`, … in both
    /// dialects.
    async fn select_rows(
        &self,
        table: &'static str,
        filter: String,
        params: Vec<Cell>,
    ) -> StoreResult<Vec<StoredRow>>;
}

/// The look-ups every resource paid later has, made of [`AwaitedStore`]'s primitives.
#[async_trait::async_trait]
pub trait Awaiting: AwaitedStore {
    /// Stores the resource and the first answer if the fence still holds the key.
    async fn finish_awaited<R: AwaitedRecord>(
        &self,
        done: AwaitedCompletion<R>,
    ) -> StoreResult<FinishOutcome> {
        let AwaitedHead {
            merchant,
            idempotency_key: key,
            id,
            ..
        } = done.resource.head();
        let row = AwaitedRow {
            table: R::TABLE,
            merchant: merchant.to_string(),
            key: key.as_ref().to_string(),
            payment_id: id.to_string(),
            fence: done.fence,
            response: done.response.clone(),
            cells: done
                .resource
                .cells()
                .into_iter()
                .chain([("fingerprint", Cell::text(done.fingerprint.as_ref()))])
                .collect(),
        };
        self.finish_row(row).await
    }

    /// The resources `filter` selects (see [`AwaitedStore::select_rows`]).
    async fn awaited_where<R: AwaitedRecord>(
        &self,
        filter: String,
        params: Vec<Cell>,
    ) -> StoreResult<Vec<R>> {
        let rows = self.select_rows(R::TABLE, filter, params).await?;
        rows.iter().map(R::read).collect()
    }

    /// A resource by payment id, for its merchant.
    async fn awaited_by_id<R: AwaitedRecord>(
        &self,
        merchant: &MerchantId,
        id: &PaymentId,
    ) -> StoreResult<Option<R>> {
        let params = vec![Cell::text(merchant.as_ref()), Cell::text(id.as_ref())];
        let found = self
            .awaited_where("merchant = $1 AND id = $2".into(), params)
            .await?;
        Ok(found.into_iter().next())
    }

    /// The resource of a provider's id (any merchant: a notification names only that id), with
    /// the fingerprint of the request that made it.
    async fn awaited_by_provider<R: AwaitedRecord>(
        &self,
        provider_id: &str,
    ) -> StoreResult<Option<(R, Option<Fingerprint>)>> {
        let filter = format!("{} = $1", R::PROVIDER_ID);
        let rows = self
            .select_rows(R::TABLE, filter, vec![Cell::text(provider_id)])
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let fingerprint = row.opt_text("fingerprint")?.map(Fingerprint::from_stored);
        Ok(Some((R::read(row)?, fingerprint)))
    }

    /// A merchant's resources whose `field` is `value`, oldest first.
    async fn awaited_by<R: AwaitedRecord>(
        &self,
        merchant: &MerchantId,
        by: Lookup<'_>,
    ) -> StoreResult<Vec<R>> {
        let filter = format!(
            "merchant = $1 AND {} = $2 ORDER BY created_at, id",
            by.field.column()
        );
        let params = vec![Cell::text(merchant.as_ref()), Cell::text(by.value)];
        self.awaited_where(filter, params).await
    }
}

impl<T: AwaitedStore + ?Sized> Awaiting for T {}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> StoredRow {
        StoredRow::new(vec![
            ("a".into(), Cell::text("x")),
            ("n".into(), Cell::int(7)),
            ("z".into(), Cell::Text(None)),
        ])
    }

    #[test]
    fn a_null_read_back_is_missing_whatever_the_column_kind() {
        let r = row();
        assert_eq!(r.opt_int("z").unwrap(), None);
        assert_eq!(r.opt_text("z").unwrap(), None);
        assert!(r.int("z").is_err());
    }

    #[test]
    fn a_column_of_the_wrong_kind_or_absent_is_corrupt_not_a_default() {
        let r = row();
        assert!(r.int("a").is_err());
        assert!(r.text("n").is_err());
        assert!(r.text("nenhuma").is_err());
        assert_eq!(r.text("a").unwrap(), "x");
        assert_eq!(r.int("n").unwrap(), 7);
    }
}
