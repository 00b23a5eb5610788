//! The sale's NFC-e, written ahead like a payment attempt: the série's next number is taken and
//! the note signed and stored in one durable transaction, before any byte of it goes to SEFAZ;
//! a sale asked for its note again (a retry, a restart) gets the note it has, never a second
//! number; what SEFAZ says moves it from `pendente` once and only forward.

use super::*;
use crate::fiscal::Situacao;
use nfce::{NfceError, NotaAssinada};

/// Where a note stands at the till.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EstadoNota {
    /// Signed and stored; SEFAZ has not authorized it yet (or the till has not heard so).
    Pendente,
    /// Authorized: its protocol is kept with it.
    Autorizada,
    /// SEFAZ refused it as it is; the sale needs a person (and the number, an inutilização).
    Rejeitada,
    /// SEFAZ has its number under another key: the number is spent.
    NumeroPerdido,
}

impl EstadoNota {
    fn as_str(self) -> &'static str {
        match self {
            EstadoNota::Pendente => "pendente",
            EstadoNota::Autorizada => "autorizada",
            EstadoNota::Rejeitada => "rejeitada",
            EstadoNota::NumeroPerdido => "numero_perdido",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pendente" => EstadoNota::Pendente,
            "autorizada" => EstadoNota::Autorizada,
            "rejeitada" => EstadoNota::Rejeitada,
            "numero_perdido" => EstadoNota::NumeroPerdido,
            _ => return None,
        })
    }
}

/// A note as the outbox keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotaRegistro {
    /// Its key.
    pub chave: String,
    /// The sale it is the note of.
    pub sale_id: SaleId,
    /// Série.
    pub serie: u16,
    /// Número.
    pub numero: u32,
    /// `tpEmis` (1 normal, 9 contingência).
    pub tp_emis: u8,
    /// `vNF`, in centavos.
    pub total: i64,
    /// The signed XML, as it is sent every time.
    pub xml: String,
    /// The QR Code's text.
    pub qrcode: String,
    /// Where it stands.
    pub estado: EstadoNota,
    /// SEFAZ's protocol, once authorized.
    pub protocolo: Option<String>,
    /// SEFAZ's last code for it.
    pub c_stat: Option<u16>,
    /// Why it is not authorized yet, or was refused.
    pub motivo: Option<String>,
    /// Sends tried.
    pub tentativas: u32,
    /// When it was issued (till clock).
    pub emitida_em: UnixMillis,
}

const NOTA_COLUMNS: &str = "chave, sale_id, serie, numero, tp_emis, total, xml, qrcode, estado, \
     protocolo, c_stat, motivo, tentativas, emitida_em";

fn nota_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<NotaRegistro> {
    let corrupt = |column: &str, e: String| {
        rusqlite::Error::FromSqlConversionFailure(
            r.as_ref().column_index(column).unwrap_or(0),
            rusqlite::types::Type::Text,
            e.into(),
        )
    };
    let sale: String = r.get("sale_id")?;
    let estado: String = r.get("estado")?;
    Ok(NotaRegistro {
        chave: r.get("chave")?,
        sale_id: SaleId::parse(&sale).map_err(|e| corrupt("sale_id", e.to_string()))?,
        serie: r.get("serie")?,
        numero: r.get("numero")?,
        tp_emis: r.get("tp_emis")?,
        total: r.get("total")?,
        xml: r.get("xml")?,
        qrcode: r.get("qrcode")?,
        estado: EstadoNota::parse(&estado)
            .ok_or_else(|| corrupt("estado", format!("estado de nota desconhecido: {estado}")))?,
        protocolo: r.get("protocolo")?,
        c_stat: r.get("c_stat")?,
        motivo: r.get("motivo")?,
        tentativas: r.get("tentativas")?,
        emitida_em: r.get("emitida_em")?,
    })
}

fn live_note(c: &rusqlite::Connection, sale: &str) -> Result<Option<NotaRegistro>> {
    c.prepare_cached(&format!(
        "SELECT {NOTA_COLUMNS} FROM notas
         WHERE sale_id = ?1 AND estado IN ('pendente', 'autorizada')"
    ))?
    .query_row([sale], nota_from_row)
    .optional()
    .map_err(CoreError::from)
}

