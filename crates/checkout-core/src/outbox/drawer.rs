//! The cash drawer's movements of a store day, and the cash the day's attempts moved.

use super::*;
use crate::domain::Tally;
use crate::drawer::{Drawer, DrawerKind, DrawerMove};

/// The day's cash sales and cash given back, as tallies: sales of the sales opened that day,
/// refunds made in `bounds` (the closing counts them the same way).
fn cash_of_day(
    c: &rusqlite::Connection,
    day: &str,
    bounds: (UnixMillis, UnixMillis),
) -> rusqlite::Result<(Tally, Tally)> {
    let tally = |count: i64, sum: i64| Tally {
        count: count as usize,
        centavos: Total::new(sum).unwrap_or(Total::ZERO),
    };
    c.prepare_cached(
        "SELECT COUNT(*) FILTER (WHERE kind = 'pagamento' AND sale_id IN (SELECT sale_id FROM sales WHERE day = ?1)),
                COALESCE(SUM(valor) FILTER (WHERE kind = 'pagamento' AND sale_id IN (SELECT sale_id FROM sales WHERE day = ?1)), 0),
                COUNT(*) FILTER (WHERE kind = 'estorno' AND created_at >= ?2 AND created_at < ?3),
                COALESCE(SUM(valor) FILTER (WHERE kind = 'estorno' AND created_at >= ?2 AND created_at < ?3), 0)
           FROM attempts WHERE metodo = 'dinheiro' AND state = 'aprovado'",
    )?
    .query_row(params![day, bounds.0, bounds.1], |r| {
        Ok((tally(r.get(0)?, r.get(1)?), tally(r.get(2)?, r.get(3)?)))
    })
}

fn moves_of_day(c: &rusqlite::Connection, day: &str) -> Result<Vec<DrawerMove>> {
    let rows = c
        .prepare_cached("SELECT kind, valor, motivo, at FROM drawer WHERE day = ?1 ORDER BY seq")?
        .query_map([day], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, UnixMillis>(3)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter()
        .map(|(kind, valor, motivo, at)| {
            Ok(DrawerMove {
                kind: DrawerKind::parse(&kind)?,
                valor: Total::new(valor).map_err(|e| CoreError::Storage(e.to_string()))?,
                motivo,
                at,
            })
        })
        .collect()
}

/// The drawer of `day` as the outbox has it now.
fn drawer_of(
    c: &rusqlite::Connection,
    day: &str,
    bounds: (UnixMillis, UnixMillis),
) -> Result<Drawer> {
    let (vendas, devolucoes) = cash_of_day(c, day, bounds)?;
    Ok(Drawer::of(moves_of_day(c, day)?, vendas, devolucoes))
}

impl Outbox {
    /// Records a drawer movement of `day` and returns the drawer after it. Refused: a second
    /// opening the same day, a sangria of more than the drawer should hold, an amount of zero
    /// (but a count of an empty drawer).
    pub async fn drawer_move(
        &self,
        day: &str,
        bounds: (UnixMillis, UnixMillis),
        kind: DrawerKind,
        valor: Total,
        motivo: Option<String>,
        now: UnixMillis,
    ) -> Result<Drawer> {
        let day = day.to_string();
        self.db
            .write(move |c| {
                if valor.is_zero() && kind != DrawerKind::Contagem {
                    return Err(CoreError::Invalid("informe um valor maior que zero".into()));
                }
                let before = drawer_of(c, &day, bounds)?;
                match kind {
                    DrawerKind::Abertura if before.movimentos.iter().any(|m| m.kind == DrawerKind::Abertura) => {
                        return Err(CoreError::Invalid(format!(
                            "a gaveta já foi aberta hoje com {}; use suprimento para pôr mais troco",
                            before.abertura
                        )));
                    }
                    DrawerKind::Sangria if valor > before.esperado => {
                        return Err(CoreError::Invalid(format!(
                            "a gaveta deve ter {}; uma sangria de {valor} passaria disso",
                            before.esperado
                        )));
                    }
                    _ => {}
                }
                exec(
                    c,
                    "INSERT INTO drawer (day, kind, valor, motivo, at) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![day, kind.as_str(), valor.get(), motivo, now],
                )?;
                // The drawer after it: the one read above with this movement added.
                let mut moves = before.movimentos;
                moves.push(DrawerMove {
                    kind,
                    valor,
                    motivo,
                    at: now,
                });
                Ok(Drawer::of(moves, before.vendas, before.devolucoes))
            })
            .await
    }

    /// The drawer of `day`.
    pub async fn drawer(&self, day: &str, bounds: (UnixMillis, UnixMillis)) -> Result<Drawer> {
        let day = day.to_string();
        self.db.read(move |c| drawer_of(c, &day, bounds)).await
    }
}
