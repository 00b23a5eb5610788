//! End-of-day reconciliation: every attempt as CSV or JSON.

use crate::domain::{Capture, CardToken, Centavos, Financing, UnixMillis};
use crate::error::{CoreError, Result};
use crate::outbox::Attempt;
use serde::Serialize;

fn rfc3339(ms: UnixMillis) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// One exported row; times in RFC 3339 (UTC), amounts in centavos and formatted.
#[derive(Debug, Serialize)]
struct Row<'a> {
    attempt_id: &'a str,
    /// `pagamento` or `estorno`.
    kind: &'static str,
    sale_id: &'a str,
    /// A refund: the payment attempt it paid back.
    refund_of: &'a str,
    idempotency_key: &'a str,
    state: &'static str,
    valor_centavos: i64,
    valor: String,
    /// Masked (`tok_…vado`): an export never carries a whole card token.
    cartao: String,
    /// `debito`, `credito`, `voucher`, `pix`, or `cartao` (a card that named no method).
    metodo: &'static str,
    /// Installments (1 unless a parcelado).
    parcelas: u8,
    /// A parcelado: `loja` (sem juros) or `emissor` (com juros).
    parcelamento: &'static str,
    /// Cash: what the customer handed over, in centavos (empty otherwise).
    recebido_centavos: Option<i64>,
    /// Cash: the change given back, in centavos (empty otherwise).
    troco_centavos: Option<i64>,
    /// A tender of a sale paid in parts: the sale's total, in centavos (empty otherwise).
    total_venda_centavos: Option<i64>,
    /// A card tender authorized first: `pendente`, `capturar`, `desfazer`, `capturada`,
    /// `desfeita` or `expirada` (empty: captured with its charge).
    captura: &'static str,
    tries: u32,
    payment_id: &'a str,
    motivo: &'a str,
    last_error: &'a str,
    created_at: String,
    updated_at: String,
}

fn row(a: &Attempt) -> Row<'_> {
    Row {
        attempt_id: a.id.as_ref(),
        kind: a.kind.as_str(),
        sale_id: a.sale_id.as_ref(),
        refund_of: a.refund_of.as_ref().map_or("", |r| r.as_ref()),
        idempotency_key: a.idempotency_key.as_ref(),
        state: a.state.as_str(),
        valor_centavos: a.valor.get(),
        valor: a.valor.to_string(),
        cartao: a
            .cartao
            .as_ref()
            .map_or_else(|| a.metodo.to_string(), CardToken::masked),
        metodo: a.plano.map_or(a.metodo.as_str(), |p| p.method.as_str()),
        parcelas: a.plano.map_or(1, |p| p.parcelas),
        parcelamento: a
            .plano
            .and_then(|p| p.financing)
            .map_or("", Financing::as_str),
        recebido_centavos: a.recebido.map(Centavos::get),
        troco_centavos: a.troco().map(|t| t.get()),
        total_venda_centavos: a.sale_total.map(Centavos::get),
        captura: a.captura.map_or("", Capture::as_str),
        tries: a.tries,
        payment_id: a.payment_id.as_deref().unwrap_or(""),
        motivo: a.motivo.as_deref().unwrap_or(""),
        last_error: a.last_error.as_deref().unwrap_or(""),
        created_at: rfc3339(a.created_at),
        updated_at: rfc3339(a.updated_at),
    }
}

/// Attempts as CSV with a header row.
pub fn to_csv(attempts: &[Attempt]) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for a in attempts {
        w.serialize(row(a))
            .map_err(|e| CoreError::Storage(format!("CSV: {e}")))?;
    }
    if attempts.is_empty() {
        w.write_record([
            "attempt_id",
            "kind",
            "sale_id",
            "refund_of",
            "idempotency_key",
            "state",
            "valor_centavos",
            "valor",
            "cartao",
            "metodo",
            "parcelas",
            "parcelamento",
            "recebido_centavos",
            "troco_centavos",
            "total_venda_centavos",
            "captura",
            "tries",
            "payment_id",
            "motivo",
            "last_error",
            "created_at",
            "updated_at",
        ])
        .map_err(|e| CoreError::Storage(format!("CSV: {e}")))?;
    }
    w.into_inner()
        .map_err(|e| CoreError::Storage(format!("CSV: {e}")))
}

/// Attempts as a JSON array.
pub fn to_json(attempts: &[Attempt]) -> Result<Vec<u8>> {
    let rows: Vec<Row<'_>> = attempts.iter().map(row).collect();
    serde_json::to_vec_pretty(&rows).map_err(|e| CoreError::Storage(format!("JSON: {e}")))
}
