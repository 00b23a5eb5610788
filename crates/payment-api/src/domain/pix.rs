//! A Pix charge's identity, request and states.

use super::request::{json_object, unknown_beside_ask};
use super::{FieldError, IdempotencyKey, MerchantId, PaymentAsk};
use sha2::{Digest, Sha256};

/// The txid of a charge at the Pix provider (`[a-zA-Z0-9]{26,35}`, unique per receiver): derived
/// from (merchant, idempotency key), so every try of one key, and a takeover after a crash, asks
/// the provider for the same charge, and the provider refuses a second one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Txid(String);

impl Txid {
    /// The txid of a key: 32 hex characters.
    pub fn derive(merchant: &MerchantId, key: &IdempotencyKey) -> Self {
        let mut h = Sha256::new();
        h.update(b"pagar-pix-txid-v1\0");
        h.update(merchant.as_ref().as_bytes());
        h.update(b"\0");
        h.update(key.as_ref().as_bytes());
        Self(hex::encode(&h.finalize()[..16]))
    }

    /// A txid read from a webhook, the provider or the store: `None` when it is not one.
    pub fn parse(s: &str) -> Option<Self> {
        ((26..=35).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric()))
            .then(|| Self(s.to_string()))
    }
}

pagar_rules::text_newtype!(Txid);

pagar_rules::words! {
    /// Where a Pix charge stands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum PixStatus / UnknownPixStatus("status de Pix desconhecido") {
        /// Shown to the customer, not paid yet (the first answer, replayed for the key).
        Aguardando = "aguardando",
        /// Paid while it was waiting: the sale is paid.
        Aprovado = "aprovado",
        /// Its time ran out unpaid; it was removed at the provider.
        Expirado = "expirado",
        /// The cashier cancelled it; it was removed at the provider.
        Cancelado = "cancelado",
        /// Paid after it expired or was cancelled: the money is the merchant's and must be kept as
        /// the payment or given back, never dropped.
        RecebidoAposCancelamento = "recebido_apos_cancelamento",
    }
}

impl PixStatus {
    /// True once money was received for it.
    pub fn received(self) -> bool {
        matches!(
            self,
            PixStatus::Aprovado | PixStatus::RecebidoAposCancelamento
        )
    }
}

/// Shortest and longest time a Pix charge may be shown, in seconds.
pub const PIX_EXPIRY_RANGE: std::ops::RangeInclusive<u32> = 30..=86_400;

/// A validated `POST /pagamentos` body with `"metodo": "pix"`.
#[derive(Debug, Clone)]
pub struct PixRequest {
    /// What every payment asks (its `descricao` is shown to the payer: `solicitacaoPagador`).
    pub ask: PaymentAsk,
    /// Seconds until it expires (the server's default when absent).
    pub expiracao: Option<u32>,
}

impl PixRequest {
    /// True when a payment body asks for Pix.
    pub fn wanted(body: &serde_json::Value) -> bool {
        body.get("metodo").and_then(serde_json::Value::as_str) == Some("pix")
    }

    /// Validates a parsed body. Every problem is reported.
    pub fn from_json(body: &serde_json::Value) -> Result<Self, Vec<FieldError>> {
        let obj = json_object(body)?;
        let mut errors = Vec::new();
        let ask = PaymentAsk::from_json(obj, &mut errors);
        if obj.get("metodo").and_then(serde_json::Value::as_str) != Some("pix") {
            errors.push(FieldError::new("metodo", "metodo deve ser \"pix\""));
        }
        let expiracao = match obj.get("expiracao") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) if PIX_EXPIRY_RANGE.contains(&n) => Some(n),
                _ => {
                    errors.push(FieldError::new(
                        "expiracao",
                        format!(
                            "expiracao deve ser um inteiro de segundos entre {} e {}",
                            PIX_EXPIRY_RANGE.start(),
                            PIX_EXPIRY_RANGE.end()
                        ),
                    ));
                    None
                }
            },
        };
        if obj.contains_key("cartao") {
            errors.push(FieldError::new("cartao", "um Pix não leva cartão"));
        }
        unknown_beside_ask(obj, &["metodo", "expiracao", "cartao"], &mut errors);
        match ask {
            Some(ask) if errors.is_empty() => Ok(Self { ask, expiracao }),
            _ => Err(errors),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_txid_is_what_the_api_pix_accepts_and_the_same_for_the_same_key() {
        let m = MerchantId::parse("loja").unwrap();
        let k = IdempotencyKey::parse(b"k-1").unwrap();
        let t = Txid::derive(&m, &k);
        assert_eq!(Txid::parse(t.as_ref()), Some(t.clone()));
        assert_eq!(t, Txid::derive(&m, &k));
        assert_ne!(t, Txid::derive(&m, &IdempotencyKey::parse(b"k-2").unwrap()));
        assert_ne!(t, Txid::derive(&MerchantId::parse("outra").unwrap(), &k));
        for bad in ["", "abc", &"a".repeat(36), "abcdefghijklmnopqrstuvwxy-z"] {
            assert_eq!(Txid::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_status_round_trips() {
        for s in PixStatus::ALL {
            assert_eq!(PixStatus::parse(s.as_str()), Ok(s));
        }
        assert!(PixStatus::parse("pago").is_err());
    }

    #[test]
    fn a_pix_request_is_validated_field_by_field() {
        let ok =
            PixRequest::from_json(&json!({"valor": 1234, "metodo": "pix", "referencia": "a-1"}))
                .unwrap();
        assert_eq!(ok.ask.valor.get(), 1234);
        let errs = PixRequest::from_json(
            &json!({"valor": 0, "metodo": "pix", "expiracao": 5, "cartao": "tok_aprovado", "x": 1}),
        )
        .unwrap_err();
        let fields: Vec<_> = errs.iter().map(|e| e.campo.as_str()).collect();
        assert_eq!(fields, ["valor", "expiracao", "cartao", "x"]);
    }
}
