//! Fitting parsed arguments to a tool's schema without changing what they mean.
//!
//! Only coercions with one reading are made: `"42"` → `42` for an integer, `"true"` → `true`
//! for a boolean, `42` → `"42"` for a string, a single string where an array of strings is
//! expected, a single object where an array of objects is expected, a JSON string holding the
//! expected array or object, an enum value in the wrong case. Fields the schema does not know
//! are dropped with a note. A missing required field is an error that quotes the schema and
//! an example call.

use serde_json::{Map, Value, json};

/// Coerces `args` (an object) to `schema`, recording what it changed in `notes`. Errors are
/// messages for the model.
pub fn fit_to_schema(
    tool: &str,
    args: &mut Map<String, Value>,
    schema: &Value,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    let open = schema.get("additionalProperties") == Some(&Value::Bool(true));
    if !open {
        let unknown: Vec<String> = args
            .keys()
            .filter(|k| !props.contains_key(k.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            args.remove(&key);
            notes.push(format!("dropped unknown field `{key}`"));
        }
    }
    for (key, value) in args.iter_mut() {
        if let Some(prop) = props.get(key) {
            coerce(key, value, prop, notes).map_err(|m| {
                format!(
                    "invalid arguments for {tool}: field `{key}`: {m}\n{}",
                    schema_help(tool, schema)
                )
            })?;
        }
    }
    let missing: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|r| args.get(*r).is_none_or(Value::is_null))
        .collect();
    if !missing.is_empty() {
        let list = missing
            .iter()
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(format!(
            "invalid arguments for {tool}: missing required field {list}\n{}",
            schema_help(tool, schema)
        ));
    }
    Ok(())
}

/// The schema and an example call, appended to argument errors.
pub fn schema_help(tool: &str, schema: &Value) -> String {
    format!(
        "Schema of {tool}: {}\nExample: {tool} {}",
        schema,
        example_for(schema)
    )
}

fn coerce(
    key: &str,
    value: &mut Value,
    schema: &Value,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let Some(ty) = schema.get("type").and_then(Value::as_str) else {
        return Ok(());
    };
    if value.is_null() {
        // Optional fields sent as null mean "not given"; required ones are caught later.
        return Ok(());
    }
    match (ty, &*value) {
        ("integer", Value::String(s)) => {
            let t = s.trim();
            let canonical = t.strip_prefix('-').unwrap_or(t);
            let plain = !canonical.is_empty()
                && canonical.chars().all(|c| c.is_ascii_digit())
                && (canonical == "0" || !canonical.starts_with('0'));
            match t.parse::<i64>() {
                Ok(n) if plain => {
                    notes.push(format!("`{key}`: \"{s}\" → {n}"));
                    *value = json!(n);
                }
                _ => return Err(format!("expected an integer, got the string {value}")),
            }
        }
        ("integer", Value::Number(n)) if n.as_i64().is_none() && n.as_u64().is_none() => {
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                    notes.push(format!("`{key}`: {n} → {}", f as i64));
                    *value = json!(f as i64);
                }
                _ => return Err(format!("expected an integer, got {n}")),
            }
        }
        ("number", Value::String(s)) => match s.trim().parse::<f64>() {
            Ok(f) if f.is_finite() && s.trim() == s && !s.starts_with('+') => {
                if let Some(n) = serde_json::Number::from_f64(f) {
                    notes.push(format!("`{key}`: \"{s}\" → {n}"));
                    *value = Value::Number(n);
                }
            }
            _ => return Err(format!("expected a number, got the string {value}")),
        },
        ("boolean", Value::String(s)) => {
            let b = match s.trim() {
                "true" | "True" | "TRUE" => true,
                "false" | "False" | "FALSE" => false,
                _ => return Err(format!("expected true or false, got the string {value}")),
            };
            notes.push(format!("`{key}`: \"{s}\" → {b}"));
            *value = Value::Bool(b);
        }
        ("string", Value::Number(_) | Value::Bool(_)) => {
            let s = value.to_string();
            notes.push(format!("`{key}`: {s} → \"{s}\""));
            *value = Value::String(s);
        }
        ("array", Value::String(s)) => {
            let items = schema.get("items").cloned().unwrap_or(Value::Null);
            if s.trim_start().starts_with('[')
                && let Ok(parsed @ Value::Array(_)) = serde_json::from_str::<Value>(s)
            {
                notes.push(format!("`{key}`: decoded the array sent as a JSON string"));
                *value = parsed;
            } else if items.get("type").and_then(Value::as_str) == Some("string") {
                notes.push(format!("`{key}`: a single string → a list of one"));
                *value = Value::Array(vec![value.take()]);
            } else {
                return Err(format!("expected an array, got the string {value}"));
            }
        }
        ("array", Value::Object(_)) => {
            let items = schema.get("items").cloned().unwrap_or(Value::Null);
            if items.get("type").and_then(Value::as_str) == Some("object") {
                notes.push(format!("`{key}`: a single object → a list of one"));
                *value = Value::Array(vec![value.take()]);
            } else {
                return Err("expected an array, got an object".into());
            }
        }
        ("object", Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(parsed @ Value::Object(_)) => {
                notes.push(format!("`{key}`: decoded the object sent as a JSON string"));
                *value = parsed;
            }
            _ => return Err(format!("expected an object, got the string {value}")),
        },
        ("string", Value::String(s)) => {
            if let Some(options) = schema.get("enum").and_then(Value::as_array)
                && !options.iter().any(|o| o.as_str() == Some(s))
            {
                let lower = s.to_lowercase();
                match options.iter().find(|o| o.as_str() == Some(lower.as_str())) {
                    Some(o) => {
                        notes.push(format!("`{key}`: \"{s}\" → {o}"));
                        *value = o.clone();
                    }
                    None => {
                        return Err(format!(
                            "{value} is not one of {}",
                            Value::Array(options.clone())
                        ));
                    }
                }
            }
        }
        _ => {}
    }
    // Recurse into what is now in place.
    match (ty, value) {
        ("array", Value::Array(items)) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    coerce(&format!("{key}[{i}]"), item, item_schema, notes)?;
                }
            }
        }
        ("object", Value::Object(map)) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                let open = schema.get("additionalProperties") == Some(&Value::Bool(true));
                if !open {
                    let unknown: Vec<String> = map
                        .keys()
                        .filter(|k| !props.contains_key(k.as_str()))
                        .cloned()
                        .collect();
                    for k in unknown {
                        map.remove(&k);
                        notes.push(format!("dropped unknown field `{key}.{k}`"));
                    }
                }
                for (k, v) in map.iter_mut() {
                    if let Some(p) = props.get(k) {
                        coerce(&format!("{key}.{k}"), v, p, notes)?;
                    }
                }
                let missing: Vec<&str> = schema
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .filter(|r| map.get(*r).is_none_or(Value::is_null))
                    .collect();
                if let Some(m) = missing.first() {
                    return Err(format!("missing required field `{m}`"));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A plausible call for `schema`: every required field with an example value.
pub fn example_for(schema: &Value) -> Value {
    let mut out = Map::new();
    let props = schema.get("properties").and_then(Value::as_object);
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let prop = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
        out.insert(name.to_string(), example_value(name, prop));
    }
    Value::Object(out)
}

