//! Domain newtypes: parse, don't validate. Each type's constructor is the only way in.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// Largest amount one payment may carry: R$ 1.000.000,00.
pub const MAX_VALOR_CENTAVOS: i64 = 100_000_000;

/// An amount of money in centavos (BRL). Always positive and at most [`MAX_VALOR_CENTAVOS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Centavos(i64);

impl Centavos {
    /// Parses an amount from a JSON value: it must be an integer in `1..=MAX_VALOR_CENTAVOS`.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, String> {
        match value {
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(v) => Self::new(v),
                None if n.is_u64() => Err(format!(
                    "valor deve ser no máximo {MAX_VALOR_CENTAVOS} centavos"
                )),
                None => Err(
                    "valor deve ser um inteiro de centavos, não um número com casas decimais"
                        .into(),
                ),
            },
            serde_json::Value::Null => Err("valor é obrigatório".into()),
            _ => Err("valor deve ser um inteiro de centavos".into()),
        }
    }

    /// Builds an amount from centavos, enforcing the range.
    pub fn new(v: i64) -> Result<Self, String> {
        if v <= 0 {
            Err("valor deve ser maior que zero".into())
        } else if v > MAX_VALOR_CENTAVOS {
            Err(format!(
                "valor deve ser no máximo {MAX_VALOR_CENTAVOS} centavos"
            ))
        } else {
            Ok(Self(v))
        }
    }

    /// The amount in centavos.
    pub fn get(self) -> i64 {
        self.0
    }
}

/// A card token the gateway knows. Unknown tokens are rejected before anything is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardToken {
    /// `tok_aprovado`: approved.
    Aprovado,
    /// `tok_recusado`: declined with `cartao_recusado`.
    Recusado,
    /// `tok_saldo_insuficiente`: declined with `saldo_insuficiente`.
    SaldoInsuficiente,
    /// `tok_lento`: approved after the gateway's slow delay.
    Lento,
}

impl CardToken {
    /// Every token the simulator knows, in the order a UI would list them.
    pub const ALL: [CardToken; 4] = [
        CardToken::Aprovado,
        CardToken::Recusado,
        CardToken::SaldoInsuficiente,
        CardToken::Lento,
    ];

    /// Parses a token string.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| "cartao desconhecido: use um token de cartão válido".to_string())
    }

    /// The wire form of the token.
    pub fn as_str(self) -> &'static str {
        match self {
            CardToken::Aprovado => "tok_aprovado",
            CardToken::Recusado => "tok_recusado",
            CardToken::SaldoInsuficiente => "tok_saldo_insuficiente",
            CardToken::Lento => "tok_lento",
        }
    }
}

/// The merchant that owns an API key; idempotency keys and payments are scoped to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MerchantId(String);

impl MerchantId {
    /// Parses a merchant id: 1–64 characters of `[A-Za-z0-9_-]`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(format!(
                "merchant id inválido: {s:?} (1–64 caracteres de A-Z, a-z, 0-9, _ ou -)"
            ))
        }
    }
}

impl AsRef<str> for MerchantId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MerchantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why an `Idempotency-Key` header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No header at all.
    #[error("o cabeçalho Idempotency-Key é obrigatório")]
    Missing,
    /// More than one header field.
    #[error("envie exatamente um cabeçalho Idempotency-Key")]
    Duplicate,
    /// Empty value (bare or `""`).
    #[error("Idempotency-Key não pode ser vazio")]
    Empty,
    /// Over 255 characters.
    #[error("Idempotency-Key deve ter no máximo 255 caracteres")]
    TooLong,
    /// Not visible ASCII, or a malformed structured-field string.
    #[error("Idempotency-Key deve conter apenas ASCII visível")]
    BadCharacters,
}

