//! The API's public JSON: what clients read and what the OpenAPI document describes.
//!
//! Stored rows ([`crate::store::Payment`], [`crate::gateway::simulator::LedgerRow`]) are typed for the
//! server's own use; the bodies here are made from them in one place, so a column can change
//! without changing the wire, and the wire cannot change by accident.

use crate::clock::{rfc3339, Millis};
use crate::domain::RefundStatus;
use crate::domain::{CaptureState, FieldError, Financing};
use crate::gateway::simulator::{LedgerRow, RefundLedgerRow};
use crate::store::{Payment, PixCharge, Refund};
use serde::{Deserialize, Serialize};

mod awaited;
mod ledger;
mod machine;

pub use awaited::*;
pub use ledger::*;
pub use machine::*;

/// A payment as `POST /pagamentos` answers it and lookups return it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[schema(as = Payment)]
pub struct PaymentBody {
    /// `pay_…`
    pub id: String,
    /// `aprovado` or `recusado`; an authorization (`"captura": false`) is `autorizado` until
    /// captured (then `aprovado`), undone (`desfeito`) or lapsed (`expirado`); a Pix paid after
    /// its charge was cancelled or expired is `recebido_apos_cancelamento` (money to give back,
    /// never a sale's payment; a devolução is made from it like a refund).
    #[schema(example = "aprovado")]
    pub status: &'static str,
    /// Amount in centavos.
    pub valor: i64,
    /// Always `BRL`.
    pub moeda: &'static str,
    /// An authorization's state: `pendente`, `capturada`, `desfeita` or `expirada` (absent: captured
    /// with its charge).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "pendente")]
    pub captura: Option<&'static str>,
    /// When an authorization lapses unless captured, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autorizacao_expira_em: Option<String>,
    /// Decline reason code (`cartao_recusado`, `saldo_insuficiente`), for declines only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub motivo: Option<String>,
    /// Free text from the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub descricao: Option<String>,
    /// Client reference from the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub referencia: Option<String>,
    /// The idempotency key that created it.
    pub idempotency_key: String,
    /// The id of the money at whoever took it: the gateway's charge id for a card, the Pix's
    /// endToEndId for a Pix.
    pub cobranca_id: String,
    /// Who took the money: `cartao` (the card gateway), `pix` (the Pix provider) or
    /// `maquininha` (the card machine's provider).
    #[schema(example = "cartao")]
    pub meio: &'static str,
    /// Creation time, RFC 3339.
    pub criado_em: String,
    /// The till that sent it, when it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<String>,
    /// `debito`, `credito` or `voucher`, when the request named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "credito")]
    pub metodo: Option<&'static str>,
    /// Installments, when the request named a method (1: à vista).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = 3)]
    pub parcelas: Option<u8>,
    /// Who finances a parcelado: `loja` (sem juros) or `emissor` (com juros).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "loja")]
    pub parcelamento: Option<&'static str>,
}

impl From<&Payment> for PaymentBody {
    fn from(p: &Payment) -> Self {
        Self {
            id: p.id.to_string(),
            status: p.public_status(),
            valor: p.valor.get(),
            moeda: "BRL",
            captura: p.captura.map(CaptureState::as_str),
            autorizacao_expira_em: p.autorizacao_expira_em.map(rfc3339),
            motivo: p.motivo.clone(),
            descricao: p.descricao.clone(),
            referencia: p.referencia.clone(),
            idempotency_key: p.idempotency_key.as_ref().to_string(),
            cobranca_id: p.cobranca_id.clone(),
            meio: p.meio.as_str(),
            criado_em: rfc3339(p.created_at),
            terminal: p.terminal.as_ref().map(ToString::to_string),
            metodo: p.plano.map(|plan| plan.method.as_str()),
            parcelas: p.plano.map(|p| p.parcelas),
            parcelamento: p.plano.and_then(|p| p.financing).map(Financing::as_str),
        }
    }
}

impl PaymentBody {
    /// The bytes a payment is answered with, first and on every replay.
    pub fn bytes_of(p: &Payment) -> Vec<u8> {
        serde_json::to_vec(&Self::from(p)).expect("a payment always serialises")
    }
}

