//! What the window may show and offer for a sale, decided here from the sale's attempts in the
//! outbox: where a divided sale stands (paid, missing, given back, authorized, being captured or
//! released), each payment's refunds, and which late Pix may be kept as the sale's payment. The
//! window draws these values; it never works them out again (`ui/state.js` only reads them).

use crate::domain::{AttemptId, AttemptState, Capture, Means, Net, SaleId, Total, UnixMillis};
use crate::outbox::Attempt;
use serde::Serialize;

/// A sale as the window sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SaleView {
    /// The sale.
    pub sale_id: SaleId,
    /// A sale paid in parts: where it stands (`None`: paid at once).
    pub divisao: Option<Division>,
    /// Each payment of the sale that has refunds: what was paid back and what is on its way.
    pub estornos: Vec<PaymentRefunds>,
    /// Late Pix of the sale the cashier may keep as its payment ("Manter").
    pub manter_pix: Vec<AttemptId>,
    /// The newest change among the sale's attempts: of two views of a sale, the window keeps
    /// the one with the later `as_of`.
    pub as_of: UnixMillis,
}

/// Where a divided sale stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Division {
    /// The sale's total.
    pub total: Total,
    /// What its parts paid, less what was paid back.
    pub pago: Net,
    /// What is still missing.
    pub falta: Total,
    /// The parts paid, oldest first.
    pub partes: Vec<Part>,
    /// Given back: refunds approved, and parts undone (unless the till started again with them
    /// unfinished: then the part is missing again, the sale not given up).
    pub devolvido: Total,
    /// On its way back: refunds undecided and parts being undone.
    pub estornando: Total,
    /// Given back ("Cancelar venda" or Estornar): nothing more is charged on it.
    pub cancelada: bool,
    /// Card parts authorized and not captured yet.
    pub autorizado: Total,
    /// Card parts whose capture was decided and not answered yet.
    pub capturando: Total,
    /// Card parts being or already undone, or lapsed: nothing taken.
    pub liberado: Total,
}

/// One part of a divided sale that paid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    /// Its amount.
    pub valor: Total,
    /// How the cashier reads its means: `Débito`, `Crédito 3× sem juros`, `Pix`, `Dinheiro`.
    pub forma: String,
    /// When it was made (its order among the parts).
    pub seq: i64,
    /// A card part whose capture the server confirmed.
    pub capturada: bool,
}

/// A payment's refunds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PaymentRefunds {
    /// The payment attempt.
    pub pagamento: AttemptId,
    /// Paid back.
    pub aprovado: Total,
    /// On its way back (undecided refunds).
    pub andamento: Total,
}

impl SaleView {
    /// The view of `sale` from its attempts (payments and refunds, in any order).
    pub fn of(sale: SaleId, attempts: &[Attempt]) -> Self {
        let of_sale: Vec<&Attempt> = attempts.iter().filter(|a| a.sale_id == sale).collect();
        let divisao = of_sale
            .iter()
            .find_map(|a| a.sale_total)
            .map(|total| division(total.into(), &of_sale));
        let mut estornos: Vec<PaymentRefunds> = Vec::new();
        for r in of_sale.iter().filter(|r| r.is_refund()) {
            let Some(paid) = &r.refund_of else { continue };
            let i = match estornos.iter().position(|e| e.pagamento == *paid) {
                Some(i) => i,
                None => {
                    estornos.push(PaymentRefunds {
                        pagamento: paid.clone(),
                        aprovado: Total::ZERO,
                        andamento: Total::ZERO,
                    });
                    estornos.len() - 1
                }
            };
            if r.state == AttemptState::Aprovado {
                estornos[i].aprovado += r.valor;
            } else if r.is_undecided() {
                estornos[i].andamento += r.valor;
            }
        }
        let manter_pix = of_sale
            .iter()
            .filter(|a| can_keep_pix(a, &of_sale))
            .map(|a| a.id.clone())
            .collect();
        Self {
            sale_id: sale,
            divisao,
            estornos,
            manter_pix,
            as_of: of_sale.iter().map(|a| a.updated_at).max().unwrap_or(0),
        }
    }
}

