//! JSON Schemas for tool arguments, derived from Rust types and trimmed for the model.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The JSON Schema of `T`, inlined (no `$ref`s), without `$schema`/`title` noise, with
/// optional fields as plain types (not `["string", "null"]`) and integer `format`s dropped.
/// Deterministic: the same type always yields the same bytes.
pub fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft07()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("title");
        map.remove("$schema");
        map.remove("definitions");
        map.remove("$defs");
        // The argument struct's doc comment ("Arguments of `x`.") says nothing the tool's
        // description does not; it cost every tool in the cached head a few tokens.
        map.remove("description");
    }
    simplify(&mut value);
    value
}

fn simplify(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get("type") {
                let non_null: Vec<Value> = types
                    .iter()
                    .filter(|t| t.as_str() != Some("null"))
                    .cloned()
                    .collect();
                if non_null.len() == 1 {
                    map.insert("type".into(), non_null[0].clone());
                }
            }
            if let Some(Value::String(f)) = map.get("format")
                && matches!(
                    f.as_str(),
                    "uint"
                        | "uint8"
                        | "uint16"
                        | "uint32"
                        | "uint64"
                        | "int"
                        | "int32"
                        | "int64"
                        | "uint128"
                        | "int128"
                        | "double"
                        | "float"
                )
            {
                map.remove("format");
            }
            // `"default": null` on optional fields only costs tokens.
            if map.get("default") == Some(&Value::Null) {
                map.remove("default");
            }
            // `"additionalProperties": false` on every object: Keel checks the arguments
            // itself (unknown fields are refused with the schema, `catalog::coerce` treats a
            // schema without `true` as closed), so the model need not read it on every tool.
            if map.get("additionalProperties") == Some(&Value::Bool(false)) {
                map.remove("additionalProperties");
            }
            // `"minimum": 0` of unsigned integers: a negative value fails to parse anyway,
            // with an error that says so.
            if map.get("minimum").and_then(Value::as_f64) == Some(0.0)
                && map.get("type").and_then(Value::as_str) == Some("integer")
            {
                map.remove("minimum");
            }
            // An optional enum's `null` member: leaving the field out says the same.
            if map.get("type").is_some_and(Value::is_string)
                && let Some(Value::Array(members)) = map.get_mut("enum")
            {
                members.retain(|m| !m.is_null());
            }
            for v in map.values_mut() {
                simplify(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(simplify),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments of a test tool.
    #[derive(JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        /// The file.
        path: String,
        /// First line (1-based).
        start_line: Option<u32>,
    }

    #[test]
    fn schema_is_compact_and_stable() {
        let s = schema_for::<Args>();
        assert_eq!(s["type"], "object");
        assert_eq!(s["properties"]["path"]["description"], "The file.");
        assert_eq!(s["properties"]["start_line"]["type"], "integer");
        assert!(s["properties"]["start_line"].get("format").is_none());
        assert_eq!(s["required"], serde_json::json!(["path"]));
        assert!(s.get("$schema").is_none() && s.get("title").is_none());
        assert!(
            s.get("description").is_none(),
            "the struct's doc comment is not sent"
        );
        assert!(s["properties"]["start_line"].get("minimum").is_none());
        assert!(s.get("additionalProperties").is_none());
        assert_eq!(s.to_string(), schema_for::<Args>().to_string());
    }
}
