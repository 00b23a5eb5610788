//! The closing's totals: the day's attempts by state, the Pix, and the approved by way of paying.

use super::*;

/// The day's attempts by state (the latest attempt of each sale and every earlier one: a
/// declined card and its retry are both counted, each in its state).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Approved.
    pub aprovado: Tally,
    /// Declined.
    pub recusado: Tally,
    /// Still waiting for the server.
    pub pendente: Tally,
    /// Waiting for a person.
    pub revisao: Tally,
    /// Authorized on a card, then undone or lapsed: nothing was taken.
    pub desfeito: Tally,
}

impl Totals {
    pub(super) fn add(&mut self, state: AttemptState, valor: Centavos) {
        match state {
            AttemptState::Aprovado => &mut self.aprovado,
            AttemptState::Recusado => &mut self.recusado,
            AttemptState::Pendente => &mut self.pendente,
            AttemptState::Revisao => &mut self.revisao,
        }
        .add(valor);
    }
}

/// The day's Pix apart, as the cashier saw them end (each also counted in [`Totals`] by its
/// attempt's state; a Pix given back is also in the refunds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PixTotals {
    /// Paid while the QR was on screen.
    pub recebidos: Tally,
    /// Paid after the till showed it cancelled or expired: kept as the sale's payment when the
    /// sale still waited, otherwise money to give back.
    pub recebidos_apos_cancelamento: Tally,
    /// Expired unpaid.
    pub expirados: Tally,
    /// Cancelled unpaid.
    pub cancelados: Tally,
    /// Still waiting for the customer.
    pub aguardando: Tally,
    /// Given back (devoluções approved).
    pub devolvidos: Tally,
}

impl PixTotals {
    pub(super) fn add(&mut self, a: &Attempt) {
        let late = a.is_late_pix();
        let t = match (a.state, a.motivo.as_deref()) {
            _ if a.is_refund() => {
                if a.state != AttemptState::Aprovado {
                    return;
                }
                &mut self.devolvidos
            }
            (AttemptState::Aprovado, Some("recebido_apos_cancelamento")) => {
                &mut self.recebidos_apos_cancelamento
            }
            (AttemptState::Aprovado, _) => &mut self.recebidos,
            (AttemptState::Recusado, _) if late => &mut self.recebidos_apos_cancelamento,
            (AttemptState::Recusado, Some("pix_expirado")) => &mut self.expirados,
            (AttemptState::Recusado, _) => &mut self.cancelados,
            (AttemptState::Pendente | AttemptState::Revisao, _) => &mut self.aguardando,
        };
        t.add(a.valor);
    }

    /// True when the day had a Pix.
    pub fn any(&self) -> bool {
        [
            self.recebidos,
            self.recebidos_apos_cancelamento,
            self.expirados,
            self.cancelados,
            self.aguardando,
            self.devolvidos,
        ]
        .iter()
        .any(|t| t.count > 0)
    }
}

/// How the day's approved payments were paid, one line per way (only the ways used).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MethodTally {
    /// `debito`, `credito`, `parcelado`, `voucher`, `pix`, or `cartao` (a card attempt that
    /// named no method).
    pub forma: &'static str,
    /// How the closing names it: `Aprovados no débito`, `Aprovados no crédito parcelado`, …
    pub rotulo: &'static str,
    /// Approved payments and their amounts.
    pub tally: Tally,
}

/// The ways a sale is paid, in the order the closing lists them.
pub(super) const FORMAS: [(&str, &str); 8] = [
    (Means::Dinheiro.as_str(), "Aprovados em dinheiro"),
    ("debito", "Aprovados no débito"),
    ("credito", "Aprovados no crédito à vista"),
    ("parcelado", "Aprovados no crédito parcelado"),
    ("voucher", "Aprovados no voucher"),
    (Means::Pix.as_str(), "Aprovados por Pix"),
    (Means::Maquininha.as_str(), "Aprovados na maquininha"),
    (
        Means::Cartao.as_str(),
        "Aprovados no cartão (forma não informada)",
    ),
];

/// The way an attempt paid, as [`FORMAS`] names it.
pub(super) fn forma_of(a: &Attempt) -> &'static str {
    match (a.metodo, a.plano) {
        (Means::Dinheiro | Means::Pix | Means::Maquininha, _) => a.metodo.as_str(),
        (Means::Cartao, None) => Means::Cartao.as_str(),
        (Means::Cartao, Some(p)) => match p.method {
            CardMethod::Debito => "debito",
            CardMethod::Voucher => "voucher",
            CardMethod::Credito if p.parcelas > 1 => "parcelado",
            CardMethod::Credito => "credito",
        },
    }
}

/// What the late Pix of declined attempts brought in.
pub(super) fn late_declined(attempts: &[&Attempt]) -> Total {
    attempts
        .iter()
        .filter(|a| a.is_late_pix())
        .map(|a| a.valor)
        .sum()
}
