//! Strict JSON: the one parser request bodies go through.

/// A body that is not one JSON value (or names a field twice).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MalformedJson(pub String);

/// Parses a request body as JSON, refusing an object that names a field twice (which value a
/// parser keeps differs between parsers, so the amount charged would depend on it). Nesting is
/// bounded by serde_json's recursion limit (128); lone UTF-16 surrogates in `\\u` escapes and
/// invalid UTF-8 are refused by the parser.
pub fn parse_json_strict(bytes: &[u8]) -> Result<serde_json::Value, MalformedJson> {
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
    let value = Strict
        .deserialize(&mut de)
        .map_err(|e| MalformedJson(e.to_string()))?;
    de.end().map_err(|e| MalformedJson(e.to_string()))?;
    Ok(value)
}