/// A Pix charge as `POST /pagamentos` (`"metodo": "pix"`) answers it first (`aguardando`, the
/// bytes every replay repeats) and `GET /pagamentos/{id}` reads it later.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[schema(as = PagamentoPix)]
pub struct PixPaymentBody {
    /// `pay_…`
    pub id: String,
    /// `aguardando`, `aprovado`, `expirado`, `cancelado` or `recebido_apos_cancelamento`.
    pub status: &'static str,
    /// Always `pix`.
    pub metodo: &'static str,
    /// What every payment paid later says (amount, the request's words, key, time, till).
    #[serde(flatten)]
    pub head: AwaitedHeadBody,
    /// The charge at the Pix provider.
    pub pix: PixDetail,
    /// `GET` only: its devoluções (refunds paid back by the Pix provider), oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estornos: Option<Vec<RefundBody>>,
}

/// What `POST /pagamentos` answers 201 with: a card payment (`Payment`), or a Pix waiting for the
/// customer (`PagamentoPix`, `"metodo": "pix"`). For the document only: the server writes each
/// body with its own type.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[schema(as = PagamentoCriado)]
pub enum PaymentCreated {
    /// A card payment.
    Cartao(PaymentBody),
    /// A Pix.
    Pix(PixPaymentBody),
    /// A card at the card machine.
    Maquininha(MachinePaymentBody),
}

/// What `GET /pagamentos/{id}` answers: a card payment with its refunds, or a Pix in its state
/// now. For the document only, like [`PaymentCreated`].
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[schema(as = PagamentoConsultado)]
pub enum PaymentRead {
    /// A card payment.
    Cartao(PaymentDetail),
    /// A Pix.
    Pix(PixPaymentBody),
    /// A card at the card machine.
    Maquininha(MachinePaymentBody),
}

/// The Pix side of a Pix payment.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct PixDetail {
    /// The provider's charge id (`[a-zA-Z0-9]{26,35}`), derived from the idempotency key.
    pub txid: String,
    /// The BR Code ("Pix copia e cola"), the text of the QR.
    pub copia_e_cola: String,
    /// When it expires, RFC 3339.
    pub expira_em: String,
    /// The end-to-end id of the Pix that paid it, once paid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2eid: Option<String>,
    /// When it was paid, RFC 3339, once paid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pago_em: Option<String>,
}

impl From<&PixCharge> for PixPaymentBody {
    fn from(p: &PixCharge) -> Self {
        Self {
            id: p.head.id.to_string(),
            status: p.status.as_str(),
            metodo: "pix",
            head: AwaitedHeadBody::from(&p.head),
            pix: PixDetail {
                txid: p.txid.to_string(),
                copia_e_cola: p.copia_e_cola.clone(),
                expira_em: rfc3339(p.expira_em),
                e2eid: p.e2eid.clone(),
                pago_em: p.pago_em.map(rfc3339),
            },
            estornos: None,
        }
    }
}

impl PixPaymentBody {
    /// A charge with its devoluções, as `GET /pagamentos/{id}` reads it.
    pub fn with_refunds(p: &PixCharge, refunds: &[Refund]) -> Self {
        Self {
            estornos: Some(refunds.iter().map(RefundBody::from).collect()),
            ..Self::from(p)
        }
    }

    /// The bytes a Pix charge is answered with at this moment.
    pub fn bytes_of(p: &PixCharge) -> Vec<u8> {
        serde_json::to_vec(&Self::from(p)).expect("a Pix charge always serialises")
    }
}

/// A refund as `POST /pagamentos/{id}/estornos` answers it (201 paid back, 402 declined) and
/// `GET /pagamentos/{id}` lists it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[schema(as = Estorno)]
pub struct RefundBody {
    /// `est_…`
    pub id: String,
    /// The payment paid back (`pay_…`).
    pub pagamento: String,
    /// `aprovado` (paid back), `recusado` (declined by the gateway), or, in a payment's list
    /// only, `pendente` (in progress: its amount is held).
    pub status: &'static str,
    /// Amount in centavos.
    pub valor: i64,
    /// Always `BRL`.
    pub moeda: &'static str,
    /// The merchant's reason, from the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub motivo: Option<String>,
    /// Client reference from the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub referencia: Option<String>,
    /// The gateway's decline code (`estorno_recusado`), for declines only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recusa: Option<String>,
    /// The idempotency key that asked for it.
    pub idempotency_key: String,
    /// Creation time, RFC 3339.
    pub criado_em: String,
}

