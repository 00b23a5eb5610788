//! The commands the window may call. Thin: parse input into domain types, call the core, map
//! the result.

use crate::error::{AppError, Result};
use crate::events::{self, EventBatch};
use crate::receipts::{self, Receipt};
use crate::session::{AppInfo, Session};
use checkout_core::domain::sale_number;
use checkout_core::{
    export, Attempt, AttemptId, CardToken, Centavos, Checkout, Closing, Connectivity, Drawer,
    DrawerKind, OpenSale, PayOutcome, PlanOffer, QueueSummary, RefundReason, SaleId, Total,
};
use checkout_core::{Event, SaleView};
use payment_api::faults::Faults;
use serde::Serialize;
use tauri::State;

mod notas;
mod replies;

pub use notas::*;
pub use replies::*;

/// What a command about one attempt works on: the till's checkout and the attempt's id.
fn attempt_of(session: &Session, attempt_id: String) -> Result<(Checkout, AttemptId)> {
    let checkout = session.get()?.checkout().clone();
    Ok((checkout, AttemptId::from_stored(attempt_id)))
}

/// Session facts.
#[tauri::command]
pub async fn app_info(session: State<'_, Session>) -> Result<AppInfo> {
    let mut info = session.get()?.info();
    info.first_paint_ms = first_paint_ms();
    info.navigation_ms = NAVIGATION_MS.get().copied();
    Ok(info)
}

/// Milliseconds from process start to the window's first painted frame, once the window says so.
static FIRST_PAINT_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
/// Of those, process start to the page's navigation.
static NAVIGATION_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// The window calls this after its first painted frame, with when each step of its start ended
/// (`marks`: ms from the page's navigation); the startup time is logged with them and kept.
#[tauri::command]
pub fn ui_ready(marks: Option<std::collections::BTreeMap<String, u64>>) -> Option<u64> {
    let started = crate::STARTED.get()?;
    let ms = *FIRST_PAINT_MS.get_or_init(|| started.elapsed().as_millis() as u64);
    let marks = marks.unwrap_or_default();
    // The page's clock starts at its navigation: what came before it is the process's own start.
    let navigation = marks
        .get("painted")
        .map(|p| *NAVIGATION_MS.get_or_init(|| ms.saturating_sub(*p)));
    tracing::info!(
        first_paint_ms = ms,
        navigation_ms = navigation,
        ?marks,
        "window painted"
    );
    Some(ms)
}

/// The startup figure, if the window reported it.
pub fn first_paint_ms() -> Option<u64> {
    FIRST_PAINT_MS.get().copied()
}

/// The sale open at the till, with its latest attempt, and the other unsettled sales: what the
/// window draws on start, after a crash, and after a reload.
#[tauri::command]
pub async fn open_sale(session: State<'_, Session>) -> Result<OpenSale> {
    Ok(session.get()?.checkout().open_sale().await?)
}

/// Opens the next sale (numbered for the day) and answers the till with it; refused while the
/// open one's payment is still being decided.
#[tauri::command]
pub async fn new_sale(session: State<'_, Session>) -> Result<OpenSale> {
    let checkout = session.get()?.checkout();
    checkout.new_sale().await?;
    Ok(checkout.open_sale().await?)
}

/// The receipt of an approved attempt, saved under `<data>/comprovantes/`; refused for any
/// attempt that is not approved.
#[tauri::command]
pub async fn receipt(session: State<'_, Session>, attempt_id: String) -> Result<Receipt> {
    let p = session.get()?;
    let attempt = p
        .checkout()
        .attempt(&AttemptId::from_stored(attempt_id))
        .await?;
    let refunds = if attempt.is_refund() {
        Vec::new()
    } else {
        p.checkout().refunds_of(&attempt.id).await?
    };
    let mut r = receipts::receipt(p.settings(), &attempt, &refunds)?;
    let name = format!(
        "{}-{}-{}-{}.html",
        if attempt.is_refund() {
            "estorno"
        } else {
            "comprovante"
        },
        attempt.sale_day.as_deref().unwrap_or("sem-dia"),
        attempt.sale_number.map(sale_number).unwrap_or_default(),
        attempt.id
    );
    let path = p.save(
        &p.settings().receipt_dir(),
        &name,
        receipts::receipt_html(&r).as_bytes(),
    )?;
    r.arquivo = Some(path.display().to_string());
    Ok(r)
}

