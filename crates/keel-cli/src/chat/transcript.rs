//! The transcript: the session's events folded into cells (a user message, a streamed
//! answer, reasoning, a tool call with its result, an approval, a notice) and drawn as lines.
//! Events of a subagent (`parent_run_id`) are nested under the run that started it.

use std::collections::HashMap;

use keel_protocol::{
    ApprovalScope, DeltaChannel, ErrorCode, Event, EventKind, SessionStatus, ToolDetails, Usage,
};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::markdown;
use super::theme::Theme;
use super::tool_cell::{self, Limits, ToolView};
use super::wrap::wrap;

/// Lines of a tool call's body shown until Ctrl-O expands them.
const COLLAPSED: Limits = Limits {
    diff: 40,
    file: 12,
    output: 6,
};
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Ok,
    Warn,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolStatus {
    Running,
    Done,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalState {
    Pending,
    Approved(ApprovalScope),
    Denied(Option<String>),
}

#[derive(Debug, Clone)]
pub enum CellKind {
    User(String),
    Assistant {
        text: String,
        streaming: bool,
    },
    Reasoning {
        text: String,
        streaming: bool,
    },
    Tool {
        id: String,
        name: String,
        /// The argument shown on the call's line (path, command, pattern …).
        arg: String,
        args: Value,
        start_ms: u64,
        end_ms: Option<u64>,
        status: ToolStatus,
        /// The result text the model read.
        content: String,
        details: Box<ToolDetails>,
    },
    Approval {
        call_id: String,
        tool: String,
        summary: String,
        class: String,
        /// Why the class (`` `rm` deletes files ``).
        reason: String,
        state: ApprovalState,
    },
    Notice(String, Level),
}

#[derive(Debug, Clone)]
pub struct Cell {
    pub kind: CellKind,
    /// 0 for the session's own runs, 1 for a subagent, …
    pub depth: usize,
}

/// What the status line shows.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub provider: String,
    pub model: String,
    pub usage: Usage,
    /// Prompt tokens of the latest model request: how full the context is.
    pub context_tokens: u64,
    pub context_window: Option<u64>,
    /// Keel knows the model's prices (so a cost of $0 is a real figure).
    pub priced: bool,
    pub phase: Option<String>,
    pub session: Option<String>,
}

impl Status {
    /// The context fill in percent, when the window is known.
    pub fn context_percent(&self) -> Option<u64> {
        self.context_window
            .filter(|w| *w > 0)
            .map(|w| (self.context_tokens * 100 / w).min(100))
    }

    /// `ctx 12% of 128k`, `ctx 3.4k (window unknown)` or `ctx unknown`.
    pub fn context_text(&self) -> String {
        use crate::render::text::compact;
        match (self.context_percent(), self.context_window) {
            (Some(p), Some(w)) => format!("ctx {p}% of {}", compact(w)),
            _ if self.context_tokens > 0 => {
                format!("ctx {} (window unknown)", compact(self.context_tokens))
            }
            _ => "ctx unknown".to_string(),
        }
    }
}

#[derive(Debug, Default)]
pub struct Transcript {
    pub cells: Vec<Cell>,
    depths: HashMap<String, usize>,
    /// Command output and long diffs shown whole (Ctrl-O).
    pub expand_output: bool,
    /// Reasoning shown whole rather than as one line (Ctrl-T).
    pub show_reasoning: bool,
    pub status: Status,
    /// The blocker waiting for an answer: the next message answers it.
    pub blocker: Option<String>,
    /// A message typed here waits for the session's echo of it.
    typed: bool,
}

impl Transcript {
    pub fn push(&mut self, kind: CellKind) {
        self.cells.push(Cell { kind, depth: 0 });
    }

    pub fn notice(&mut self, text: impl Into<String>, level: Level) {
        self.push(CellKind::Notice(text.into(), level));
    }

