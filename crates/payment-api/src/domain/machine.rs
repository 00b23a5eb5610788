//! A card taken at the card machine beside the cashier (`POST /pagamentos` with `"maquininha"`):
//! the order's key at the machine's provider, where the order stands, and the validated request.

use super::request::{json_object, unknown_beside_ask};
use super::{CardPlan, FieldError, IdempotencyKey, MerchantId, PaymentAsk};
use sha2::{Digest, Sha256};

/// The `X-Idempotency-Key` of a key's order at the machine's provider, derived from (merchant,
/// key): a retry, or a takeover after a crash, asks for the same order, and the provider answers
/// the one it made instead of a second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderKey(String);

impl OrderKey {
    /// The order key of a payment key.
    pub fn derive(merchant: &MerchantId, key: &IdempotencyKey) -> Self {
        Self(Self::hash(b"pagar-maquininha-order-v1\0", merchant, key))
    }

    /// The key of the cancel of that order (another namespace: never the order's own).
    pub fn derive_cancel(merchant: &MerchantId, key: &IdempotencyKey) -> Self {
        Self(Self::hash(b"pagar-maquininha-cancel-v1\0", merchant, key))
    }

    /// The key of a refund asked under a refund's (merchant, key).
    pub fn derive_refund(merchant: &MerchantId, key: &IdempotencyKey) -> Self {
        Self(Self::hash(b"pagar-maquininha-refund-v1\0", merchant, key))
    }

    fn hash(namespace: &[u8], merchant: &MerchantId, key: &IdempotencyKey) -> String {
        let mut h = Sha256::new();
        h.update(namespace);
        h.update(merchant.as_ref().as_bytes());
        h.update(b"\0");
        h.update(key.as_ref().as_bytes());
        format!("mq_{}", hex::encode(&h.finalize()[..16]))
    }
}

impl AsRef<str> for OrderKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

pagar_rules::words! {
    /// Where a card-machine payment stands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum MachineStatus / UnknownMachineStatus("status de pagamento na maquininha desconhecido") {
        /// Sent to the machine; no card has paid it yet (the first answer, replayed for the key).
        Aguardando = "aguardando",
        /// A card paid it at the machine: the sale is paid.
        Aprovado = "aprovado",
        /// The card was declined at the machine.
        Recusado = "recusado",
        /// Cancelled before any card paid it, by the cashier (before the machine took it) or on the
        /// machine; it can no longer be paid.
        Cancelado = "cancelado",
        /// Nobody paid it in time; it can no longer be paid.
        Expirado = "expirado",
    }
}

/// A machine's id at its provider (Mercado Pago's `terminal_id`, e.g.
/// `NEWLAND_N950__N950NCB801293324`): 1–64 letters, digits, `_` or `-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MachineId(String);

impl MachineId {
    /// Parses a machine id.
    pub fn parse(s: &str) -> Option<Self> {
        let ok = (1..=64).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        ok.then(|| Self(s.to_string()))
    }
}

pagar_rules::text_newtype!(MachineId);

/// A validated `POST /pagamentos` body that names a `maquininha`: the card is the customer's, at
/// the machine, so there is no `cartao` token.
#[derive(Debug, Clone)]
pub struct MachineRequest {
    /// What every payment asks.
    pub ask: PaymentAsk,
    /// The machine that takes the card.
    pub maquininha: MachineId,
    /// Débito, crédito (à vista or parcelado) or voucher, offered first at the machine; `None`:
    /// the customer chooses there.
    pub plano: Option<CardPlan>,
}

impl MachineRequest {
    /// True when a payment body asks for the card machine.
    pub fn wanted(body: &serde_json::Value) -> bool {
        body.get("maquininha").is_some()
    }

    /// Validates a parsed body. Every problem is reported.
    pub fn from_json(body: &serde_json::Value) -> Result<Self, Vec<FieldError>> {
        let obj = json_object(body)?;
        let mut errors = Vec::new();
        let ask = PaymentAsk::from_json(obj, &mut errors);
        let valor = ask.as_ref().map(|a| a.valor);
        let maquininha = match obj.get("maquininha").and_then(serde_json::Value::as_str) {
            Some(s) => MachineId::parse(s),
            None => None,
        };
        if maquininha.is_none() {
            errors.push(FieldError::new(
                "maquininha",
                "maquininha deve ser o id da maquininha: 1 a 64 letras, dígitos, _ ou -",
            ));
        }
        let plano = CardPlan::from_json(obj, valor, &mut errors);
        if obj.contains_key("cartao") {
            errors.push(FieldError::new(
                "cartao",
                "na maquininha o cartão é o do cliente: não mande cartao",
            ));
        }
        if obj.contains_key("captura") {
            errors.push(FieldError::new(
                "captura",
                "a maquininha captura na hora: não mande captura",
            ));
        }
        let own = [
            "maquininha",
            "metodo",
            "parcelas",
            "parcelamento",
            "cartao",
            "captura",
        ];
        unknown_beside_ask(obj, &own, &mut errors);
        match (ask, maquininha) {
            (Some(ask), Some(maquininha)) if errors.is_empty() => Ok(Self {
                ask,
                maquininha,
                plano,
            }),
            _ => Err(errors),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_machine_request_is_validated_and_every_problem_reported() {
        let ok = MachineRequest::from_json(&json!({
            "valor": 10000, "maquininha": "PAGAR_SIM__POS-1", "metodo": "credito",
            "parcelas": 3, "parcelamento": "loja", "referencia": "venda-1"
        }))
        .unwrap();
        assert_eq!(ok.maquininha.as_ref(), "PAGAR_SIM__POS-1");
        assert_eq!(ok.plano.unwrap().parcelas, 3);
        let bare = MachineRequest::from_json(&json!({"valor": 1, "maquininha": "POS-1"})).unwrap();
        assert!(bare.plano.is_none(), "the customer chooses at the machine");
        let errors = MachineRequest::from_json(&json!({
            "valor": 0, "maquininha": "bad id!", "cartao": "tok_aprovado", "metodo": "debito",
            "parcelas": 2, "extra": 1
        }))
        .unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.campo.as_str()).collect();
        for f in ["valor", "maquininha", "cartao", "parcelas", "extra"] {
            assert!(fields.contains(&f), "{f} in {fields:?}");
        }
    }

    #[test]
    fn order_keys_differ_by_key_merchant_and_purpose_and_never_change() {
        let m = MerchantId::parse("loja_a").unwrap();
        let k = IdempotencyKey::parse(b"k-1").unwrap();
        let order = OrderKey::derive(&m, &k);
        assert_eq!(order, OrderKey::derive(&m, &k));
        assert_ne!(order, OrderKey::derive_cancel(&m, &k));
        assert_ne!(order, OrderKey::derive_refund(&m, &k));
        let other = MerchantId::parse("loja_b").unwrap();
        assert_ne!(order, OrderKey::derive(&other, &k));
        assert!(order.as_ref().len() <= 64, "fits Mercado Pago's key");
    }
}