fn note_by_key(c: &rusqlite::Connection, chave: &str) -> Result<NotaRegistro> {
    c.prepare_cached(&format!(
        "SELECT {NOTA_COLUMNS} FROM notas WHERE chave = ?1"
    ))?
    .query_row([chave], nota_from_row)
    .optional()?
    .ok_or_else(|| CoreError::Invalid(format!("nota desconhecida: {chave}")))
}

impl Outbox {
    /// The sale's live note, or a new one: série `serie`'s next number is taken, the note made
    /// and signed by `assinar(numero)`, and stored, in one durable transaction — before any byte
    /// of it goes to SEFAZ. A sign that fails takes no number.
    pub async fn emitir_nota<F>(
        &self,
        sale: SaleId,
        serie: u16,
        now: UnixMillis,
        assinar: F,
    ) -> Result<NotaRegistro>
    where
        F: FnOnce(u32) -> std::result::Result<NotaAssinada, NfceError> + Send + 'static,
    {
        self.db
            .write(move |c| {
                if let Some(nota) = live_note(c, sale.as_ref())? {
                    return Ok(nota);
                }
                exec(
                    c,
                    "INSERT INTO fiscal_series (serie, proximo) VALUES (?1, 1)
                     ON CONFLICT (serie) DO NOTHING",
                    [serie],
                )?;
                let numero: u32 = c.query_row(
                    "SELECT proximo FROM fiscal_series WHERE serie = ?1",
                    [serie],
                    |r| r.get(0),
                )?;
                let assinada =
                    assinar(numero).map_err(|e| CoreError::Invalid(format!("NFC-e: {e}")))?;
                exec(
                    c,
                    "INSERT INTO notas (chave, sale_id, serie, numero, tp_emis, total, xml, qrcode,
                                        estado, emitida_em)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pendente', ?9)",
                    params![
                        assinada.chave.as_ref(),
                        sale.as_ref(),
                        serie,
                        numero,
                        assinada.chave.tipo().codigo(),
                        assinada.total,
                        assinada.xml,
                        assinada.qrcode,
                        now
                    ],
                )?;
                exec(
                    c,
                    "UPDATE fiscal_series SET proximo = proximo + 1 WHERE serie = ?1",
                    [serie],
                )?;
                note_by_key(c, assinada.chave.as_ref())
            })
            .await
    }

    /// The sale's live note (pending or authorized), if it has one.
    pub async fn nota_da_venda(&self, sale: &SaleId) -> Result<Option<NotaRegistro>> {
        let sale = sale.to_string();
        self.db.read(move |c| live_note(c, &sale)).await
    }

    /// Notes still to send, oldest first.
    pub async fn notas_pendentes(&self) -> Result<Vec<NotaRegistro>> {
        self.db
            .read(|c| {
                let mut st = c.prepare_cached(&format!(
                    "SELECT {NOTA_COLUMNS} FROM notas WHERE estado = 'pendente'
                     ORDER BY emitida_em, numero"
                ))?;
                let rows = st.query_map([], nota_from_row)?;
                Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            })
            .await
    }

    /// Records what a send of a pending note came to; a note no longer pending does not move.
    pub async fn registrar_envio(&self, chave: &str, situacao: Situacao) -> Result<NotaRegistro> {
        let chave = chave.to_string();
        self.db
            .write(move |c| {
                let (estado, protocolo, c_stat, motivo) = match situacao {
                    Situacao::Autorizada(p) => {
                        (EstadoNota::Autorizada, p.n_prot, Some(p.c_stat), None)
                    }
                    Situacao::Rejeitada(code, why) => {
                        (EstadoNota::Rejeitada, None, Some(code), Some(why))
                    }
                    Situacao::NumeroComOutraChave(why) => {
                        (EstadoNota::NumeroPerdido, None, Some(539), Some(why))
                    }
                    Situacao::ConsumoIndevido => (
                        EstadoNota::Pendente,
                        None,
                        Some(656),
                        Some("SEFAZ bloqueou o emitente por consumo indevido".to_string()),
                    ),
                    Situacao::SemResposta(why) => (EstadoNota::Pendente, None, None, Some(why)),
                };
                exec(
                    c,
                    "UPDATE notas SET estado = ?2, protocolo = ?3, c_stat = COALESCE(?4, c_stat),
                                      motivo = ?5, tentativas = tentativas + 1
                     WHERE chave = ?1 AND estado = 'pendente'",
                    params![chave, estado.as_str(), protocolo, c_stat, motivo],
                )?;
                note_by_key(c, &chave)
            })
            .await
    }
}
