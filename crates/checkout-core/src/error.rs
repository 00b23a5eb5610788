//! The crate's one error type.

use crate::domain::{Centavos, Total};
use serde::Serialize;
use std::path::PathBuf;

/// Result alias for the crate.
pub type Result<T, E = CoreError> = std::result::Result<T, E>;

/// Everything that can go wrong in the checkout core. Messages are pt-BR, for the cashier.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// Input did not parse (amount, sale id, card token).
    #[error("{0}")]
    Invalid(String),
    /// The configuration cannot be used (API address, certificate file).
    #[error("configuração: {0}")]
    Config(String),
    /// The sale still has a payment that is not final: a new sale would invite a second charge.
    #[error("a venda {0} ainda tem um pagamento em andamento; espere o resultado antes de começar outra")]
    SaleOpen(String),
    /// Another process owns the outbox file.
    #[error("outra instância do Pagar já está usando {0}; feche-a antes de abrir esta")]
    AlreadyOpen(PathBuf),
    /// The outbox could not store the attempt because the database is locked by someone else.
    #[error("o banco de pagamentos está ocupado; nada foi enviado, tente de novo")]
    StorageBusy,
    /// The disk (or the outbox's size cap) is full.
    #[error("sem espaço para registrar o pagamento; nada foi enviado")]
    StorageFull,
    /// Any other storage failure.
    #[error("falha ao gravar o pagamento; nada foi enviado: {0}")]
    Storage(String),
    /// Offline and this payment is above the per-payment cap.
    #[error("sem conexão: pagamentos acima de {cap} não podem esperar na fila")]
    OfflinePaymentTooLarge {
        /// The cap.
        cap: Centavos,
    },
    /// Offline and the queue would pass the total cap.
    #[error("sem conexão: a fila chegaria a {would_be}, acima do limite de {cap}")]
    OfflineQueueFull {
        /// Total waiting if this payment were queued.
        would_be: Total,
        /// The cap.
        cap: Total,
    },
    /// A sale in `revisao` could not be checked against the server before a new attempt.
    #[error("não foi possível confirmar com o servidor se a tentativa {attempt} cobrou ({why}); nada foi enviado, tente de novo quando a conexão voltar")]
    ReviewUnresolved {
        /// The attempt in review.
        attempt: crate::domain::AttemptId,
        /// Why it could not be checked.
        why: String,
    },
    /// The sale's earlier payment attempt is in review and its key was not cancelled on the
    /// server yet: no new key may exist for the sale while the old one could still charge.
    #[error("a tentativa {0} desta venda está em revisão e a chave dela ainda não foi cancelada no servidor; nada foi criado")]
    KeyNotCancelled(crate::domain::AttemptId),
    /// The refund asked for is more than what is left of the payment.
    #[error("o estorno de {asked} passa do que resta estornar deste pagamento ({left}); nada foi enviado")]
    RefundExceeds {
        /// Asked.
        asked: Centavos,
        /// Left to refund as the till knows it.
        left: Total,
    },
    /// A tender of a sale paid in parts that would take its approved tenders above its total.
    #[error("este pagamento de {asked} passa do que falta da venda ({falta}); nada foi enviado")]
    TenderExceeds {
        /// Asked.
        asked: Centavos,
        /// What is missing of the sale as the till knows it.
        falta: Total,
    },
    /// The payment was refunded in full already (or the rest is on its way back).
    #[error("este pagamento já foi todo estornado (ou o resto está em estorno); nada foi enviado")]
    NothingToRefund,
    /// No such attempt.
    #[error("tentativa não encontrada: {0}")]
    NotFound(String),
    /// Waiting for an attempt to end took longer than asked.
    #[error("o pagamento ainda está pendente")]
    StillPending,
    /// The engine has shut down.
    #[error("o motor de pagamentos foi encerrado")]
    Closed,
    /// A Pix needs the server now: its QR comes from it.
    #[error(
        "sem conexão com o servidor de pagamentos: o Pix não pode ser gerado agora; ofereça cartão"
    )]
    PixOffline,
    /// A Pix cancel the server did not take: it says the Pix still waits (the cancel never
    /// reached it).
    #[error("o cancelamento não chegou ao servidor: o Pix continua aguardando e ainda pode ser pago; cancele de novo (Esc) ou aguarde o cliente")]
    PixNotCancelled,
    /// A Pix cancel with no answer, and no answer to the question that followed it: the Pix may
    /// have been cancelled, or may still be paid.
    #[error("sem resposta do servidor ({0}): não se sabe se o Pix foi cancelado, e ele ainda pode ser pago; o caixa confirma sozinho quando a conexão voltar — não cobre de outra forma até lá")]
    PixCancelUnknown(String),
    /// A card at the machine needs the server now (the order goes through it) and it does not
    /// answer.
    #[error("sem conexão com o servidor de pagamentos: o pedido não chega à maquininha agora; ofereça outra forma")]
    MachineOffline,
    /// This till has no card machine configured.
    #[error("este caixa não tem maquininha configurada")]
    NoMachine,
    /// The cashier cancelled an order the machine already took: a card may still pay it.
    #[error("a maquininha já está com o pedido: cancele na maquininha ou aguarde o cliente; ele ainda pode pagar")]
    MachineHasOrder,
    /// A cancel of a machine order with no answer: it may have been cancelled, or may still be
    /// paid.
    #[error("sem resposta do servidor ({0}): não se sabe se o pedido foi cancelado, e ele ainda pode ser pago na maquininha; o caixa confirma sozinho quando a conexão voltar — não cobre de outra forma até lá")]
    MachineCancelUnknown(String),
    /// The server could not be asked (closing the till needs it).
    #[error("não foi possível consultar o servidor de pagamentos: {0}")]
    Unreachable(String),
    /// The day still has payments waiting: closing now would leave them out.
    #[error("{}", pending_at_close(*.count, *.total, *.refunds))]
    PendingAtClose {
        /// How many payments are `pendente`.
        count: usize,
        /// Their total.
        total: Total,
        /// How many refunds are `pendente`.
        refunds: usize,
    },
}

