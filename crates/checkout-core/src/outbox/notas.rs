//! The sale's NFC-e, written ahead like a payment attempt: the série's next number is taken and
//! the note signed and stored in one durable transaction, before any byte of it goes to SEFAZ;
//! a sale asked for its note again (a retry, a restart) gets the note it has, never a second
//! number; what SEFAZ says moves it from `pendente` once and only forward. A note sent normally
//! whose answer the customer could not wait for is replaced, in the same transaction that issues
//! it, by a note in contingência under the next number (`substituida`), and settled later:
//! SEFAZ never had it (`inutilizada`, its number declared unused) or did authorize it
//! (`a_cancelar`, its cancellation by substitution signed and stored in that same write, then
//! `cancelada` once SEFAZ registers it: [`cancelamento`]).

mod cancelamento;
mod horario;
pub use cancelamento::Cancelamento;

use super::*;
use crate::domain::Situacao;
use nfce::{NfceError, NotaAssinada};

/// Where a note stands at the till.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EstadoNota {
    /// Signed and stored; SEFAZ has not authorized it yet (or the till has not heard so).
    Pendente,
    /// Authorized: its protocol is kept with it.
    Autorizada,
    /// SEFAZ refused it as it is; the sale needs a person (and the number, an inutilização).
    Rejeitada,
    /// SEFAZ has its number under another key: the number is spent.
    NumeroPerdido,
    /// Sent normally, its answer not heard while the customer waited: the sale got a note in
    /// contingência instead, and this one is still to settle with SEFAZ.
    Substituida,
    /// Replaced, and SEFAZ never had it: its number is declared unused (the protocol kept).
    Inutilizada,
    /// Replaced, and SEFAZ had authorized it after all: the sale has two authorized notes until
    /// this one is cancelled by substitution (evento 110112, signed and stored with it, sent
    /// until SEFAZ registers it).
    ACancelar,
    /// Replaced, authorized, and cancelled by substitution: SEFAZ registered the event.
    Cancelada,
    /// Replaced, authorized, and SEFAZ refused its cancellation for good (the window past, …):
    /// the sale has two authorized notes, and only a person can settle it.
    CancelamentoRecusado,
}

impl EstadoNota {
    fn as_str(self) -> &'static str {
        match self {
            EstadoNota::Pendente => "pendente",
            EstadoNota::Autorizada => "autorizada",
            EstadoNota::Rejeitada => "rejeitada",
            EstadoNota::NumeroPerdido => "numero_perdido",
            EstadoNota::Substituida => "substituida",
            EstadoNota::Inutilizada => "inutilizada",
            EstadoNota::ACancelar => "a_cancelar",
            EstadoNota::Cancelada => "cancelada",
            EstadoNota::CancelamentoRecusado => "cancelamento_recusado",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pendente" => EstadoNota::Pendente,
            "autorizada" => EstadoNota::Autorizada,
            "rejeitada" => EstadoNota::Rejeitada,
            "numero_perdido" => EstadoNota::NumeroPerdido,
            "substituida" => EstadoNota::Substituida,
            "inutilizada" => EstadoNota::Inutilizada,
            "a_cancelar" => EstadoNota::ACancelar,
            "cancelada" => EstadoNota::Cancelada,
            "cancelamento_recusado" => EstadoNota::CancelamentoRecusado,
            _ => return None,
        })
    }
}

/// A note as the outbox keeps it (and the window is told of it, but its XML).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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
    #[serde(skip)]
    pub xml: String,
    /// The QR Code's text.
    pub qrcode: String,
    /// Where it stands.
    pub estado: EstadoNota,
    /// SEFAZ's protocol, once authorized (or its number declared unused).
    pub protocolo: Option<String>,
    /// When SEFAZ authorized it (`dhRecbto`, as SEFAZ wrote it).
    pub autorizada_em: Option<String>,
    /// SEFAZ's last code for it.
    pub c_stat: Option<u16>,
    /// Why it is not authorized yet, or was refused.
    pub motivo: Option<String>,
    /// Sends tried.
    pub tentativas: u32,
    /// When it was issued (till clock).
    pub emitida_em: UnixMillis,
    /// When it is due to be sent again (pending notes).
    pub proxima_tentativa: UnixMillis,
    /// The note in contingência that replaced it.
    pub substituta: Option<String>,
    /// Its signed cancellation by substitution (a note to cancel), sent as it is every time.
    #[serde(skip)]
    pub evento: Option<String>,
    /// The protocol of its cancellation, once SEFAZ registered it.
    pub cancelamento: Option<String>,
}

