//! The deterministic stages of compaction: clearing consumed tool results, dropping dead-end
//! steps, and replacing the oldest turns with the earlier-work block. Pure transforms of a
//! message list; no model calls.

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

use keel_protocol::{ContentBlock, Message, Role, ToolCall};
use keel_tools::ToolEffect;
use regex::Regex;
use serde_json::Value;

use keel_tracker::{OpenError, call_key, call_target, key_line};

/// Tool calls (with their results) that are never compacted, in a window of
/// [`FULL_TAIL_WINDOW`] tokens or more.
pub const KEEP_LAST_TOOL_CALLS: usize = 5;
/// Tokens of window each protected call needs: a smaller window protects fewer calls (at
/// least one), since five calls with their results can fill a 2,048-token window on their own.
const WINDOW_PER_KEPT_CALL: u64 = 1_600;
/// The smallest window that protects all [`KEEP_LAST_TOOL_CALLS`].
pub const FULL_TAIL_WINDOW: u64 = WINDOW_PER_KEPT_CALL * KEEP_LAST_TOOL_CALLS as u64;

/// Tool results shorter than this stay as they are.
pub(crate) const MIN_RESULT_CHARS_TO_CLEAR: usize = 300;
/// String arguments longer than this are shrunk in old tool calls.
const MAX_OLD_ARGUMENT_CHARS: usize = 400;
/// Characters of a call's target (its path, its command) a one-line summary repeats.
const MAX_TARGET_CHARS: usize = 100;
/// Characters of an unresolved error's message the earlier-work block repeats.
const MAX_ERROR_CHARS: usize = 300;
/// Marks the block compaction adds to the first message.
const EARLIER_WORK_TAG: &str = "<earlier-work>";

static SYMBOL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?m)^(?:\s*\d+\t)?\s*(?:pub(?:\([^)]*\))?\s+)?(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:fn|def|class|struct|enum|trait|interface|type|function|impl|func|module)\s+([A-Za-z_][A-Za-z0-9_]*)",
    )
    .ok()
});

/// Facts about the session the earlier-work block always states.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    pub files: Vec<String>,
    pub open_errors: Vec<OpenError>,
}

/// How many of the last tool calls a `window`-token context protects: one per
/// 1,600 tokens, at least one, at most [`KEEP_LAST_TOOL_CALLS`] (from 8,000 tokens).
pub fn kept_calls(window: u64) -> usize {
    let n = (window / WINDOW_PER_KEPT_CALL).clamp(1, KEEP_LAST_TOOL_CALLS as u64);
    usize::try_from(n).unwrap_or(KEEP_LAST_TOOL_CALLS)
}

/// Index of the first message of the protected tail: the assistant message from which the
/// last [`KEEP_LAST_TOOL_CALLS`] tool calls are made. Index 1 when there are not that many
/// (everything after the task is protected).
pub fn tail_start(messages: &[Message]) -> usize {
    tail_start_keeping(messages, KEEP_LAST_TOOL_CALLS)
}

/// [`tail_start`] protecting the last `keep` tool calls (see [`kept_calls`]).
pub fn tail_start_keeping(messages: &[Message], keep: usize) -> usize {
    let keep = keep.max(1);
    let mut calls = 0;
    for i in (1..messages.len()).rev() {
        let m = &messages[i];
        if m.role == Role::Assistant {
            calls += m
                .content
                .iter()
                .filter(|b| matches!(b, ContentBlock::ToolUse { .. }))
                .count();
            if calls >= keep {
                return i;
            }
        }
    }
    1
}

/// The tool calls of a transcript by id.
pub(crate) fn calls_by_id(messages: &[Message]) -> HashMap<String, ToolCall> {
    let mut out = HashMap::new();
    for m in messages {
        for b in &m.content {
            if let ContentBlock::ToolUse { id, name, input } = b {
                out.insert(
                    id.clone(),
                    ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: input.clone(),
                    },
                );
            }
        }
    }
    out
}

