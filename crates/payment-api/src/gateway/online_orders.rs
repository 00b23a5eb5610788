//! The acquirer's wire, in the shape of Mercado Pago's **Orders API for online payments**
//! (`POST /v1/orders` with `type: "online"`): what [`super::http::HttpGateway`] sends and reads,
//! and what the bundled acquirer simulator (`crates/adquirente`) answers, so the two sides are
//! one definition.
//!
//! Followed from Mercado Pago's reference: an order of one payment created under a mandatory
//! `X-Idempotency-Key` (the server's downstream key), `processing_mode: "automatic"`,
//! `capture_mode` `automatic` or `manual` (an authorization: `action_required` /
//! `waiting_capture` until `POST /v1/orders/{id}/capture` or `/cancel`), amounts as `"12.34"`,
//! `external_reference`, `transactions.payments[].payment_method` (`type`, `token`,
//! `installments`), the order states `processed` / `failed` / `canceled` / `expired`, refunds
//! under their own key (`POST /v1/orders/{id}/refund` with the payment's id and amount) listed in
//! `transactions.refunds`, and errors as `{"errors": [{"code", "message"}]}`.
//!
//! Where it is ours (each marked below, and in `docs/provedores.md`): `metadata` (the merchant and
//! what the server keeps with a charge), `financing` (who pays a parcelado's interest),
//! `capture_expires_at_ms`, a payment method with no `type` (a charge that named no method), the
//! decline codes (Pagar's own words, not Mercado Pago's `status_detail`), 201 for an order made
//! now and 200 for one made before under the same key, `GET /v1/orders?external_reference=`, and
//! a void of an unused key (`POST /v1/orders/cancel-by-idempotency-key`, as Square's cancel by
//! idempotency key): Mercado Pago has none, and Pagar's cancel by key needs one.

use super::{ChargeDecision, ChargeMetadata, GatewayRefund, GatewayResult};
use crate::clock::Millis;
use crate::domain::{CaptureState, CardMethod, CardPlan, Centavos, Fingerprint, TerminalId};
use serde::{Deserialize, Serialize};

/// `POST /v1/orders`: one order of one payment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewOrder {
    /// `"online"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `"automatic"`.
    pub processing_mode: String,
    /// `"automatic"` (captured with the charge) or `"manual"` (authorized only).
    pub capture_mode: String,
    /// The downstream key the order is made under (also its `X-Idempotency-Key`).
    pub external_reference: String,
    /// `"12.34"`.
    pub total_amount: String,
    /// The payment's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its one payment.
    pub transactions: NewTransactions,
    /// Ours: who the charge is for and what the server keeps with it.
    pub metadata: WireMetadata,
}

/// `transactions` of a new order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewTransactions {
    /// One payment.
    pub payments: Vec<NewPayment>,
}

/// A payment of a new order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewPayment {
    /// `"12.34"`.
    pub amount: String,
    /// The card and how it pays.
    pub payment_method: WireMethod,
}

/// `payment_method`: the card's function, token and installments.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WireMethod {
    /// `debit_card`, `credit_card`, `voucher_card`; absent when the charge named none.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The card token (only on the way in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Installments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installments: Option<u8>,
    /// Ours: who pays a parcelado's interest (`loja` or `emissor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub financing: Option<String>,
}

impl WireMethod {
    /// A plan on the wire (`None`: no method named).
    pub fn of(plano: Option<CardPlan>) -> Self {
        let Some(p) = plano else {
            return Self::default();
        };
        Self {
            kind: Some(
                match p.method {
                    CardMethod::Debito => "debit_card",
                    CardMethod::Credito => "credit_card",
                    CardMethod::Voucher => "voucher_card",
                }
                .to_string(),
            ),
            token: None,
            installments: Some(p.parcelas),
            financing: p.financing.map(|f| f.as_str().to_string()),
        }
    }

