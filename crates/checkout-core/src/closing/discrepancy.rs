//! What a closing reports: each disagreement between the till and the server, and its kind.

use super::*;

/// What kind of disagreement a discrepancy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscrepancyKind {
    /// Approved at the till, no payment on the server: the till says the customer paid and the
    /// merchant will not get the money.
    ApprovedMissingOnServer,
    /// The server has an approved payment for an attempt the till still has as pending or in
    /// review: the customer was charged and the till does not know it.
    ChargedNotFinalLocally,
    /// The amounts differ.
    AmountMismatch,
    /// The till and the server disagree on approved/declined.
    StateMismatch,
    /// More than one approved payment on the server for one sale: a double charge.
    TwoChargesForOneSale,
    /// The server paid back a refund the till still has as pending or in review.
    RefundedNotFinalLocally,
    /// A payment this till sent (by `terminal`) that no attempt in the outbox knows.
    UnknownOnServer,
    /// A Pix the customer paid after the till showed it cancelled or expired, not given back in
    /// full: money that belongs to the customer.
    PixReceivedAfterCancel,
    /// The server charged another method or other installments than the till asked for.
    PlanMismatch,
    /// A sale paid in parts whose approved tenders on the server pass its total.
    TendersAboveTotal,
    /// The cash counted in the drawer is not what it should hold.
    DrawerDifference,
    /// A card authorization neither captured nor undone: money held on the customer's card
    /// for a sale nobody finished.
    AuthorizationOpen,
}

impl DiscrepancyKind {
    /// Every kind, in the order a screen lists them.
    pub const ALL: [DiscrepancyKind; 12] = [
        DiscrepancyKind::TwoChargesForOneSale,
        DiscrepancyKind::AuthorizationOpen,
        DiscrepancyKind::TendersAboveTotal,
        DiscrepancyKind::PixReceivedAfterCancel,
        DiscrepancyKind::ChargedNotFinalLocally,
        DiscrepancyKind::RefundedNotFinalLocally,
        DiscrepancyKind::ApprovedMissingOnServer,
        DiscrepancyKind::AmountMismatch,
        DiscrepancyKind::PlanMismatch,
        DiscrepancyKind::StateMismatch,
        DiscrepancyKind::UnknownOnServer,
        DiscrepancyKind::DrawerDifference,
    ];

    /// The heading a cashier reads.
    pub fn label(self) -> &'static str {
        match self {
            DiscrepancyKind::ApprovedMissingOnServer => "Aprovado no caixa, ausente no servidor",
            DiscrepancyKind::ChargedNotFinalLocally => {
                "Cobrado no servidor, não concluído no caixa"
            }
            DiscrepancyKind::AmountMismatch => "Valor diferente",
            DiscrepancyKind::StateMismatch => "Resultado diferente",
            DiscrepancyKind::TwoChargesForOneSale => "Duas cobranças para uma venda",
            DiscrepancyKind::RefundedNotFinalLocally => {
                "Estornado no servidor, não concluído no caixa"
            }
            DiscrepancyKind::UnknownOnServer => "No servidor, sem registro neste caixa",
            DiscrepancyKind::PixReceivedAfterCancel => "Pix recebido após cancelamento, a devolver",
            DiscrepancyKind::PlanMismatch => "Forma de pagamento ou parcelas diferentes",
            DiscrepancyKind::TendersAboveTotal => "Pagamentos acima do total da venda",
            DiscrepancyKind::DrawerDifference => "Diferença na gaveta",
            DiscrepancyKind::AuthorizationOpen => "Autorização em aberto no cartão",
        }
    }
}

/// One disagreement between the till and the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Discrepancy {
    /// What kind.
    pub kind: DiscrepancyKind,
    /// Its heading, pt-BR.
    pub label: &'static str,
    /// The sale's number that day (`0042`), when known.
    pub venda: Option<String>,
    /// The sale id.
    pub sale_id: Option<String>,
    /// The attempt concerned.
    pub attempt_id: Option<String>,
    /// The server payments concerned.
    pub payment_ids: Vec<String>,
    /// What the till has, in centavos.
    pub local_centavos: Option<Total>,
    /// What the server has, in centavos (the sum, for two charges).
    pub server_centavos: Option<Total>,
    /// What it means, pt-BR.
    pub detail: String,
}

impl Discrepancy {
    /// Something the server has that no attempt of this till knows (referenced by `referencia`,
    /// if it has one).
    pub(super) fn unknown_on_server(
        referencia: Option<String>,
        id: &str,
        valor: Total,
        detail: String,
    ) -> Self {
        let kind = DiscrepancyKind::UnknownOnServer;
        Self {
            kind,
            label: kind.label(),
            venda: None,
            sale_id: None,
            attempt_id: referencia,
            payment_ids: vec![id.to_string()],
            local_centavos: None,
            server_centavos: Some(valor),
            detail,
        }
    }
}