/// `text` cut to `max` characters (marked `…`): a garbage target — a weak model's 1.6 KB
/// "path" — is not repeated whole in a summary or a fact.
fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// A one-line stand-in for a consumed tool result.
pub fn result_summary(call: Option<&ToolCall>, content: &str, is_error: bool) -> String {
    let (name, target) = match call {
        Some(c) => (c.name.as_str(), call_target(c)),
        None => ("tool", None),
    };
    let what = match &target {
        Some(t) => format!("{name} {}", short(t, MAX_TARGET_CHARS)),
        None => name.to_string(),
    };
    if is_error {
        let line: String = key_line(content).chars().take(300).collect();
        return format!("[compacted error] {what}: {line}");
    }
    let lines = content.lines().count();
    let symbols: Vec<String> = SYMBOL
        .as_ref()
        .map(|re| {
            let mut seen = BTreeSet::new();
            re.captures_iter(content)
                .filter_map(|c| c.get(1).map(|m| m.as_str().to_string()))
                .filter(|s| seen.insert(s.clone()))
                .take(10)
                .collect()
        })
        .unwrap_or_default();
    if symbols.is_empty() {
        let first: String = content
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .chars()
            .take(120)
            .collect();
        format!("[compacted] {what}: {lines} lines; first: {first}")
    } else {
        format!(
            "[compacted] {what}: {lines} lines — defines: {}",
            symbols.join(", ")
        )
    }
}

fn shrink_long_strings(value: &mut Value) -> bool {
    shrink_strings_over(value, MAX_OLD_ARGUMENT_CHARS)
}

/// Strings longer than this in a refused call's arguments that are long as a whole.
pub(crate) const REFUSED_STRING_CHARS: usize = 80;

/// A refused or failed call's arguments: every string over [`MAX_OLD_ARGUMENT_CHARS`], and
/// when the arguments are that long together, every string over [`REFUSED_STRING_CHARS`] (a
/// SmolLM2 garbage call of two 290-character strings stayed whole in the protected tail and
/// its run ended `context_overflow`) — and if they are still that long (many short strings:
/// a SmolLM2 `edit_file` of eight garbage edits, 1,444 characters the server counted as ~700
/// tokens, ended a real run `context_overflow` in the same way), every list or object in
/// them over [`REFUSED_STRING_CHARS`] becomes one line saying how large it was.
fn shrink_refused_arguments(value: &mut Value) -> bool {
    let long = |v: &Value| v.to_string().chars().count() > MAX_OLD_ARGUMENT_CHARS;
    if !long(value) {
        return shrink_strings_over(value, MAX_OLD_ARGUMENT_CHARS);
    }
    let mut changed = shrink_strings_over(value, REFUSED_STRING_CHARS);
    if long(value) {
        changed |= collapse_large_parts(value);
    }
    changed
}

/// Replaces each list or object inside `value` (the arguments' top level, or `value` itself
/// when it is a list) longer than [`REFUSED_STRING_CHARS`] with `[compacted: N items, M
/// chars]`; the short fields beside them (a path) stay.
fn collapse_large_parts(value: &mut Value) -> bool {
    let collapse = |v: &mut Value| {
        let items = match v {
            Value::Array(a) => a.len(),
            Value::Object(o) => o.len(),
            _ => return false,
        };
        let chars = v.to_string().chars().count();
        if chars <= REFUSED_STRING_CHARS {
            return false;
        }
        *v = Value::String(format!("[compacted: {items} items, {chars} chars]"));
        true
    };
    match value {
        Value::Object(map) => map
            .values_mut()
            .fold(false, |changed, v| collapse(v) | changed),
        other => collapse(other),
    }
}

pub(crate) fn shrink_strings_over(value: &mut Value, limit: usize) -> bool {
    match value {
        Value::String(s) if s.chars().count() > limit => {
            *s = format!(
                "[compacted: {} lines, {} chars]",
                s.lines().count(),
                s.chars().count()
            );
            true
        }
        Value::Object(map) => {
            let mut changed = false;
            for v in map.values_mut() {
                changed |= shrink_strings_over(v, limit);
            }
            changed
        }
        Value::Array(items) => {
            let mut changed = false;
            for v in items {
                changed |= shrink_strings_over(v, limit);
            }
            changed
        }
        _ => false,
    }
}

/// Stage 1: in `messages[1..tail]`, replaces long tool results with one-line summaries,
/// shrinks long string arguments of tool calls and drops reasoning. Returns whether anything
/// changed.
pub fn clear_tool_results(messages: &mut [Message], tail: usize) -> bool {
    let calls = calls_by_id(messages);
    let mut changed = false;
    let end = tail.min(messages.len());
    for m in messages.iter_mut().take(end).skip(1) {
        let before = m.content.len();
        m.content
            .retain(|b| !matches!(b, ContentBlock::Reasoning { .. }));
        changed |= m.content.len() != before;
        if m.content.is_empty() {
            m.content.push(ContentBlock::Text {
                text: "(thinking omitted)".into(),
            });
        }
        for b in &mut m.content {
            match b {
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } if content.len() > MIN_RESULT_CHARS_TO_CLEAR
                    && !content.starts_with("[compacted") =>
                {
                    *content = result_summary(calls.get(tool_use_id.as_str()), content, *is_error);
                    changed = true;
                }
                ContentBlock::ToolUse { input, .. } => {
                    changed |= shrink_long_strings(input);
                }
                _ => {}
            }
        }
    }
    changed
}