/// An idempotency key: 1–255 visible ASCII characters. The structured-field string form
/// (`"abc"`) and the bare form (`abc`) parse to the same key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Largest key length, in characters.
    pub const MAX_LEN: usize = 255;

    /// Parses one header value (raw bytes, as they arrived).
    pub fn parse(raw: &[u8]) -> Result<Self, KeyError> {
        if raw.is_empty() {
            return Err(KeyError::Empty);
        }
        if !raw.iter().all(|b| (0x21..=0x7e).contains(b)) {
            // Header values may carry spaces only inside the quoted form.
            if !(raw.first() == Some(&b'"') && raw.iter().all(|b| (0x20..=0x7e).contains(b))) {
                return Err(KeyError::BadCharacters);
            }
        }
        let inner = if raw.len() >= 2 && raw[0] == b'"' && raw[raw.len() - 1] == b'"' {
            Self::unquote(&raw[1..raw.len() - 1])?
        } else if raw.contains(&b'"') && raw[0] == b'"' {
            return Err(KeyError::BadCharacters);
        } else {
            String::from_utf8(raw.to_vec()).map_err(|_| KeyError::BadCharacters)?
        };
        if inner.is_empty() {
            return Err(KeyError::Empty);
        }
        if inner.len() > Self::MAX_LEN {
            return Err(KeyError::TooLong);
        }
        if !inner.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(KeyError::BadCharacters);
        }
        Ok(Self(inner))
    }

    /// RFC 8941 sf-string body: `\"` and `\\` are the only escapes; a bare `"` is not allowed.
    fn unquote(body: &[u8]) -> Result<String, KeyError> {
        let mut out = String::with_capacity(body.len());
        let mut it = body.iter();
        while let Some(&b) = it.next() {
            match b {
                b'\\' => match it.next() {
                    Some(&e @ (b'"' | b'\\')) => out.push(e as char),
                    _ => return Err(KeyError::BadCharacters),
                },
                b'"' => return Err(KeyError::BadCharacters),
                _ => out.push(b as char),
            }
        }
        Ok(out)
    }
}

impl AsRef<str> for IdempotencyKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// SHA-256 of method, path and the canonical JSON body. Equal requests have equal fingerprints
/// whatever their key order or whitespace; `null` and a missing field differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint(String);

impl Fingerprint {
    /// Computes the fingerprint of a parsed request.
    pub fn of(method: &str, path: &str, body: &serde_json::Value) -> Self {
        let mut h = Sha256::new();
        h.update(method.as_bytes());
        h.update(b"\n");
        h.update(path.as_bytes());
        h.update(b"\n");
        let mut canonical = Vec::new();
        write_canonical(body, &mut canonical);
        h.update(canonical);
        Self(hex::encode(h.finalize()))
    }

    /// Rebuilds a fingerprint read back from the store.
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }
}

/// Compact JSON with every object's keys in byte order, whatever map serde_json was built with
/// (its `preserve_order` feature, enabled by any crate in a build, would keep insertion order).
/// Numbers keep serde_json's own form: `100` and `100.0` and `1e2` are different bodies.
fn write_canonical(v: &serde_json::Value, out: &mut Vec<u8>) {
    match v {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend(serde_json::to_vec(k).expect("a string serialises"));
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        serde_json::Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(v, out);
            }
            out.push(b']');
        }
        scalar => out.extend(serde_json::to_vec(scalar).expect("a scalar serialises")),
    }
}

