//! A small front-matter reader for Markdown instruction files (`.keel/rules/*.md`,
//! `SKILL.md`): a block between `---` lines at the top holding `key: value` pairs, where a
//! value is a scalar (quotes optional) or a list (`[a, b]` inline, or `- item` lines).
//! Anything richer is kept as text; unknown keys are ignored by callers.

use std::collections::BTreeMap;

/// One front-matter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Scalar(String),
    List(Vec<String>),
}

impl Value {
    /// The value as a list: a scalar is a one-item list (comma-separated items split).
    pub fn as_list(&self) -> Vec<String> {
        match self {
            Value::List(items) => items.clone(),
            Value::Scalar(s) => s
                .split(',')
                .map(|p| unquote(p.trim()).to_string())
                .filter(|p| !p.is_empty())
                .collect(),
        }
    }

    /// The value as one string (a list joined with `, `).
    pub fn as_text(&self) -> String {
        match self {
            Value::Scalar(s) => s.clone(),
            Value::List(items) => items.join(", "),
        }
    }
}

/// A parsed document: its front matter (empty when there is none) and its body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Document {
    pub fields: BTreeMap<String, Value>,
    pub body: String,
}

impl Document {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return &s[1..s.len() - 1];
        }
    }
    s
}

/// Splits `text` into front matter and body. A document without a leading `---` line, or
/// whose block is never closed, is all body.
pub fn parse(text: &str) -> Document {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Document {
            fields: BTreeMap::new(),
            body: text.to_string(),
        };
    }
    let mut fields: BTreeMap<String, Value> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut consumed = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut closed = false;
    for line in lines {
        consumed += line.len() + 1;
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(item) = trimmed.strip_prefix("- ")
            && line.starts_with([' ', '-'])
            && let Some(key) = &current
        {
            let item = unquote(item).to_string();
            match fields.get_mut(key) {
                Some(Value::List(items)) => items.push(item),
                _ => {
                    fields.insert(key.clone(), Value::List(vec![item]));
                }
            }
            continue;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            continue;
        };
        let key = key.trim().to_string();
        let value = value.trim();
        let parsed = if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']'))
        {
            Value::List(
                inner
                    .split(',')
                    .map(|p| unquote(p).to_string())
                    .filter(|p| !p.is_empty())
                    .collect(),
            )
        } else if value.is_empty() {
            Value::List(Vec::new())
        } else {
            Value::Scalar(unquote(value).to_string())
        };
        fields.insert(key.clone(), parsed);
        current = Some(key);
    }
    if !closed {
        return Document {
            fields: BTreeMap::new(),
            body: text.to_string(),
        };
    }
    Document {
        fields,
        body: text
            .get(consumed.min(text.len())..)
            .unwrap_or("")
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_scalars_inline_and_block_lists() {
        let d = parse(
            "---\nname: pdf\ndescription: \"Fill PDF forms\"\nglobs: [\"*.pdf\", docs/**]\ntools:\n  - read_file\n  - grep\n---\nBody here.\n",
        );
        assert_eq!(d.get("name"), Some(&Value::Scalar("pdf".into())));
        assert_eq!(
            d.get("description").map(Value::as_text).as_deref(),
            Some("Fill PDF forms")
        );
        assert_eq!(
            d.get("globs").map(Value::as_list),
            Some(vec!["*.pdf".to_string(), "docs/**".to_string()])
        );
        assert_eq!(
            d.get("tools").map(Value::as_list),
            Some(vec!["read_file".to_string(), "grep".to_string()])
        );
        assert_eq!(d.body, "Body here.\n");
    }

    #[test]
    fn no_or_unclosed_front_matter_is_all_body() {
        assert!(parse("# Title\nText").fields.is_empty());
        let d = parse("---\nname: x\nno end");
        assert!(d.fields.is_empty());
        assert_eq!(d.body, "---\nname: x\nno end");
    }
}
