//! Output: human-readable rendering of the event stream, and JSON lines.

use std::io::Write;
use std::sync::Mutex;

use keel_engine::EventSink;
use keel_protocol::{DeltaChannel, ErrorCode, Event, EventKind, SessionStatus};
use serde_json::Value;

use crate::chat::markdown::{self, MarkdownStream, to_ansi};
use crate::chat::theme::Theme;
use crate::chat::tool_cell::{self, Limits, ToolView};
use keel_tools::text::count;

/// Lines of a tool call's body (`tool_cell`) `keel run` prints: an edit's diff, a created
/// file's head, a command output's tail.
const BODY_LINES: Limits = Limits {
    diff: 30,
    file: 12,
    output: 8,
};

/// Prints each event as one JSON line on stdout, flushed, and nothing else.
pub struct JsonLines;

impl EventSink for JsonLines {
    fn publish(&self, event: &Event) {
        let Ok(line) = serde_json::to_string(event) else {
            return;
        };
        // Cleaned like all output; `json_safe` first, so the data stays the same.
        let mut out = crate::out::stdout();
        let _ = writeln!(out, "{}", crate::out::json_safe(&line));
        let _ = out.flush();
    }
}

/// The width of the terminal on stdout, else 100 columns (a pipe, a file).
fn terminal_width() -> usize {
    if crate::out::stdout_is_terminal() {
        crossterm::terminal::size().map_or(100, |(w, _)| usize::from(w.max(20)))
    } else {
        100
    }
}

/// Whether stdout should get colour: a terminal, and `NO_COLOR` unset.
pub fn stdout_color() -> bool {
    crate::out::stdout_is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Renders events for a person. In live mode the answer streams from deltas; in replay mode
/// (a stored transcript) it comes from the complete assistant messages. Answers are Markdown,
/// rendered by the same code as `keel chat`'s transcript (block by block as they stream).
pub struct Human {
    style: Style,
    theme: Theme,
    live: bool,
    /// Columns Markdown tables are fitted to: the terminal's, else 100.
    width: usize,
    /// Show a spinner with the elapsed time while a tool runs (live, on a terminal).
    spinner: bool,
    state: Mutex<HumanState>,
}

#[derive(Default)]
struct HumanState {
    /// The cursor is mid-line after streamed text.
    open_line: bool,
    /// Which stream the open line belongs to.
    channel: Option<DeltaChannel>,
    /// A write refused in this run and not redone since (tool and first line of the
    /// reason): a run that ends "completed" after it gets no success mark.
    refused_write: Option<String>,
    /// The answer streaming as Markdown.
    markdown: MarkdownStream,
    /// The running tool's spinner.
    spinner: Option<indicatif::ProgressBar>,
    /// When each running tool call started (event time, ms).
    started: std::collections::HashMap<String, u64>,
    /// The arguments of each running tool call (what its result's body may show).
    args: std::collections::HashMap<String, Value>,
    /// Subagents' labels by run id (`a1 explorer`).
    agents: std::collections::HashMap<String, String>,
}

/// Whether the run of `events` completed without the change its task asked for
/// (`session_finished`'s `unchanged`): `keel run` exits 4 (incomplete).
pub fn changed_nothing(events: &[keel_protocol::Event]) -> bool {
    events.iter().rev().any(|e| {
        e.parent_run_id.is_none()
            && matches!(
                e.kind,
                EventKind::SessionFinished {
                    status: SessionStatus::Completed,
                    unchanged: true,
                    ..
                }
            )
    })
}

/// The tools that write files: a refusal of one means the change the model meant to make is
/// not in the workspace.
const WRITE_TOOLS: &[&str] = &["create_file", "edit_file", "apply_patch"];

/// The last file write of `events` when it was refused and no later write succeeded (tool
/// and the first line of why): such a run did not leave its work in the workspace.
pub fn unredone_refusal(events: &[keel_protocol::Event]) -> Option<String> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::ToolResult {
            name,
            is_error,
            content,
            ..
        } if WRITE_TOOLS.contains(&name.as_str()) && e.parent_run_id.is_none() => {
            Some(is_error.then(|| format!("{name}: {}", first_line(content, 80))))
        }
        _ => None,
    })?
}

impl Human {
    pub fn new(color: bool, live: bool) -> Self {
        Self {
            style: Style::new(color),
            theme: if color {
                Theme::colored()
            } else {
                Theme::plain()
            },
            live,
            width: terminal_width(),
            spinner: false,
            state: Mutex::new(HumanState::default()),
        }
    }

