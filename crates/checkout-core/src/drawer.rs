//! The cash drawer ("gaveta") of a store day: the float it opened with, cash taken out
//! (sangria) or put in (suprimento) with their reasons, cash sales and cash given back, and the
//! counts. What it should hold is their sum; a count that differs is the closing's business.

use crate::domain::Tally;
use crate::domain::{Total, UnixMillis};
use crate::error::CoreError;
use serde::Serialize;

/// A kind of drawer movement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DrawerKind {
    /// The float the day starts with (once a day).
    Abertura,
    /// Cash taken out (to the safe, to the bank).
    Sangria,
    /// Cash put in (more change).
    Suprimento,
    /// The cashier counted the drawer: `valor` is what was there.
    Contagem,
}

impl DrawerKind {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            DrawerKind::Abertura => "abertura",
            DrawerKind::Sangria => "sangria",
            DrawerKind::Suprimento => "suprimento",
            DrawerKind::Contagem => "contagem",
        }
    }

    /// Parses the stored form (what the window sends).
    pub fn parse(s: &str) -> Result<Self, CoreError> {
        [
            DrawerKind::Abertura,
            DrawerKind::Sangria,
            DrawerKind::Suprimento,
            DrawerKind::Contagem,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
        .ok_or_else(|| {
            CoreError::Invalid(format!(
                "movimento de gaveta desconhecido: {s:?} (abertura, sangria, suprimento ou contagem)"
            ))
        })
    }
}

/// One movement, as the outbox keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DrawerMove {
    /// What it was.
    pub kind: DrawerKind,
    /// How much (a count: what was in the drawer).
    pub valor: Total,
    /// Why, as the cashier wrote it.
    pub motivo: Option<String>,
    /// When (epoch ms).
    pub at: UnixMillis,
}

/// The drawer of a day.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Drawer {
    /// The float.
    pub abertura: Total,
    /// Cash put in.
    pub suprimentos: Tally,
    /// Cash taken out.
    pub sangrias: Tally,
    /// Cash sales (what stayed in the drawer: the amount, the change already given back).
    pub vendas: Tally,
    /// Cash given back (refunds of cash sales).
    pub devolucoes: Tally,
    /// What the drawer should hold.
    pub esperado: Total,
    /// The last count, if the cashier counted.
    pub contado: Option<Total>,
    /// `contado - esperado` (positive: more in the drawer than expected).
    pub diferenca: Option<i64>,
    /// Every movement, oldest first.
    pub movimentos: Vec<DrawerMove>,
}

impl Drawer {
    /// The drawer from the day's movements and its cash sales and cash given back.
    pub fn of(moves: Vec<DrawerMove>, vendas: Tally, devolucoes: Tally) -> Self {
        let mut d = Drawer {
            vendas,
            devolucoes,
            ..Drawer::default()
        };
        for m in &moves {
            match m.kind {
                DrawerKind::Abertura => d.abertura += m.valor,
                DrawerKind::Suprimento => {
                    d.suprimentos.count += 1;
                    d.suprimentos.centavos += m.valor;
                }
                DrawerKind::Sangria => {
                    d.sangrias.count += 1;
                    d.sangrias.centavos += m.valor;
                }
                DrawerKind::Contagem => d.contado = Some(m.valor),
            }
        }
        let esperado = d.abertura.get() + d.suprimentos.centavos.get() + d.vendas.centavos.get()
            - d.sangrias.centavos.get()
            - d.devolucoes.centavos.get();
        // Sangrias and devoluções are refused when the drawer does not hold them: never negative.
        d.esperado = Total::new(esperado).unwrap_or(Total::ZERO);
        d.diferenca = d.contado.map(|c| c.get() - d.esperado.get());
        d.movimentos = moves;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: i64) -> Total {
        Total::new(v).unwrap()
    }

    fn mv(kind: DrawerKind, valor: i64) -> DrawerMove {
        DrawerMove {
            kind,
            valor: t(valor),
            motivo: None,
            at: 0,
        }
    }

    #[test]
    fn the_drawer_should_hold_the_float_and_cash_in_less_cash_out_and_a_count_says_the_difference()
    {
        let vendas = Tally {
            count: 3,
            centavos: t(25_000),
        };
        let devolucoes = Tally {
            count: 1,
            centavos: t(2_000),
        };
        let d = Drawer::of(
            vec![
                mv(DrawerKind::Abertura, 10_000),
                mv(DrawerKind::Suprimento, 5_000),
                mv(DrawerKind::Sangria, 20_000),
                mv(DrawerKind::Contagem, 17_500),
                mv(DrawerKind::Contagem, 17_900),
            ],
            vendas,
            devolucoes,
        );
        assert_eq!(d.esperado.get(), 10_000 + 5_000 + 25_000 - 20_000 - 2_000);
        assert_eq!(d.contado, Some(t(17_900)), "the last count counts");
        assert_eq!(d.diferenca, Some(-100));
        assert_eq!(d.movimentos.len(), 5);
        assert_eq!(
            Drawer::of(vec![], Tally::default(), Tally::default()).diferenca,
            None
        );
    }
}
