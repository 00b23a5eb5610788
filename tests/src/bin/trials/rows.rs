//! What the checker reads: the tills' outboxes, the servers' payments, refunds and Pix, the
//! provider's.

use super::*;

#[derive(Debug)]
pub(crate) struct AttemptRow {
    pub(crate) id: String,
    /// `pagamento` or `estorno`.
    pub(crate) kind: String,
    pub(crate) sale: String,
    pub(crate) state: String,
    pub(crate) valor: i64,
    pub(crate) payment_id: Option<String>,
    pub(crate) last_error: Option<String>,
    /// A Pix: its charge's status as the till last heard it.
    pub(crate) pix_status: Option<String>,
    /// A tender of a divided sale: the sale's total.
    pub(crate) sale_total: Option<i64>,
    /// An authorized tender: where its capture stands at the till.
    pub(crate) captura: Option<String>,
}

impl AttemptRow {
    /// A Pix the till closed and then learnt was paid anyway: money it shows to give back.
    pub(crate) fn knows_late_pix(&self) -> bool {
        self.state == "recusado" && self.pix_status.as_deref() == Some("recebido_apos_cancelamento")
    }
}

/// A Pix charge as the server has it.
#[derive(Debug)]
pub(crate) struct PixChargeRow {
    pub(crate) id: String,
    pub(crate) txid: String,
    pub(crate) status: String,
    pub(crate) valor: i64,
    pub(crate) e2eid: Option<String>,
    pub(crate) referencia: Option<String>,
}

/// A Pix the server recorded as received.
#[derive(Debug)]
pub(crate) struct ReceivedRow {
    pub(crate) e2eid: String,
    pub(crate) txid: String,
    pub(crate) valor: i64,
}

pub(crate) const PIX_CHARGES_SQL: &str =
    "SELECT id, txid, status, valor, e2eid, referencia FROM pix_charges WHERE merchant = $1";
pub(crate) const PIX_RECEIVED_SQL: &str =
    "SELECT r.end_to_end_id, r.txid, r.valor FROM pix_received r
     JOIN pix_charges c ON c.txid = r.txid WHERE c.merchant = $1";

