//! The store's error: what a database said, or a row no domain type accepts.

/// Errors of the store (SQLite or another backend).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite said no.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Schema migration failed.
    #[error("migration: {0}")]
    Migration(#[from] rusqlite_migration::Error),
    /// The database could not run or commit the write.
    #[error(transparent)]
    Db(#[from] durable_sqlite::Error),
    /// PostgreSQL said no.
    #[cfg(feature = "postgres")]
    #[error("postgres: {}", describe_postgres(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// PostgreSQL could not be reached, configured or migrated.
    #[cfg(feature = "postgres")]
    #[error("postgres: {0}")]
    Unavailable(String),
    /// A stored row did not have the expected shape.
    #[error("corrupt row: {0}")]
    Corrupt(String),
}

/// A PostgreSQL error with its reason: tokio-postgres's own message is only "db error" or
/// "error connecting to server", with the reason kept in the server's answer or the source chain.
#[cfg(feature = "postgres")]
pub fn describe_postgres(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