/// True for a card part being or already undone, or lapsed.
fn is_undone(a: &Attempt) -> bool {
    matches!(
        a.captura,
        Some(Capture::Desfazer | Capture::Desfeita | Capture::Expirada)
    )
}

fn division(total: Total, of_sale: &[&Attempt]) -> Division {
    let (mut pago, mut devolvido, mut estornando) = (0i64, Total::ZERO, Total::ZERO);
    let (mut autorizado, mut capturando, mut liberado) = (Total::ZERO, Total::ZERO, Total::ZERO);
    let mut partes = Vec::new();
    for x in of_sale {
        // The same rule as the refunds' balance: `pendente`, and `revisao` until the server
        // said it has none.
        if x.is_refund() && x.is_undecided() {
            estornando += x.valor;
        }
        if x.state != AttemptState::Aprovado {
            continue;
        }
        if x.captura == Some(Capture::Desfazer) {
            estornando += x.valor;
        }
        if is_undone(x) {
            liberado += x.valor;
            if x.captura_por != Some("reinicio") {
                devolvido += x.valor;
            }
            continue;
        }
        match x.captura {
            Some(Capture::Pendente) => autorizado += x.valor,
            Some(Capture::Capturar) => capturando += x.valor,
            _ => {}
        }
        if x.is_refund() {
            pago -= x.valor.get();
            devolvido += x.valor;
        } else {
            pago += x.valor.get();
            partes.push(Part {
                valor: x.valor.into(),
                forma: forma(x),
                seq: x.created_at,
                capturada: x.captura == Some(Capture::Capturada),
            });
        }
    }
    partes.sort_by_key(|p| p.seq);
    let paid = Total::new(pago.max(0)).unwrap_or(Total::ZERO);
    let back = devolvido + estornando;
    Division {
        total,
        pago: Net::new(pago),
        falta: total.saturating_sub(paid),
        partes,
        devolvido,
        estornando,
        cancelada: !back.is_zero() && pago - estornando.get() <= 0,
        autorizado,
        capturando,
        liberado,
    }
}

/// How the cashier reads an attempt's means: the card's plan, or the means.
fn forma(a: &Attempt) -> String {
    match (a.metodo, a.plano) {
        (Means::Cartao, Some(p)) => p.label(),
        (Means::Maquininha, Some(p)) => format!("{} na maquininha", p.label()),
        (m, _) => m.label().to_string(),
    }
}