/// Closes today's till: reconciles with the server and saves the closing as CSV, JSON and a
/// printable page under `<data>/fechamentos/`. `anyway`: close with pending payments listed.
#[tauri::command]
pub async fn close_day(session: State<'_, Session>, anyway: bool) -> Result<ClosingReply> {
    let p = session.get()?;
    let closing = p.checkout().close_day(None, anyway).await?;
    let dir = p.settings().closing_dir();
    let stem = format!("fechamento-{}", closing.day);
    let json = serde_json::to_vec_pretty(&closing).expect("a closing serialises");
    let html = receipts::closing_html(&closing, p.settings());
    let csv = p.save(&dir, &format!("{stem}.csv"), closing.to_csv().as_bytes())?;
    let json = p.save(&dir, &format!("{stem}.json"), &json)?;
    let html = p.save(&dir, &format!("{stem}.html"), html.as_bytes())?;
    Ok(ClosingReply {
        closing,
        csv: csv.display().to_string(),
        json: json.display().to_string(),
        html: html.display().to_string(),
    })
}

/// Pays a sale: `valor` as the cashier typed it (`1.234,56`).
#[tauri::command]
pub async fn pay(
    session: State<'_, Session>,
    sale_id: String,
    valor: String,
    cartao: String,
    forma: Option<String>,
    parcelas: Option<u8>,
    total: Option<String>,
) -> Result<PayReply> {
    let sale = SaleId::parse(&sale_id).map_err(AppError::invalid)?;
    let valor = Centavos::parse_brl(&valor).map_err(AppError::invalid)?;
    let cartao = CardToken::parse(&cartao).map_err(AppError::invalid)?;
    let total = parse_total(total)?;
    let running = session.get()?;
    let checkout = running.checkout();
    let plan = |forma: &str| {
        running
            .settings()
            .plans
            .plan(forma, parcelas, valor)
            .map_err(AppError::invalid)
    };
    Ok(match (forma, total) {
        // Without a forma the request names no method: the gateway's default, crédito à vista.
        (None, None) => checkout.pay(sale, valor, cartao).await?,
        (None, Some(_)) => {
            return Err(AppError::Invalid(
                "um pagamento dividido diz a forma de cada parte".into(),
            ))
        }
        (Some(forma), None) => {
            checkout
                .pay_card(sale, valor, cartao, plan(&forma)?)
                .await?
        }
        (Some(forma), Some(total)) => {
            checkout
                .pay_tender(sale, total, valor, cartao, plan(&forma)?)
                .await?
        }
    }
    .into())
}

/// Pays a sale (or, with `total`, one part of a sale paid in parts) in cash: `recebido` is what
/// the customer handed over; the change is the rest. Local and approved at once.
#[tauri::command]
pub async fn pay_cash(
    session: State<'_, Session>,
    sale_id: String,
    valor: String,
    recebido: String,
    total: Option<String>,
) -> Result<PayReply> {
    let sale = SaleId::parse(&sale_id).map_err(AppError::invalid)?;
    let valor = Centavos::parse_brl(&valor).map_err(AppError::invalid)?;
    let recebido = Centavos::parse_brl(&recebido)
        .map_err(|e| AppError::Invalid(format!("valor recebido: {e}")))?;
    let total = parse_total(total)?;
    Ok(session
        .get()?
        .checkout()
        .pay_cash(sale, valor, recebido, total)
        .await?
        .into())
}

/// Cancels a sale the customer gave up on: every approved payment of it is refunded in full
/// (cash from the drawer). Returns the refunds.
#[tauri::command]
pub async fn abandon_sale(session: State<'_, Session>, sale_id: String) -> Result<Vec<Attempt>> {
    let sale = SaleId::parse(&sale_id).map_err(AppError::invalid)?;
    Ok(session.get()?.checkout().abandon_sale(&sale).await?)
}

/// Confirms a divided sale that is paid and whose receipt the window shows: its card
/// authorizations are captured. Returns the parts decided now.
#[tauri::command]
pub async fn confirm_sale(session: State<'_, Session>, sale_id: String) -> Result<Vec<Attempt>> {
    let sale = SaleId::parse(&sale_id).map_err(AppError::invalid)?;
    Ok(session.get()?.checkout().confirm_sale(&sale).await?)
}

/// The total of a divided sale as typed, when the sale is divided.
fn parse_total(total: Option<String>) -> Result<Option<Centavos>> {
    total
        .map(|t| {
            Centavos::parse_brl(&t).map_err(|e| AppError::Invalid(format!("total da venda: {e}")))
        })
        .transpose()
}

