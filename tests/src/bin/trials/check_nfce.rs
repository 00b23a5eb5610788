//! (n): the NFC-e of a trial's sales at its SEFAZ simulator (a process of its own) and at the
//! tills: every sale paid in full has one authorized note and no sale two at SEFAZ once the
//! cancelled are set apart (a note set aside that SEFAZ authorized after all is cancelled by
//! substitution, which the trial counts), the note of a sale paid back in full cancelled there,
//! every number
//! of every till's série authorized or declared unused, nothing refused (a 204 for a note sent
//! again is SEFAZ saying it has it), no till blocked (656). And the heal of SEFAZ after the
//! faults.

use super::*;
use checkout_core::fiscal::VendaPaga;
use checkout_core::outbox::{EstadoNota, Outbox};

/// SEFAZ back up once the other faults stop; an outage of it may outlast them by `outlasts_ms`,
/// then ends on its own.
pub(crate) fn heal_sefaz(sefaz: &mut SefazProcess, outlasts_ms: u64, out: &mut Outcome) {
    if !sefaz.is_running() {
        sefaz.restart();
    }
    let url = sefaz.url().to_string();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(outlasts_ms)).await;
        let _ = reqwest::Client::new()
            .put(format!("{url}/qa/modo"))
            .json(&json!({"modo": "normal"}))
            .send()
            .await;
    });
    if outlasts_ms > 0 {
        out.kinds.insert("SEFAZ outage outlasts the faults");
    }
}

/// What a trial's SEFAZ holds: authorized notes `(chave, série, número)`, the keys of those
/// cancelled, numbers declared unused `(série, início, fim)`, and refusals `(código, chave)`
/// other than 204 and 573 (an event sent again is SEFAZ saying it has it).
struct AtSefaz {
    notas: Vec<(String, u32, u32)>,
    canceladas: BTreeSet<String>,
    inutilizadas: Vec<(u32, u32, u32)>,
    recusas: Vec<(u32, Option<String>)>,
}

fn at_sefaz(db: &Path) -> rusqlite::Result<AtSefaz> {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let rows = |sql: &str| -> rusqlite::Result<Vec<(String, u32, u32)>> {
        let mut st = c.prepare(sql)?;
        let r = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        r.collect()
    };
    let notas = rows("SELECT chave, serie, numero FROM notas")?;
    let inutilizadas = {
        let mut st = c.prepare("SELECT serie, inicio, fim FROM inutilizadas")?;
        let r = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        r.collect::<rusqlite::Result<Vec<_>>>()?
    };
    let recusas = {
        let mut st =
            c.prepare("SELECT c_stat, chave FROM rejeicoes WHERE c_stat NOT IN (204, 573)")?;
        let r = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        r.collect::<rusqlite::Result<Vec<_>>>()?
    };
    let canceladas = {
        let mut st =
            c.prepare("SELECT chave FROM eventos WHERE tp_evento IN ('110111', '110112')")?;
        let r = st.query_map([], |r| r.get(0))?;
        r.collect::<rusqlite::Result<BTreeSet<String>>>()?
    };
    Ok(AtSefaz {
        notas,
        canceladas,
        inutilizadas,
        recusas,
    })
}