    /// The plan it names (`Ok(None)`: none), or why it names none we know.
    pub fn plan(&self) -> Result<Option<CardPlan>, String> {
        let Some(kind) = &self.kind else {
            return Ok(None);
        };
        let parcelas = self.installments.unwrap_or(1);
        let stored = match (kind.as_str(), parcelas) {
            ("debit_card", _) => "debito".to_string(),
            ("voucher_card", _) => "voucher".to_string(),
            ("credit_card", 0 | 1) => "credito".to_string(),
            ("credit_card", n) => format!(
                "credito:{n}:{}",
                self.financing.as_deref().unwrap_or("loja")
            ),
            (other, _) => return Err(format!("payment_method.type desconhecido: {other}")),
        };
        CardPlan::parse_stored(&stored)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

/// Ours: the merchant a charge is for and what the server keeps with it ([`ChargeMetadata`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WireMetadata {
    /// The merchant.
    pub merchant: String,
    /// The fingerprint of the request that charged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// The client's own reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub referencia: Option<String>,
    /// The payment's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descricao: Option<String>,
    /// The till that sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<String>,
}

impl WireMetadata {
    /// `metadata` of a charge for `merchant`.
    pub fn of(merchant: &str, m: &ChargeMetadata) -> Self {
        Self {
            merchant: merchant.to_string(),
            fingerprint: m.fingerprint.as_ref().map(|f| f.as_ref().to_string()),
            referencia: m.referencia.clone(),
            descricao: m.descricao.clone(),
            terminal: m.terminal.as_ref().map(|t| t.as_ref().to_string()),
        }
    }

    /// What the server kept with the charge, or why it cannot be read.
    pub fn charge_metadata(&self) -> Result<ChargeMetadata, String> {
        Ok(ChargeMetadata {
            fingerprint: self.fingerprint.clone().map(Fingerprint::from_stored),
            referencia: self.referencia.clone(),
            descricao: self.descricao.clone(),
            terminal: self
                .terminal
                .as_deref()
                .map(|t| TerminalId::parse(t).map_err(|e| e.to_string()))
                .transpose()?,
        })
    }
}

/// An order as the acquirer answers it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireOrder {
    /// The order id: the server's `cobranca_id`.
    pub id: String,
    /// `"online"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `processed`, `failed`, `action_required`, `canceled`, `expired`.
    pub status: String,
    /// `accredited`, `waiting_capture`, `canceled`, `expired`, or a decline code.
    pub status_detail: String,
    /// `automatic` or `manual`.
    pub capture_mode: String,
    /// The downstream key it was made under.
    pub external_reference: String,
    /// `"12.34"`.
    pub total_amount: String,
    /// Its payment, and the refunds asked.
    pub transactions: WireTransactions,
    /// Ours: see [`WireMetadata`].
    pub metadata: WireMetadata,
}

/// `transactions` of an order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireTransactions {
    /// One payment.
    pub payments: Vec<WirePayment>,
    /// Refunds (the refund endpoint lists the one made under its key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refunds: Vec<WireRefund>,
}

/// A payment of an order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WirePayment {
    /// Its id.
    pub id: String,
    /// `"12.34"`.
    pub amount: String,
    /// As the order's.
    pub status: String,
    /// As the order's.
    pub status_detail: String,
    /// How it was charged.
    pub payment_method: WireMethod,
    /// Ours: when an authorization lapses unless captured (the acquirer's clock, epoch ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_expires_at_ms: Option<Millis>,
}

/// A refund of an order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireRefund {
    /// The refund's id.
    pub id: String,
    /// The payment paid back.
    pub transaction_id: String,
    /// The key it was asked under.
    pub reference_id: String,
    /// `"12.34"`.
    pub amount: String,
    /// `processed` (paid back) or `failed`.
    pub status: String,
    /// `accredited`, or a decline code.
    pub status_detail: String,
}

/// `POST /v1/orders/{id}/refund`: what to pay back of which payment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefundAsk {
    /// One payment and its amount.
    pub transactions: Vec<RefundOf>,
}

/// A payment and the amount of it to pay back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefundOf {
    /// The payment's id.
    pub id: String,
    /// `"12.34"`.
    pub amount: String,
}