impl AsRef<str> for Fingerprint {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// The key the server sends to the gateway: derived from (merchant, key), so every execution
/// of one idempotency key, including a takeover after a crash, charges the gateway at most once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownstreamKey(String);

impl DownstreamKey {
    /// Derives the downstream key.
    pub fn derive(merchant: &MerchantId, key: &IdempotencyKey) -> Self {
        let mut h = Sha256::new();
        h.update(b"pagar-downstream-v1\0");
        h.update(merchant.as_ref().as_bytes());
        h.update(b"\0");
        h.update(key.as_ref().as_bytes());
        Self(format!("dk_{}", hex::encode(&h.finalize()[..16])))
    }
}

impl AsRef<str> for DownstreamKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A validated `POST /pagamentos` body.
#[derive(Debug, Clone)]
pub struct PaymentRequest {
    /// Amount in centavos.
    pub valor: Centavos,
    /// Card token.
    pub cartao: CardToken,
    /// Free text shown on statements.
    pub descricao: Option<String>,
    /// The client's own reference (the checkout app sends its attempt id).
    pub referencia: Option<String>,
}

/// Parses a request body as JSON, refusing an object that names a field twice (which value a
/// parser keeps differs between parsers, so the amount charged would depend on it). Nesting is
/// bounded by serde_json's recursion limit (128); lone UTF-16 surrogates in `\\u` escapes and
/// invalid UTF-8 are refused by the parser.
pub fn parse_json_strict(bytes: &[u8]) -> Result<serde_json::Value, String> {
    use serde::de::{DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
    struct Strict;
    impl<'de> DeserializeSeed<'de> for Strict {
        type Value = serde_json::Value;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Strict {
        type Value = serde_json::Value;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
            Ok(v.into())
        }
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok(v.into())
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok(v.into())
        }
        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(v.into())
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(v.into())
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(serde_json::Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut items = Vec::new();
            while let Some(v) = seq.next_element_seed(Strict)? {
                items.push(v);
            }
            Ok(items.into())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut obj = serde_json::Map::new();
            while let Some(k) = map.next_key::<String>()? {
                if obj.contains_key(&k) {
                    return Err(A::Error::custom(format!("campo {k:?} repetido")));
                }
                let v = map.next_value_seed(Strict)?;
                obj.insert(k, v);
            }
            Ok(obj.into())
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Strict.deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

/// Longest `descricao` and `referencia`, in characters.
pub const MAX_TEXT_LEN: usize = 255;

impl PaymentRequest {
    /// Validates a parsed JSON body. Every problem is reported, not just the first.
    pub fn from_json(body: &serde_json::Value) -> Result<Self, Vec<FieldError>> {
        let Some(obj) = body.as_object() else {
            return Err(vec![FieldError::new("", "o corpo deve ser um objeto JSON")]);
        };
        let mut errors = Vec::new();
        let valor = match obj.get("valor") {
            None => Err("valor é obrigatório".to_string()),
            Some(v) => Centavos::from_json(v),
        }
        .map_err(|e| errors.push(FieldError::new("valor", e)))
        .ok();
        let cartao = match obj.get("cartao") {
            None | Some(serde_json::Value::Null) => Err("cartao é obrigatório".to_string()),
            Some(serde_json::Value::String(s)) => CardToken::parse(s),
            Some(_) => Err("cartao deve ser um texto".to_string()),
        }
        .map_err(|e| errors.push(FieldError::new("cartao", e)))
        .ok();
        let mut text = |name: &'static str| match obj.get(name) {
            None | Some(serde_json::Value::Null) => None,
            // Control characters (NUL above all: PostgreSQL cannot store it in text) are refused
            // here, before any charge, so that no request can charge and then fail to be stored.
            Some(serde_json::Value::String(s)) if s.chars().any(char::is_control) => {
                errors.push(FieldError::new(
                    name,
                    format!("{name} não pode ter caracteres de controle (como \\u0000)"),
                ));
                None
            }
            Some(serde_json::Value::String(s)) if s.chars().count() <= MAX_TEXT_LEN => {
                Some(s.clone())
            }
            Some(serde_json::Value::String(_)) => {
                errors.push(FieldError::new(
                    name,
                    format!("{name} deve ter no máximo {MAX_TEXT_LEN} caracteres"),
                ));
                None
            }
            Some(_) => {
                errors.push(FieldError::new(name, format!("{name} deve ser um texto")));
                None
            }
        };
        let descricao = text("descricao");
        let referencia = text("referencia");
        for k in obj.keys() {
            if !["valor", "cartao", "descricao", "referencia"].contains(&k.as_str()) {
                errors.push(FieldError::new(k.clone(), "campo desconhecido"));
            }
        }
        match (valor, cartao) {
            (Some(valor), Some(cartao)) if errors.is_empty() => Ok(Self {
                valor,
                cartao,
                descricao,
                referencia,
            }),
            _ => Err(errors),
        }
    }
}

/// One invalid field of a request body.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// The field's name (empty for the body as a whole).
    pub campo: String,
    /// What is wrong with it, in pt-BR.
    pub erro: String,
}

impl FieldError {
    /// An error on one field.
    pub fn new(campo: impl Into<String>, erro: impl Into<String>) -> Self {
        Self {
            campo: campo.into(),
            erro: erro.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bare_key_and_its_quoted_form_are_the_same_key() {
        assert_eq!(
            IdempotencyKey::parse(b"abc-123").unwrap(),
            IdempotencyKey::parse(b"\"abc-123\"").unwrap()
        );
    }

    #[test]
    fn a_key_longer_than_255_chars_is_rejected() {
        assert_eq!(
            IdempotencyKey::parse(&[b'a'; 255]).unwrap().as_ref().len(),
            255
        );
        assert_eq!(IdempotencyKey::parse(&[b'a'; 256]), Err(KeyError::TooLong));
    }

    #[test]
    fn empty_and_non_visible_keys_are_rejected() {
        assert_eq!(IdempotencyKey::parse(b""), Err(KeyError::Empty));
        assert_eq!(IdempotencyKey::parse(b"\"\""), Err(KeyError::Empty));
        assert_eq!(IdempotencyKey::parse(b"a b"), Err(KeyError::BadCharacters));
        assert_eq!(
            IdempotencyKey::parse(b"\"a b\""),
            Err(KeyError::BadCharacters)
        );
        assert_eq!(
            IdempotencyKey::parse("chave-ç".as_bytes()),
            Err(KeyError::BadCharacters)
        );
        assert_eq!(
            IdempotencyKey::parse(b"\"abc"),
            Err(KeyError::BadCharacters)
        );
        assert_eq!(
            IdempotencyKey::parse(b"\"a\"b\""),
            Err(KeyError::BadCharacters)
        );
    }

    #[test]
    fn escapes_in_the_quoted_form_are_decoded() {
        assert_eq!(
            IdempotencyKey::parse(br#""a\"b""#).unwrap().as_ref(),
            "a\"b"
        );
    }

    #[test]
    fn key_order_and_whitespace_do_not_change_the_fingerprint() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"valor":100,"cartao":"tok_aprovado"}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str("{ \"cartao\" : \"tok_aprovado\",\n \"valor\": 100 }").unwrap();
        assert_eq!(
            Fingerprint::of("POST", "/pagamentos", &a),
            Fingerprint::of("POST", "/pagamentos", &b)
        );
    }

    #[test]
    fn null_and_a_missing_field_have_different_fingerprints() {
        let a = json!({"valor": 100, "cartao": "tok_aprovado"});
        let b = json!({"valor": 100, "cartao": "tok_aprovado", "descricao": null});
        assert_ne!(
            Fingerprint::of("POST", "/p", &a),
            Fingerprint::of("POST", "/p", &b)
        );
    }

    #[test]
    fn valor_must_be_a_positive_integer_up_to_the_limit() {
        for bad in [
            json!(0),
            json!(-1),
            json!(1.5),
            json!(100.0),
            json!("100"),
            json!(100_000_001),
            json!(u64::MAX),
        ] {
            assert!(
                Centavos::from_json(&bad).is_err(),
                "{bad} should be rejected"
            );
        }
        assert_eq!(
            Centavos::from_json(&json!(100_000_000)).unwrap().get(),
            100_000_000
        );
    }

    #[test]
    fn an_unknown_card_token_is_a_validation_error() {
        let err = PaymentRequest::from_json(&json!({"valor": 100, "cartao": "tok_qualquer"}))
            .unwrap_err();
        assert_eq!(err[0].campo, "cartao");
    }

    #[test]
    fn the_articles_body_is_a_valid_request() {
        let req =
            PaymentRequest::from_json(&json!({"valor": 100, "cartao": "tok_aprovado"})).unwrap();
        assert_eq!(req.valor.get(), 100);
        assert_eq!(req.cartao, CardToken::Aprovado);
    }

    #[test]
    fn the_downstream_key_differs_per_merchant() {
        let k = IdempotencyKey::parse(b"k").unwrap();
        let a = DownstreamKey::derive(&MerchantId::parse("a").unwrap(), &k);
        let b = DownstreamKey::derive(&MerchantId::parse("b").unwrap(), &k);
        assert_ne!(a, b);
    }
}
