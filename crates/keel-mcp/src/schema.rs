//! Server-supplied JSON Schemas, validated and sanitised before a model sees them. Providers
//! accept different subsets of JSON Schema (OpenAI's function calling rejects some keywords
//! that Anthropic ignores, Gemini-style endpoints reject `$ref`), so the registry keeps one
//! schema that every dialect accepts: the intersection.

use serde_json::{Map, Value};

/// Keywords removed everywhere in the schema: annotations and meta keywords that some
/// providers reject and none need.
const STRIPPED: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "$anchor",
    "$dynamicAnchor",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
    "contentMediaType",
    "contentEncoding",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "unevaluatedProperties",
    "unevaluatedItems",
    "patternProperties",
    "propertyNames",
];

/// A provider's schema dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Anthropic's tool input schemas.
    Anthropic,
    /// OpenAI-compatible function parameters (also DeepSeek, OpenRouter, Ollama, vLLM).
    OpenAi,
}

/// The schema for `dialect`: references inlined, unsupported keywords stripped, the root an
/// object. Errors say why the schema cannot be offered at all (the tool is then skipped).
pub fn sanitize(schema: &Value, dialect: Dialect) -> Result<Value, String> {
    let Value::Object(root) = schema else {
        return Err("the input schema is not a JSON object".into());
    };
    match root.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(format!(
                "the input schema's type is {other}, not \"object\""
            ));
        }
    }
    let defs = root
        .get("$defs")
        .or_else(|| root.get("definitions"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut out = clean(schema, &defs, 0)?;
    if let Value::Object(m) = &mut out {
        m.insert("type".into(), Value::String("object".into()));
        if !m.contains_key("properties") {
            m.insert("properties".into(), Value::Object(Map::new()));
        }
        if let Some(props) = m.get("properties")
            && !props.is_object()
        {
            return Err("`properties` is not an object".into());
        }
        if dialect == Dialect::OpenAi {
            // OpenAI rejects a top-level combinator.
            for k in ["oneOf", "anyOf", "allOf", "not", "enum"] {
                m.remove(k);
            }
        }
    }
    Ok(out)
}

/// The strictest schema: what every dialect accepts.
pub fn sanitize_all(schema: &Value) -> Result<Value, String> {
    let a = sanitize(schema, Dialect::Anthropic)?;
    sanitize(&a, Dialect::OpenAi)
}

fn clean(v: &Value, defs: &Value, depth: usize) -> Result<Value, String> {
    if depth > 32 {
        return Err("the input schema nests deeper than 32 levels (recursive $ref?)".into());
    }
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                let name = r
                    .strip_prefix("#/$defs/")
                    .or_else(|| r.strip_prefix("#/definitions/"))
                    .ok_or_else(|| format!("unsupported $ref `{r}` (only local definitions)"))?;
                let target = defs
                    .get(name)
                    .ok_or_else(|| format!("$ref `{r}` names no definition"))?;
                return clean(target, defs, depth + 1);
            }
            let mut out = Map::new();
            for (k, val) in m {
                if STRIPPED.contains(&k.as_str()) || k == "$defs" || k == "definitions" {
                    continue;
                }
                let cleaned = match k.as_str() {
                    // Maps of name -> schema.
                    "properties" => match val {
                        Value::Object(props) => {
                            let mut p = Map::new();
                            for (name, s) in props {
                                p.insert(name.clone(), clean(s, defs, depth + 1)?);
                            }
                            Value::Object(p)
                        }
                        _ => return Err(format!("`properties` is not an object: {val}")),
                    },
                    // Schemas or lists of schemas.
                    "items"
                    | "additionalProperties"
                    | "not"
                    | "anyOf"
                    | "oneOf"
                    | "allOf"
                    | "prefixItems"
                    | "contains" => clean(val, defs, depth + 1)?,
                    // Anything else is a keyword value (a type, a bound, an enum list).
                    _ => val.clone(),
                };
                out.insert(k.clone(), cleaned);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .map(|i| clean(i, defs, depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strips_meta_keywords_and_inlines_refs() {
        let s = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"P": {"type": "string", "examples": ["a"]}},
            "properties": {"p": {"$ref": "#/$defs/P"}, "n": {"type": "integer", "default": 1}}
        });
        let out = sanitize_all(&s).unwrap_or_default();
        assert_eq!(
            out,
            json!({"type": "object", "properties": {"p": {"type": "string"}, "n": {"type": "integer", "default": 1}}})
        );
    }

    #[test]
    fn rejects_what_no_provider_accepts() {
        assert!(sanitize_all(&json!({"type": "string"})).is_err());
        assert!(sanitize_all(&json!([1])).is_err());
        assert!(sanitize_all(&json!({"type": "object", "properties": 3})).is_err());
        let r = json!({"type": "object", "properties": {"a": {"$ref": "https://x/y"}}});
        assert!(sanitize_all(&r).is_err());
        let cyc = json!({"type": "object", "$defs": {"A": {"$ref": "#/$defs/A"}},
                         "properties": {"a": {"$ref": "#/$defs/A"}}});
        assert!(sanitize_all(&cyc).is_err());
    }

    #[test]
    fn an_empty_schema_becomes_an_empty_object() {
        assert_eq!(
            sanitize_all(&json!({})).unwrap_or_default(),
            json!({"type": "object", "properties": {}})
        );
    }
}