    /// The approval waiting for an answer, if any (the oldest).
    pub fn pending_approval(&self) -> Option<(&str, &str)> {
        self.cells.iter().find_map(|c| match &c.kind {
            CellKind::Approval {
                call_id,
                summary,
                state: ApprovalState::Pending,
                ..
            } => Some((call_id.as_str(), summary.as_str())),
            _ => None,
        })
    }

    /// The user's message as the session recorded it, unless this screen already shows it
    /// (it was typed here).
    fn user_message(&mut self, text: &str) {
        if std::mem::take(&mut self.typed) {
            return;
        }
        let text = text.trim();
        if !text.is_empty() {
            self.push(CellKind::User(text.to_string()));
        }
    }

    /// A message typed on this screen: shown now, and not again when the session records it.
    pub fn typed(&mut self, text: String) {
        self.push(CellKind::User(text));
        self.typed = true;
    }

    fn depth_of(&mut self, event: &Event) -> usize {
        let depth = match &event.parent_run_id {
            Some(parent) => self.depths.get(parent).copied().unwrap_or(0) + 1,
            None => 0,
        };
        if !event.run_id.is_empty() {
            self.depths.entry(event.run_id.clone()).or_insert(depth);
        }
        depth
    }

    fn push_at(&mut self, kind: CellKind, depth: usize) {
        self.cells.push(Cell { kind, depth });
    }

    /// The open (streaming) cell of this kind at `depth`.
    fn streaming(&mut self, depth: usize, reasoning: bool) -> Option<&mut String> {
        let last = self.cells.iter_mut().rev().find(|c| c.depth == depth)?;
        match &mut last.kind {
            CellKind::Assistant { text, streaming } if *streaming && !reasoning => Some(text),
            CellKind::Reasoning { text, streaming } if *streaming && reasoning => Some(text),
            _ => None,
        }
    }

