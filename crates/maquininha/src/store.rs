//! The simulator's ledger, in its own SQLite file: one row per order (its key `UNIQUE`, at most
//! one open order per terminal by a partial unique index), the cancel and refund keys with the
//! answer they were given, and every notification tried. Every write commits with
//! `synchronous=FULL`: what the API answered survives a power cut of this machine.

use rusqlite::{params, Connection, OptionalExtension, Row};
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS orders (
    id                 TEXT PRIMARY KEY,
    idempotency_key    TEXT NOT NULL UNIQUE,
    fingerprint        TEXT NOT NULL,
    terminal_id        TEXT NOT NULL,
    external_reference TEXT NOT NULL,
    centavos           INTEGER NOT NULL CHECK (centavos > 0),
    default_type       TEXT,
    installments       INTEGER,
    description        TEXT,
    status             TEXT NOT NULL CHECK (status IN
        ('created', 'at_terminal', 'processed', 'canceled', 'failed', 'expired', 'refunded')),
    status_detail      TEXT NOT NULL,
    payment_id         TEXT NOT NULL UNIQUE,
    card_type          TEXT,
    version            INTEGER NOT NULL,
    created_ms         INTEGER NOT NULL,
    updated_ms         INTEGER NOT NULL,
    expires_ms         INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS one_open_order_per_terminal
    ON orders (terminal_id) WHERE status IN ('created', 'at_terminal');
CREATE TABLE IF NOT EXISTS actions (
    idempotency_key TEXT PRIMARY KEY,
    order_id        TEXT NOT NULL REFERENCES orders (id),
    kind            TEXT NOT NULL CHECK (kind IN ('cancel', 'refund')),
    status          INTEGER NOT NULL,
    answer          TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS refunds (
    id        TEXT PRIMARY KEY,
    order_id  TEXT NOT NULL UNIQUE REFERENCES orders (id),
    centavos  INTEGER NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS deliveries (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id   TEXT NOT NULL,
    action     TEXT NOT NULL,
    status     INTEGER,
    error      TEXT,
    sent_ms    INTEGER NOT NULL
);
";

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Where an order stands (Mercado Pago's order `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Created,
    AtTerminal,
    Processed,
    Canceled,
    Failed,
    Expired,
    Refunded,
}

impl Status {
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Created => "created",
            Status::AtTerminal => "at_terminal",
            Status::Processed => "processed",
            Status::Canceled => "canceled",
            Status::Failed => "failed",
            Status::Expired => "expired",
            Status::Refunded => "refunded",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            Status::Created,
            Status::AtTerminal,
            Status::Processed,
            Status::Canceled,
            Status::Failed,
            Status::Expired,
            Status::Refunded,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
}

/// What a client asks an order to be: the machine, its reference, amount, the card type and
/// installments offered first, and its description.
#[derive(Debug, Clone)]
pub struct OrderAsk {
    pub terminal_id: String,
    pub external_reference: String,
    pub centavos: i64,
    pub default_type: Option<String>,
    pub installments: Option<i64>,
    pub description: Option<String>,
}

/// One order, as stored.
#[derive(Debug, Clone)]
pub struct Order {
    pub id: String,
    pub ask: OrderAsk,
    pub status: Status,
    pub status_detail: String,
    pub payment_id: String,
    /// The card the customer paid with (`debit_card`, …), once processed.
    pub card_type: Option<String>,
    pub version: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub expires_ms: i64,
}

const ORDER_COLUMNS: &str = "id, terminal_id, external_reference, centavos, default_type, \
     installments, description, status, status_detail, payment_id, card_type, version, \
     created_ms, updated_ms, expires_ms";

fn order_of(r: &Row<'_>) -> rusqlite::Result<Order> {
    let status: String = r.get(7)?;
    Ok(Order {
        id: r.get(0)?,
        ask: OrderAsk {
            terminal_id: r.get(1)?,
            external_reference: r.get(2)?,
            centavos: r.get(3)?,
            default_type: r.get(4)?,
            installments: r.get(5)?,
            description: r.get(6)?,
        },
        status: Status::parse(&status).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                7,
                rusqlite::types::Type::Text,
                format!("unknown status {status}").into(),
            )
        })?,
        status_detail: r.get(8)?,
        payment_id: r.get(9)?,
        card_type: r.get(10)?,
        version: r.get(11)?,
        created_ms: r.get(12)?,
        updated_ms: r.get(13)?,
        expires_ms: r.get(14)?,
    })
}

/// An order asked for.
#[derive(Debug, Clone)]
pub struct NewOrder {
    pub idempotency_key: String,
    pub fingerprint: String,
    pub ask: OrderAsk,
    pub expires_ms: i64,
}

