//! Property tests for argument repair: it never panics, never changes valid JSON, and its
//! repairs of common mistakes give back exactly the intended value.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_tools::catalog::repair_json;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Exact binary fractions: serde_json's own float parsing round-trips them.
        any::<i32>().prop_map(|i| Value::from(f64::from(i) / 4.0)),
        // Text with quotes, backslashes, newlines, tabs, braces and non-ASCII.
        "[a-z0-9 '\"\\\\\n\t{}\\[\\],:é→]{0,16}".prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-z_][a-z0-9_]{0,8}", value(), 0..6)
        .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>()))
}

/// Values whose strings hold no quote or backslash: single-quoting them is unambiguous.
fn plain_object() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        "[a-z0-9 .,:{}\\[\\]\n\t]{0,12}".prop_map(Value::String),
    ];
    let v = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 1..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    });
    prop::collection::btree_map("[a-z_][a-z0-9_]{0,8}", v, 1..5)
        .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>()))
}

/// JSON with single-quoted strings and bare keys, raw newlines/tabs in strings and a trailing
/// comma after every last member — each a mistake repair must undo exactly.
fn sloppy(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(sloppy).collect();
            format!("[{},]", inner.join(", "))
        }
        Value::Object(m) => {
            let inner: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}: {}", sloppy(v)))
                .collect();
            format!("{{{},}}", inner.join(", "))
        }
        other => other.to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn never_panics(text in "\\PC{0,80}") {
        let _ = repair_json(&text);
    }

    #[test]
    fn never_panics_on_json_like_text(text in "[{}\\[\\]\"':,a-z0-9 \\\\\n-]{0,60}") {
        let _ = repair_json(&text);
    }

    #[test]
    fn valid_json_is_returned_unchanged(v in object(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
        let r = repair_json(&text).unwrap();
        prop_assert_eq!(r.value, v);
        prop_assert!(r.fixes.is_empty());
    }

    #[test]
    fn sloppy_json_repairs_to_exactly_the_intended_value(v in plain_object()) {
        let r = repair_json(&sloppy(&v));
        prop_assert!(r.is_ok(), "{}: {:?}", sloppy(&v), r);
        prop_assert_eq!(r.unwrap().value, v);
    }

    #[test]
    fn missing_closers_after_a_complete_value_are_added(v in plain_object()) {
        let text = v.to_string();
        // Drop the trailing closers, but only when what is left ends with a complete string,
        // `true`/`false` or a closer (a cut number could have had more digits).
        let trimmed = text.trim_end_matches(['}', ']']);
        let ends_well = trimmed.ends_with('"') || trimmed.ends_with("true") || trimmed.ends_with("false");
        if ends_well && trimmed.len() < text.len() {
            let r = repair_json(trimmed);
            prop_assert!(r.is_ok(), "{}: {:?}", trimmed, r);
            prop_assert_eq!(r.unwrap().value, v);
        }
    }

    #[test]
    fn json_cut_anywhere_is_repaired_exactly_or_refused(v in object(), cut in 0usize..400) {
        let text = v.to_string();
        let mut end = cut.min(text.len());
        while !text.is_char_boundary(end) { end -= 1; }
        let prefix = &text[..end];
        if let Ok(r) = repair_json(prefix) {
            // Whatever is accepted must be a prefix-consistent reading: every key it has is in
            // the original with the same value, except possibly the last (closed) container.
            if let (Value::Object(got), Value::Object(orig)) = (&r.value, &v) {
                for (k, gv) in got {
                    let ov = orig.get(k);
                    prop_assert!(ov.is_some(), "invented key {} from {:?}", k, prefix);
                    if ov != Some(gv) {
                        // Only a container may be shorter (closed early), never a scalar.
                        prop_assert!(gv.is_array() || gv.is_object(), "{:?} → {} changed", prefix, k);
                    }
                }
            }
        }
    }
}
