//! The simulator's own store, in its own SQLite file (`synchronous=FULL`, files 0600): one row
//! per authorized note — its key the primary key, its (CNPJ, modelo, série, número) `UNIQUE`, as
//! SEFAZ's own base decides 204 and 539 — and every rejection, which the 656 rule counts.

use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS notas (
    chave       TEXT PRIMARY KEY,
    cnpj        TEXT NOT NULL,
    modelo      INTEGER NOT NULL,
    serie       INTEGER NOT NULL,
    numero      INTEGER NOT NULL,
    tp_emis     INTEGER NOT NULL,
    valor       TEXT NOT NULL,
    n_prot      TEXT NOT NULL UNIQUE,
    dh_recbto   TEXT NOT NULL,
    dig_val     TEXT NOT NULL,
    xml         TEXT NOT NULL,
    recebida_ms INTEGER NOT NULL,
    UNIQUE (cnpj, modelo, serie, numero)
);
CREATE TABLE IF NOT EXISTS rejeicoes (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    cnpj   TEXT NOT NULL,
    chave  TEXT,
    c_stat INTEGER NOT NULL,
    em_ms  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS eventos (
    n_prot     TEXT PRIMARY KEY,
    chave      TEXT NOT NULL REFERENCES notas (chave),
    tp_evento  TEXT NOT NULL,
    n_seq      INTEGER NOT NULL,
    substituta TEXT,
    dh_reg     TEXT NOT NULL,
    xml        TEXT NOT NULL,
    UNIQUE (chave, tp_evento, n_seq)
);
CREATE INDEX IF NOT EXISTS rejeicoes_por_cnpj ON rejeicoes (cnpj, em_ms);
CREATE TABLE IF NOT EXISTS inutilizadas (
    n_prot    TEXT PRIMARY KEY,
    cnpj      TEXT NOT NULL,
    modelo    INTEGER NOT NULL,
    serie     INTEGER NOT NULL,
    inicio    INTEGER NOT NULL,
    fim       INTEGER NOT NULL CHECK (fim >= inicio),
    dh_recbto TEXT NOT NULL,
    xml       TEXT NOT NULL,
    UNIQUE (cnpj, modelo, serie, inicio, fim)
);
";

/// A note as read: its row and the protocol of the event that cancelled it, if one did.
const NOTA: &str = "SELECT n.*, (SELECT e.n_prot FROM eventos e WHERE e.chave = n.chave
                                 AND e.tp_evento IN ('110111', '110112')) AS cancelamento
                    FROM notas n";

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// An authorized note as SEFAZ keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Autorizada {
    /// Its key.
    pub chave: String,
    /// The emitter.
    pub cnpj: String,
    /// Série.
    pub serie: u16,
    /// Número.
    pub numero: u32,
    /// `tpEmis` (1 normal, 9 contingência).
    pub tp_emis: u8,
    /// `vNF`.
    pub valor: String,
    /// Protocol number.
    pub n_prot: String,
    /// When it was received.
    pub dh_recbto: String,
    /// The digest of what was authorized.
    pub dig_val: String,
    /// The protocol of the event that cancelled it (110111 or 110112), if one did.
    pub cancelamento: Option<String>,
    /// When it was received (this base's clock).
    #[serde(skip)]
    pub recebida_ms: i64,
}

/// What a note is, for the base: the fields SEFAZ decides on.
#[derive(Debug, Clone)]
pub struct Entrada<'a> {
    /// Key, emitter, modelo, série, número, type of issue, total, digest, the note.
    pub chave: &'a str,
    /// Emitter.
    pub cnpj: &'a str,
    /// 65.
    pub modelo: u8,
    /// Série.
    pub serie: u16,
    /// Número.
    pub numero: u32,
    /// `tpEmis`.
    pub tp_emis: u8,
    /// `vNF`.
    pub valor: &'a str,
    /// `DigestValue`.
    pub dig_val: &'a str,
    /// The note as received.
    pub xml: &'a str,
}

/// What the base says of a note sent for authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registro {
    /// Authorized now.
    Nova(Autorizada),
    /// Its key was authorized before (204).
    MesmaChave(Autorizada),
    /// Its number was authorized under another key (539).
    OutraChave(Autorizada),
    /// Its number was declared unused (206).
    Inutilizada,
}