/// The server's Pix charges and the Pix it recorded, for one merchant.
pub(crate) async fn pix_rows(
    database: &ApiDatabase,
    merchant: &str,
) -> Result<(Vec<PixChargeRow>, Vec<ReceivedRow>), String> {
    match database {
        ApiDatabase::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
            let sqlite = |sql: &str| sql.replace("$1", "?1");
            let charges = c
                .prepare(&sqlite(PIX_CHARGES_SQL))
                .and_then(|mut st| {
                    st.query_map([merchant], |r| {
                        Ok(PixChargeRow {
                            id: r.get(0)?,
                            txid: r.get(1)?,
                            status: r.get(2)?,
                            valor: r.get(3)?,
                            e2eid: r.get(4)?,
                            referencia: r.get(5)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.to_string())?;
            let received = c
                .prepare(&sqlite(PIX_RECEIVED_SQL))
                .and_then(|mut st| {
                    st.query_map([merchant], |r| {
                        Ok(ReceivedRow {
                            e2eid: r.get(0)?,
                            txid: r.get(1)?,
                            valor: r.get(2)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.to_string())?;
            Ok((charges, received))
        }
        ApiDatabase::Postgres(url) => {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let driver = tokio::spawn(conn);
            let charges = client
                .query(PIX_CHARGES_SQL, &[&merchant])
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| PixChargeRow {
                    id: r.get(0),
                    txid: r.get(1),
                    status: r.get(2),
                    valor: r.get(3),
                    e2eid: r.get(4),
                    referencia: r.get(5),
                })
                .collect();
            let received = client
                .query(PIX_RECEIVED_SQL, &[&merchant])
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| ReceivedRow {
                    e2eid: r.get(0),
                    txid: r.get(1),
                    valor: r.get(2),
                })
                .collect();
            drop(client);
            let _ = driver.await;
            Ok((charges, received))
        }
    }
}

#[derive(Debug)]
pub(crate) struct PaymentRow {
    pub(crate) id: String,
    pub(crate) status: String,
    pub(crate) valor: i64,
    pub(crate) referencia: Option<String>,
    pub(crate) cobranca_id: String,
    /// `cartao` or `pix`: who took the money.
    pub(crate) meio: String,
    /// An authorization's state (`None`: captured with its charge).
    pub(crate) captura: Option<String>,
}

impl PaymentRow {
    /// Approved, and not an authorization undone or lapsed: it took or holds money.
    pub(crate) fn holds_money(&self) -> bool {
        self.status == "aprovado"
            && !matches!(self.captura.as_deref(), Some("desfeita" | "expirada"))
    }
}

/// A refund as the server has it.
#[derive(Debug)]
pub(crate) struct RefundRow {
    pub(crate) id: String,
    pub(crate) status: String,
    pub(crate) valor: i64,
    pub(crate) referencia: Option<String>,
}

pub(crate) const REFUNDS_SQL: &str =
    "SELECT id, status, valor, referencia FROM refunds WHERE merchant = $1";

/// The server's refunds, for one merchant.
pub(crate) async fn server_refunds(
    database: &ApiDatabase,
    merchant: &str,
) -> Result<Vec<RefundRow>, String> {
    match database {
        ApiDatabase::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
            c.prepare(&REFUNDS_SQL.replace("$1", "?1"))
                .and_then(|mut st| {
                    st.query_map([merchant], |r| {
                        Ok(RefundRow {
                            id: r.get(0)?,
                            status: r.get(1)?,
                            valor: r.get(2)?,
                            referencia: r.get(3)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.to_string())
        }
        ApiDatabase::Postgres(url) => {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let driver = tokio::spawn(conn);
            let rows = client
                .query(REFUNDS_SQL, &[&merchant])
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| RefundRow {
                    id: r.get(0),
                    status: r.get(1),
                    valor: r.get(2),
                    referencia: r.get(3),
                })
                .collect();
            drop(client);
            let _ = driver.await;
            Ok(rows)
        }
    }
}

/// The charges the acquirer made for `merchant` (its own ledger file): `(downstream key, charge
/// id)`.
pub(crate) fn acquirer_rows(
    gateway_db: &Path,
    merchant: &str,
) -> Result<Vec<(String, String)>, String> {
    rusqlite::Connection::open(gateway_db)
        .and_then(|c| {
            c.prepare(
                "SELECT downstream_key, cobranca_id FROM gateway_ledger WHERE merchant = ?1 AND status <> 'anulado'",
            )?
            .query_map([merchant], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| format!("livro do adquirente: {e}"))
}

/// The server's payments of `merchant`.
pub(crate) async fn payment_rows(
    database: &ApiDatabase,
    merchant: &str,
) -> Result<Vec<PaymentRow>, String> {
    match database {
        ApiDatabase::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
            let payments = c
                .prepare("SELECT id, status, valor, referencia, cobranca_id, captura, meio FROM payments WHERE merchant = ?1")
                .and_then(|mut st| {
                    st.query_map([merchant], |r| {
                        Ok(PaymentRow {
                            id: r.get(0)?,
                            status: r.get(1)?,
                            valor: r.get(2)?,
                            referencia: r.get(3)?,
                            cobranca_id: r.get(4)?,
                            captura: r.get(5)?,
                            meio: r.get(6)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.to_string())?;
            Ok(payments)
        }
        ApiDatabase::Postgres(url) => {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let driver = tokio::spawn(conn);
            let payments = client
                .query("SELECT id, status, valor, referencia, cobranca_id, captura, meio FROM payments WHERE merchant = $1", &[&merchant])
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| PaymentRow {
                    id: r.get(0),
                    status: r.get(1),
                    valor: r.get(2),
                    referencia: r.get(3),
                    cobranca_id: r.get(4),
                    captura: r.get(5),
                    meio: r.get(6),
                })
                .collect();
            drop(client);
            let _ = driver.await;
            Ok(payments)
        }
    }
}