impl NotaRegistro {
    /// Issued in contingência (`tpEmis` 9).
    pub fn em_contingencia(&self) -> bool {
        self.tp_emis == 9
    }

    /// A note in contingência not yet authorized must reach SEFAZ by then (`prazo` after it was
    /// issued: the state's rule); `None` for any other note.
    pub fn enviar_ate(&self, prazo: std::time::Duration) -> Option<UnixMillis> {
        (self.em_contingencia() && self.estado == EstadoNota::Pendente)
            .then(|| self.emitida_em + prazo.as_millis() as UnixMillis)
    }
}

const NOTA_COLUMNS: &str = "chave, sale_id, serie, numero, tp_emis, total, xml, qrcode, estado, \
     protocolo, autorizada_em, c_stat, motivo, tentativas, emitida_em, proxima_tentativa, substituta, \
     evento, cancelamento";

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
        autorizada_em: r.get("autorizada_em")?,
        c_stat: r.get("c_stat")?,
        motivo: r.get("motivo")?,
        tentativas: r.get("tentativas")?,
        emitida_em: r.get("emitida_em")?,
        proxima_tentativa: r.get("proxima_tentativa")?,
        substituta: r.get("substituta")?,
        evento: r.get("evento")?,
        cancelamento: r.get("cancelamento")?,
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

/// How a replaced note was settled with SEFAZ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Desfecho {
    /// SEFAZ never had it: its number was declared unused under this protocol.
    Inutilizada(String),
    /// SEFAZ had authorized it under this protocol; `evento` cancels it by substitution
    /// (signed, stored with it in the same write, then sent).
    Autorizada {
        /// The note's authorization protocol.
        protocolo: String,
        /// The signed event.
        evento: String,
    },
}

/// The till's fiscal state: where it began issuing notes, and until when SEFAZ blocks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fiscal {
    /// The last attempt stored before the till issued notes (its row): a sale paid by it or an
    /// earlier one was sold before, and gets no note.
    pub apos_tentativa: i64,
    /// SEFAZ refused this emitter for consumo indevido (656) until then: send nothing before.
    pub bloqueada_ate: UnixMillis,
}