impl From<&Refund> for RefundBody {
    fn from(r: &Refund) -> Self {
        Self {
            id: r.id.to_string(),
            pagamento: r.payment_id.to_string(),
            status: r.status.as_str(),
            valor: r.valor.get(),
            moeda: "BRL",
            motivo: r.motivo.clone(),
            referencia: r.referencia.clone(),
            recusa: r.recusa.clone(),
            idempotency_key: r.idempotency_key.as_ref().to_string(),
            criado_em: rfc3339(r.created_at),
        }
    }
}

impl RefundBody {
    /// The bytes a refund is answered with, first and on every replay.
    pub fn bytes_of(r: &Refund) -> Vec<u8> {
        serde_json::to_vec(&Self::from(r)).expect("a refund always serialises")
    }
}

/// `GET /pagamentos/{id}`: the payment as it was answered, with its refunds.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = PagamentoDetalhado)]
pub struct PaymentDetail {
    /// The payment.
    #[serde(flatten)]
    pub pagamento: PaymentBody,
    /// Paid back so far, in centavos (approved refunds).
    pub estornado: i64,
    /// What can still be refunded, in centavos: the amount less approved refunds and those in
    /// progress. Zero for a declined payment.
    pub saldo_estornavel: i64,
    /// Its refunds, oldest first.
    pub estornos: Vec<RefundBody>,
}

impl PaymentDetail {
    /// A payment with its refunds.
    pub fn new(p: &Payment, refunds: &[Refund]) -> Self {
        let sum = |keep: fn(RefundStatus) -> bool| -> i64 {
            refunds
                .iter()
                .filter(|r| keep(r.status))
                .map(|r| r.valor.get())
                .sum()
        };
        let estornado = sum(|s| s == RefundStatus::Aprovado);
        let taken = sum(|s| s != RefundStatus::Recusado);
        let refundable = p.is_captured();
        Self {
            pagamento: PaymentBody::from(p),
            estornado,
            saldo_estornavel: if refundable { p.valor.get() - taken } else { 0 },
            estornos: refunds.iter().map(RefundBody::from).collect(),
        }
    }
}

/// Body of `POST /pagamentos/{id}/estornos` (documentation, like [`NovoPagamento`]).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct NovoEstorno {
    /// Amount to pay back in centavos: up to what is left of the payment (`saldo_estornavel`).
    valor: i64,
    /// Why, up to 255 characters (e.g. `devolução`).
    motivo: Option<String>,
    /// Client reference, up to 255 characters (the checkout app sends its attempt id).
    referencia: Option<String>,
}

/// Payments found by a lookup, or one page of a time range.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PaymentList {
    /// Oldest first; empty when none.
    pub pagamentos: Vec<PaymentBody>,
    /// A look-up by `referencia` or `idempotency_key` only: keys with that reference (or that
    /// key) still executing — or abandoned mid-execution and not yet recovered. Whatever they
    /// become, an empty `pagamentos` with entries here is **not** "no payment": ask again later,
    /// or cancel the key (`POST /pagamentos/cancelamentos`) to settle it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub em_andamento: Option<Vec<EmAndamento>>,
    /// A look-up by `referencia` or `idempotency_key` only: Pix charges found, in their state now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pix: Option<Vec<PixPaymentBody>>,
    /// A look-up by `referencia` or `idempotency_key` only: card-machine orders found, in their
    /// state now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maquininha: Option<Vec<MachinePaymentBody>>,
    /// A time range only: the `cursor` of the next page, or `null` on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, nullable)]
    pub proximo: Option<Option<String>>,
}

/// A key still executing, as a look-up lists it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct EmAndamento {
    /// The key.
    pub idempotency_key: String,
    /// When it was first claimed, RFC 3339.
    pub desde: String,
}

impl From<&crate::store::InProgressKey> for EmAndamento {
    fn from(k: &crate::store::InProgressKey) -> Self {
        Self {
            idempotency_key: k.key.as_ref().to_string(),
            desde: rfc3339(k.since),
        }
    }
}

