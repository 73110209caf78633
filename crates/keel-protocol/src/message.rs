//! Messages, content blocks, tool calls and results, token usage.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who authored a message. Tool results travel in `user` messages, as both major wire formats
/// (Anthropic natively, OpenAI after splitting) can represent them that way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One block of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text { text: String },
    /// The model's thinking. `signature` is the opaque token Anthropic requires when the block is
    /// sent back; providers without one leave it empty.
    Reasoning {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A thinking block the provider encrypted (Anthropic `redacted_thinking`). Opaque: sent
    /// back to the same provider unchanged, never shown.
    RedactedReasoning { data: String },
    /// A tool invocation requested by the model.
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// The outcome of a tool invocation, answering the `tool_use` with the same id.
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
}

/// One conversation message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// An assistant message holding one text block.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// The concatenated text blocks of this message (reasoning and tool blocks excluded).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls this message requests, in order.
    pub fn tool_calls(&self) -> Vec<ToolCall> {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse { id, name, input } => Some(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: input.clone(),
                }),
                _ => None,
            })
            .collect()
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// A call's arguments as canonical JSON (object keys sorted), so equal calls compare equal
/// whatever order the model wrote the keys in.
pub fn canonical_args(value: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(map) => {
                let ordered: std::collections::BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// What a tool call produced, as shown to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub id: String,
    pub name: String,
    pub is_error: bool,
    pub content: String,
}

/// A tool as advertised to the model: its name, what it does and a JSON Schema of its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// Token usage, per request or accumulated over a session. Normalised across providers:
/// `input_tokens` counts every prompt token, cached or not (Anthropic's `input_tokens +
/// cache_read_input_tokens + cache_creation_input_tokens`; OpenAI's `prompt_tokens`), so it is
/// the size of the context; the cache fields are the parts of it read from or written to the
/// provider's prompt cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache (included in `input_tokens`).
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache (included in `input_tokens`).
    #[serde(default)]
    pub cache_creation_tokens: u64,
    /// Estimated cost in US dollars, when a price is known for the model.
    #[serde(default)]
    pub cost_usd: f64,
    /// Number of model requests this usage covers.
    #[serde(default)]
    pub requests: u64,
    /// Some of these figures are Keel's estimates: the server reported no usage (a streaming
    /// server that ignores `stream_options.include_usage`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl Usage {
    /// Adds another usage record to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_creation_tokens += other.cache_creation_tokens;
        self.cost_usd += other.cost_usd;
        self.requests += other.requests;
        self.estimated |= other.estimated;
    }

    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_blocks_use_snake_case_type_tags() {
        let msg = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Reasoning {
                    text: "hm".into(),
                    signature: None,
                },
                ContentBlock::ToolUse {
                    id: "c1".into(),
                    name: "read_file".into(),
                    input: serde_json::json!({"path": "a"}),
                },
            ],
        };
        let json = serde_json::to_string(&msg).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"role":"assistant","content":[{"type":"reasoning","text":"hm"},{"type":"tool_use","id":"c1","name":"read_file","input":{"path":"a"}}]}"#
        );
        let back: Message = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, msg);
        assert_eq!(back.tool_calls().len(), 1);
    }

    #[test]
    fn usage_adds_up() {
        let mut total = Usage::default();
        total.add(&Usage {
            input_tokens: 10,
            output_tokens: 5,
            requests: 1,
            ..Usage::default()
        });
        total.add(&Usage {
            input_tokens: 1,
            output_tokens: 2,
            cache_read_tokens: 7,
            requests: 1,
            ..Usage::default()
        });
        assert_eq!(total.total_tokens(), 18);
        assert_eq!(total.cache_read_tokens, 7);
        assert_eq!(total.requests, 2);
    }
}