impl Outbox {
    /// The sale's live note, or a new one: série `serie`'s next number is taken, the note made
    /// and signed by `assinar(numero)`, and stored, in one durable transaction — before any byte
    /// of it goes to SEFAZ. A sign that fails takes no number.
    ///
    /// With `substitui`, the sale's live note is that pending note, sent normally, whose answer
    /// the customer could not wait for: it leaves the sale's live notes (`substituida`) in the
    /// same transaction, and the new note (in contingência) takes its place. If the sale's live
    /// note is another by then (or it was authorized meanwhile), that one is returned unchanged.
    pub async fn emitir_nota<F>(
        &self,
        sale: SaleId,
        serie: u16,
        now: UnixMillis,
        substitui: Option<String>,
        assinar: F,
    ) -> Result<NotaRegistro>
    where
        F: FnOnce(u32) -> std::result::Result<NotaAssinada, NfceError> + Send + 'static,
    {
        self.db
            .write(move |c| {
                if let Some(nota) = live_note(c, sale.as_ref())? {
                    let replaces = substitui.as_deref() == Some(nota.chave.as_str())
                        && nota.estado == EstadoNota::Pendente;
                    if !replaces {
                        return Ok(nota);
                    }
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
                if let Some(old) = &substitui {
                    exec(
                        c,
                        "UPDATE notas SET estado = 'substituida', substituta = ?2
                         WHERE chave = ?1 AND estado = 'pendente'",
                        params![old, assinada.chave.as_ref()],
                    )?;
                }
                exec(
                    c,
                    "INSERT INTO notas (chave, sale_id, serie, numero, tp_emis, total, xml, qrcode,
                                        estado, emitida_em, proxima_tentativa)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pendente', ?9, ?9)",
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

    /// Every note of the sale, oldest first (a replaced one and the note that replaced it).
    pub async fn notas_da_venda(&self, sale: &SaleId) -> Result<Vec<NotaRegistro>> {
        let sale = sale.to_string();
        self.select_notas(
            "WHERE sale_id = ?1 ORDER BY emitida_em, numero",
            vec![sale.into()],
        )
        .await
    }

    /// Every note, oldest first.
    pub async fn notas(&self) -> Result<Vec<NotaRegistro>> {
        self.select_notas("ORDER BY emitida_em, numero", vec![])
            .await
    }

    /// Notes still to send, oldest first.
    pub async fn notas_pendentes(&self) -> Result<Vec<NotaRegistro>> {
        self.select_notas(
            "WHERE estado = 'pendente' ORDER BY emitida_em, numero",
            vec![],
        )
        .await
    }

    /// Pending notes due to be sent at `now`, oldest first (at most `limit`).
    pub async fn notas_a_enviar(&self, now: UnixMillis, limit: u32) -> Result<Vec<NotaRegistro>> {
        self.select_notas(
            "WHERE estado = 'pendente' AND proxima_tentativa <= ?1
             ORDER BY emitida_em, numero LIMIT ?2",
            vec![now.into(), i64::from(limit).into()],
        )
        .await
    }

    /// Notes issued in `[from, to)`, oldest first.
    pub async fn notas_entre(&self, from: UnixMillis, to: UnixMillis) -> Result<Vec<NotaRegistro>> {
        self.select_notas(
            "WHERE emitida_em >= ?1 AND emitida_em < ?2 ORDER BY emitida_em, numero",
            vec![from.into(), to.into()],
        )
        .await
    }

    /// Every note not settled yet (pending, refused, number lost, set aside, to cancel), of any
    /// day, oldest first.
    pub async fn notas_abertas(&self) -> Result<Vec<NotaRegistro>> {
        self.select_notas(
            "WHERE estado NOT IN ('autorizada', 'inutilizada', 'cancelada')
             ORDER BY emitida_em, numero",
            vec![],
        )
        .await
    }

    /// Replaced notes not yet settled with SEFAZ and due to be asked about at `now`, oldest
    /// first.
    pub async fn notas_substituidas(&self, now: UnixMillis) -> Result<Vec<NotaRegistro>> {
        self.select_notas(
            "WHERE estado = 'substituida' AND proxima_tentativa <= ?1
             ORDER BY emitida_em, numero",
            vec![now.into()],
        )
        .await
    }

    /// Counts a try at a note that settled nothing (`motivo`) and makes it due again at
    /// `proxima`.
    pub async fn adiar_nota(
        &self,
        chave: &str,
        motivo: String,
        proxima: UnixMillis,
    ) -> Result<NotaRegistro> {
        let chave = chave.to_string();
        self.db
            .write(move |c| {
                exec(
                    c,
                    "UPDATE notas SET tentativas = tentativas + 1, motivo = ?2,
                                      proxima_tentativa = ?3
                     WHERE chave = ?1",
                    params![chave, motivo, proxima],
                )?;
                note_by_key(c, &chave)
            })
            .await
    }

    async fn select_notas(
        &self,
        filter: &'static str,
        args: Vec<rusqlite::types::Value>,
    ) -> Result<Vec<NotaRegistro>> {
        self.db
            .read(move |c| {
                let mut st =
                    c.prepare_cached(&format!("SELECT {NOTA_COLUMNS} FROM notas {filter}"))?;
                let rows = st.query_map(rusqlite::params_from_iter(args), nota_from_row)?;
                Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            })
            .await
    }

    /// Sales with an approved payment stored after attempt row `apos` and no note at all, the
    /// latest paid first (at most `limit`): the ones to look at for a note. Whether each is paid
    /// in full is the caller's: a sale paid back or given up before its note stays here unnoted,
    /// and sinks below every sale paid after it.
    pub async fn vendas_sem_nota(&self, apos: i64, limit: u32) -> Result<Vec<SaleId>> {
        self.db
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT a.sale_id FROM attempts a
                     WHERE a.kind = 'pagamento' AND a.state = 'aprovado' AND a.rowid > ?1
                       AND NOT EXISTS (SELECT 1 FROM notas n WHERE n.sale_id = a.sale_id)
                     GROUP BY a.sale_id ORDER BY max(a.rowid) DESC LIMIT ?2",
                )?;
                let rows = st.query_map(params![apos, limit], |r| r.get::<_, String>(0))?;
                rows.map(|s| {
                    let s = s?;
                    SaleId::parse(&s).map_err(|e| CoreError::Invalid(format!("{s}: {e}")))
                })
                .collect()
            })
            .await
    }

    /// Fixes where this till's notes begin, the first time it issues notes: after every attempt
    /// stored so far (a durable write, once; later calls change nothing).
    pub async fn iniciar_fiscal(&self) -> Result<()> {
        self.db
            .write(move |c| {
                exec(
                    c,
                    "INSERT INTO fiscal (id, apos_tentativa)
                     SELECT 1, COALESCE(MAX(rowid), 0) FROM attempts WHERE true
                     ON CONFLICT (id) DO NOTHING",
                    [],
                )?;
                Ok(())
            })
            .await
    }

    /// The till's fiscal state ([`Outbox::iniciar_fiscal`] made it): a read, no write.
    pub async fn fiscal(&self) -> Result<Fiscal> {
        self.db
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT apos_tentativa, bloqueada_ate FROM fiscal WHERE id = 1",
                    [],
                    |r| {
                        Ok(Fiscal {
                            apos_tentativa: r.get(0)?,
                            bloqueada_ate: r.get(1)?,
                        })
                    },
                )?)
            })
            .await
    }

    /// Records SEFAZ's block (656) until `ate`.
    pub async fn bloquear_fiscal(&self, ate: UnixMillis) -> Result<()> {
        self.db
            .write(move |c| {
                exec(
                    c,
                    "UPDATE fiscal SET bloqueada_ate = ?1 WHERE id = 1",
                    [ate],
                )?;
                Ok(())
            })
            .await
    }

    /// Records what a send of a pending note came to, and when it is due again if it is still
    /// pending; a note no longer pending does not move.
    pub async fn registrar_envio(
        &self,
        chave: &str,
        situacao: Situacao,
        proxima: UnixMillis,
    ) -> Result<NotaRegistro> {
        let chave = chave.to_string();
        self.db
            .write(move |c| {
                let (estado, protocolo, c_stat, motivo) = match situacao {
                    Situacao::Autorizada(p) => (
                        EstadoNota::Autorizada,
                        Some((p.n_prot.unwrap_or_default(), p.dh_recbto)),
                        Some(p.c_stat),
                        None,
                    ),
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
                let (protocolo, autorizada_em) = protocolo.unzip();
                exec(
                    c,
                    "UPDATE notas SET estado = ?2, protocolo = ?3, c_stat = COALESCE(?4, c_stat),
                                      motivo = ?5, tentativas = tentativas + 1,
                                      proxima_tentativa = ?6, autorizada_em = ?7
                     WHERE chave = ?1 AND estado = 'pendente'",
                    params![
                        chave,
                        estado.as_str(),
                        protocolo,
                        c_stat,
                        motivo,
                        proxima,
                        autorizada_em
                    ],
                )?;
                note_by_key(c, &chave)
            })
            .await
    }

    /// Records how a replaced note was settled with SEFAZ.
    pub async fn resolver_substituida(
        &self,
        chave: &str,
        desfecho: Desfecho,
    ) -> Result<NotaRegistro> {
        let chave = chave.to_string();
        self.db
            .write(move |c| {
                let (estado, protocolo, evento) = match desfecho {
                    Desfecho::Inutilizada(p) => (EstadoNota::Inutilizada, p, None),
                    Desfecho::Autorizada { protocolo, evento } => {
                        (EstadoNota::ACancelar, protocolo, Some(evento))
                    }
                };
                exec(
                    c,
                    "UPDATE notas SET estado = ?2, protocolo = ?3, evento = ?4
                     WHERE chave = ?1 AND estado = 'substituida'",
                    params![chave, estado.as_str(), protocolo, evento],
                )?;
                note_by_key(c, &chave)
            })
            .await
    }
}
