//! The last resort before a request that does not fit the window ends the run: a forced
//! compaction (the request was refused as too large after the usual stages, or the user asked
//! for one) also shrinks every failed call, the protected tail's included.

use std::collections::{BTreeSet, HashMap};

use keel_protocol::{ContentBlock, Message, ToolCall};

use super::stages::{REFUSED_STRING_CHARS, result_summary, shrink_strings_over};

/// Characters a failed call's error keeps in the last resort: the tool, its target and the
/// start of the error's key line.
const ERROR_CHARS: usize = 200;

/// In `messages[1..]` (the task stays byte for byte), every failed call keeps only strings of
/// at most [`REFUSED_STRING_CHARS`] in its arguments, and its error only [`ERROR_CHARS`]
/// characters of its key line. The usual stages keep a failed call's arguments whole when they
/// are short (under 400 characters), and its error whole in the protected tail: a SmolLM2
/// plan_exec run on the raw server ended `context_overflow` with garbage `read_file` calls — a
/// 170-character path of three lines, a 750-byte error quoting it in the tail — about 110
/// tokens over the room a 2,048-token window left for a reply. Returns whether anything
/// changed.
pub fn shrink_failed_calls(messages: &mut [Message]) -> bool {
    let failed: BTreeSet<String> = messages
        .iter()
        .skip(1)
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolResult {
                tool_use_id,
                is_error: true,
                ..
            } => Some(tool_use_id.clone()),
            _ => None,
        })
        .collect();
    let mut calls: HashMap<String, ToolCall> = HashMap::new();
    let mut changed = false;
    for m in messages.iter_mut().skip(1) {
        for b in &mut m.content {
            if let ContentBlock::ToolUse { id, name, input } = b
                && failed.contains(id.as_str())
            {
                let arguments = input.clone();
                changed |= shrink_strings_over(input, REFUSED_STRING_CHARS);
                let call = ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments,
                };
                calls.insert(id.clone(), call);
            }
        }
    }
    for m in messages.iter_mut().skip(1) {
        for b in &mut m.content {
            if let ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error: true,
            } = b
                && content.chars().count() > ERROR_CHARS
            {
                let summary = if content.starts_with("[compacted") {
                    content.clone()
                } else {
                    result_summary(calls.get(tool_use_id.as_str()), content, true)
                };
                *content = summary.chars().take(ERROR_CHARS).collect();
                changed = true;
            }
        }
    }
    changed
}
