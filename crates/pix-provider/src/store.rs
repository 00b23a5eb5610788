//! The simulator's own SQLite file: charges (`cob`), the Pix received for them, devoluções, the
//! webhook registered per key, and every callback delivery tried. `txid`, `endToEndId` and a
//! devolução's `(e2eid, id)` are primary keys: the database, not a read, refuses a second one.

use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::Mutex;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(i64::MAX)
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cob (
    txid        TEXT    PRIMARY KEY,
    valor       INTEGER NOT NULL CHECK (valor > 0),
    chave       TEXT    NOT NULL,
    expiracao   INTEGER NOT NULL CHECK (expiracao > 0),
    criacao     INTEGER NOT NULL,
    status      TEXT    NOT NULL CHECK (status IN ('ATIVA', 'CONCLUIDA', 'REMOVIDA_PELO_USUARIO_RECEBEDOR')),
    revisao     INTEGER NOT NULL DEFAULT 0,
    location    TEXT    NOT NULL,
    solicitacao TEXT
);
CREATE INDEX IF NOT EXISTS cob_chave ON cob (chave);
CREATE TABLE IF NOT EXISTS pix (
    e2eid   TEXT    PRIMARY KEY,
    txid    TEXT    NOT NULL REFERENCES cob (txid),
    valor   INTEGER NOT NULL CHECK (valor > 0),
    horario INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS pix_horario ON pix (horario);
CREATE TABLE IF NOT EXISTS devolucao (
    e2eid     TEXT    NOT NULL REFERENCES pix (e2eid),
    id        TEXT    NOT NULL,
    rtr_id    TEXT    NOT NULL UNIQUE,
    valor     INTEGER NOT NULL CHECK (valor > 0),
    status    TEXT    NOT NULL CHECK (status IN ('EM_PROCESSAMENTO', 'DEVOLVIDO', 'NAO_REALIZADO')),
    horario   INTEGER NOT NULL,
    PRIMARY KEY (e2eid, id)
);
CREATE TABLE IF NOT EXISTS webhook (
    chave TEXT PRIMARY KEY,
    url   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entrega (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id TEXT    NOT NULL,
    corpo      TEXT    NOT NULL,
    status     INTEGER,
    erro       TEXT,
    enviado_em INTEGER NOT NULL
);
";

/// A charge as stored.
#[derive(Debug, Clone)]
pub struct Cob {
    pub txid: String,
    pub valor: i64,
    pub chave: String,
    pub expiracao: i64,
    pub criacao: i64,
    pub status: String,
    pub revisao: i64,
    pub location: String,
    pub solicitacao: Option<String>,
    /// The `loc.id` (the row's number).
    pub loc_id: i64,
    pub pix: Vec<PixRecebido>,
}

impl Cob {
    /// True once its time is up (it can no longer be paid at a PSP that follows `#319`).
    pub fn expired(&self, now: i64) -> bool {
        now > self.criacao + self.expiracao * 1000
    }
}

/// A Pix received.
#[derive(Debug, Clone)]
pub struct PixRecebido {
    pub e2eid: String,
    pub txid: String,
    pub valor: i64,
    pub horario: i64,
    pub devolucoes: Vec<Devolucao>,
}

/// A devolução.
#[derive(Debug, Clone)]
pub struct Devolucao {
    pub id: String,
    pub rtr_id: String,
    pub valor: i64,
    pub status: String,
    pub horario: i64,
}

/// Which Pix received a consulta lists (`GET /pix`): every one the simulator has carries a txid,
/// so `txIdPresente=false` lists none.
#[derive(Debug, Clone, Default)]
pub struct FiltroPix {
    /// From, in milliseconds since the epoch (inclusive).
    pub inicio: i64,
    /// To, likewise (inclusive).
    pub fim: i64,
    /// Only the Pix of this charge.
    pub txid: Option<String>,
    /// Only Pix with (true) or without (false) a txid.
    pub txid_presente: Option<bool>,
    /// Only Pix with (true) or without (false) a devolução.
    pub devolucao_presente: Option<bool>,
}

/// What the simulator did, counted from its own tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Charges created (`PUT /cob`).
    pub cobrancas: i64,
    /// Pix received (money that reached the merchant).
    pub pix: i64,
    /// Devoluções made.
    pub devolucoes: i64,
    /// Sum of the devoluções, in centavos.
    pub devolvido: i64,
    /// Callback deliveries tried.
    pub entregas: i64,
    /// Callback deliveries the receiver answered 2xx.
    pub entregas_aceitas: i64,
}

/// Why a write was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("{0}")]
    Invalid(String),
    #[error("não encontrado")]
    NotFound,
    #[error(transparent)]
    Db(#[from] rusqlite::Error),
}

/// The simulator's database.
pub struct PixDb(Mutex<Connection>);

impl PixDb {
    /// Opens (and creates) the file.
    pub fn open(path: &Path) -> rusqlite::Result<Self> {
        // Made the owner's alone before SQLite opens it (its -wal and -shm files take the same
        // mode); a path SQLite cannot open either is its error to report.
        let _ = provider_kit::own_file(path);
        let c = Connection::open(path)?;
        c.pragma_update(None, "journal_mode", "WAL")?;
        c.pragma_update(None, "synchronous", "FULL")?;
        c.busy_timeout(std::time::Duration::from_secs(5))?;
        c.execute_batch(SCHEMA)?;
        Ok(Self(Mutex::new(c)))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, Refused>) -> Result<T, Refused> {
        let mut c = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut c)
    }

    /// Creates a charge; a `txid` already used is refused.
    pub fn create(&self, cob: &Cob) -> Result<Cob, Refused> {
        self.with(|c| {
            let inserted = c.execute(
                "INSERT INTO cob (txid, valor, chave, expiracao, criacao, status, location, solicitacao)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'ATIVA', ?6, ?7) ON CONFLICT (txid) DO NOTHING",
                params![cob.txid, cob.valor, cob.chave, cob.expiracao, cob.criacao, cob.location, cob.solicitacao],
            )?;
            if inserted == 0 {
                return Err(Refused::Invalid("O txid informado já foi utilizado.".into()));
            }
            read_cob(c, &cob.txid)?.ok_or(Refused::NotFound)
        })
    }

    /// A charge with the Pix received for it.
    pub fn cob(&self, txid: &str) -> Result<Option<Cob>, Refused> {
        self.with(|c| read_cob(c, txid))
    }

    /// Removes an active charge (idempotent); a paid one is refused.
    pub fn remove(&self, txid: &str) -> Result<Cob, Refused> {
        self.with(|c| {
            let tx = c.transaction()?;
            let cob = read_cob(&tx, txid)?.ok_or(Refused::NotFound)?;
            match cob.status.as_str() {
                "CONCLUIDA" => return Err(Refused::Invalid("A cobrança já foi paga.".into())),
                "ATIVA" => {
                    tx.execute(
                        "UPDATE cob SET status = 'REMOVIDA_PELO_USUARIO_RECEBEDOR', revisao = revisao + 1 WHERE txid = ?1",
                        [txid],
                    )?;
                }
                _ => {}
            }
            let cob = read_cob(&tx, txid)?.ok_or(Refused::NotFound)?;
            tx.commit()?;
            Ok(cob)
        })
    }

    /// The customer pays: a Pix for the charge's amount. A charge already paid, or (unless
    /// `accept_inactive`) removed or expired, is refused as a PSP following `#319` refuses it.
    pub fn pay(
        &self,
        txid: &str,
        e2eid: &str,
        accept_inactive: bool,
    ) -> Result<PixRecebido, Refused> {
        let now = now_ms();
        self.with(|c| {
            let tx = c.transaction()?;
            let cob = read_cob(&tx, txid)?.ok_or(Refused::NotFound)?;
            if cob.status == "CONCLUIDA" || !cob.pix.is_empty() {
                return Err(Refused::Invalid("cobrança já paga".into()));
            }
            let inactive = cob.status != "ATIVA" || cob.expired(now);
            if inactive && !accept_inactive {
                return Err(Refused::Invalid("cobrança expirada ou removida".into()));
            }
            tx.execute(
                "INSERT INTO pix (e2eid, txid, valor, horario) VALUES (?1, ?2, ?3, ?4)",
                params![e2eid, txid, cob.valor, now],
            )?;
            tx.execute(
                "UPDATE cob SET status = 'CONCLUIDA' WHERE txid = ?1 AND status = 'ATIVA'",
                [txid],
            )?;
            tx.commit()?;
            Ok(PixRecebido {
                e2eid: e2eid.to_string(),
                txid: txid.to_string(),
                valor: cob.valor,
                horario: now,
                devolucoes: Vec::new(),
            })
        })
    }

    /// A Pix received, by end-to-end id.
    pub fn pix(&self, e2eid: &str) -> Result<Option<PixRecebido>, Refused> {
        self.with(|c| read_pix(c, e2eid))
    }

    /// The Pix received with `horario` in `[inicio, fim]` that pass the filter, oldest first:
    /// `limit` of them from the `offset`-th, and how many pass in all.
    pub fn pix_between(
        &self,
        f: &FiltroPix,
        offset: i64,
        limit: i64,
    ) -> Result<(Vec<PixRecebido>, i64), Refused> {
        self.with(|c| {
            const WHERE: &str = "FROM pix p WHERE p.horario BETWEEN ?1 AND ?2
                 AND (?3 IS NULL OR p.txid = ?3)
                 AND (?4 IS NULL OR ?4 = 1)
                 AND (?5 IS NULL OR ?5 = EXISTS (SELECT 1 FROM devolucao d WHERE d.e2eid = p.e2eid))";
            let args = params![f.inicio, f.fim, f.txid, f.txid_presente, f.devolucao_presente];
            let total: i64 =
                c.query_row(&format!("SELECT COUNT(*) {WHERE}"), args, |r| r.get(0))?;
            let e2eids = c
                .prepare_cached(&format!(
                    "SELECT p.e2eid {WHERE} ORDER BY p.horario, p.e2eid LIMIT ?6 OFFSET ?7"
                ))?
                .query_map(
                    params![
                        f.inicio,
                        f.fim,
                        f.txid,
                        f.txid_presente,
                        f.devolucao_presente,
                        limit,
                        offset
                    ],
                    |r| r.get::<_, String>(0),
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut pix = Vec::with_capacity(e2eids.len());
            for e2eid in e2eids {
                pix.extend(read_pix(c, &e2eid)?);
            }
            Ok((pix, total))
        })
    }

    /// Pays back part of a Pix under the client's id: a reused id or more than what is left is
    /// refused (400), never replayed.
    pub fn refund(&self, e2eid: &str, id: &str, valor: i64) -> Result<Devolucao, Refused> {
        let now = now_ms();
        self.with(|c| {
            let tx = c.transaction()?;
            let pix = read_pix(&tx, e2eid)?.ok_or(Refused::NotFound)?;
            if pix.devolucoes.iter().any(|d| d.id == id) {
                return Err(Refused::Invalid("O id da devolução já foi utilizado.".into()));
            }
            let taken: i64 = pix
                .devolucoes
                .iter()
                .filter(|d| d.status != "NAO_REALIZADO")
                .map(|d| d.valor)
                .sum();
            if valor <= 0 || taken + valor > pix.valor {
                return Err(Refused::Invalid(
                    "A soma das devoluções ultrapassa o valor do Pix.".into(),
                ));
            }
            let rtr_id = rtr_id();
            tx.execute(
                "INSERT INTO devolucao (e2eid, id, rtr_id, valor, status, horario) VALUES (?1, ?2, ?3, ?4, 'DEVOLVIDO', ?5)",
                params![e2eid, id, rtr_id, valor, now],
            )?;
            tx.commit()?;
            Ok(Devolucao {
                id: id.to_string(),
                rtr_id,
                valor,
                status: "DEVOLVIDO".into(),
                horario: now,
            })
        })
    }

    /// Registers the callback URL for a key.
    pub fn set_webhook(&self, chave: &str, url: &str) -> Result<(), Refused> {
        self.with(|c| {
            c.execute(
                "INSERT INTO webhook (chave, url) VALUES (?1, ?2) ON CONFLICT (chave) DO UPDATE SET url = excluded.url",
                params![chave, url],
            )?;
            Ok(())
        })
    }

    /// The callback URL registered for a key.
    pub fn webhook(&self, chave: &str) -> Result<Option<String>, Refused> {
        self.with(|c| {
            Ok(
                c.query_row("SELECT url FROM webhook WHERE chave = ?1", [chave], |r| {
                    r.get(0)
                })
                .optional()?,
            )
        })
    }

    /// Records one callback delivery tried.
    pub fn record_delivery(
        &self,
        webhook_id: &str,
        body: &str,
        status: Option<u16>,
        erro: Option<&str>,
    ) -> Result<(), Refused> {
        self.with(|c| {
            c.execute(
                "INSERT INTO entrega (webhook_id, corpo, status, erro, enviado_em) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![webhook_id, body, status, erro, now_ms()],
            )?;
            Ok(())
        })
    }

    /// Every charge (to the key `chave`, or to any key) with its Pix and devoluções, oldest
    /// first: the ledger a checker compares with what the API and the tills believe.
    pub fn ledger(&self, chave: Option<&str>) -> Result<Vec<Cob>, Refused> {
        self.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT txid FROM cob WHERE ?1 IS NULL OR chave = ?1 ORDER BY rowid",
            )?;
            let txids: Vec<String> = st
                .query_map([chave], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            let mut cobs = Vec::with_capacity(txids.len());
            for txid in txids {
                if let Some(cob) = read_cob(c, &txid)? {
                    cobs.push(cob);
                }
            }
            Ok(cobs)
        })
    }

    /// The counts tests check.
    pub fn counts(&self) -> Result<Counts, Refused> {
        self.with(|c| {
            let n = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0));
            Ok(Counts {
                cobrancas: n("SELECT COUNT(*) FROM cob")?,
                pix: n("SELECT COUNT(*) FROM pix")?,
                devolucoes: n("SELECT COUNT(*) FROM devolucao WHERE status <> 'NAO_REALIZADO'")?,
                devolvido: n(
                    "SELECT COALESCE(SUM(valor), 0) FROM devolucao WHERE status <> 'NAO_REALIZADO'",
                )?,
                entregas: n("SELECT COUNT(*) FROM entrega")?,
                entregas_aceitas: n(
                    "SELECT COUNT(*) FROM entrega WHERE status BETWEEN 200 AND 299",
                )?,
            })
        })
    }
}