    /// Folds one event in. `live`: answers come from deltas (a replayed transcript has only
    /// the complete messages).
    pub fn apply(&mut self, event: &Event) {
        let depth = self.depth_of(event);
        match &event.kind {
            EventKind::SessionStarted {
                provider,
                model,
                phase,
                task,
                ..
            } => {
                if depth == 0 {
                    self.status.provider = provider.clone();
                    self.status.model = model.clone();
                    self.status.phase = phase.clone();
                    self.status.session = Some(event.session_id.clone());
                    self.user_message(task);
                }
            }
            EventKind::SessionResumed { message, .. } if depth == 0 => self.user_message(message),
            EventKind::TurnStarted { .. } | EventKind::Snapshot { .. } => {}
            EventKind::AssistantDelta { text, channel } => {
                let reasoning = *channel == DeltaChannel::Reasoning;
                if let Some(open) = self.streaming(depth, reasoning) {
                    open.push_str(text);
                } else {
                    let text = text.clone();
                    self.push_at(
                        if reasoning {
                            CellKind::Reasoning {
                                text,
                                streaming: true,
                            }
                        } else {
                            CellKind::Assistant {
                                text,
                                streaming: true,
                            }
                        },
                        depth,
                    );
                }
            }
            EventKind::AssistantMessage {
                text,
                reasoning,
                usage,
                ..
            } => {
                let mut had_reasoning = false;
                let mut had_text = false;
                for cell in self
                    .cells
                    .iter_mut()
                    .rev()
                    .filter(|c| c.depth == depth)
                    .take(2)
                {
                    match &mut cell.kind {
                        CellKind::Reasoning { streaming, .. } if *streaming => {
                            *streaming = false;
                            had_reasoning = true;
                        }
                        CellKind::Assistant {
                            text: shown,
                            streaming,
                        } if *streaming => {
                            *streaming = false;
                            shown.clone_from(text);
                            had_text = true;
                        }
                        _ => {}
                    }
                }
                if let Some(r) = reasoning
                    .as_deref()
                    .filter(|r| !r.is_empty() && !had_reasoning)
                {
                    self.push_at(
                        CellKind::Reasoning {
                            text: r.to_string(),
                            streaming: false,
                        },
                        depth,
                    );
                }
                if !had_text && !text.trim().is_empty() {
                    self.push_at(
                        CellKind::Assistant {
                            text: text.clone(),
                            streaming: false,
                        },
                        depth,
                    );
                }
                self.status.usage.add(usage);
                if depth == 0 && usage.input_tokens > 0 {
                    self.status.context_tokens = usage.input_tokens;
                }
            }
            EventKind::ToolCall {
                id,
                name,
                arguments,
            } => self.push_at(
                CellKind::Tool {
                    id: id.clone(),
                    name: name.clone(),
                    arg: crate::render::summarize_args(arguments),
                    args: arguments.clone(),
                    start_ms: event.ts,
                    end_ms: None,
                    status: ToolStatus::Running,
                    content: String::new(),
                    details: Box::default(),
                },
                depth,
            ),
            EventKind::ToolResult {
                id,
                is_error,
                content,
                details,
                ..
            } => {
                for cell in self.cells.iter_mut().rev() {
                    if let CellKind::Tool {
                        id: cid,
                        end_ms,
                        status,
                        content: shown,
                        details: typed,
                        ..
                    } = &mut cell.kind
                        && cid == id
                    {
                        *end_ms = Some(event.ts);
                        *status = if *is_error {
                            ToolStatus::Failed
                        } else {
                            ToolStatus::Done
                        };
                        shown.clone_from(content);
                        **typed = details.clone();
                        break;
                    }
                }
            }
            EventKind::ApprovalRequested {
                call_id,
                tool,
                summary,
                class,
                reason,
            } => {
                let cell = Cell {
                    kind: CellKind::Approval {
                        call_id: call_id.clone(),
                        tool: tool.clone(),
                        summary: summary.clone(),
                        class: class.clone(),
                        reason: reason.clone(),
                        state: ApprovalState::Pending,
                    },
                    depth,
                };
                // The question (and later its answer) goes above the call it is about, so
                // the record reads in order: asked, answered, ran, output.
                let call = self
                    .cells
                    .iter()
                    .rposition(|c| matches!(&c.kind, CellKind::Tool { id, .. } if id == call_id));
                match call {
                    Some(at) => self.cells.insert(at, cell),
                    None => self.cells.push(cell),
                }
            }
            EventKind::ApprovalResolved {
                call_id,
                approved,
                scope,
                reason,
            } => {
                for cell in &mut self.cells {
                    if let CellKind::Approval {
                        call_id: cid,
                        state,
                        ..
                    } = &mut cell.kind
                        && cid == call_id
                    {
                        *state = if *approved {
                            ApprovalState::Approved(scope.unwrap_or_default())
                        } else {
                            ApprovalState::Denied(reason.clone())
                        };
                    }
                }
            }
            EventKind::PhaseChanged { phase, previous } => {
                self.status.phase = Some(phase.clone());
                self.push_at(
                    CellKind::Notice(format!("◆ phase {previous} → {phase}"), Level::Info),
                    depth,
                );
            }
            EventKind::Blocker { id, question, .. } => {
                // A subagent's blocker belongs to the child's own session: not the user's to
                // answer here (its parent gets the child's status as a result).
                if depth == 0 {
                    self.blocker = Some(id.clone());
                }
                self.push_at(
                    CellKind::Notice(
                        format!("? blocked: {question}\n  type your answer below; Enter sends it"),
                        Level::Warn,
                    ),
                    depth,
                );
            }
            EventKind::SessionFinished {
                status: SessionStatus::Completed,
                unchanged: true,
                ..
            } if depth == 0 => {
                self.push_at(
                    CellKind::Notice(
                        "! nothing was changed: the task asked for a change and no file was written".into(),
                        Level::Warn,
                    ),
                    depth,
                );
            }
            EventKind::SessionFinished { status, .. } => {
                let text = match status {
                    SessionStatus::Completed => return, // the answer says it
                    SessionStatus::Blocked => return,   // the blocker says it
                    SessionStatus::Cancelled if depth == 0 => {
                        "■ cancelled · your next message continues the session".to_string()
                    }
                    SessionStatus::Cancelled => "■ cancelled".to_string(),
                    _ => format!("✗ {status}"),
                };
                let level = if *status == SessionStatus::Cancelled {
                    Level::Warn
                } else {
                    Level::Error
                };
                self.push_at(CellKind::Notice(text, level), depth);
            }
            // Asked for, not an error: the `session_finished` after it says "cancelled".
            EventKind::Error(info) if info.error_code == ErrorCode::Cancelled => {}
            EventKind::Undo {
                turn,
                modified,
                recreated,
                removed,
                ..
            } => {
                let mut text = format!("↶ undo: workspace restored to the end of turn {turn}");
                for (label, files) in [
                    ("restored", modified),
                    ("recreated", recreated),
                    ("removed", removed),
                ] {
                    if !files.is_empty() {
                        text.push_str(&format!("\n  {label}: {}", files.join(", ")));
                    }
                }
                self.push_at(CellKind::Notice(text, Level::Info), depth);
            }
            _ => {
                // Everything else reads as `keel run` prints it.
                let text = crate::render::Human::new(false, true).line(event);
                let text = text.trim_end();
                if !text.is_empty() {
                    let level = match &event.kind {
                        EventKind::Error(_)
                        | EventKind::RollbackFailed { .. }
                        | EventKind::TurnFinished { .. } => Level::Error,
                        EventKind::ModelRetry { .. }
                        | EventKind::ModelFallback { .. }
                        | EventKind::ModelNotice { .. }
                        | EventKind::WorkspaceCheck { .. }
                        | EventKind::Recovery { .. }
                        | EventKind::PhaseViolation { .. }
                        | EventKind::SnapshotFailed { .. } => Level::Warn,
                        _ => Level::Info,
                    };
                    self.push_at(CellKind::Notice(text.to_string(), level), depth);
                }
            }
        }
    }