/// Body of `POST /pagamentos/cancelamentos`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NovoCancelamento {
    /// The key of the payment to cancel (or to learn the payment of), as it was sent in
    /// `Idempotency-Key`.
    pub idempotency_key: String,
}

/// The answer of `POST /pagamentos/cancelamentos`: the same however often it is asked.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct CancelamentoBody {
    /// The key.
    pub idempotency_key: String,
    /// `cancelada`: nothing was charged under the key and nothing ever will be (any request with
    /// it is refused with 422 `idempotency-key-cancelled`); `pagamento`: the key had made the
    /// payment in `pagamento`, and nothing more was charged.
    pub resultado: &'static str,
    /// The key's payment, when `resultado` is `pagamento`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pagamento: Option<PaymentBody>,
}

impl CancelamentoBody {
    /// The body of a cancellation's outcome: the key's payment, or none (the key is void).
    pub fn new(key: &crate::domain::IdempotencyKey, payment: Option<&Payment>) -> Self {
        let (resultado, pagamento) = match payment {
            None => ("cancelada", None),
            Some(p) => ("pagamento", Some(PaymentBody::from(p))),
        };
        Self {
            idempotency_key: key.as_ref().to_string(),
            resultado,
            pagamento,
        }
    }
}

/// A sale paid in parts, as `GET /vendas/{referencia}` answers it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[schema(as = Venda)]
pub struct VendaBody {
    /// `ven_…`
    pub id: String,
    /// The till's reference.
    pub referencia: String,
    /// The till that opened it, when it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<String>,
    /// The sale's total, in centavos.
    pub total: i64,
    /// Approved, less approved refunds.
    pub pago: i64,
    /// Held on cards by authorizations (`"captura": false`) not captured or undone yet.
    pub autorizado: i64,
    /// Held by tenders still executing.
    pub em_andamento: i64,
    /// `total - pago - autorizado - em_andamento`: what a new tender may still take.
    pub falta: i64,
    /// Received by tenders after they were closed (a Pix paid after its cancellation or expiry),
    /// less what was given back: not in `pago`, the customer's money to give back.
    pub a_devolver: i64,
    /// Each tender, oldest first.
    pub pagamentos: Vec<VendaTender>,
}

/// One tender of a sale.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct VendaTender {
    /// Its payment (`pay_…`), once it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// Its amount, in centavos.
    pub valor: i64,
    /// What it holds of the sale now (an approved tender less its approved refunds).
    pub retido: i64,
    /// What it received that the sale does not take, less what was given back (a Pix paid after
    /// it was closed); absent when nothing.
    #[serde(skip_serializing_if = "is_zero")]
    pub a_devolver: i64,
    /// `aprovado`, `autorizado` (held, not captured), `recusado`, `em_andamento`, `liberado`
    /// (refused or cancelled before it charged, or an authorization undone or lapsed), or
    /// `recebido_apos_cancelamento` (a Pix paid after it was closed: to be given back).
    pub status: String,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

impl From<&crate::store::Sale> for VendaBody {
    fn from(s: &crate::store::Sale) -> Self {
        let (pago, autorizado, em_andamento) = (s.pago(), s.autorizado(), s.em_andamento());
        Self {
            id: s.id.clone(),
            referencia: s.referencia.clone(),
            terminal: (!s.terminal.is_empty()).then(|| s.terminal.clone()),
            total: s.total.get(),
            pago,
            autorizado,
            em_andamento,
            falta: s.total.get() - pago - autorizado - em_andamento,
            a_devolver: s.a_devolver(),
            pagamentos: s
                .tenders
                .iter()
                .map(|t| VendaTender {
                    id: t.payment_id.clone(),
                    idempotency_key: t.idempotency_key.clone(),
                    valor: t.valor.get(),
                    retido: t.retido,
                    a_devolver: t.a_devolver,
                    status: t.status.clone(),
                })
                .collect(),
        }
    }
}