/// Ours: `POST /v1/orders/cancel-by-idempotency-key`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VoidAsk {
    /// The key that must never charge.
    pub idempotency_key: String,
    /// The merchant it belongs to.
    pub merchant: String,
}

/// Ours: what a void answers: the order the key had made (nothing voided), or none (void).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VoidAnswer {
    /// The order made before the void, if any.
    pub order: Option<WireOrder>,
}

/// Ours: `GET /v1/orders?external_reference=`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Found {
    /// The orders made under that key (one at most).
    pub data: Vec<WireOrder>,
}

/// The code of a charge refused because its key was voided.
pub const VOIDED: &str = "idempotency_key_voided";
/// The code of a capture or cancel of an order that is no authorization.
pub const NOT_AN_AUTHORIZATION: &str = "order_not_authorized";

/// Where a charge stands, as the order's `status` and `status_detail` say it.
fn status_of(decision: &ChargeDecision, captura: Option<CaptureState>) -> (&str, &str) {
    match (decision, captura) {
        (ChargeDecision::Recusado(motivo), _) => ("failed", motivo.as_str()),
        (ChargeDecision::Aprovado, None | Some(CaptureState::Capturada)) => {
            ("processed", "accredited")
        }
        (ChargeDecision::Aprovado, Some(CaptureState::Pendente)) => {
            ("action_required", "waiting_capture")
        }
        (ChargeDecision::Aprovado, Some(CaptureState::Desfeita)) => ("canceled", "canceled"),
        (ChargeDecision::Aprovado, Some(CaptureState::Expirada)) => ("expired", "expired"),
    }
}

impl WireOrder {
    /// The order of a charge made under `downstream_key` for `merchant`.
    pub fn of(result: &GatewayResult, downstream_key: &str, merchant: &str) -> Self {
        let (status, detail) = status_of(&result.decision, result.captura);
        let amount = result.valor.as_reais();
        Self {
            id: result.cobranca_id.clone(),
            kind: "online".into(),
            status: status.into(),
            status_detail: detail.into(),
            capture_mode: if result.captura.is_some() {
                "manual"
            } else {
                "automatic"
            }
            .into(),
            external_reference: downstream_key.to_string(),
            total_amount: amount.clone(),
            transactions: WireTransactions {
                payments: vec![WirePayment {
                    id: payment_id(&result.cobranca_id),
                    amount,
                    status: status.into(),
                    status_detail: detail.into(),
                    payment_method: WireMethod::of(result.plano),
                    capture_expires_at_ms: result.autorizacao_expira_em,
                }],
                refunds: Vec::new(),
            },
            metadata: WireMetadata::of(merchant, &result.metadata),
        }
    }

    /// The charge it is, as the server reads it (`fresh`: made by this call), or why it cannot
    /// be read.
    pub fn result(&self, fresh: bool) -> Result<GatewayResult, String> {
        let payment = self
            .transactions
            .payments
            .first()
            .ok_or("pedido sem pagamento")?;
        let valor = pagar_rules::decimal::parse(&self.total_amount)
            .and_then(|c| Centavos::new(c).ok())
            .ok_or_else(|| format!("total_amount ilegível: {}", self.total_amount))?;
        let manual = self.capture_mode == "manual";
        let (decision, captura) = match (self.status.as_str(), manual) {
            ("failed", _) => (ChargeDecision::Recusado(self.status_detail.clone()), None),
            ("processed", false) => (ChargeDecision::Aprovado, None),
            ("processed", true) => (ChargeDecision::Aprovado, Some(CaptureState::Capturada)),
            ("action_required", true) => (ChargeDecision::Aprovado, Some(CaptureState::Pendente)),
            ("canceled", true) => (ChargeDecision::Aprovado, Some(CaptureState::Desfeita)),
            ("expired", true) => (ChargeDecision::Aprovado, Some(CaptureState::Expirada)),
            (status, _) => {
                return Err(format!(
                    "pedido {} em estado desconhecido: {status} ({})",
                    self.id, self.capture_mode
                ))
            }
        };
        Ok(GatewayResult {
            cobranca_id: self.id.clone(),
            valor,
            decision,
            fresh,
            plano: payment.payment_method.plan()?,
            captura,
            autorizacao_expira_em: payment.capture_expires_at_ms,
            metadata: self.metadata.charge_metadata()?,
        })
    }
}