/// Today's cash drawer: its float, movements, cash sales, what it should hold and the last count.
#[tauri::command]
pub async fn drawer(session: State<'_, Session>) -> Result<Drawer> {
    Ok(session.get()?.checkout().drawer().await?)
}

/// Records a movement of today's cash drawer: `abertura`, `sangria`, `suprimento` or
/// `contagem` (what was counted), with the cashier's reason.
#[tauri::command]
pub async fn drawer_move(
    session: State<'_, Session>,
    kind: String,
    valor: String,
    motivo: Option<String>,
) -> Result<Drawer> {
    let kind = DrawerKind::parse(&kind)?;
    // Zero parses (an empty drawer counted); the outbox refuses it for any other movement.
    let valor = Total::parse_brl(&valor).map_err(AppError::invalid)?;
    // The same rules as any reason a cashier writes: trimmed, at most 255 characters, one line.
    let motivo = match motivo {
        Some(m) => RefundReason::parse(&m)
            .map_err(AppError::invalid)?
            .map(|r| r.as_ref().to_string()),
        None => None,
    };
    Ok(session
        .get()?
        .checkout()
        .drawer_move(kind, valor, motivo)
        .await?)
}

/// The card plans the store offers for the amount typed, for the "forma de pagamento" list:
/// débito, crédito à vista, each parcelado with its installments (`3× de R$ 33,34`), voucher.
/// An amount that does not parse offers débito and crédito à vista only.
#[tauri::command]
pub async fn card_plans(session: State<'_, Session>, valor: String) -> Result<Vec<PlanOffer>> {
    let rules = session.get()?.settings().plans;
    Ok(match Centavos::parse_brl(&valor) {
        Ok(valor) => rules.offers(valor),
        Err(_) => rules
            .offers(Centavos::new(1).expect("positive"))
            .into_iter()
            .filter(|o| o.forma != "parcelado")
            .collect(),
    })
}

/// Pays a sale by Pix: the server makes the charge and the window shows its QR. Refused while
/// the server cannot be reached (a Pix cannot be shown offline).
#[tauri::command]
pub async fn pay_pix(
    session: State<'_, Session>,
    sale_id: String,
    valor: String,
    total: Option<String>,
) -> Result<PayReply> {
    let sale = SaleId::parse(&sale_id).map_err(AppError::invalid)?;
    let valor = Centavos::parse_brl(&valor).map_err(AppError::invalid)?;
    let checkout = session.get()?.checkout().clone();
    Ok(match parse_total(total)? {
        None => checkout.pay_pix(sale, valor).await?,
        Some(total) => checkout.pay_pix_tender(sale, total, valor).await?,
    }
    .into())
}

/// Pays a sale by a card at this till's machine: the server sends the order to the machine and
/// the window shows it waiting there. `forma`/`parcelas` are what the machine offers first
/// (none: the customer chooses there). Refused while the server cannot be reached.
#[tauri::command]
pub async fn pay_maquininha(
    session: State<'_, Session>,
    sale_id: String,
    valor: String,
    forma: Option<String>,
    parcelas: Option<u8>,
    total: Option<String>,
) -> Result<PayReply> {
    let sale = SaleId::parse(&sale_id).map_err(AppError::invalid)?;
    let valor = Centavos::parse_brl(&valor).map_err(AppError::invalid)?;
    let total = parse_total(total)?;
    let running = session.get()?;
    let plan = forma
        .map(|f| {
            running
                .settings()
                .plans
                .plan(&f, parcelas, valor)
                .map_err(AppError::invalid)
        })
        .transpose()?;
    let checkout = running.checkout().clone();
    Ok(match total {
        None => checkout.pay_maquininha(sale, valor, plan).await?,
        Some(total) => {
            checkout
                .pay_maquininha_tender(sale, total, valor, plan)
                .await?
        }
    }
    .into())
}

/// Cancels the order of a card-machine attempt no card has paid: only while the machine has not
/// taken it (otherwise the answer says the machine holds it, and a card may still pay).
#[tauri::command]
pub async fn cancel_maquininha(session: State<'_, Session>, attempt_id: String) -> Result<Attempt> {
    let (checkout, id) = attempt_of(&session, attempt_id)?;
    Ok(checkout.cancel_maquininha(&id).await?)
}

