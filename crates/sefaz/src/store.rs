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
    // One sequence for notes and inutilizações, as one authorizer numbers its protocols.
    let seq: i64 = tx.query_row(
        "SELECT (SELECT COUNT(*) FROM notas) + (SELECT COUNT(*) FROM inutilizadas) + 1",
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
            .query_row("SELECT * FROM notas WHERE chave = ?1", [e.chave], row)
            .optional()?;
        if let Some(a) = by_key {
            return Ok(Registro::MesmaChave(a));
        }
        let by_number = tx
            .query_row(
                "SELECT * FROM notas WHERE cnpj = ?1 AND modelo = ?2 AND serie = ?3 AND numero = ?4",
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
        let a = tx.query_row("SELECT * FROM notas WHERE chave = ?1", [e.chave], row)?;
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
    pub fn nota(&self, chave: &str) -> rusqlite::Result<Option<Autorizada>> {
        self.conn()
            .query_row("SELECT * FROM notas WHERE chave = ?1", [chave], row)
            .optional()
    }

    /// Every note authorized, in order.
    pub fn notas(&self) -> rusqlite::Result<Vec<Autorizada>> {
        let c = self.conn();
        let mut st = c.prepare("SELECT * FROM notas ORDER BY n_prot")?;
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
        })
    }
}
