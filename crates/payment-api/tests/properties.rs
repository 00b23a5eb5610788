//! Property tests of what the server decides before it touches a store: the Idempotency-Key's
//! syntax, the request fingerprint, and the strict JSON parser. Thousands of cases each.

use payment_api::domain::{parse_json_strict, Fingerprint, IdempotencyKey};
use proptest::prelude::*;
use serde_json::Value;

/// `cases` a property, or fewer when `PROPTEST_CASES` says so (`make test` runs 500 of each;
/// `make properties` runs them all).
fn config(cases: u32) -> ProptestConfig {
    let cap = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(u32::MAX);
    ProptestConfig {
        cases: cases.min(cap),
        ..ProptestConfig::default()
    }
}

/// The sf-string form of a key: quoted, with `\` and `"` escaped.
fn sf_string(key: &str) -> String {
    let mut out = String::from("\"");
    for c in key.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Any JSON value, a few levels deep, with unicode strings and every number form.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("\\PC{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = serde_json::Map<String, Value>> {
    prop::collection::btree_map("[a-z_]{1,8}", json_value(), 0..8)
        .prop_map(|m| m.into_iter().collect())
}

/// JSON text of `v` with every object's keys written in reverse order and extra whitespace.
fn reversed_text(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.reverse();
            let parts: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| {
                    format!(
                        "{} :\n {}",
                        serde_json::to_string(k).unwrap(),
                        reversed_text(v)
                    )
                })
                .collect();
            format!("{{ {} }}", parts.join(" ,\t"))
        }
        Value::Array(items) => format!(
            "[ {} ]",
            items
                .iter()
                .map(reversed_text)
                .collect::<Vec<_>>()
                .join(" , ")
        ),
        scalar => serde_json::to_string(scalar).unwrap(),
    }
}

/// JSON text of a string with every non-ASCII character as a `\u` escape (surrogate pairs too).
fn escaped(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

fn fp(v: &Value) -> Fingerprint {
    Fingerprint::of("POST", "/pagamentos", v)
}

proptest! {
    #![proptest_config(config(3_000))]

    #[test]
    fn any_bytes_are_parsed_or_refused_and_an_accepted_key_is_1_to_255_visible_ascii(
        raw in prop::collection::vec(any::<u8>(), 0..300)
    ) {
        if let Ok(key) = IdempotencyKey::parse(&raw) {
            let k = key.as_ref();
            prop_assert!(!k.is_empty() && k.len() <= 255);
            prop_assert!(k.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        }
    }

    #[test]
    fn a_visible_ascii_key_means_the_same_bare_and_as_an_sf_string(key in "[!-~]{1,255}") {
        let quoted = IdempotencyKey::parse(sf_string(&key).as_bytes()).unwrap();
        prop_assert_eq!(quoted.as_ref(), key.as_str());
        if !key.starts_with('"') {
            let bare = IdempotencyKey::parse(key.as_bytes()).unwrap();
            prop_assert_eq!(bare.as_ref(), key.as_str());
        }
    }

    #[test]
    fn a_key_longer_than_255_characters_is_refused(key in "[!-~]{256,400}") {
        prop_assert!(IdempotencyKey::parse(key.as_bytes()).is_err());
        prop_assert!(IdempotencyKey::parse(sf_string(&key).as_bytes()).is_err());
    }

    #[test]
    fn a_byte_outside_visible_ascii_is_refused_in_either_form(
        key in "[#-~]{1,100}",
        at in any::<prop::sample::Index>(),
        bad in prop_oneof![0u8..=0x20, 0x7fu8..=0xff],
    ) {
        let mut raw = key.into_bytes();
        raw.insert(at.index(raw.len() + 1), bad);
        prop_assert!(IdempotencyKey::parse(&raw).is_err(), "{raw:?}");
        let mut quoted = vec![b'"'];
        quoted.extend_from_slice(&raw);
        quoted.push(b'"');
        prop_assert!(IdempotencyKey::parse(&quoted).is_err(), "{quoted:?}");
    }

    #[test]
    fn key_order_and_whitespace_do_not_change_the_fingerprint(body in object()) {
        let v = Value::Object(body);
        let text = reversed_text(&v);
        let reparsed = parse_json_strict(text.as_bytes()).unwrap();
        prop_assert_eq!(fp(&reparsed), fp(&v));
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        prop_assert_eq!(fp(&parse_json_strict(pretty.as_bytes()).unwrap()), fp(&v));
    }

    #[test]
    fn unicode_escapes_and_literal_characters_are_the_same_body(s in "\\PC{0,40}") {
        let literal = format!("{{\"descricao\":{}}}", serde_json::to_string(&s).unwrap());
        let escapes = format!("{{\"descricao\":{}}}", escaped(&s));
        let a = parse_json_strict(literal.as_bytes()).unwrap();
        let b = parse_json_strict(escapes.as_bytes()).unwrap();
        prop_assert_eq!(fp(&a), fp(&b));
    }

    #[test]
    fn null_and_a_missing_field_are_different_bodies(mut body in object()) {
        body.remove("descricao");
        let missing = Value::Object(body.clone());
        body.insert("descricao".into(), Value::Null);
        prop_assert_ne!(fp(&missing), fp(&Value::Object(body)));
    }

    #[test]
    fn the_strict_parser_reads_back_what_serde_json_writes_and_refuses_a_repeated_field(
        body in object(),
        v in json_value(),
    ) {
        let text = serde_json::to_vec(&Value::Object(body.clone())).unwrap();
        prop_assert_eq!(parse_json_strict(&text).unwrap(), Value::Object(body.clone()));
        if let Some((k, _)) = body.iter().next() {
            let mut twice = serde_json::to_string(&Value::Object(body.clone())).unwrap();
            twice.pop();
            twice.push_str(&format!(",{}:{}}}", serde_json::to_string(k).unwrap(), v));
            prop_assert!(parse_json_strict(twice.as_bytes()).is_err(), "{twice}");
        }
    }
}

/// Numbers keep their written form: `100`, `100.0` and `1e2` are three different bodies, and
/// only the integer is a valid `valor` (the others are refused by validation, never charged).
#[test]
fn number_forms_are_different_bodies_and_only_an_integer_is_a_valor() {
    let forms = ["100", "100.0", "1e2"].map(|n| {
        parse_json_strict(format!(r#"{{"valor":{n},"cartao":"tok_aprovado"}}"#).as_bytes()).unwrap()
    });
    assert_ne!(fp(&forms[0]), fp(&forms[1]));
    assert_ne!(fp(&forms[0]), fp(&forms[2]));
    assert_eq!(
        fp(&forms[1]),
        fp(&forms[2]),
        "1e2 and 100.0 are both the float 100"
    );
    let valid: Vec<bool> = forms
        .iter()
        .map(|v| payment_api::domain::PaymentRequest::from_json(v).is_ok())
        .collect();
    assert_eq!(valid, [true, false, false]);
}
