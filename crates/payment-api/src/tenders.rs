//! A tender of a sale paid in parts holds its amount against the sale before it may charge (a
//! card) or make its charge (a Pix); the database refuses a hold that would pass the total.

use crate::domain::PaymentAsk;
use crate::error::{ApiError, Result};
use crate::idempotency::Held;
use crate::store::{SaleStore, TenderAsk, TenderHold};

/// Holds the request's `valor` of its sale `venda` (the request is a part of it; `None`: a sale
/// paid at once, nothing to hold) for the key `held` holds, or refuses the request: nothing was held or
/// charged, so the key is freed and nothing is stored, like a validation error, and the till
/// asks again for what is left. Every means that can be a part calls it first.
pub(crate) async fn hold(
    sales: &dyn SaleStore,
    held: &Held<'_>,
    request: &PaymentAsk,
) -> Result<()> {
    let Some(venda) = &request.venda else {
        return Ok(());
    };
    let ask = TenderAsk {
        merchant: held.merchant.clone(),
        terminal: request.terminal.clone(),
        key: held.key.clone(),
        fence: held.fence,
        venda: venda.clone(),
        valor: request.valor,
    };
    let hold = sales.hold_tender(&ask).await?;
    let refused = match hold {
        TenderHold::Held => return Ok(()),
        TenderHold::LeaseLost => return Err(ApiError::LeaseLost),
        TenderHold::Exceeds { total, held } => ApiError::SaleExceeded {
            total: total.get(),
            held,
        },
        TenderHold::TotalMismatch { total } => ApiError::SaleTotalMismatch { total: total.get() },
    };
    tracing::info!(merchant = %held.merchant, venda = %venda.referencia, "tender refused: {refused}");
    held.forget().await?;
    Err(refused)
}