/// (n) over the SEFAZ base at `sefaz_db` and each till's outbox (till `t` issues série `t + 1`).
pub(crate) async fn check_nfce(out: &mut Outcome, sefaz_db: &Path, tills: &[Till]) {
    const N: usize = 13;
    let sefaz = match at_sefaz(sefaz_db) {
        Ok(s) => s,
        Err(e) => {
            out.notes
                .push(format!("(n) the SEFAZ base unreadable: {e}"));
            out.violations[N] += 1;
            return;
        }
    };
    for (code, chave) in &sefaz.recusas {
        out.notes
            .push(format!("(n) SEFAZ refused {code} note {chave:?}"));
        out.violations[N] += 1;
    }
    let authorized: BTreeMap<&str, (u32, u32)> = sefaz
        .notas
        .iter()
        .map(|(k, s, n)| (k.as_str(), (*s, *n)))
        .collect();
    out.nfce[0] += authorized.len() as u32;
    let mut ours: BTreeSet<String> = BTreeSet::new();
    for (t, till) in tills.iter().enumerate() {
        let serie = t as u32 + 1;
        let outbox = match Outbox::open(&till.outbox, Duration::from_secs(5), None) {
            Ok(o) => o,
            Err(e) => {
                out.notes.push(format!("(n) till {t}'s outbox: {e}"));
                out.violations[N] += 1;
                continue;
            }
        };
        let (attempts, notas) = match (outbox.list().await, outbox.notas().await) {
            (Ok(a), Ok(n)) => (a, n),
            (Err(e), _) | (_, Err(e)) => {
                out.notes.push(format!("(n) till {t}'s outbox: {e}"));
                out.violations[N] += 1;
                continue;
            }
        };
        outbox.close();
        // Every number the till took is a note SEFAZ authorized or a number it declared unused.
        let taken = notas.iter().map(|n| n.numero).max().unwrap_or(0);
        for numero in 1..=taken {
            let at = sefaz
                .notas
                .iter()
                .filter(|(_, s, n)| (*s, *n) == (serie, numero))
                .count();
            let unused = sefaz
                .inutilizadas
                .iter()
                .any(|(s, a, b)| *s == serie && (*a..=*b).contains(&numero));
            if at + usize::from(unused) != 1 {
                out.notes.push(format!(
                    "(n) till {t} série {serie} number {numero}: {at} notes at SEFAZ, declared unused {unused}"
                ));
                out.violations[N] += 1;
            }
        }
        for n in &notas {
            ours.insert(n.chave.clone());
            match n.estado {
                EstadoNota::Autorizada => {
                    if !authorized.contains_key(n.chave.as_str())
                        || sefaz.canceladas.contains(&n.chave)
                    {
                        out.notes.push(format!(
                            "(n) till {t} holds note {} as authorized; SEFAZ does not",
                            n.chave
                        ));
                        out.violations[N] += 1;
                    }
                }
                EstadoNota::Cancelada => {
                    out.nfce[if n.substituta.is_some() { 3 } else { 4 }] += 1;
                    if !sefaz.canceladas.contains(&n.chave) {
                        out.notes.push(format!(
                            "(n) till {t} holds note {} as cancelled; SEFAZ does not",
                            n.chave
                        ));
                        out.violations[N] += 1;
                    }
                }
                EstadoNota::Inutilizada => out.nfce[2] += 1,
                _ => {
                    out.notes.push(format!(
                        "(n) till {t} note {} left {:?} ({:?})",
                        n.chave, n.estado, n.motivo
                    ));
                    out.violations[N] += 1;
                }
            }
            if n.c_stat == Some(656) {
                out.notes
                    .push(format!("(n) till {t} blocked by SEFAZ (656)"));
                out.violations[N] += 1;
            }
            if n.em_contingencia() {
                out.nfce[1] += 1;
            }
        }
        // Every sale paid in full has one note authorized and not cancelled, at SEFAZ.
        let mut sales: BTreeMap<&str, Vec<checkout_core::Attempt>> = BTreeMap::new();
        for a in &attempts {
            sales.entry(a.sale_id.as_ref()).or_default().push(a.clone());
        }
        for (sale, of_sale) in &sales {
            let live = notas
                .iter()
                .filter(|n| {
                    n.sale_id.as_ref() == *sale
                        && authorized.contains_key(n.chave.as_str())
                        && !sefaz.canceladas.contains(&n.chave)
                })
                .count();
            let paid = VendaPaga::of(of_sale).is_some();
            if VendaPaga::devolvida(of_sale) && live > 0 {
                out.notes.push(format!(
                    "(n) till {t} sale {sale} paid back in full keeps {live} authorized notes"
                ));
                out.violations[N] += 1;
            }
            if live > 1 || (paid && live == 0) {
                out.notes.push(format!(
                    "(n) till {t} sale {sale} paid {paid} has {live} authorized notes"
                ));
                out.violations[N] += 1;
            }
        }
    }
    for chave in authorized.keys().filter(|k| !ours.contains(**k)) {
        out.notes.push(format!(
            "(n) SEFAZ authorized {chave}, which no till issued"
        ));
        out.violations[N] += 1;
    }
}