    /// Shows a spinner with the elapsed time while each tool call runs.
    pub fn with_spinner(mut self, on: bool) -> Self {
        self.spinner = on;
        self
    }

    /// One event as text on its own (no streaming state), as `keel run` would print it.
    pub(crate) fn line(&self, event: &Event) -> String {
        let event = crate::term_text::clean_event(event);
        self.render(&event, &mut HumanState::default())
    }

    fn render(&self, event: &Event, st: &mut HumanState) -> String {
        let s = self.style;
        let theme = &self.theme;
        let mut out = String::new();
        let close = |out: &mut String, st: &mut HumanState| {
            if st.open_line {
                out.push_str(s.reset);
                out.push('\n');
                st.open_line = false;
            }
            if st.markdown.is_open() {
                out.push_str(&to_ansi(
                    &st.markdown.finish(None, self.width, theme),
                    theme.color,
                ));
            }
            st.channel = None;
        };
        match &event.kind {
            EventKind::SessionStarted {
                provider,
                model,
                phase,
                ..
            } => {
                let mode = phase
                    .as_deref()
                    .map(|p| format!(" · plan_exec ({p})"))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "{}● keel · {provider}/{model}{mode} · session {}{}\n",
                    s.dim, event.session_id, s.reset
                ));
            }
            EventKind::TurnStarted { .. } => {
                // A local model can think for minutes before its first byte (or its whole
                // reply, when it cannot stream): show that Keel is waiting, and for how long.
                if self.spinner && self.live {
                    st.spinner = Some(spinner_bar("    {spinner} waiting for the model {elapsed}"));
                }
            }
            EventKind::AssistantDelta { text, channel } => {
                if !self.live {
                    return out;
                }
                if st.channel != Some(*channel) {
                    close(&mut out, st);
                    if *channel == DeltaChannel::Reasoning {
                        out.push_str(s.dim);
                    }
                    st.channel = Some(*channel);
                }
                if *channel == DeltaChannel::Text {
                    let lines = st.markdown.push(text, self.width, theme);
                    out.push_str(&to_ansi(&lines, theme.color));
                    return out;
                }
                out.push_str(text);
                st.open_line = !text.ends_with('\n');
                if !st.open_line && *channel == DeltaChannel::Reasoning {
                    out.push_str(s.reset);
                }
            }
            EventKind::AssistantMessage {
                text, reasoning, ..
            } => {
                if self.live {
                    if st.open_line {
                        out.push_str(s.reset);
                        out.push('\n');
                        st.open_line = false;
                    }
                    // The message's final text finishes what its deltas started.
                    let rest = st.markdown.finish(Some(text), self.width, theme);
                    out.push_str(&to_ansi(&rest, theme.color));
                    st.channel = None;
                } else {
                    close(&mut out, st);
                    if let Some(r) = reasoning.as_deref().filter(|r| !r.is_empty()) {
                        out.push_str(&format!("{}{}{}\n", s.dim, r.trim_end(), s.reset));
                    }
                    if !text.is_empty() {
                        out.push_str(&to_ansi(
                            &markdown::render(text, self.width, theme),
                            theme.color,
                        ));
                    }
                }
            }
            EventKind::ToolCall {
                id,
                name,
                arguments,
            } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "  {}→ {name}{} {}\n",
                    s.cyan,
                    s.reset,
                    summarize_args(arguments)
                ));
                st.started.insert(id.clone(), event.ts);
                st.args.insert(id.clone(), arguments.clone());
                if self.spinner {
                    if let Some(previous) = st.spinner.take() {
                        previous.finish_and_clear();
                    }
                    // Printed before the spinner starts drawing below it.
                    // Raw: every event was cleaned (`clean_event`) before Keel's styles.
                    let mut stdout = crate::out::raw_stdout().lock();
                    let _ = stdout.write_all(std::mem::take(&mut out).as_bytes());
                    let _ = stdout.flush();
                    drop(stdout);
                    st.spinner = Some(spinner_bar("    {spinner} {elapsed}"));
                }
            }
            EventKind::ToolRepaired { from, to, how, .. } => {
                close(&mut out, st);
                let line = match how.strip_prefix("name: ") {
                    Some(why) => format!("{from} → {to} ({why})"),
                    None => format!("arguments repaired: {}", first_line(how, 100)),
                };
                out.push_str(&format!("    {}↪ {line}{}\n", s.yellow, s.reset));
            }
            EventKind::ToolResult {
                id,
                is_error,
                content,
                details,
                metadata,
                name,
                ..
            } => {
                if WRITE_TOOLS.contains(&name.as_str()) {
                    st.refused_write =
                        is_error.then(|| format!("{name}: {}", first_line(content, 80)));
                }
                if *is_error && content.starts_with("{\"error\":\"phase_violation\"") {
                    return out; // the phase_violation line above already says it
                }
                close(&mut out, st);
                // The repair note is shown by the tool_repaired line already.
                let content = match content.strip_prefix("[keel: ") {
                    Some(rest) => rest.split_once('\n').map_or("", |(_, body)| body),
                    None => content.as_str(),
                };
                if let Some(plan) = metadata.as_ref().and_then(|m| m.get("plan")) {
                    out.push_str(&render_plan(plan, s));
                    return out;
                }
                let took = st
                    .started
                    .remove(id)
                    .map(|t| event.ts.saturating_sub(t))
                    .filter(|ms| *ms >= 1000)
                    .map(|ms| format!(" · {:.1}s", ms as f64 / 1000.0))
                    .unwrap_or_default();
                let first = first_line(content, 110);
                let args = st.args.remove(id).unwrap_or(Value::Null);
                // The typed body: an edit's diff, a created file's head, a command's output.
                let body = || {
                    let view = ToolView {
                        name,
                        args: &args,
                        is_error: *is_error,
                        content,
                        details,
                    };
                    to_ansi(&tool_cell::body(&view, BODY_LINES, "", theme), theme.color)
                };
                if *is_error {
                    out.push_str(&format!("    {}✗ {first}{took}{}\n", s.red, s.reset));
                    // A failed command's output says why; any other error is its first line.
                    if self.live && details.output_tail.is_some() {
                        out.push_str(&body());
                    }
                } else {
                    let lines = content.lines().count();
                    out.push_str(&format!(
                        "    {}✓ {first}{}{took}{}\n",
                        s.dim,
                        if lines > 1 {
                            format!(" (+{})", count(lines - 1, "line", "lines"))
                        } else {
                            String::new()
                        },
                        s.reset
                    ));
                    if self.live {
                        out.push_str(&body());
                    }
                }
                // The typed part of the result: what changed, what was cut.
                if !*is_error && !details.files.is_empty() {
                    out.push_str(&format!(
                        "      {}changed: {}{}\n",
                        s.dim,
                        details.files.join(", "),
                        s.reset
                    ));
                }
                if let Some(t) = details.truncated {
                    out.push_str(&format!(
                        "      {}(output cut: {} of {} characters shown){}\n",
                        s.dim, t.shown_chars, t.original_chars, s.reset
                    ));
                }
            }
            EventKind::PhaseChanged { phase, previous } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}◆ phase {previous} → {phase}{}\n",
                    s.bold, s.reset
                ));
            }
            EventKind::PhaseViolation { tool, phase, hint } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "    {}⚠ phase violation ({phase}, {tool}): {hint}{}\n",
                    s.yellow, s.reset
                ));
            }
            EventKind::PhaseValidation {
                phase,
                command,
                passed,
                output,
                after_rollback,
                ..
            } => {
                close(&mut out, st);
                let (mark, color) = if *passed {
                    ("✓", s.green)
                } else {
                    ("✗", s.red)
                };
                let when = if *after_rollback {
                    " after rollback"
                } else {
                    ""
                };
                out.push_str(&format!(
                    "  {color}{mark} validate {phase}{when}: {command}{}\n",
                    s.reset
                ));
                if !passed && !output.trim().is_empty() {
                    out.push_str(&format!(
                        "{}{}{}\n",
                        s.dim,
                        first_line(output, 200),
                        s.reset
                    ));
                }
            }
            EventKind::RollbackStarted { phase, command } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}↺ rolling back {phase}: {command}{}\n",
                    s.yellow, s.reset
                ));
            }
            EventKind::RollbackCompleted { phase, .. } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "  {}✓ rollback of {phase} done; the workspace validates{}\n",
                    s.green, s.reset
                ));
            }
            EventKind::RollbackFailed { phase, reason, .. } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "  {}✗ rollback of {phase} failed: {reason}{}\n",
                    s.red, s.reset
                ));
            }
            EventKind::Checkpoint { phase, reason, .. } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}◇ checkpoint {phase}: {reason}{}\n",
                    s.dim, s.reset
                ));
            }
            EventKind::Snapshot { left_out, .. } if !left_out.is_empty() => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}note: left out of the snapshot (larger than [snapshots] max_file_mb, or a name git refuses to record; undo leaves them as they are): {}{}\n",
                    s.yellow,
                    first_line(&left_out.join(", "), 200),
                    s.reset
                ));
            }
            EventKind::Snapshot { .. } => {}
            EventKind::SnapshotFailed { message, .. } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}note: no workspace snapshots this run (undo unavailable): {}{}\n",
                    s.yellow,
                    first_line(message, 200),
                    s.reset
                ));
            }
            EventKind::WorkspacePushed {
                url,
                branch,
                commit,
            } => {
                close(&mut out, st);
                let short: String = commit.chars().take(10).collect();
                out.push_str(&format!(
                    "{}⇡ pushed {short} to {branch} of {url}{}\n",
                    s.dim, s.reset
                ));
            }
            EventKind::Undo { turn, .. } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}↶ undo: workspace restored to the end of turn {turn}{}\n",
                    s.dim, s.reset
                ));
            }
            EventKind::Compaction {
                tokens_before,
                tokens_after,
                summarizer,
                ..
            } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}… context compacted {tokens_before} → {tokens_after} tokens ({summarizer}){}\n",
                    s.dim, s.reset
                ));
            }
            EventKind::Blocker {
                id,
                question,
                source,
                evidence,
            } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}? blocked ({id}): {question}{}\n",
                    s.yellow, s.reset
                ));
                for e in evidence.iter().take(6) {
                    out.push_str(&format!("  {}- {}{}\n", s.dim, first_line(e, 160), s.reset));
                }
                let resume = format!("keel run --resume {}", event.session_id);
                if source == "budget" {
                    out.push_str(&format!("  {}continue: {resume}{}\n", s.dim, s.reset));
                } else {
                    out.push_str(&format!(
                        "  {}answer: keel blocker answer {id} \"…\"  then: {resume}{}\n",
                        s.dim, s.reset
                    ));
                }
            }
            EventKind::SessionResumed { message, .. } => {
                close(&mut out, st);
                let message = if message.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", first_line(message, 100))
                };
                out.push_str(&format!(
                    "{}● resumed session {}{message}{}\n",
                    s.dim, event.session_id, s.reset
                ));
            }
            EventKind::Recovery {
                attempt,
                error_code,
                ..
            } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}↻ recovery attempt {attempt} after {}: the model reflects and retries{}\n",
                    s.yellow,
                    error_code.as_str(),
                    s.reset
                ));
            }
            EventKind::Verification {
                gate,
                passed,
                output,
                required,
                ..
            } => {
                close(&mut out, st);
                let (mark, color) = if *passed {
                    ("✓", s.green)
                } else {
                    ("✗", s.red)
                };
                let why = if *required {
                    " (required by the constitution)"
                } else {
                    ""
                };
                out.push_str(&format!("  {color}{mark} verify {gate}{why}{}\n", s.reset));
                if !passed {
                    out.push_str(&format!(
                        "{}{}{}\n",
                        s.dim,
                        first_line(output, 200),
                        s.reset
                    ));
                }
            }
            EventKind::ModelRetry {
                attempt,
                attempts,
                delay_ms,
                message,
            } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}↻ {message} — attempt {} of {attempts}, waiting {:.1}s{}\n",
                    s.yellow,
                    attempt + 1,
                    *delay_ms as f64 / 1000.0,
                    s.reset
                ));
            }
            EventKind::ModelNotice { message } => {
                close(&mut out, st);
                out.push_str(&format!("{}! {message}{}\n", s.yellow, s.reset));
            }
            EventKind::WorkspaceCheck {
                unchecked, message, ..
            } => {
                close(&mut out, st);
                let color = if *unchecked { s.red } else { s.yellow };
                for (i, line) in message.lines().enumerate() {
                    let mark = if i == 0 { "!" } else { " " };
                    out.push_str(&format!("    {color}{mark} {line}{}\n", s.reset));
                }
            }
            EventKind::ModelFallback { from, to, message } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}⇢ {from} failed ({message}); switching to {to}{}\n",
                    s.yellow, s.reset
                ));
            }
            // A cancellation is what the person asked for, not an error: `session_finished`
            // says "cancelled".
            EventKind::Error(info) if info.error_code == ErrorCode::Cancelled => {}
            EventKind::Error(info) => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}error [{}]: {}{}\n",
                    s.red,
                    info.error_code.as_str(),
                    info.message,
                    s.reset
                ));
                for hint in &info.suggestions {
                    out.push_str(&format!("  {}- {hint}{}\n", s.dim, s.reset));
                }
            }
            EventKind::AgentStarted { .. } | EventKind::AgentFinished { .. } => {
                close(&mut out, st);
                out.push_str(&child::agent_line(s, &event.kind));
                out.push('\n');
            }
            EventKind::SessionFinished {
                status,
                iterations,
                usage,
                children,
                unchanged,
            } => {
                close(&mut out, st);
                out.push_str(&child::children_lines(s, children));
                // "Completed" without the work in the workspace: no success mark (exit 4).
                let incomplete = match (status, st.refused_write.take()) {
                    (SessionStatus::Completed, Some(refused)) => Some(format!(
                        "a write was refused and not redone ({refused}); check the workspace before relying on it"
                    )),
                    (SessionStatus::Completed, None) if *unchanged => Some(
                        "nothing was changed: the task asked for a change and no file was written (the answer above says why)".to_string(),
                    ),
                    _ => None,
                };
                if let Some(why) = incomplete {
                    out.push_str(&format!(
                        "{}! {status}, but {why}{} {}after {} · {}{}\n",
                        s.yellow,
                        s.reset,
                        s.dim,
                        count(*iterations as usize, "iteration", "iterations"),
                        usage_line(usage),
                        s.reset
                    ));
                    return out;
                }
                let (mark, color) = match status {
                    SessionStatus::Completed => ("✓", s.green),
                    SessionStatus::Blocked => ("?", s.yellow),
                    SessionStatus::Cancelled => ("■", s.yellow),
                    _ => ("✗", s.red),
                };
                out.push_str(&format!(
                    "{color}{mark} {status}{} {}after {} · {}{}\n",
                    s.reset,
                    s.dim,
                    count(*iterations as usize, "iteration", "iterations"),
                    usage_line(usage),
                    s.reset
                ));
            }
            EventKind::ApprovalRequested {
                call_id,
                summary,
                class,
                reason,
                ..
            } => {
                close(&mut out, st);
                out.push_str(&format!(
                    "{}? approval needed ({}): {summary}{} {}[{call_id}]{}\n",
                    s.yellow,
                    class_and_reason(class, reason),
                    s.reset,
                    s.dim,
                    s.reset
                ));
            }
            EventKind::ApprovalResolved {
                approved, reason, ..
            } => {
                close(&mut out, st);
                if *approved {
                    out.push_str(&format!("{}✓ approved{}\n", s.green, s.reset));
                } else {
                    out.push_str(&format!(
                        "{}✗ denied{}{}\n",
                        s.red,
                        reason
                            .as_deref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default(),
                        s.reset
                    ));
                }
            }
            // The end of every turn: the status was shown by `session_finished`; only a turn
            // that failed outside the run has more to say.
            EventKind::TurnFinished { status, message } => {
                if let Some(message) = message {
                    close(&mut out, st);
                    out.push_str(&format!("{}✗ turn {status}: {message}{}\n", s.red, s.reset));
                }
            }
        }
        out
    }
}

impl EventSink for Human {
    fn publish(&self, event: &Event) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        // Model, tool and repository text reaches the terminal as text, never as escapes.
        let event = &*crate::term_text::clean_event(event);
        let text = if event.parent_run_id.is_some() {
            // A subagent's event: one line, nested, never streamed.
            let mut text = child::child_line(self.style, event, &mut st.agents);
            if !text.is_empty() && st.open_line {
                text.insert(0, '\n');
                st.open_line = false;
            }
            text
        } else {
            self.render(event, &mut st)
        };
        if text.is_empty() {
            return;
        }
        // Whatever is printed replaces the running tool's spinner line.
        if let Some(spinner) = st.spinner.take() {
            spinner.finish_and_clear();
        }
        // Raw: every event was cleaned (`clean_event`) before Keel's styles were added.
        let mut out = crate::out::raw_stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

/// A spinner drawn on stdout with `template`, ticking on its own.
fn spinner_bar(template: &str) -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stdout());
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}

mod child;
pub mod text;

use text::{Style, first_line, render_plan};
pub use text::{class_and_reason, one_line, summarize_args, usage_line, when};

#[cfg(test)]
mod tests;