/// Body of `POST /pagamentos` (documentation; the handler validates the raw JSON itself so that
/// every field error is reported and the fingerprint covers the body as sent).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct NovoPagamento {
    /// Amount in centavos, 1–100 000 000.
    valor: i64,
    /// `debito`, `credito`, `voucher`, `pix`, or `cartao` (the default: a card charge à vista
    /// whose function the gateway decides). Part of the fingerprint, like `parcelas`: the same
    /// key with another method or plan is 422. A Pix is answered 201 `aguardando` with the QR's
    /// text (`PagamentoPix`); its later state is read with `GET /pagamentos/{id}`.
    #[schema(example = "credito")]
    metodo: Option<String>,
    /// `credito` only: 1–12 installments (default 1, à vista). 2 or more need `parcelamento`,
    /// and the amount must split into that many installments of at least one centavo (each
    /// rounded up, the last absorbing the rounding).
    #[schema(example = 3)]
    parcelas: Option<u8>,
    /// A parcelado only: `loja` (sem juros: the store pays the cost) or `emissor` (com juros:
    /// the buyer's bank finances it).
    #[schema(example = "loja")]
    parcelamento: Option<String>,
    /// Card token (card payments only): `tok_aprovado`, `tok_recusado`,
    /// `tok_saldo_insuficiente`, `tok_lento`; `tok_estorno_recusado` and `tok_estorno_lento`
    /// approve, and their refunds are declined or slow; `tok_somente_debito` declines crédito
    /// and voucher, `tok_voucher` pays only a voucher (every other card declines one), and
    /// `tok_sem_parcelamento` declines a parcelado (`metodo_nao_aceito`,
    /// `parcelamento_nao_permitido`).
    cartao: Option<String>,
    /// A tender of a sale paid in parts: `{"referencia": "<the till's sale id>", "total":
    /// <centavos>}`. The server keeps the sale (per merchant and `terminal`) and answers 422
    /// `venda-excedida` to a tender that would take what its tenders paid or hold above the
    /// total (decided in the database, under concurrent tills, retries and replicas), and 422
    /// `venda-total-diferente` to one that names another total; nothing is stored for either.
    /// A Pix tender holds its part while it waits, and frees it if cancelled or expired unpaid.
    venda: Option<serde_json::Value>,
    /// Card only. `false`: authorize only — answered 201 `autorizado`; the amount is held on the
    /// card until `POST /pagamentos/{id}/captura` takes it or `/desfazimento` releases it, or the
    /// hold lapses (`expirado`). Absent or `true`: captured at once.
    captura: Option<bool>,
    /// Pix only: seconds until the charge expires (30–86 400; the server's default otherwise).
    expiracao: Option<u32>,
    /// The card machine that takes the card (its provider's `terminal_id`, 1–64 of `A-Z a-z 0-9
    /// _ -`): the customer pays there, so no `cartao`. `metodo` (`debito`, `credito`,
    /// `voucher`) and `parcelas` are what the machine offers first. Answered 201 `aguardando`
    /// (`PagamentoMaquininha`); its later state is read with `GET /pagamentos/{id}`, and
    /// `POST /pagamentos/{id}/cancelamento` cancels it while the machine has not taken it.
    #[schema(example = "PAGAR_SIM__POS-1")]
    maquininha: Option<String>,
    /// Free text, up to 255 characters.
    descricao: Option<String>,
    /// Client reference, up to 255 characters; findable forever with `GET /pagamentos?referencia=`.
    referencia: Option<String>,
    /// The till that sends it (1–64 of `A-Z a-z 0-9 _ . -`); a time range can be filtered by it.
    terminal: Option<String>,
}

/// An RFC 9457 problem: the body of every error.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem<'a> {
    /// Stable type URI, `urn:pagar:problem:<slug>`.
    #[serde(rename = "type")]
    pub kind: &'a str,
    /// Short summary.
    pub title: &'a str,
    /// HTTP status.
    pub status: u16,
    /// What happened, in pt-BR.
    pub detail: String,
    /// Whether retrying the same request with the same key may succeed.
    pub retryable: bool,
    /// Each invalid field, for `validation` problems.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<&'a [FieldError]>,
}

/// `GET /health`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok` (liveness) or `ready` (readiness).
    pub status: &'static str,
    /// How long completed idempotency keys are kept before the reaper deletes them.
    pub key_retention_secs: u64,
}
