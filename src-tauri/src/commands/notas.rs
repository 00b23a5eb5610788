//! The sale's NFC-e as the window shows it: where each note stands (and, in contingência, by when
//! it must reach SEFAZ), its DANFE, and the QA control of the sandbox's SEFAZ.

use crate::error::Result;
use crate::session::Session;
use checkout_core::outbox::NotaRegistro;
use checkout_core::SaleId;
use serde::Serialize;
use tauri::State;

/// A note of the sale, for the window.
#[derive(Debug, Serialize)]
pub struct NotaView {
    /// The note as the till keeps it (without its XML).
    #[serde(flatten)]
    pub nota: NotaRegistro,
    /// A note in contingência not yet authorized: by when it must be sent (ms since the epoch).
    pub enviar_ate: Option<i64>,
}

fn sale(sale_id: String) -> Result<SaleId> {
    SaleId::parse(&sale_id).map_err(crate::error::AppError::invalid)
}

/// The sale's notes, oldest first (the live one last).
#[tauri::command]
pub async fn notas(session: State<'_, Session>, sale_id: String) -> Result<Vec<NotaView>> {
    let checkout = session.get()?.checkout();
    let prazo = checkout.prazo_contingencia();
    let notas = checkout.notas_da_venda(&sale(sale_id)?).await?;
    Ok(notas
        .into_iter()
        .map(|nota| NotaView {
            enviar_ate: prazo.and_then(|p| nota.enviar_ate(p)),
            nota,
        })
        .collect())
}

/// The DANFE NFC-e of a sale, and where its note and DANFE were saved.
#[derive(Debug, Serialize)]
pub struct Danfe {
    /// The page.
    pub html: String,
    /// The note's signed XML, as SEFAZ got it (`<data>/nfce/<chave>.xml`).
    pub xml: String,
    /// The page (`<data>/nfce/<chave>.html`).
    pub arquivo: String,
}

/// The DANFE NFC-e of the sale's live note, saved with the note's signed XML (so it can be
/// checked with tools Pagar did not write), or nothing while the sale has no note.
#[tauri::command]
pub async fn danfe(session: State<'_, Session>, sale_id: String) -> Result<Option<Danfe>> {
    let p = session.get()?;
    let sale = sale(sale_id)?;
    let (Some(html), Some(nota)) = (
        p.checkout().danfe(&sale).await?,
        p.checkout().nota_da_venda(&sale).await?,
    ) else {
        return Ok(None);
    };
    let dir = p.settings().nfce_dir();
    let xml = p.save(&dir, &format!("{}.xml", nota.chave), nota.xml.as_bytes())?;
    let arquivo = p.save(&dir, &format!("{}.html", nota.chave), html.as_bytes())?;
    Ok(Some(Danfe {
        html,
        xml: xml.display().to_string(),
        arquivo: arquivo.display().to_string(),
    }))
}

/// QA: plays SEFAZ at the sandbox's simulator (`normal`, `fora`, `lenta`, `perde-resposta`).
#[tauri::command]
pub async fn qa_sefaz(session: State<'_, Session>, modo: String) -> Result<()> {
    session.get()?.qa_sefaz(&modo).await
}