/// Stage 1 inside the protected tail: a call that was refused or failed with long string
/// arguments — a weak model's 1.6 KB garbage call — keeps neither them nor a long error that
/// repeats them, only the error's key line; it would otherwise stay whole in a 2,048-token
/// window until more calls pushed it out. Other calls in the tail (a failing test run with
/// short arguments among them) stay whole. Returns whether anything changed.
pub fn shrink_refused_calls(messages: &mut [Message], tail: usize) -> bool {
    let refused: BTreeSet<String> = messages
        .iter()
        .skip(tail)
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
    let mut shrunk: HashMap<String, ToolCall> = HashMap::new();
    for m in messages.iter_mut().skip(tail.max(1)) {
        for b in &mut m.content {
            if let ContentBlock::ToolUse { id, name, input } = b
                && refused.contains(id.as_str())
            {
                let original = input.clone();
                if shrink_refused_arguments(input) {
                    let call = ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: original,
                    };
                    shrunk.insert(id.clone(), call);
                }
            }
        }
    }
    for m in messages.iter_mut().skip(tail.max(1)) {
        for b in &mut m.content {
            if let ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error: true,
            } = b
                && let Some(call) = shrunk.get(tool_use_id.as_str())
                && content.len() > MIN_RESULT_CHARS_TO_CLEAR
                && !content.starts_with("[compacted")
            {
                *content = result_summary(Some(call), content, true);
            }
        }
    }
    !shrunk.is_empty()
}

/// Stage 2: drops dead-end steps from `messages[1..tail]` — a step (assistant tool calls and
/// their results) whose every call is either an error resolved later (a later success of the
/// same tool on the same target) or a read-only call repeated later. Returns the new tail
/// index and the assistant text of dropped steps.
pub fn drop_dead_ends(
    messages: &mut Vec<Message>,
    tail: usize,
    effect_of: &dyn Fn(&str) -> Option<ToolEffect>,
) -> (usize, Vec<String>) {
    // Every call in order, with its outcome.
    let mut outcome: HashMap<String, bool> = HashMap::new();
    for m in messages.iter() {
        for b in &m.content {
            if let ContentBlock::ToolResult {
                tool_use_id,
                is_error,
                ..
            } = b
            {
                outcome.insert(tool_use_id.clone(), *is_error);
            }
        }
    }
    let mut timeline: Vec<(usize, ToolCall, bool)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        for c in m.tool_calls() {
            let err = outcome.get(&c.id).copied().unwrap_or(true);
            timeline.push((i, c, err));
        }
    }
    let dead = |i: usize, call: &ToolCall, is_error: bool| -> bool {
        let later = timeline.iter().filter(|(j, _, _)| *j > i);
        if is_error {
            let target = call_target(call);
            later
                .clone()
                .any(|(_, c, e)| !*e && c.name == call.name && call_target(c) == target)
        } else {
            effect_of(&call.name) == Some(ToolEffect::ReadOnly)
                && later.clone().any(|(_, c, _)| call_key(c) == call_key(call))
        }
    };
    let mut drop = BTreeSet::new();
    let mut notes = Vec::new();
    let mut i = 1;
    while i + 1 < tail.min(messages.len()) {
        let (a, u) = (&messages[i], &messages[i + 1]);
        let calls = a.tool_calls();
        let only_results = u.role == Role::User
            && !u.content.is_empty()
            && u.content
                .iter()
                .all(|b| matches!(b, ContentBlock::ToolResult { .. }));
        if a.role == Role::Assistant && !calls.is_empty() && only_results {
            let all_dead = calls
                .iter()
                .all(|c| dead(i, c, outcome.get(&c.id).copied().unwrap_or(true)));
            if all_dead {
                let text = a.text();
                if !text.trim().is_empty() {
                    notes.push(text.trim().chars().take(300).collect());
                }
                drop.insert(i);
                drop.insert(i + 1);
                i += 2;
                continue;
            }
        }
        i += 1;
    }
    if drop.is_empty() {
        return (tail, notes);
    }
    let removed_before_tail = drop.iter().filter(|&&d| d < tail).count();
    let mut idx = 0;
    messages.retain(|_| {
        let keep = !drop.contains(&idx);
        idx += 1;
        keep
    });
    (tail - removed_before_tail, notes)
}