/// "2 pagamentos ainda pendentes (R$ 30,00) e 1 estorno pendente; feche o caixa quando eles
/// forem concluídos ou feche listando eles".
fn pending_at_close(count: usize, total: Total, refunds: usize) -> String {
    let many = count + refunds > 1;
    let payments = match count {
        0 => None,
        1 => Some(format!("1 pagamento ainda pendente ({total})")),
        n => Some(format!("{n} pagamentos ainda pendentes ({total})")),
    };
    let refunds = match refunds {
        0 => None,
        1 => Some("1 estorno ainda pendente".to_string()),
        n => Some(format!("{n} estornos ainda pendentes")),
    };
    let what = match (payments, refunds) {
        (Some(p), Some(r)) => format!("{p} e {}", r.replacen(" ainda", "", 1)),
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => "nada pendente".to_string(),
    };
    let (they, done) = if many {
        ("eles", "eles forem concluídos")
    } else {
        ("ele", "ele for concluído")
    };
    format!("{what}; feche o caixa quando {done} ou feche listando {they}")
}

impl From<durable_sqlite::Error> for CoreError {
    fn from(e: durable_sqlite::Error) -> Self {
        match e.code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                CoreError::StorageBusy
            }
            Some(rusqlite::ErrorCode::DiskFull) => CoreError::StorageFull,
            _ => CoreError::Storage(e.to_string()),
        }
    }
}

impl From<rusqlite::Error> for CoreError {
    fn from(e: rusqlite::Error) -> Self {
        durable_sqlite::Error::from(e).into()
    }
}

impl From<rusqlite_migration::Error> for CoreError {
    fn from(e: rusqlite_migration::Error) -> Self {
        CoreError::Storage(format!("migração do banco: {e}"))
    }
}

/// Errors cross to the UI as `{kind, message}`.
impl Serialize for CoreError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let kind = match self {
            CoreError::Invalid(_) => "invalid",
            CoreError::Config(_) => "config",
            CoreError::SaleOpen(_) => "sale_open",
            CoreError::AlreadyOpen(_) => "already_open",
            CoreError::StorageBusy => "storage_busy",
            CoreError::StorageFull => "storage_full",
            CoreError::Storage(_) => "storage",
            CoreError::OfflinePaymentTooLarge { .. } => "offline_payment_too_large",
            CoreError::OfflineQueueFull { .. } => "offline_queue_full",
            CoreError::ReviewUnresolved { .. } => "review_unresolved",
            CoreError::KeyNotCancelled(_) => "key_not_cancelled",
            CoreError::RefundExceeds { .. } => "refund_exceeds",
            CoreError::TenderExceeds { .. } => "tender_exceeds",
            CoreError::NothingToRefund => "nothing_to_refund",
            CoreError::NotFound(_) => "not_found",
            CoreError::StillPending => "still_pending",
            CoreError::Closed => "closed",
            CoreError::Unreachable(_) => "unreachable",
            CoreError::PixOffline => "pix_offline",
            CoreError::PixNotCancelled => "pix_not_cancelled",
            CoreError::PixCancelUnknown(_) => "pix_cancel_unknown",
            CoreError::MachineOffline => "machine_offline",
            CoreError::NoMachine => "no_machine",
            CoreError::MachineHasOrder => "machine_has_order",
            CoreError::MachineCancelUnknown(_) => "machine_cancel_unknown",
            CoreError::PendingAtClose { .. } => "pending_at_close",
        };
        let mut st = s.serialize_struct("CoreError", 2)?;
        st.serialize_field("kind", kind)?;
        st.serialize_field("message", &self.to_string())?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_busy_and_full_become_the_cashiers_messages() {
        let fail = |code| {
            CoreError::from(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(code),
                None,
            ))
        };
        assert!(matches!(
            fail(rusqlite::ffi::SQLITE_BUSY),
            CoreError::StorageBusy
        ));
        assert!(matches!(
            fail(rusqlite::ffi::SQLITE_FULL),
            CoreError::StorageFull
        ));
        assert!(matches!(
            fail(rusqlite::ffi::SQLITE_IOERR),
            CoreError::Storage(_)
        ));
    }
}