/// Why the ledger refused.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("the idempotency key was used with another request")]
    KeyReused,
    #[error("the terminal already has an open order ({0})")]
    TerminalBusy(String),
    #[error("no such order")]
    NotFound,
    #[error("the order is {0}")]
    WrongStatus(&'static str),
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
}

/// How a create ended.
pub enum Created {
    New(Order),
    /// The key and body were seen before: that order, as it now stands.
    Again(Order),
}

/// A stored answer to a cancel or refund key.
pub struct Answer {
    pub order_id: String,
    pub kind: String,
    pub status: u16,
    pub body: String,
}

/// The ledger's own counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub orders: i64,
    /// Orders a card paid (processed, refunded later or not): the charges.
    pub paid: i64,
    pub refunds: i64,
    pub canceled: i64,
    pub failed: i64,
    pub expired: i64,
    pub notifications: i64,
}

/// The ledger.
pub struct Ledger {
    conn: Mutex<Connection>,
}

impl Ledger {
    pub fn open(path: &Path) -> rusqlite::Result<Self> {
        // The owner's alone before SQLite opens it (its -wal and -shm files take the same mode);
        // a path SQLite cannot open either is its error to report.
        let _ = provider_kit::own_file(path);
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, Refused>) -> Result<T, Refused> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut conn)
    }

    /// Creates the order, or answers the one its key made.
    pub fn create(&self, new: &NewOrder) -> Result<Created, Refused> {
        self.with(|c| {
            let tx = c.transaction()?;
            let seen: Option<(String, String)> = tx
                .query_row(
                    "SELECT id, fingerprint FROM orders WHERE idempotency_key = ?1",
                    [&new.idempotency_key],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            if let Some((id, fingerprint)) = seen {
                if fingerprint != new.fingerprint {
                    return Err(Refused::KeyReused);
                }
                return Ok(Created::Again(get(&tx, &id)?));
            }
            let busy: Option<String> = tx
                .query_row(
                    "SELECT id FROM orders WHERE terminal_id = ?1 AND status IN ('created', 'at_terminal')",
                    [&new.ask.terminal_id],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(id) = busy {
                return Err(Refused::TerminalBusy(id));
            }
            let now = now_ms();
            let id = format!("ORD{}", uuid::Uuid::now_v7().simple()).to_uppercase();
            let payment = format!("PAY{}", uuid::Uuid::now_v7().simple()).to_uppercase();
            tx.execute(
                "INSERT INTO orders (id, idempotency_key, fingerprint, terminal_id, external_reference, \
                 centavos, default_type, installments, description, status, status_detail, payment_id, \
                 card_type, version, created_ms, updated_ms, expires_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'created', 'created', ?10, NULL, 1, ?11, ?11, ?12)",
                params![
                    id,
                    new.idempotency_key,
                    new.fingerprint,
                    new.ask.terminal_id,
                    new.ask.external_reference,
                    new.ask.centavos,
                    new.ask.default_type,
                    new.ask.installments,
                    new.ask.description,
                    payment,
                    now,
                    new.expires_ms,
                ],
            )?;
            let order = get(&tx, &id)?;
            tx.commit()?;
            Ok(Created::New(order))
        })
    }

    /// The order `id`.
    pub fn order(&self, id: &str) -> Result<Order, Refused> {
        self.with(|c| get(c, id))
    }

    /// The open order of a terminal, if any.
    pub fn open_order(&self, terminal_id: &str) -> Result<Option<Order>, Refused> {
        self.first_order(
            "WHERE terminal_id = ?1 AND status IN ('created', 'at_terminal')",
            terminal_id,
        )
    }

    /// The newest order of a terminal, whatever its state (the machine's screen shows how the
    /// last one ended).
    pub fn last_order(&self, terminal_id: &str) -> Result<Option<Order>, Refused> {
        self.first_order(
            "WHERE terminal_id = ?1 ORDER BY created_ms DESC, rowid DESC",
            terminal_id,
        )
    }

    fn first_order(&self, filter: &str, terminal_id: &str) -> Result<Option<Order>, Refused> {
        self.with(|c| {
            Ok(c.query_row(
                &format!("SELECT {ORDER_COLUMNS} FROM orders {filter} LIMIT 1"),
                [terminal_id],
                order_of,
            )
            .optional()?)
        })
    }

    /// Moves `id` from one of `from` to `to`, or says what it is now.
    pub fn transition(
        &self,
        id: &str,
        from: &[Status],
        to: Status,
        detail: &str,
        card_type: Option<&str>,
    ) -> Result<Order, Refused> {
        self.with(|c| {
            let tx = c.transaction()?;
            let now = get(&tx, id)?;
            if !from.contains(&now.status) {
                return Err(Refused::WrongStatus(now.status.as_str()));
            }
            tx.execute(
                "UPDATE orders SET status = ?2, status_detail = ?3, card_type = COALESCE(?4, card_type), \
                 version = version + 1, updated_ms = ?5 WHERE id = ?1",
                params![id, to.as_str(), detail, card_type, now_ms()],
            )?;
            if to == Status::Refunded {
                tx.execute(
                    "INSERT INTO refunds (id, order_id, centavos, created_ms) VALUES (?1, ?2, ?3, ?4)",
                    params![
                        format!("REF{}", uuid::Uuid::now_v7().simple()).to_uppercase(),
                        id,
                        now.ask.centavos,
                        now_ms()
                    ],
                )?;
            }
            let order = get(&tx, id)?;
            tx.commit()?;
            Ok(order)
        })
    }

    /// Orders still open past their time: each is expired and returned.
    pub fn expire_due(&self, now: i64) -> Result<Vec<Order>, Refused> {
        let due: Vec<String> = self.with(|c| {
            let mut st = c.prepare(
                "SELECT id FROM orders WHERE status IN ('created', 'at_terminal') AND expires_ms <= ?1",
            )?;
            let ids = st
                .query_map([now], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            Ok(ids)
        })?;
        let open = [Status::Created, Status::AtTerminal];
        Ok(due
            .iter()
            .filter_map(|id| {
                self.transition(id, &open, Status::Expired, "expired", None)
                    .ok()
            })
            .collect())
    }

    /// The answer a cancel or refund key was given, if it was.
    pub fn answer(&self, key: &str) -> Result<Option<Answer>, Refused> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT order_id, kind, status, answer FROM actions WHERE idempotency_key = ?1",
                [key],
                |r| {
                    Ok(Answer {
                        order_id: r.get(0)?,
                        kind: r.get(1)?,
                        status: r.get(2)?,
                        body: r.get(3)?,
                    })
                },
            )
            .optional()?)
        })
    }

    /// Keeps the answer a cancel or refund key was given (the first one stays).
    pub fn keep_answer(&self, key: &str, a: &Answer) -> Result<(), Refused> {
        self.with(|c| {
            c.execute(
                "INSERT INTO actions (idempotency_key, order_id, kind, status, answer) VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (idempotency_key) DO NOTHING",
                params![key, a.order_id, a.kind, a.status, a.body],
            )?;
            Ok(())
        })
    }

    /// Records one notification tried.
    pub fn record_delivery(
        &self,
        order_id: &str,
        action: &str,
        status: Option<u16>,
        error: Option<&str>,
    ) -> Result<(), Refused> {
        self.with(|c| {
            c.execute(
                "INSERT INTO deliveries (order_id, action, status, error, sent_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![order_id, action, status, error, now_ms()],
            )?;
            Ok(())
        })
    }

    /// Every order, oldest first (the QA ledger).
    pub fn orders(&self) -> Result<Vec<Order>, Refused> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {ORDER_COLUMNS} FROM orders ORDER BY created_ms, rowid"
            ))?;
            let all = st
                .query_map([], order_of)?
                .collect::<rusqlite::Result<_>>()?;
            Ok(all)
        })
    }

    pub fn counts(&self) -> Result<Counts, Refused> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT count(*), \
                        count(*) FILTER (WHERE status IN ('processed', 'refunded')), \
                        (SELECT count(*) FROM refunds), \
                        count(*) FILTER (WHERE status = 'canceled'), \
                        count(*) FILTER (WHERE status = 'failed'), \
                        count(*) FILTER (WHERE status = 'expired'), \
                        (SELECT count(*) FROM deliveries WHERE status BETWEEN 200 AND 299) \
                 FROM orders",
                [],
                |r| {
                    Ok(Counts {
                        orders: r.get(0)?,
                        paid: r.get(1)?,
                        refunds: r.get(2)?,
                        canceled: r.get(3)?,
                        failed: r.get(4)?,
                        expired: r.get(5)?,
                        notifications: r.get(6)?,
                    })
                },
            )?)
        })
    }
}

fn get(c: &Connection, id: &str) -> Result<Order, Refused> {
    c.query_row(
        &format!("SELECT {ORDER_COLUMNS} FROM orders WHERE id = ?1"),
        [id],
        order_of,
    )
    .optional()?
    .ok_or(Refused::NotFound)
}
