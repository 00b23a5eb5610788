//! What the commands answer the window, beyond the core's own types: a payment's and a closing's
//! reply, the QR's modules, a refund's figures, the snapshot and the events with the core's views
//! of their sales.

use super::*;

/// What closing the till answers: the closing and where its files went.
#[derive(Debug, Serialize)]
pub struct ClosingReply {
    /// The reconciliation.
    pub closing: Closing,
    /// The closing as CSV.
    pub csv: String,
    /// The closing as JSON.
    pub json: String,
    /// The printable summary.
    pub html: String,
}

/// What `pay` answers.
#[derive(Debug, Serialize)]
pub struct PayReply {
    /// The sale's attempt.
    pub attempt: Attempt,
    /// True when the sale already had a live or approved attempt and no new key was made.
    pub existing: bool,
}

impl From<PayOutcome> for PayReply {
    fn from(outcome: PayOutcome) -> Self {
        match outcome {
            PayOutcome::Created(attempt) => PayReply {
                attempt,
                existing: false,
            },
            PayOutcome::Existing(attempt) => PayReply {
                attempt,
                existing: true,
            },
        }
    }
}

/// A QR code's modules, for the window to draw: `linhas[y]` has one `1` (dark) or `0` per module.
#[derive(Debug, Serialize)]
pub struct QrMatrix {
    /// Modules per side.
    pub tamanho: usize,
    /// Rows, top to bottom.
    pub linhas: Vec<String>,
}

/// What the refund dialog shows of a payment: what was charged, paid back, on its way back,
/// and what is left to refund (the dialog's default amount), as the till knows it.
#[derive(Debug, Serialize)]
pub struct RefundInfo {
    /// The payment attempt.
    pub pagamento: Attempt,
    /// Its refunds, oldest first.
    pub estornos: Vec<Attempt>,
    /// Paid back (approved refunds), in centavos.
    pub estornado: Total,
    /// Undecided refunds, in centavos.
    pub em_andamento: Total,
    /// What may still be refunded, in centavos.
    pub saldo: Total,
    /// The card the money goes back to, masked (`tok_…vado`).
    pub cartao: String,
}

/// What the confirmation shows: the amount as the cashier typed it (`1.234,56`), read once
/// here, checked against what is left, and sent as these centavos when confirmed.
#[derive(Debug, Serialize)]
pub struct RefundPreview {
    /// The amount to refund, in centavos.
    pub valor: i64,
}

/// Everything the screen shows at once.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// Every attempt, oldest first.
    pub attempts: Vec<Attempt>,
    /// The queue.
    pub queue: QueueSummary,
    /// Connectivity.
    pub connectivity: Connectivity,
    /// Why the payment API cannot be used (pt-BR), while it cannot.
    pub connectivity_problem: Option<String>,
    /// Whether QA has cut the network path.
    pub offline_simulated: bool,
    /// What the window may show and offer for each sale of those attempts, decided by the core.
    pub vendas: Vec<SaleView>,
}

/// How many settled attempts a window is sent and keeps (`ui/state.js` `KEEP_ATTEMPTS` is the
/// same number): the history shows 50 and the QA panel 20; every unsettled attempt comes too.
/// The export and the closing read the outbox itself, so nothing is lost to the window's bound.
pub const WINDOW_ATTEMPTS: usize = 200;

/// What one `events` call answers: the events, and the view of every sale they changed, read
/// after them (so never older than they are).
#[derive(Debug, Serialize)]
pub struct EventsReply {
    /// The events.
    #[serde(flatten)]
    pub batch: EventBatch,
    /// The sales the events changed, as the window may show them now.
    pub vendas: Vec<SaleView>,
}

/// The view of each of `sales` (once each), decided by the core.
pub(super) async fn views_of(checkout: &Checkout, mut sales: Vec<SaleId>) -> Result<Vec<SaleView>> {
    sales.sort_by(|a, b| a.as_ref().cmp(b.as_ref()));
    sales.dedup();
    let mut views = Vec::with_capacity(sales.len());
    for sale in &sales {
        views.push(checkout.sale_view(sale).await?);
    }
    Ok(views)
}