/// Cancels the Pix of an attempt the customer has not paid.
#[tauri::command]
pub async fn cancel_pix(session: State<'_, Session>, attempt_id: String) -> Result<Attempt> {
    let (checkout, id) = attempt_of(&session, attempt_id)?;
    Ok(checkout.cancel_pix(&id).await?)
}

/// Keeps a Pix the customer paid after it was cancelled as its sale's payment (the sale was not
/// paid another way); refused, with the reason, otherwise.
#[tauri::command]
pub async fn keep_late_pix(session: State<'_, Session>, attempt_id: String) -> Result<Attempt> {
    let (checkout, id) = attempt_of(&session, attempt_id)?;
    Ok(checkout.keep_late_pix(&id).await?)
}

/// The QR code of a text (a Pix's "copia e cola"), medium error correction.
#[tauri::command]
pub fn pix_qr(texto: String) -> Result<QrMatrix> {
    let code = qrcode::QrCode::with_error_correction_level(texto.as_bytes(), qrcode::EcLevel::M)
        .map_err(AppError::invalid)?;
    let tamanho = code.width();
    let colors = code.to_colors();
    let linhas = colors
        .chunks(tamanho)
        .map(|row| {
            row.iter()
                .map(|c| if *c == qrcode::Color::Dark { '1' } else { '0' })
                .collect()
        })
        .collect();
    Ok(QrMatrix { tamanho, linhas })
}

/// QA (embedded sandbox only): the customer pays the Pix of an attempt at the simulated bank,
/// with the webhook delivered as `webhook` says (`entregue`, `perdido`, `duplicado`,
/// `triplicado`); `aceitar_inativa` lets a cancelled or expired charge be paid.
#[tauri::command]
pub async fn qa_pix_pay(
    session: State<'_, Session>,
    attempt_id: String,
    webhook: String,
    aceitar_inativa: bool,
) -> Result<()> {
    let running = session.get()?;
    let attempt = running
        .checkout()
        .attempt(&AttemptId::from_stored(attempt_id))
        .await?;
    let txid = attempt
        .pix
        .as_ref()
        .map(|p| p.txid.clone())
        .ok_or_else(|| AppError::invalid("esta tentativa não tem um Pix gerado"))?;
    running.qa_pix_pay(&txid, &webhook, aceitar_inativa).await
}

/// A payment and its refunds, for the refund dialog.
#[tauri::command]
pub async fn refund_info(session: State<'_, Session>, attempt_id: String) -> Result<RefundInfo> {
    info_of(
        session.get()?.checkout(),
        AttemptId::from_stored(attempt_id),
    )
    .await
}

/// Reads and checks a refund amount before the confirmation; nothing is stored.
#[tauri::command]
pub async fn refund_preview(
    session: State<'_, Session>,
    attempt_id: String,
    valor: String,
) -> Result<RefundPreview> {
    let valor = Centavos::parse_brl(&valor).map_err(AppError::invalid)?;
    let balance = session
        .get()?
        .checkout()
        .refund_balance(&AttemptId::from_stored(attempt_id))
        .await?;
    let valor = balance.check(Some(valor))?;
    Ok(RefundPreview { valor: valor.get() })
}

async fn info_of(checkout: &Checkout, id: AttemptId) -> Result<RefundInfo> {
    let balance = checkout.refund_balance(&id).await?;
    let pagamento = checkout.attempt(&id).await?;
    Ok(RefundInfo {
        estornos: checkout.refunds_of(&id).await?,
        estornado: balance.estornado,
        em_andamento: balance.em_andamento,
        saldo: balance.left(),
        cartao: pagamento.cartao.as_ref().map_or_else(
            || {
                if pagamento.is_cash() {
                    "dinheiro"
                } else {
                    "Pix"
                }
                .to_string()
            },
            |c| c.masked(),
        ),
        pagamento,
    })
}

/// Refunds `valor` centavos (as the confirmation showed them) of an approved payment attempt,
/// with the cashier's `motivo`. Answers the payment's undecided refund instead if it has one.
#[tauri::command]
pub async fn refund(
    session: State<'_, Session>,
    attempt_id: String,
    valor: i64,
    motivo: Option<String>,
) -> Result<PayReply> {
    let valor = Centavos::new(valor).map_err(AppError::invalid)?;
    let motivo = match motivo {
        Some(m) => RefundReason::parse(&m).map_err(AppError::invalid)?,
        None => None,
    };
    let outcome = session
        .get()?
        .checkout()
        .refund(&AttemptId::from_stored(attempt_id), Some(valor), motivo)
        .await?;
    Ok(outcome.into())
}