/// The block added to the first message: the summary and the facts that must survive.
pub fn earlier_work_block(
    summary: &str,
    facts: &Facts,
    notes: &[String],
    user_notes: &[String],
) -> String {
    let mut out = format!(
        "{EARLIER_WORK_TAG}\nEarlier steps of this session were compacted to save context.\n\nSummary:\n{}\n",
        summary.trim()
    );
    if !facts.files.is_empty() {
        const MAX_FILES: usize = 60;
        let mut list = facts
            .files
            .iter()
            .take(MAX_FILES)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if facts.files.len() > MAX_FILES {
            list.push_str(&format!(" (+{} more)", facts.files.len() - MAX_FILES));
        }
        out.push_str(&format!("\nFiles created or modified so far: {list}\n"));
    }
    if !facts.open_errors.is_empty() {
        out.push_str("\nUnresolved errors:\n");
        for e in &facts.open_errors {
            let target = e
                .target
                .as_deref()
                .map(|t| format!(" {}", short(t, MAX_TARGET_CHARS)))
                .unwrap_or_default();
            let message = short(&e.message, MAX_ERROR_CHARS);
            out.push_str(&format!("- {}{target}: {message}\n", e.tool));
        }
    }
    if !notes.is_empty() {
        out.push_str("\nNotes from dropped steps:\n");
        for n in notes.iter().rev().take(10).rev() {
            out.push_str(&format!("- {}\n", n.replace('\n', " ")));
        }
    }
    if !user_notes.is_empty() {
        out.push_str("\nUser messages after the task:\n");
        for n in user_notes.iter().rev().take(8).rev() {
            out.push_str(&format!("- {}\n", n.replace('\n', " ")));
        }
    }
    out.push_str("</earlier-work>");
    out
}

/// Stage 3's last step: replaces `messages[1..split]` with a block in the first message (with
/// `split <= 1` only the block is refreshed). The first message's own blocks (the task) stay
/// byte for byte; an older earlier-work block is replaced.
pub fn apply_summary(messages: &mut Vec<Message>, split: usize, block: String) {
    let Some(first) = messages.first_mut() else {
        return;
    };
    first.content.retain(
        |b| !matches!(b, ContentBlock::Text { text } if text.starts_with(EARLIER_WORK_TAG)),
    );
    first.content.push(ContentBlock::Text { text: block });
    if split > 1 && split <= messages.len() {
        messages.drain(1..split);
    }
}