    /// At least the last `wanted` lines (whole cells, from the newest back): a frame renders
    /// only what it can show, however long the session.
    pub fn last_lines(
        &self,
        wanted: usize,
        width: u16,
        now_ms: u64,
        theme: &Theme,
    ) -> Vec<Line<'static>> {
        let mut blocks: Vec<Vec<Line<'static>>> = Vec::new();
        let mut count = 0;
        for (i, cell) in self.cells.iter().enumerate().rev() {
            if count >= wanted {
                break;
            }
            let mut block = Vec::new();
            let gap = matches!(cell.kind, CellKind::User(_) | CellKind::Assistant { .. })
                && i > 0
                && cell.depth == 0;
            if gap {
                block.push(Line::default());
            }
            let prefix = "│ ".repeat(cell.depth);
            let room = usize::from(width).saturating_sub(prefix.chars().count());
            for line in self.cell_lines(cell, room, now_ms, theme) {
                for mut piece in wrap(&line, room, "  ") {
                    if !prefix.is_empty() {
                        piece
                            .spans
                            .insert(0, Span::styled(prefix.clone(), theme.dim));
                    }
                    block.push(piece);
                }
            }
            count += block.len();
            blocks.push(block);
        }
        blocks.into_iter().rev().flatten().collect()
    }

    /// A message typed here could not be sent: the session's record of it will not come.
    pub fn untyped(&mut self) {
        self.typed = false;
    }

    fn cell_lines(
        &self,
        cell: &Cell,
        width: usize,
        now_ms: u64,
        theme: &Theme,
    ) -> Vec<Line<'static>> {
        match &cell.kind {
            CellKind::User(text) => text
                .lines()
                .enumerate()
                .map(|(i, l)| {
                    Line::from(vec![
                        Span::styled(if i == 0 { "› " } else { "  " }, theme.user),
                        Span::styled(l.to_string(), theme.bold),
                    ])
                })
                .collect(),
            CellKind::Assistant { text, .. } => markdown::render(text, width, theme),
            CellKind::Reasoning { text, streaming } => {
                let n = text.lines().filter(|l| !l.trim().is_empty()).count();
                if self.show_reasoning {
                    let mut lines = vec![Line::styled("▾ thinking (Ctrl-T hides)", theme.dim)];
                    lines.extend(
                        text.lines()
                            .map(|l| Line::styled(format!("  {l}"), theme.dim)),
                    );
                    lines
                } else {
                    let last = if *streaming {
                        text.lines()
                            .last()
                            .map(|l| format!(": {}", l.trim()))
                            .unwrap_or_default()
                    } else {
                        String::new()
                    };
                    vec![Line::styled(
                        format!(
                            "▸ thinking, {n} line{} (Ctrl-T shows){last}",
                            if n == 1 { "" } else { "s" }
                        ),
                        theme.dim,
                    )]
                }
            }
            CellKind::Tool {
                name,
                arg,
                args,
                start_ms,
                end_ms,
                status,
                content,
                details,
                ..
            } => {
                // Waiting for a person: the question above says everything.
                if *status == ToolStatus::Running
                    && self
                        .pending_approval()
                        .is_some_and(|(c, _)| Some(c) == cell_id(cell))
                {
                    return Vec::new();
                }
                let elapsed = elapsed_text(end_ms.unwrap_or(now_ms).saturating_sub(*start_ms));
                let (mark, style) = match status {
                    ToolStatus::Running => (spinner(now_ms), theme.tool),
                    ToolStatus::Done => ("✓", theme.ok),
                    ToolStatus::Failed => ("✗", theme.error),
                };
                let mut lines = vec![Line::from(vec![
                    Span::styled(format!("{mark} "), style),
                    Span::styled(name.clone(), theme.tool),
                    Span::raw(if arg.is_empty() {
                        String::new()
                    } else {
                        format!(" {arg}")
                    }),
                    Span::styled(format!(" · {elapsed}"), theme.dim),
                ])];
                if *status != ToolStatus::Running {
                    let view = ToolView {
                        name,
                        args,
                        is_error: *status == ToolStatus::Failed,
                        content,
                        details,
                    };
                    let (limits, hint) = if self.expand_output {
                        (Limits::ALL, "")
                    } else {
                        (COLLAPSED, "Ctrl-O expands")
                    };
                    lines.extend(tool_cell::body(&view, limits, hint, theme));
                }
                lines
            }
            CellKind::Approval {
                call_id,
                tool,
                summary,
                class,
                reason,
                state,
            } => {
                let mut lines = vec![Line::from(vec![
                    Span::styled("? approve ", theme.warn),
                    Span::styled(format!("{tool} "), theme.tool),
                    Span::styled(format!("({class})"), theme.warn),
                    Span::raw(format!(": {}", approval_text(summary, self.expand_output))),
                ])];
                if !reason.is_empty() {
                    lines.push(Line::styled(format!("  {reason}"), theme.warn));
                }
                // What a pending call writes, before the answer: the summary of a file tool
                // names only its path (red-team pass 4, R4-6: a `curl … | sh` line added to
                // README.md was asked about as "edit_file README.md").
                if *state == ApprovalState::Pending {
                    let args = self.cells.iter().find_map(|c| match &c.kind {
                        CellKind::Tool { id, args, .. } if id == call_id => Some(args),
                        _ => None,
                    });
                    for line in written_preview(args, self.expand_output) {
                        lines.push(Line::styled(line, theme.dim));
                    }
                }
                lines.push(match state {
                    ApprovalState::Pending => Line::styled(
                        "  [y] yes once · [a] yes for this session · [n] no · [r] no, with a reason",
                        theme.bold,
                    ),
                    ApprovalState::Approved(ApprovalScope::Session) => {
                        Line::styled("  ✓ approved for this session", theme.ok)
                    }
                    ApprovalState::Approved(_) => Line::styled("  ✓ approved once", theme.ok),
                    ApprovalState::Denied(reason) => Line::styled(
                        format!(
                            "  ✗ denied{}",
                            reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
                        ),
                        theme.error,
                    ),
                });
                lines
            }
            CellKind::Notice(text, level) => {
                let style = match level {
                    Level::Info => theme.dim,
                    Level::Ok => theme.ok,
                    Level::Warn => theme.warn,
                    Level::Error => theme.error,
                };
                text.lines()
                    .map(|l| Line::styled(l.to_string(), style))
                    .collect()
            }
        }
    }
}

