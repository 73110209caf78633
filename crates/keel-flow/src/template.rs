//! `${…}` references in flow text: parsing, and filling them in at run time.

use std::collections::BTreeMap;

use crate::ir::{Part, Ref, Template, Value};

/// Parses `text` into literal parts and references; the error says what is wrong.
pub fn parse(text: &str) -> Result<Template, String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            parts.push(Part::Text(rest[..start].to_string()));
        }
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!(
                "`${{` without a closing `}}` in `{}`",
                crate::short(text, 60)
            ));
        };
        parts.push(Part::Ref(parse_ref(after[..end].trim())?));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest.to_string()));
    }
    Ok(Template { parts })
}

/// Parses the inside of `${…}`: `inputs.NAME`, `nodes.ID.FIELD`, `run.id` or `run.short`.
pub fn parse_ref(inner: &str) -> Result<Ref, String> {
    let pieces: Vec<&str> = inner.split('.').collect();
    match pieces.as_slice() {
        ["inputs", name] if !name.is_empty() => Ok(Ref::Input((*name).to_string())),
        ["nodes", node, field] if !node.is_empty() && !field.is_empty() => Ok(Ref::Node {
            node: (*node).to_string(),
            field: (*field).to_string(),
        }),
        ["nodes", node] if !node.is_empty() => Ok(Ref::Node {
            node: (*node).to_string(),
            field: "output".to_string(),
        }),
        ["run", "id"] => Ok(Ref::RunId),
        ["run", "short"] => Ok(Ref::RunShort),
        _ => Err(format!(
            "`${{{inner}}}` is not a reference; write `${{inputs.NAME}}`, `${{nodes.ID.output}}` (or another field of the node), `${{run.id}}` or `${{run.short}}`"
        )),
    }
}

/// The last 8 hex digits of a run id (a UUIDv7's random end: its start is a timestamp, shared
/// by runs started close together), for names such as a delivered branch.
pub fn short_run_id(run_id: &str) -> String {
    let hex: Vec<char> = run_id.chars().filter(char::is_ascii_hexdigit).collect();
    hex[hex.len().saturating_sub(8)..].iter().collect()
}

/// What references resolve against at run time.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub run_id: &'a str,
    pub inputs: &'a BTreeMap<String, Value>,
    pub outputs: &'a BTreeMap<String, BTreeMap<String, Value>>,
}

impl Scope<'_> {
    pub fn lookup(&self, r: &Ref) -> Option<Value> {
        match r {
            Ref::Input(n) => self.inputs.get(n).cloned(),
            Ref::Node { node, field } => self.outputs.get(node)?.get(field).cloned(),
            Ref::RunId => Some(Value::String(self.run_id.to_string())),
            Ref::RunShort => Some(Value::String(short_run_id(self.run_id))),
        }
    }

    /// The template with its references filled in; a reference without a value (a node that
    /// was skipped) becomes an empty string.
    pub fn render(&self, t: &Template) -> String {
        let mut out = String::new();
        for p in &t.parts {
            match p {
                Part::Text(s) => out.push_str(s),
                Part::Ref(r) => {
                    if let Some(v) = self.lookup(r) {
                        out.push_str(&v.to_string());
                    }
                }
            }
        }
        out
    }
}