/// The previous earlier-work block's presence.
pub(crate) fn has_block(first: &Message) -> bool {
    first
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::Text { text } if text.starts_with(EARLIER_WORK_TAG)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn assistant_call(id: &str, name: &str, input: Value, text: &str) -> Message {
        let mut content = Vec::new();
        if !text.is_empty() {
            content.push(ContentBlock::Text { text: text.into() });
        }
        content.push(ContentBlock::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        });
        Message {
            role: Role::Assistant,
            content,
        }
    }

    pub(crate) fn result(id: &str, content: &str, is_error: bool) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: id.into(),
                content: content.into(),
                is_error,
            }],
        }
    }

    pub(crate) fn big_file(name: &str) -> String {
        let mut s = String::new();
        for i in 1..=60 {
            if i % 20 == 1 {
                s.push_str(&format!("{i}\tpub fn {name}_{i}() {{\n"));
            } else {
                s.push_str(&format!("{i}\t    let x = {i}; // filler line\n"));
            }
        }
        s
    }

    pub(crate) fn session() -> Vec<Message> {
        let mut m = vec![Message::user_text("fix the parser")];
        for i in 0..8 {
            let id = format!("c{i}");
            m.push(assistant_call(
                &id,
                "read_file",
                json!({"path": format!("src/f{i}.rs")}),
                "",
            ));
            m.push(result(&id, &big_file(&format!("f{i}")), false));
        }
        m
    }

    #[test]
    fn the_tail_holds_the_last_five_calls() {
        let m = session();
        let t = tail_start(&m);
        assert_eq!(m[t].role, Role::Assistant);
        let calls: usize = m[t..].iter().map(|m| m.tool_calls().len()).sum();
        assert_eq!(calls, KEEP_LAST_TOOL_CALLS);
        assert_eq!(tail_start(&m[..5]), 1, "fewer calls: everything protected");
    }

    #[test]
    fn a_small_window_protects_fewer_calls() {
        assert_eq!(kept_calls(2_048), 1);
        assert_eq!(kept_calls(4_096), 2);
        assert_eq!(kept_calls(6_000), 3);
        assert_eq!(kept_calls(8_000), KEEP_LAST_TOOL_CALLS);
        assert_eq!(kept_calls(FULL_TAIL_WINDOW), KEEP_LAST_TOOL_CALLS);
        assert_eq!(kept_calls(128_000), KEEP_LAST_TOOL_CALLS);
        assert_eq!(kept_calls(500), 1, "the last call is always kept");
        let m = session();
        let t = tail_start_keeping(&m, kept_calls(2_048));
        assert_eq!(t, m.len() - 2, "only the last call and its result");
        assert_eq!(tail_start_keeping(&m, KEEP_LAST_TOOL_CALLS), tail_start(&m));
    }

    #[test]
    fn a_refused_call_in_the_tail_loses_its_long_arguments_not_its_error() {
        let garbage = "src/calc.py\\n".repeat(120);
        let mut m = vec![
            Message::user_text("task"),
            assistant_call("a", "read_file", json!({"path": garbage}), ""),
            result("a", &format!("error: no such file: {garbage}"), true),
            assistant_call(
                "b",
                "create_file",
                json!({"path": "ok.py", "content": "y\n".repeat(300)}),
                "",
            ),
            result("b", "Created `ok.py`", false),
        ];
        let original = m.clone();
        assert!(shrink_refused_calls(&mut m, 1));
        let ContentBlock::ToolUse { input, .. } = &m[1].content[0] else {
            panic!()
        };
        assert!(
            input["path"]
                .as_str()
                .unwrap()
                .starts_with("[compacted: 1 lines")
        );
        let ContentBlock::ToolResult { content, .. } = &m[2].content[0] else {
            panic!()
        };
        assert!(
            content.starts_with("[compacted error] read_file src/calc.py"),
            "{content}"
        );
        assert!(
            content.len() < 600,
            "the error's key line, shortened: {content}"
        );
        assert_eq!(m[3..], original[3..], "a call that succeeded stays whole");
        assert!(!shrink_refused_calls(&mut m, 1), "idempotent");
    }

    #[test]
    fn a_refused_call_long_only_as_a_whole_is_shrunk_too() {
        let half = "E:\\workspace-2019-3-7-2.14.5_mw-i8k-x64-v4-rfc-286l-c/".repeat(5);
        let mut m = vec![
            Message::user_text("task"),
            assistant_call(
                "a",
                "create_file",
                json!({"path": half, "content": half}),
                "",
            ),
            result("a", &format!("`{half}` is not a valid path"), true),
        ];
        assert!(shrink_refused_calls(&mut m, 1));
        let ContentBlock::ToolUse { input, .. } = &m[1].content[0] else {
            panic!()
        };
        assert!(input.to_string().len() < 150, "{input}");
    }

    /// The real run's call: eight edits of short garbage strings, 1,444 characters in all,
    /// kept whole in the protected tail of a 2,048-token window (`context_overflow`).
    #[test]
    fn a_refused_call_of_many_short_strings_is_shrunk_to_its_short_fields() {
        let edits: Vec<Value> = (0..8)
            .map(|i| json!({"search": format!("/temp\nsrc.main-{i}\\s+i:k8M4YKTgN0IxJ1Cb"), "replace": "&#9;, \n   [key] : \n"}))
            .collect();
        let input = json!({"path": "src/main.rs", "edits": edits});
        assert!(input.to_string().len() > 600, "{input}");
        let mut m = vec![
            Message::user_text("task"),
            assistant_call("a", "edit_file", input, ""),
            result("a", "`src/main.rs` does not exist; use create_file", true),
        ];
        assert!(shrink_refused_calls(&mut m, 1));
        let ContentBlock::ToolUse { input, .. } = &m[1].content[0] else {
            panic!()
        };
        assert!(input.to_string().len() < 120, "{input}");
        assert_eq!(
            input["path"], "src/main.rs",
            "the short field stays: {input}"
        );
        assert!(
            input["edits"]
                .as_str()
                .is_some_and(|s| s.contains("8 items")),
            "{input}"
        );
        assert!(!shrink_refused_calls(&mut m, 1), "idempotent");
    }

    #[test]
    fn stage_one_summarises_old_results_and_keeps_the_tail() {
        let mut m = session();
        let original = m.clone();
        let t = tail_start(&m);
        assert!(clear_tool_results(&mut m, t));
        let ContentBlock::ToolResult { content, .. } = &m[2].content[0] else {
            panic!("expected a result");
        };
        assert_eq!(
            content,
            "[compacted] read_file src/f0.rs: 60 lines — defines: f0_1, f0_21, f0_41"
        );
        assert_eq!(m[0], original[0], "the task is untouched");
        assert_eq!(m[t..], original[t..], "the tail is untouched");
        assert!(!clear_tool_results(&mut m, t), "idempotent");
    }

    #[test]
    fn stage_one_shrinks_long_arguments_and_keeps_error_lines() {
        let mut m = vec![
            Message::user_text("task"),
            assistant_call(
                "w",
                "create_file",
                json!({"path": "a.rs", "content": "x\n".repeat(500)}),
                "",
            ),
            result(
                "w",
                &format!("error: disk full\n{}", "detail ".repeat(100)),
                true,
            ),
        ];
        assert!(clear_tool_results(&mut m, 3));
        let ContentBlock::ToolUse { input, .. } = &m[1].content[0] else {
            panic!()
        };
        assert_eq!(input["content"], "[compacted: 500 lines, 1000 chars]");
        assert_eq!(input["path"], "a.rs");
        let ContentBlock::ToolResult { content, .. } = &m[2].content[0] else {
            panic!()
        };
        assert_eq!(
            content,
            "[compacted error] create_file a.rs: error: disk full"
        );
    }

    #[test]
    fn stage_two_drops_resolved_errors_and_repeated_reads() {
        let mut m = vec![
            Message::user_text("task"),
            assistant_call("a", "read_file", json!({"path": "x.rs"}), ""),
            result("a", "1\tfn x() {}", false),
            assistant_call(
                "b",
                "create_file",
                json!({"path": "y.rs", "content": "1"}),
                "Creating y.",
            ),
            result("b", "error: parent is a file", true),
            assistant_call(
                "c",
                "create_file",
                json!({"path": "y.rs", "content": "2"}),
                "",
            ),
            result("c", "Created `y.rs`", false),
            assistant_call(
                "d",
                "create_file",
                json!({"path": "z.rs", "content": "3"}),
                "",
            ),
            result("d", "error: unresolved", true),
            assistant_call("e", "read_file", json!({"path": "x.rs"}), ""),
            result("e", "1\tfn x() {}", false),
        ];
        let effect = |name: &str| match name {
            "read_file" => Some(ToolEffect::ReadOnly),
            _ => Some(ToolEffect::WritesFiles),
        };
        let (tail, notes) = drop_dead_ends(&mut m, 9, &effect);
        let ids: Vec<String> = m
            .iter()
            .flat_map(|m| m.tool_calls())
            .map(|c| c.id)
            .collect();
        assert_eq!(
            ids,
            ["c", "d", "e"],
            "the repeated read and resolved error go"
        );
        assert_eq!(tail, 5);
        assert_eq!(notes, ["Creating y."]);
        // Roles still alternate.
        for w in m.windows(2) {
            assert_ne!(w[0].role, w[1].role);
        }
    }

    #[test]
    fn summaries_replace_the_oldest_turns_but_never_the_task() {
        let mut m = session();
        let task = m[0].clone();
        let t = tail_start(&m);
        let facts = Facts {
            files: vec!["src/new.rs".into()],
            open_errors: vec![OpenError {
                tool: "create_file".into(),
                target: Some("src/lib.rs".into()),
                message: "`src/lib.rs` already exists".into(),
            }],
        };
        let block = earlier_work_block("- read five files", &facts, &["chose plan B".into()], &[]);
        apply_summary(&mut m, t, block);
        assert_eq!(m[0].content[0], task.content[0]);
        assert_eq!(m[1].role, Role::Assistant);
        let text = m[0].text();
        assert!(text.contains("Files created or modified so far: src/new.rs"));
        assert!(text.contains("create_file src/lib.rs: `src/lib.rs` already exists"));
        assert!(text.contains("chose plan B"));
        // A second summary replaces the block rather than stacking.
        let len = m.len();
        apply_summary(&mut m, 1, earlier_work_block("second", &facts, &[], &[]));
        assert_eq!(m.len(), len);
        assert_eq!(m[0].content.len(), 2);
        assert!(m[0].text().contains("second"));
        assert!(!m[0].text().contains("read five files"));
    }
}