/// The id of a tool call's cell.
fn cell_id(cell: &Cell) -> Option<&str> {
    match &cell.kind {
        CellKind::Tool { id, .. } => Some(id),
        _ => None,
    }
}

pub fn spinner(now_ms: u64) -> &'static str {
    SPINNER[usize::try_from(now_ms / 100 % 10).unwrap_or(0)]
}

/// `0.4s`, `12s`, `2m05s`.
pub fn elapsed_text(ms: u64) -> String {
    if ms < 10_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 60_000 {
        format!("{}s", ms / 1000)
    } else {
        format!("{}m{:02}s", ms / 60_000, ms % 60_000 / 1000)
    }
}

/// Lines of each written argument a pending approval shows before Ctrl-O.
const PREVIEW_LINES: usize = 12;

/// The text a call would write — the string arguments of a file tool that are not its path
/// (`new_string`, `content`, `patch`, …) — each as `  key:` and its lines (`PREVIEW_LINES` of
/// them unless `expanded`, with how many more there are).
fn written_preview(args: Option<&Value>, expanded: bool) -> Vec<String> {
    const WRITTEN: &[&str] = &[
        "old_string",
        "new_string",
        "content",
        "text",
        "patch",
        "input",
        "lines",
    ];
    let Some(map) = args.and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for key in WRITTEN {
        let Some(text) = map.get(*key).and_then(Value::as_str) else {
            continue;
        };
        out.push(format!("  {key}:"));
        let all: Vec<&str> = text.lines().collect();
        let shown = if expanded {
            all.len()
        } else {
            all.len().min(PREVIEW_LINES)
        };
        for l in &all[..shown] {
            let l: String = l.chars().take(400).collect();
            out.push(format!("  │ {l}"));
        }
        if shown < all.len() {
            out.push(format!(
                "  │ … {} more lines (Ctrl-O shows them)",
                all.len() - shown
            ));
        }
    }
    out
}

/// Characters of an approval's call shown from its start, and from its end, when it is longer
/// than both: the middle is cut (Ctrl-O shows it all). A 20 KB command wrapped into ~150
/// lines put its first line — the payload — above the screen, and the person saw only padding
/// and the question (red-team pass 5, R5-13).
const APPROVAL_HEAD: usize = 1_200;
const APPROVAL_TAIL: usize = 400;

/// `summary` as an approval shows it: whole when short or `expanded`, else its head and tail
/// with how much was left out between them.
fn approval_text(summary: &str, expanded: bool) -> String {
    let n = summary.chars().count();
    if expanded || n <= APPROVAL_HEAD + APPROVAL_TAIL + 200 {
        return summary.to_string();
    }
    let head: String = summary.chars().take(APPROVAL_HEAD).collect();
    let tail: String = summary.chars().skip(n - APPROVAL_TAIL).collect();
    format!(
        "{head} … [{} characters not shown: Ctrl-O shows the whole call] … {tail}",
        n - APPROVAL_HEAD - APPROVAL_TAIL
    )
}