/// An event that cancels a note, for the base.
#[derive(Debug, Clone)]
pub struct EventoEntrada<'a> {
    /// The note.
    pub chave: &'a str,
    /// 110111 or 110112.
    pub tp_evento: &'a str,
    /// `nSeqEvento`.
    pub n_seq: u8,
    /// The note's authorization protocol, as the event names it.
    pub n_prot: &'a str,
    /// The note that replaced it (110112).
    pub substituta: Option<&'a str>,
    /// The event as received.
    pub xml: &'a str,
}

/// What the base says of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistroEvento {
    /// Registered now, under this protocol (135).
    Novo(String),
    /// This very event was registered before (573).
    Duplicado,
    /// No note under the key (494).
    NotaInexistente,
    /// The note was cancelled by another event (218).
    JaCancelada,
    /// The protocol is not the note's (222).
    ProtocoloDiverge,
    /// Past the state's window (501).
    ForaDoPrazo,
    /// The replacing note is not an authorized, uncancelled note of the same emitter (this
    /// simulator's code 694; the state's table names its own).
    SubstitutaInvalida,
}

/// A range of numbers to declare unused.
#[derive(Debug, Clone)]
pub struct Faixa<'a> {
    /// Emitter.
    pub cnpj: &'a str,
    /// 65.
    pub modelo: u8,
    /// Série.
    pub serie: u16,
    /// First number.
    pub inicio: u32,
    /// Last number.
    pub fim: u32,
    /// The request as received.
    pub xml: &'a str,
}

/// What the base says of an inutilização.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistroInutilizacao {
    /// Declared now, under this protocol (102).
    Nova(String),
    /// This very range was declared before (563).
    MesmaFaixa,
    /// Part of the range was declared before (256).
    Sobreposta,
    /// A number of the range is an authorized note (241).
    NumeroUsado,
}

fn protocolo(
    tx: &rusqlite::Transaction<'_>,
    c_uf: u8,
    dh_recbto: &str,
) -> rusqlite::Result<String> {
    // One sequence for notes, inutilizações and events, as one authorizer numbers its protocols.
    let seq: i64 = tx.query_row(
        "SELECT (SELECT COUNT(*) FROM notas) + (SELECT COUNT(*) FROM inutilizadas)
              + (SELECT COUNT(*) FROM eventos) + 1",
        [],
        |r| r.get(0),
    )?;
    let year = &dh_recbto[2..4];
    Ok(format!("1{c_uf:02}{year}{seq:010}"))
}

/// Counts for tests and QA.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Contagens {
    /// Notes authorized.
    pub autorizadas: u64,
    /// Rejections answered.
    pub rejeicoes: u64,
    /// Ranges declared unused.
    pub inutilizacoes: u64,
    /// Notes cancelled by an event.
    pub cancelamentos: u64,
}

/// The store.
pub struct Base(Mutex<Connection>);

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Autorizada> {
    Ok(Autorizada {
        chave: r.get("chave")?,
        cnpj: r.get("cnpj")?,
        serie: r.get("serie")?,
        numero: r.get("numero")?,
        tp_emis: r.get("tp_emis")?,
        valor: r.get("valor")?,
        n_prot: r.get("n_prot")?,
        dh_recbto: r.get("dh_recbto")?,
        dig_val: r.get("dig_val")?,
        cancelamento: r.get("cancelamento")?,
        recebida_ms: r.get("recebida_ms")?,
    })
}