/// Whether a late Pix can be kept as its sale's payment: not a part of a divided sale (the
/// server holds parts to the total and never counts a Pix paid after it was closed), no other
/// payment of the sale approved or under way, and no devolução of it asked for (the outbox
/// refuses the same when it keeps it).
fn can_keep_pix(a: &Attempt, of_sale: &[&Attempt]) -> bool {
    if !a.is_late_pix() || a.sale_total.is_some() {
        return false;
    }
    of_sale.iter().filter(|o| o.id != a.id).all(|o| {
        if o.is_refund() {
            o.refund_of.as_ref() != Some(&a.id) || o.state == AttemptState::Recusado
        } else {
            o.state != AttemptState::Aprovado && !o.is_undecided()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        AttemptKind, CardPlan, CardToken, Centavos, IdempotencyKey, PixCharge, PixStatus,
    };

    fn attempt(id: &str, valor: i64, state: AttemptState) -> Attempt {
        Attempt {
            id: AttemptId::from_stored(id),
            kind: AttemptKind::Pagamento,
            refund_of: None,
            refund_payment: None,
            sale_id: SaleId::parse("venda-1").unwrap(),
            idempotency_key: IdempotencyKey::from_stored(format!("k-{id}")),
            valor: Centavos::new(valor).unwrap(),
            cartao: CardToken::parse("tok_aprovado").ok(),
            metodo: Means::Cartao,
            plano: None,
            pix: None,
            maquininha: None,
            state,
            tries: 1,
            next_try_at: 0,
            last_tried_at: None,
            last_error: None,
            response_status: None,
            payment_id: Some(format!("pay_{id}")),
            motivo: None,
            created_at: 0,
            updated_at: 0,
            review_checked_at: None,
            sale_number: Some(1),
            sale_day: None,
            sale_total: None,
            captura: None,
            captura_por: None,
            recebido: None,
        }
    }

    fn part(id: &str, valor: i64, state: AttemptState, seq: i64) -> Attempt {
        Attempt {
            sale_total: Some(Centavos::new(15_000).unwrap()),
            created_at: seq,
            updated_at: seq,
            ..attempt(id, valor, state)
        }
    }

    fn refund(id: &str, of: &Attempt, valor: i64, state: AttemptState) -> Attempt {
        Attempt {
            kind: AttemptKind::Estorno,
            refund_of: Some(of.id.clone()),
            sale_total: of.sale_total,
            ..attempt(id, valor, state)
        }
    }

    fn late_pix(id: &str) -> Attempt {
        Attempt {
            metodo: Means::Pix,
            cartao: None,
            motivo: Some("pix_cancelado".into()),
            pix: Some(PixCharge {
                payment_id: format!("pay_{id}"),
                txid: "tx".into(),
                copia_e_cola: "000201".into(),
                expira_em: 0,
                status: PixStatus::RecebidoAposCancelamento,
                e2eid: Some("E9".into()),
                pago_em: Some(0),
            }),
            ..attempt(id, 1_000, AttemptState::Recusado)
        }
    }

    fn view(attempts: &[Attempt]) -> SaleView {
        SaleView::of(SaleId::parse("venda-1").unwrap(), attempts)
    }

    fn t(v: i64) -> Total {
        Total::new(v).unwrap()
    }

    #[test]
    fn a_divided_sale_shows_its_parts_in_order_and_what_is_missing() {
        let debito = Attempt {
            plano: Some(CardPlan::DEBITO),
            ..part("a1", 5_000, AttemptState::Aprovado, 1)
        };
        let live = part("a2", 10_000, AttemptState::Pendente, 2);
        let d = view(&[live.clone(), debito.clone()]).divisao.unwrap();
        assert_eq!(
            (d.total, d.pago.get(), d.falta),
            (t(15_000), 5_000, t(10_000))
        );
        assert_eq!(d.partes.len(), 1);
        assert_eq!(d.partes[0].forma, "Débito");
        let cash = Attempt {
            metodo: Means::Dinheiro,
            cartao: None,
            ..live
        };
        let cash = Attempt {
            state: AttemptState::Aprovado,
            ..cash
        };
        let d = view(&[cash, debito]).divisao.unwrap();
        assert_eq!(d.falta, Total::ZERO);
        let formas: Vec<&str> = d.partes.iter().map(|p| p.forma.as_str()).collect();
        assert_eq!(formas, ["Débito", "Dinheiro"]);
        assert!(view(&[attempt("x", 100, AttemptState::Aprovado)])
            .divisao
            .is_none());
    }

    #[test]
    fn a_sale_given_back_is_cancelled_once_its_refunds_cover_what_was_paid() {
        let paid = part("a1", 5_000, AttemptState::Aprovado, 1);
        let back = refund("r1", &paid, 5_000, AttemptState::Pendente);
        let d = view(&[paid.clone(), back.clone()]).divisao.unwrap();
        assert_eq!((d.estornando, d.cancelada), (t(5_000), true));
        // A refund in revisão the server has not answered for is still on its way: the same
        // rule as the refunds' balance (pendente, or revisão until the server said it has none).
        let in_review = Attempt {
            state: AttemptState::Revisao,
            ..back.clone()
        };
        assert_eq!(
            view(&[paid.clone(), in_review.clone()])
                .divisao
                .unwrap()
                .estornando,
            t(5_000)
        );
        let checked = Attempt {
            review_checked_at: Some(1),
            ..in_review
        };
        assert!(!view(&[paid.clone(), checked]).divisao.unwrap().cancelada);
        let done = Attempt {
            state: AttemptState::Aprovado,
            ..back
        };
        let d = view(&[paid, done]).divisao.unwrap();
        assert_eq!(
            (d.pago.get(), d.devolvido, d.cancelada),
            (0, t(5_000), true)
        );
    }

    #[test]
    fn card_authorizations_are_held_captured_or_released_and_a_restart_leaves_the_part_missing() {
        let auth = |id, captura, por| Attempt {
            captura: Some(captura),
            captura_por: por,
            ..part(id, 5_000, AttemptState::Aprovado, 1)
        };
        let d = view(&[auth("a1", Capture::Pendente, None)])
            .divisao
            .unwrap();
        assert_eq!((d.autorizado, d.falta), (t(5_000), t(10_000)));
        let d = view(&[auth("a1", Capture::Capturar, None)])
            .divisao
            .unwrap();
        assert_eq!(d.capturando, t(5_000));
        let d = view(&[auth("a1", Capture::Desfazer, Some("cancelamento"))])
            .divisao
            .unwrap();
        assert_eq!(
            (d.estornando, d.liberado, d.devolvido, d.cancelada),
            (t(5_000), t(5_000), t(5_000), true)
        );
        let d = view(&[auth("a1", Capture::Desfeita, Some("reinicio"))])
            .divisao
            .unwrap();
        assert_eq!(
            (d.liberado, d.devolvido, d.falta, d.cancelada),
            (t(5_000), Total::ZERO, t(15_000), false)
        );
        let d = view(&[auth("a1", Capture::Capturada, None)])
            .divisao
            .unwrap();
        assert!(d.partes[0].capturada);
    }

    #[test]
    fn refunds_are_counted_per_payment_approved_and_on_their_way() {
        let paid = attempt("a1", 10_000, AttemptState::Aprovado);
        let v = view(&[
            paid.clone(),
            refund("r1", &paid, 3_000, AttemptState::Aprovado),
            refund("r2", &paid, 2_000, AttemptState::Pendente),
            refund("r3", &paid, 1_000, AttemptState::Recusado),
        ]);
        assert_eq!(
            v.estornos,
            vec![PaymentRefunds {
                pagamento: paid.id,
                aprovado: t(3_000),
                andamento: t(2_000)
            }]
        );
    }

    #[test]
    fn a_late_pix_may_be_kept_only_by_a_sale_paid_no_other_way_and_not_given_back() {
        let late = late_pix("p1");
        assert_eq!(
            view(std::slice::from_ref(&late)).manter_pix,
            vec![late.id.clone()]
        );
        let card = attempt("c1", 1_000, AttemptState::Aprovado);
        assert!(
            view(&[late.clone(), card]).manter_pix.is_empty(),
            "paid by card"
        );
        let pending = attempt("c2", 1_000, AttemptState::Pendente);
        assert!(
            view(&[late.clone(), pending]).manter_pix.is_empty(),
            "being paid"
        );
        let declined = attempt("c3", 1_000, AttemptState::Recusado);
        assert_eq!(
            view(&[late.clone(), declined]).manter_pix.len(),
            1,
            "a declined card does not pay it"
        );
        let dev = refund("d1", &late, 100, AttemptState::Pendente);
        assert!(
            view(&[late.clone(), dev]).manter_pix.is_empty(),
            "a devolução was asked for"
        );
        let refused = refund("d2", &late, 100, AttemptState::Recusado);
        assert_eq!(
            view(&[late.clone(), refused]).manter_pix.len(),
            1,
            "a devolução refused asks nothing"
        );
        let as_part = Attempt {
            sale_total: Some(Centavos::new(2_000).unwrap()),
            ..late
        };
        assert!(
            view(&[as_part]).manter_pix.is_empty(),
            "a part of a divided sale"
        );
    }
}