fn read_cob(c: &Connection, txid: &str) -> Result<Option<Cob>, Refused> {
    let cob = c
        .query_row(
            "SELECT txid, valor, chave, expiracao, criacao, status, revisao, location, solicitacao, rowid FROM cob WHERE txid = ?1",
            [txid],
            |r| {
                Ok(Cob {
                    txid: r.get(0)?,
                    valor: r.get(1)?,
                    chave: r.get(2)?,
                    expiracao: r.get(3)?,
                    criacao: r.get(4)?,
                    status: r.get(5)?,
                    revisao: r.get(6)?,
                    location: r.get(7)?,
                    solicitacao: r.get(8)?,
                    loc_id: r.get(9)?,
                    pix: Vec::new(),
                })
            },
        )
        .optional()?;
    let Some(mut cob) = cob else { return Ok(None) };
    let mut st = c.prepare_cached("SELECT e2eid FROM pix WHERE txid = ?1 ORDER BY horario")?;
    let ids: Vec<String> = st
        .query_map([txid], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for id in ids {
        if let Some(p) = read_pix(c, &id)? {
            cob.pix.push(p);
        }
    }
    Ok(Some(cob))
}

fn read_pix(c: &Connection, e2eid: &str) -> Result<Option<PixRecebido>, Refused> {
    let pix = c
        .query_row(
            "SELECT e2eid, txid, valor, horario FROM pix WHERE e2eid = ?1",
            [e2eid],
            |r| {
                Ok(PixRecebido {
                    e2eid: r.get(0)?,
                    txid: r.get(1)?,
                    valor: r.get(2)?,
                    horario: r.get(3)?,
                    devolucoes: Vec::new(),
                })
            },
        )
        .optional()?;
    let Some(mut pix) = pix else { return Ok(None) };
    let mut st = c.prepare_cached(
        "SELECT id, rtr_id, valor, status, horario FROM devolucao WHERE e2eid = ?1 ORDER BY horario, id",
    )?;
    pix.devolucoes = st
        .query_map([e2eid], |r| {
            Ok(Devolucao {
                id: r.get(0)?,
                rtr_id: r.get(1)?,
                valor: r.get(2)?,
                status: r.get(3)?,
                horario: r.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(Some(pix))
}

/// An end-to-end id as the SPI makes them: `E`, the payer PSP's ISPB (8 digits), the date and
/// time (`yyyyMMddHHmm`) and 11 random characters, 32 in all.
pub fn end_to_end_id() -> String {
    id_with_prefix('E')
}

/// A devolução's `rtrId`: like an end-to-end id, with `D`.
fn rtr_id() -> String {
    id_with_prefix('D')
}

fn id_with_prefix(prefix: char) -> String {
    use rand::Rng;
    const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let now = time::OffsetDateTime::now_utc();
    let stamp = format!(
        "{:04}{:02}{:02}{:02}{:02}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute()
    );
    let mut rng = rand::thread_rng();
    let tail: String = (0..11)
        .map(|_| ALNUM[rng.gen_range(0..ALNUM.len())] as char)
        .collect();
    format!("{prefix}18236120{stamp}{tail}")
}