/// A full snapshot (on start, and after the event stream lagged).
#[tauri::command]
pub async fn attempts(session: State<'_, Session>) -> Result<Snapshot> {
    let p = session.get()?;
    let attempts = p.checkout().recent_attempts(WINDOW_ATTEMPTS).await?;
    let sales = attempts.iter().map(|a| a.sale_id.clone()).collect();
    let vendas = views_of(p.checkout(), sales).await?;
    Ok(Snapshot {
        attempts,
        vendas,
        queue: p.checkout().queue().await?,
        connectivity: p.checkout().connectivity(),
        connectivity_problem: p.checkout().connectivity_problem(),
        offline_simulated: p.offline_simulated(),
    })
}

/// Opens the window's event stream: the engine's events from now on are kept for [`events`]. The
/// window subscribes before it takes its first snapshot, so nothing falls between the two.
#[tauri::command]
pub async fn subscribe<R: tauri::Runtime>(
    session: State<'_, Session>,
    webview: tauri::Webview<R>,
) -> Result<()> {
    let p = session.get()?;
    p.streams().open(webview.label(), p.checkout().subscribe());
    Ok(())
}

/// The events since the window last asked, waiting up to [`events::EVENTS_WAIT`] for the next
/// when there are none (see [`crate::events`] for why a long poll and not a channel).
#[tauri::command]
pub async fn events<R: tauri::Runtime>(
    session: State<'_, Session>,
    webview: tauri::Webview<R>,
) -> Result<EventsReply> {
    let stream = session
        .get()?
        .streams()
        .get(webview.label())
        .ok_or_else(|| AppError::invalid("a janela não abriu seus eventos (subscribe)"))?;
    let batch = {
        let mut events = stream.lock().await;
        events::next_batch(&mut events, events::EVENTS_WAIT, events::EVENTS_BATCH).await
    };
    let changed = batch
        .events
        .iter()
        .filter_map(|e| match e {
            Event::AttemptChanged { attempt } => Some(attempt.sale_id.clone()),
            _ => None,
        })
        .collect();
    let vendas = views_of(session.get()?.checkout(), changed).await?;
    Ok(EventsReply { batch, vendas })
}

/// Exports every attempt as `csv` or `json` into the export folder; returns the file's path.
#[tauri::command]
pub async fn export_attempts(session: State<'_, Session>, format: String) -> Result<String> {
    let p = session.get()?;
    let all = p.checkout().attempts().await?;
    let bytes = match format.as_str() {
        "csv" => export::to_csv(&all)?,
        "json" => export::to_json(&all)?,
        other => {
            return Err(AppError::Invalid(format!(
                "formato desconhecido: {other} (use csv ou json)"
            )))
        }
    };
    Ok(p.write_export("pagamentos", &format, &bytes)?
        .display()
        .to_string())
}

/// Sends an attempt in review again with its same key.
#[tauri::command]
pub async fn retry_review(session: State<'_, Session>, attempt_id: String) -> Result<Attempt> {
    let (checkout, id) = attempt_of(&session, attempt_id)?;
    Ok(checkout.retry_review(&id).await?)
}

/// QA: cuts (or restores) the app's network path to the API.
#[tauri::command]
pub async fn qa_set_offline(session: State<'_, Session>, offline: bool) -> Result<()> {
    session.get()?.set_offline(offline).await
}

/// QA: the server's fault profile.
#[tauri::command]
pub async fn qa_get_faults(session: State<'_, Session>) -> Result<Faults> {
    session.get()?.faults().await
}

/// QA: replaces the server's fault profile.
#[tauri::command]
pub async fn qa_set_faults(
    session: State<'_, Session>,
    faults: serde_json::Value,
) -> Result<Faults> {
    // Read here, not by Tauri, so a field the server does not know gets the panel's message.
    let faults: Faults = serde_json::from_value(faults)
        .map_err(|e| AppError::Qa(format!("perfil recusado: {e}")))?;
    session.get()?.set_faults(faults).await
}

/// QA: writes the session log to the export folder; returns the file's path.
#[tauri::command]
pub async fn qa_export_log(session: State<'_, Session>) -> Result<String> {
    let p = session.get()?;
    let text = p.log().join("\n") + "\n";
    Ok(p.write_export("sessao-qa", "log", text.as_bytes())?
        .display()
        .to_string())
}
