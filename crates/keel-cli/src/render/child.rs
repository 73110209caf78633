//! A subagent's events in `keel run`'s human output: one short line each, indented under
//! the parent with a `│` rule and labelled with the child (`[a1 explorer]`). Children run
//! concurrently, so nothing of theirs streams: their answers show as a first line.

use std::collections::HashMap;

use keel_protocol::{ChildUsage, Event, EventKind, SessionStatus};

use super::text::{Style, first_line, summarize_args, usage_line};

/// The line for a child's `event` (empty for what is not shown); `labels` maps the children's
/// run ids to their labels, learnt from `agent_started`.
pub(super) fn child_line(s: Style, event: &Event, labels: &mut HashMap<String, String>) -> String {
    let rule = format!("  {}│{} ", s.dim, s.reset);
    if let EventKind::AgentStarted { agent_id, role, .. } = &event.kind {
        labels.insert(event.run_id.clone(), format!("{agent_id} {role}"));
    }
    let label = labels
        .get(&event.run_id)
        .cloned()
        .unwrap_or_else(|| "subagent".to_string());
    let tag = format!("{}[{label}]{}", s.dim, s.reset);
    let text = match &event.kind {
        EventKind::AgentStarted { .. } | EventKind::AgentFinished { .. } => {
            agent_line(s, &event.kind)
        }
        EventKind::ToolCall {
            name, arguments, ..
        } => format!(
            "{tag} {}→ {name}{} {}",
            s.cyan,
            s.reset,
            summarize_args(arguments)
        ),
        EventKind::ToolResult {
            is_error: true,
            content,
            ..
        } => format!("{tag} {}✗ {}{}", s.red, first_line(content, 120), s.reset),
        EventKind::AssistantMessage { text, .. } if !text.trim().is_empty() => {
            format!("{tag} {}", first_line(text.trim(), 120))
        }
        EventKind::ApprovalRequested {
            call_id,
            summary,
            class,
            reason,
            ..
        } => format!(
            "{tag} {}? approval needed ({}): {summary}{} {}[{call_id}]{}",
            s.yellow,
            super::text::class_and_reason(class, reason),
            s.reset,
            s.dim,
            s.reset
        ),
        EventKind::ApprovalResolved {
            approved, reason, ..
        } => {
            if *approved {
                format!("{tag} {}✓ approved{}", s.green, s.reset)
            } else {
                format!(
                    "{tag} {}✗ denied{}{}",
                    s.red,
                    reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default(),
                    s.reset
                )
            }
        }
        EventKind::Error(info) => format!("{tag} {}✗ {}{}", s.red, info.message, s.reset),
        EventKind::Blocker { question, .. } => {
            format!(
                "{tag} {}? {}{}",
                s.yellow,
                first_line(question, 120),
                s.reset
            )
        }
        _ => return String::new(),
    };
    format!("{rule}{text}\n")
}

/// A subagent's start or end, on one line (no newline).
pub(super) fn agent_line(s: Style, kind: &EventKind) -> String {
    match kind {
        EventKind::AgentStarted {
            agent_id,
            role,
            task,
            model,
        } => format!(
            "{}▸ subagent {agent_id} ({role}, {model}){}: {}",
            s.cyan,
            s.reset,
            first_line(task, 100)
        ),
        EventKind::AgentFinished {
            agent_id,
            role,
            status,
            iterations,
            usage,
        } => {
            let color = match status {
                SessionStatus::Completed => s.green,
                SessionStatus::Cancelled | SessionStatus::Blocked => s.yellow,
                _ => s.red,
            };
            format!(
                "{color}■ subagent {agent_id} ({role}) {status}{} {}after {} · {}{}",
                s.reset,
                s.dim,
                keel_tools::text::count(*iterations as usize, "step", "steps"),
                usage_line(usage),
                s.reset
            )
        }
        _ => String::new(),
    }
}

/// `session_finished`'s breakdown: one line per child.
pub(super) fn children_lines(s: Style, children: &[ChildUsage]) -> String {
    children
        .iter()
        .map(|c| {
            format!(
                "  {}subagent {} ({}, {}): {} · {} · {}{}\n",
                s.dim,
                c.agent_id,
                c.role,
                c.model,
                c.status,
                keel_tools::text::count(c.iterations as usize, "step", "steps"),
                usage_line(&c.usage),
                s.reset
            )
        })
        .collect()
}