/// The id of an order's one payment.
pub fn payment_id(order_id: &str) -> String {
    format!("{order_id}-1")
}

impl WireRefund {
    /// A refund of `order_id` made under `key`.
    pub fn of(refund: &GatewayRefund, order_id: &str, key: &str, valor: Centavos) -> Self {
        let (status, detail) = match &refund.decision {
            ChargeDecision::Aprovado => ("processed", "accredited"),
            ChargeDecision::Recusado(motivo) => ("failed", motivo.as_str()),
        };
        Self {
            id: refund.estorno_id.clone(),
            transaction_id: payment_id(order_id),
            reference_id: key.to_string(),
            amount: valor.as_reais(),
            status: status.into(),
            status_detail: detail.into(),
        }
    }

    /// The refund as the server reads it.
    pub fn result(&self, fresh: bool) -> GatewayRefund {
        GatewayRefund {
            estorno_id: self.id.clone(),
            decision: match self.status.as_str() {
                "processed" => ChargeDecision::Aprovado,
                _ => ChargeDecision::Recusado(self.status_detail.clone()),
            },
            fresh,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_charge_reads_back_from_its_order_as_it_was_made() {
        let plans = [
            None,
            Some("debito"),
            Some("credito"),
            Some("voucher"),
            Some("credito:3:loja"),
            Some("credito:12:emissor"),
        ];
        let states = [
            (ChargeDecision::Aprovado, None),
            (ChargeDecision::Recusado("saldo_insuficiente".into()), None),
            (ChargeDecision::Aprovado, Some(CaptureState::Pendente)),
            (ChargeDecision::Aprovado, Some(CaptureState::Capturada)),
            (ChargeDecision::Aprovado, Some(CaptureState::Desfeita)),
            (ChargeDecision::Aprovado, Some(CaptureState::Expirada)),
        ];
        for plan in plans {
            for (decision, captura) in states.clone() {
                let charge = GatewayResult {
                    cobranca_id: "ch_1".into(),
                    valor: Centavos::new(123_456).unwrap(),
                    decision,
                    fresh: true,
                    plano: plan.map(|p| CardPlan::parse_stored(p).unwrap()),
                    captura,
                    autorizacao_expira_em: captura.map(|_| 99),
                    metadata: ChargeMetadata {
                        fingerprint: Some(Fingerprint::from_stored("ab".into())),
                        referencia: Some("venda-1".into()),
                        descricao: None,
                        terminal: Some(TerminalId::parse("caixa-01").unwrap()),
                    },
                };
                let wire = serde_json::to_string(&WireOrder::of(&charge, "dk_1", "loja")).unwrap();
                let order: WireOrder = serde_json::from_str(&wire).unwrap();
                assert_eq!(order.metadata.merchant, "loja");
                assert_eq!(order.result(true).unwrap(), charge, "{wire}");
            }
        }
    }

    #[test]
    fn an_order_in_a_state_the_server_does_not_know_is_no_answer() {
        let charge = GatewayResult {
            cobranca_id: "ch_1".into(),
            valor: Centavos::new(100).unwrap(),
            decision: ChargeDecision::Aprovado,
            fresh: false,
            plano: None,
            captura: None,
            autorizacao_expira_em: None,
            metadata: ChargeMetadata::default(),
        };
        let mut order = WireOrder::of(&charge, "dk_1", "loja");
        order.status = "in_process".into();
        assert!(order.result(false).unwrap_err().contains("in_process"));
        order.status = "processed".into();
        order.transactions.payments[0].payment_method.kind = Some("pix".into());
        assert!(order.result(false).is_err());
    }
}
