//! The fingerprint of a request: what makes "the same request" under one key.

use sha2::{Digest, Sha256};

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

/// The digest of a request's exact bytes (method, path and body as received). Two requests with
/// the same digest have the same [`Fingerprint`], so a retry that sends the very bytes of a
/// request whose fingerprint was checked can be answered without parsing its body again. A
/// different digest says nothing: the bodies may still be the same JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyDigest([u8; 32]);

impl BodyDigest {
    /// SHA-256 of `method`, `path` and `body`.
    pub fn of(method: &str, path: &str, body: &[u8]) -> Self {
        let mut h = Sha256::new();
        h.update(method.as_bytes());
        h.update(b"\n");
        h.update(path.as_bytes());
        h.update(b"\n");
        h.update(body);
        Self(h.finalize().into())
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
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
