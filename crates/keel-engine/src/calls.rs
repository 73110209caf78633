//! What the loop does to a reply's tool calls before running them: each is resolved by the
//! tool catalog ([`keel_tools::resolve_call`]: aliases, intent verbs, argument repair, schema
//! fitting), and the assistant message is made safe to send back (a call whose arguments were
//! not a JSON object carries the repaired object, or `{}`, so no provider rejects the
//! transcript). The model's own name stays in the transcript.

use keel_llm::{ModelTurn, StopReason};
use keel_protocol::{ContentBlock, Message, ToolCall};
use keel_tools::{Resolved, ToolRegistry, resolve_call};
use serde_json::Value;

/// A call as the model sent it and what it resolved to (or the message for the model).
pub(crate) struct PreparedCall {
    pub(crate) sent: ToolCall,
    pub(crate) resolved: Result<Resolved, String>,
}

impl PreparedCall {
    /// The call that runs: the canonical tool with fitted arguments (the sent call when it
    /// could not be resolved).
    pub(crate) fn runnable(&self) -> ToolCall {
        match &self.resolved {
            Ok(r) => ToolCall {
                id: self.sent.id.clone(),
                name: r.tool.clone(),
                arguments: r.args.clone(),
            },
            Err(_) => self.sent.clone(),
        }
    }
}

/// Resolves every call of a reply. "Cut off" is only ever said when the finish reason was the
/// output limit.
pub(crate) fn prepare_calls(
    tools: &ToolRegistry,
    turn: &ModelTurn,
    workspace: &std::path::Path,
) -> Vec<PreparedCall> {
    let cut_off = turn.stop_reason == StopReason::MaxTokens;
    turn.tool_calls
        .iter()
        .map(|call| PreparedCall {
            sent: call.clone(),
            resolved: resolve_call(tools, &call.name, &call.arguments, cut_off, Some(workspace)),
        })
        .collect()
}

/// The assistant message with every tool use's input a JSON object.
pub(crate) fn transcript_message(turn: &ModelTurn, calls: &[PreparedCall]) -> Message {
    let mut message = turn.to_message();
    for block in &mut message.content {
        if let ContentBlock::ToolUse { id, input, .. } = block
            && !input.is_object()
        {
            *input = calls
                .iter()
                .find(|c| &c.sent.id == id)
                .and_then(|c| c.resolved.as_ref().ok())
                .map(|r| r.args.clone())
                .unwrap_or_else(|| Value::Object(Default::default()));
        }
    }
    message
}
