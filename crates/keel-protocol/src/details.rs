//! What a tool call did, typed: the fields the loop's guardrails and every renderer read,
//! beside the text the model reads. Free-form extras for UIs stay in the result's `metadata`.

use serde::{Deserialize, Serialize};

/// The typed part of a tool's result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDetails {
    /// Workspace-relative files the call created, changed or deleted (every tool that writes
    /// files sets it on success).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// A unified diff of what changed, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The exit code of the command the call ran (`None` when killed or not a command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// A question the tool asks the engine to put to the user (`ask_user`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<BlockerRequest>,
    /// The result was cut before the model saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncation>,
    /// The result came from an external tool (an MCP server), not one of Keel's own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
}

impl ToolDetails {
    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// A question for the user, raised by a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockerRequest {
    pub question: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// How much of a result was cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncation {
    /// Characters of the result before it was cut.
    pub original_chars: usize,
    /// Characters the model was shown.
    pub shown_chars: usize,
}