fn example_value(name: &str, schema: &Value) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|o| o.first())
    {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("integer") | Some("number") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => {
            let item = schema.get("items").unwrap_or(&Value::Null);
            json!([example_value(name, item)])
        }
        Some("object") => example_for(schema),
        _ => json!(match name {
            "path" => "src/main.rs",
            "command" => "cargo test",
            "pattern" => "fn main",
            "query" => "where the config is loaded",
            "search" => "exact text now in the file",
            "replace" => "the new text",
            "content" => "the whole file content",
            "patch" =>
                "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-old line\n+new line\n*** End Patch",
            "question" => "Which database should the tests use?",
            "step" => "Write the failing test",
            _ => "…",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "start_line": {"type": "integer"},
                "verbose": {"type": "boolean"},
                "globs": {"type": "array", "items": {"type": "string"}},
                "edits": {"type": "array", "items": {"type": "object",
                    "properties": {"search": {"type": "string"}, "replace": {"type": "string"}},
                    "required": ["search", "replace"]}},
                "kind": {"type": "string", "enum": ["symbols", "files"]}
            },
            "required": ["path"]
        })
    }

    fn fit(args: Value) -> Result<(Value, Vec<String>), String> {
        let mut map = args.as_object().cloned().unwrap_or_default();
        let mut notes = Vec::new();
        fit_to_schema("t", &mut map, &schema(), &mut notes)?;
        Ok((Value::Object(map), notes))
    }

    #[test]
    fn coercions_that_cannot_change_meaning() {
        let (v, notes) = fit(json!({
            "path": 42, "start_line": "10", "verbose": "true", "globs": "*.rs",
            "edits": {"search": "a", "replace": "b"}, "kind": "Symbols", "colour": "red"
        }))
        .unwrap();
        assert_eq!(
            v,
            json!({"path": "42", "start_line": 10, "verbose": true, "globs": ["*.rs"],
                   "edits": [{"search": "a", "replace": "b"}], "kind": "symbols"})
        );
        assert!(
            notes
                .iter()
                .any(|n| n.contains("dropped unknown field `colour`"))
        );
        let (v, _) = fit(json!({"path": "a", "edits": "[{\"search\": \"a\", \"replace\": \"b\"}]", "start_line": 3.0})).unwrap();
        assert_eq!(v["edits"][0]["replace"], "b");
        assert_eq!(v["start_line"], 3);
    }

    #[test]
    fn values_with_another_meaning_are_errors() {
        for bad in [
            json!({"path": "a", "start_line": "ten"}),
            json!({"path": "a", "start_line": "1.5"}),
            json!({"path": "a", "start_line": "007"}),
            json!({"path": "a", "start_line": 1.5}),
            json!({"path": "a", "verbose": "yes"}),
            json!({"path": "a", "kind": "everything"}),
            json!({"path": "a", "edits": [{"search": "a"}]}),
        ] {
            let e = fit(bad.clone())
                .err()
                .unwrap_or_else(|| panic!("{bad} was accepted"));
            assert!(e.contains("Schema of t"), "{e}");
        }
    }

    #[test]
    fn a_missing_required_field_quotes_the_schema_and_an_example() {
        let e = fit(json!({"start_line": 1})).unwrap_err();
        assert!(e.contains("missing required field `path`"), "{e}");
        assert!(e.contains("\"required\":[\"path\"]"), "{e}");
        assert!(e.contains("Example: t {\"path\":\"src/main.rs\"}"), "{e}");
    }
}