impl Base {
    /// Opens (or creates) the file.
    pub fn open(path: &Path) -> rusqlite::Result<Self> {
        provider_kit::own_file(path).map_err(|e| {
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                Some(format!("{}: {e}", path.display())),
            )
        })?;
        let c = Connection::open(path)?;
        c.pragma_update(None, "journal_mode", "WAL")?;
        c.pragma_update(None, "synchronous", "FULL")?;
        c.busy_timeout(std::time::Duration::from_secs(5))?;
        c.execute_batch(SCHEMA)?;
        Ok(Base(Mutex::new(c)))
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Authorizes the note unless its key or its number is already authorized, in one
    /// transaction: whatever two concurrent sends do, one number has one key.
    pub fn autorizar(
        &self,
        e: &Entrada<'_>,
        c_uf: u8,
        dh_recbto: &str,
    ) -> rusqlite::Result<Registro> {
        let mut c = self.conn();
        let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let by_key = tx
            .query_row(&format!("{NOTA} WHERE n.chave = ?1"), [e.chave], row)
            .optional()?;
        if let Some(a) = by_key {
            return Ok(Registro::MesmaChave(a));
        }
        let by_number = tx
            .query_row(
                &format!(
                    "{NOTA} WHERE n.cnpj = ?1 AND n.modelo = ?2 AND n.serie = ?3 AND n.numero = ?4"
                ),
                params![e.cnpj, e.modelo, e.serie, e.numero],
                row,
            )
            .optional()?;
        if let Some(a) = by_number {
            return Ok(Registro::OutraChave(a));
        }
        let unused: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM inutilizadas WHERE cnpj = ?1 AND modelo = ?2
                              AND serie = ?3 AND ?4 BETWEEN inicio AND fim)",
            params![e.cnpj, e.modelo, e.serie, e.numero],
            |r| r.get(0),
        )?;
        if unused {
            return Ok(Registro::Inutilizada);
        }
        let n_prot = protocolo(&tx, c_uf, dh_recbto)?;
        tx.execute(
            "INSERT INTO notas (chave, cnpj, modelo, serie, numero, tp_emis, valor, n_prot,
                                dh_recbto, dig_val, xml, recebida_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                e.chave,
                e.cnpj,
                e.modelo,
                e.serie,
                e.numero,
                e.tp_emis,
                e.valor,
                n_prot,
                dh_recbto,
                e.dig_val,
                e.xml,
                now_ms()
            ],
        )?;
        let a = tx.query_row(&format!("{NOTA} WHERE n.chave = ?1"), [e.chave], row)?;
        tx.commit()?;
        Ok(Registro::Nova(a))
    }

    /// Declares a range unused unless a number of it is a note or was declared before, in one
    /// transaction.
    pub fn inutilizar(
        &self,
        f: &Faixa<'_>,
        c_uf: u8,
        dh_recbto: &str,
    ) -> rusqlite::Result<RegistroInutilizacao> {
        let mut c = self.conn();
        let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let same: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM inutilizadas WHERE cnpj = ?1 AND modelo = ?2
                              AND serie = ?3 AND inicio = ?4 AND fim = ?5)",
            params![f.cnpj, f.modelo, f.serie, f.inicio, f.fim],
            |r| r.get(0),
        )?;
        if same {
            return Ok(RegistroInutilizacao::MesmaFaixa);
        }
        let overlap: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM inutilizadas WHERE cnpj = ?1 AND modelo = ?2
                              AND serie = ?3 AND inicio <= ?5 AND fim >= ?4)",
            params![f.cnpj, f.modelo, f.serie, f.inicio, f.fim],
            |r| r.get(0),
        )?;
        if overlap {
            return Ok(RegistroInutilizacao::Sobreposta);
        }
        let used: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM notas WHERE cnpj = ?1 AND modelo = ?2
                              AND serie = ?3 AND numero BETWEEN ?4 AND ?5)",
            params![f.cnpj, f.modelo, f.serie, f.inicio, f.fim],
            |r| r.get(0),
        )?;
        if used {
            return Ok(RegistroInutilizacao::NumeroUsado);
        }
        let n_prot = protocolo(&tx, c_uf, dh_recbto)?;
        tx.execute(
            "INSERT INTO inutilizadas (n_prot, cnpj, modelo, serie, inicio, fim, dh_recbto, xml)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![n_prot, f.cnpj, f.modelo, f.serie, f.inicio, f.fim, dh_recbto, f.xml],
        )?;
        tx.commit()?;
        Ok(RegistroInutilizacao::Nova(n_prot))
    }

    /// The note of a key, if authorized.
    /// Registers an event that cancels a note (110111, or 110112 naming the note that replaced
    /// it), deciding as SEFAZ's base does: one event per (key, type, sequence), a note cancelled
    /// once, the protocol the note's own, the replacing note authorized, within the window
    /// (`prazo_ms` after the note was received).
    pub fn cancelar(
        &self,
        e: &EventoEntrada<'_>,
        c_uf: u8,
        dh_reg: &str,
        prazo_ms: i64,
    ) -> rusqlite::Result<RegistroEvento> {
        let mut c = self.conn();
        let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let same: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM eventos WHERE chave = ?1 AND tp_evento = ?2
                              AND n_seq = ?3)",
            params![e.chave, e.tp_evento, e.n_seq],
            |r| r.get(0),
        )?;
        if same {
            return Ok(RegistroEvento::Duplicado);
        }
        let found = tx
            .query_row(&format!("{NOTA} WHERE n.chave = ?1"), [e.chave], row)
            .optional()?;
        let Some(nota) = found else {
            return Ok(RegistroEvento::NotaInexistente);
        };
        if nota.cancelamento.is_some() {
            return Ok(RegistroEvento::JaCancelada);
        }
        if nota.n_prot != e.n_prot {
            return Ok(RegistroEvento::ProtocoloDiverge);
        }
        if now_ms() > nota.recebida_ms + prazo_ms {
            return Ok(RegistroEvento::ForaDoPrazo);
        }
        if let Some(substituta) = e.substituta {
            let other = tx
                .query_row(&format!("{NOTA} WHERE n.chave = ?1"), [substituta], row)
                .optional()?;
            if !other.is_some_and(|o| o.cancelamento.is_none() && o.cnpj == nota.cnpj) {
                return Ok(RegistroEvento::SubstitutaInvalida);
            }
        }
        let n_prot = protocolo(&tx, c_uf, dh_reg)?;
        tx.execute(
            "INSERT INTO eventos (n_prot, chave, tp_evento, n_seq, substituta, dh_reg, xml)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                n_prot,
                e.chave,
                e.tp_evento,
                e.n_seq,
                e.substituta,
                dh_reg,
                e.xml
            ],
        )?;
        tx.commit()?;
        Ok(RegistroEvento::Novo(n_prot))
    }

    pub fn nota(&self, chave: &str) -> rusqlite::Result<Option<Autorizada>> {
        self.conn()
            .query_row(&format!("{NOTA} WHERE n.chave = ?1"), [chave], row)
            .optional()
    }

    /// The events registered for the note `chave`, in order.
    pub fn eventos(&self, chave: &str) -> rusqlite::Result<Vec<nfce::soap::EventoRegistrado>> {
        let c = self.conn();
        let mut st = c.prepare(
            "SELECT xml, tp_evento, n_prot, dh_reg, n_seq FROM eventos WHERE chave = ?1 ORDER BY n_prot",
        )?;
        let rows = st.query_map([chave], |r| {
            Ok(nfce::soap::EventoRegistrado {
                evento: r.get(0)?,
                tp_evento: r.get(1)?,
                n_prot: r.get(2)?,
                dh_reg: r.get(3)?,
                n_seq: r.get(4)?,
            })
        })?;
        rows.collect()
    }

    /// Every note authorized, in order.
    pub fn notas(&self) -> rusqlite::Result<Vec<Autorizada>> {
        let c = self.conn();
        let mut st = c.prepare(&format!("{NOTA} ORDER BY n.n_prot"))?;
        let rows = st.query_map([], row)?;
        rows.collect()
    }

    /// Records a rejection of the emitter's.
    pub fn rejeitar(&self, cnpj: &str, chave: Option<&str>, c_stat: u16) -> rusqlite::Result<()> {
        self.conn()
            .execute(
                "INSERT INTO rejeicoes (cnpj, chave, c_stat, em_ms) VALUES (?1, ?2, ?3, ?4)",
                params![cnpj, chave, c_stat, now_ms()],
            )
            .map(|_| ())
    }

    /// The emitter's rejections since `desde_ms`.
    pub fn rejeicoes_desde(&self, cnpj: &str, desde_ms: i64) -> rusqlite::Result<u64> {
        self.conn().query_row(
            "SELECT COUNT(*) FROM rejeicoes WHERE cnpj = ?1 AND em_ms >= ?2",
            params![cnpj, desde_ms],
            |r| r.get(0),
        )
    }

    /// Counts.
    pub fn contagens(&self) -> rusqlite::Result<Contagens> {
        let c = self.conn();
        Ok(Contagens {
            autorizadas: c.query_row("SELECT COUNT(*) FROM notas", [], |r| r.get(0))?,
            rejeicoes: c.query_row("SELECT COUNT(*) FROM rejeicoes", [], |r| r.get(0))?,
            inutilizacoes: c.query_row("SELECT COUNT(*) FROM inutilizadas", [], |r| r.get(0))?,
            cancelamentos: c.query_row("SELECT COUNT(*) FROM eventos", [], |r| r.get(0))?,
        })
    }
}
