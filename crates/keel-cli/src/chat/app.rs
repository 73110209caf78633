//! The chat screen's state and keys: what a key does, what an event changes, what is drawn.
//! No terminal and no session here — `mod.rs` carries out the [`Action`]s — so all of it runs
//! under ratatui's `TestBackend`.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use keel_protocol::{ApprovalScope, Attachment, Event, EventKind, Op};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::composer::{self, Composer};
use super::slash::{self, Slash};
use super::theme::Theme;
use super::transcript::{Level, Transcript, elapsed_text, spinner};

/// Two presses of Esc or Ctrl-C within this many milliseconds quit.
const DOUBLE_PRESS_MS: u64 = 2000;
/// Largest file attached for an `@path` mention (characters).
const MENTION_MAX_CHARS: usize = 20_000;
/// Most composer rows shown.
const COMPOSER_ROWS: usize = 6;
const POPUP_ROWS: usize = 6;

/// What the front end must do for the screen.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send to the session (created on first use).
    Op(Op),
    Slash(Slash),
    /// Run a shell command for the user.
    Shell(String),
    /// Continue another stored session (picked in `/resume`).
    Resume(String),
}

/// A list to pick from (`/resume`).
#[derive(Debug, Clone)]
pub struct Picker {
    pub title: String,
    /// (value, label)
    pub items: Vec<(String, String)>,
    pub selected: usize,
}

pub struct App {
    pub transcript: Transcript,
    pub composer: Composer,
    pub theme: Theme,
    /// A turn runs (from the message sent to `turn_finished`).
    pub running: bool,
    turn_started_ms: u64,
    pub quit: bool,
    /// When Esc or Ctrl-C was last pressed (a second press soon after quits).
    armed_ms: Option<u64>,
    /// Lines scrolled up from the bottom (0 follows the stream).
    pub scroll: usize,
    /// Workspace files for `@path` completion (loaded on the first `@`).
    pub files: Option<Vec<String>>,
    popup_selected: usize,
    /// Typing the reason for denying this call.
    deny_reason: Option<String>,
    pub picker: Option<Picker>,
    /// `!command` outputs that go with the next message.
    pub shell_outputs: Vec<Attachment>,
    pub workspace: std::path::PathBuf,
    /// The mode (`react`, `plan_exec`) shown in the status line, and the approval policy.
    pub mode: String,
    pub approval: String,
}

impl App {
    pub fn new(workspace: std::path::PathBuf, composer: Composer, theme: Theme) -> Self {
        Self {
            transcript: Transcript::default(),
            composer,
            theme,
            running: false,
            turn_started_ms: 0,
            quit: false,
            armed_ms: None,
            scroll: 0,
            files: None,
            popup_selected: 0,
            deny_reason: None,
            picker: None,
            shell_outputs: Vec::new(),
            workspace,
            mode: "react".into(),
            approval: "on-request".into(),
        }
    }

    pub fn notice(&mut self, text: impl Into<String>, level: Level) {
        self.transcript.notice(text, level);
        self.scroll = 0;
    }

    /// A session event.
    pub fn on_event(&mut self, event: &Event, now_ms: u64) {
        match &event.kind {
            EventKind::TurnFinished { .. } if event.parent_run_id.is_none() => {
                self.running = false;
                self.armed_ms = None;
            }
            EventKind::TurnStarted { .. } if !self.running && event.parent_run_id.is_none() => {
                self.running = true;
                self.turn_started_ms = now_ms;
            }
            EventKind::SessionStarted { mode, .. } if event.parent_run_id.is_none() => {
                self.mode.clone_from(mode);
            }
            _ => {}
        }
        self.transcript.apply(event);
    }

    /// The message was accepted: a turn runs.
    pub fn turn_started(&mut self, now_ms: u64) {
        self.running = true;
        self.turn_started_ms = now_ms;
    }

    /// Completion candidates for what is being typed: slash commands or `@path` files.
    fn popup(&self) -> Vec<(String, String)> {
        let text = self.composer.text();
        if let Some(prefix) = text.strip_prefix('/')
            && !prefix.contains(char::is_whitespace)
        {
            return slash::completions(prefix)
                .into_iter()
                .map(|(n, d)| (format!("/{n}"), d.to_string()))
                .collect();
        }
        if let (Some((_, query)), Some(files)) = (self.composer.mention(), &self.files) {
            return composer::fuzzy(files, query, POPUP_ROWS)
                .into_iter()
                .map(|f| (f.to_string(), String::new()))
                .collect();
        }
        Vec::new()
    }

    /// Whether `@` completion needs the workspace's files loaded.
    pub fn wants_files(&self) -> bool {
        self.files.is_none() && self.composer.mention().is_some()
    }

    fn accept_popup(&mut self) -> bool {
        let items = self.popup();
        let Some((value, _)) = items.get(self.popup_selected.min(items.len().saturating_sub(1)))
        else {
            return false;
        };
        if value.starts_with('/') {
            self.composer.set_text(&format!("{value} "));
        } else {
            let value = value.clone();
            self.composer.complete_mention(&value);
        }
        self.popup_selected = 0;
        true
    }

    /// A pasted block of text.
    pub fn on_paste(&mut self, text: &str) {
        self.composer.paste(text);
    }

    /// A key press; the action it asks for, if any.
    pub fn on_key(&mut self, key: KeyEvent, now_ms: u64) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let stop = key.code == KeyCode::Esc || (ctrl && key.code == KeyCode::Char('c'));
        if !stop {
            self.armed_ms = None;
        }
        if let Some(picker) = self.picker.as_mut() {
            match key.code {
                KeyCode::Up => picker.selected = picker.selected.saturating_sub(1),
                KeyCode::Down => {
                    picker.selected =
                        (picker.selected + 1).min(picker.items.len().saturating_sub(1));
                }
                KeyCode::Enter => {
                    let chosen = picker.items.get(picker.selected).map(|(v, _)| v.clone());
                    self.picker = None;
                    return chosen.map(Action::Resume);
                }
                _ if stop => self.picker = None,
                _ => {}
            }
            return None;
        }
        if stop {
            return self.on_stop(key.code == KeyCode::Esc, now_ms);
        }
        if ctrl {
            match key.code {
                KeyCode::Char('d') => {
                    if self.composer.is_empty() {
                        self.quit = true;
                    } else {
                        self.composer.delete();
                    }
                }
                KeyCode::Char('j') => self.composer.insert("\n"),
                KeyCode::Char('o') => {
                    self.transcript.expand_output = !self.transcript.expand_output
                }
                KeyCode::Char('t') => {
                    self.transcript.show_reasoning = !self.transcript.show_reasoning
                }
                KeyCode::Char('u') => self.composer.clear(),
                KeyCode::Char('w') => self.composer.delete_word(),
                KeyCode::Char('a') => self.composer.home(),
                KeyCode::Char('e') => self.composer.end(),
                _ => {}
            }
            return None;
        }
        // An approval waits: y / a / n / r answer it while the composer is empty.
        if self.deny_reason.is_none()
            && self.composer.is_empty()
            && let Some((call_id, _)) = self.transcript.pending_approval()
            && let KeyCode::Char(c) = key.code
        {
            let call_id = call_id.to_string();
            return match c {
                'y' => Some(Action::Op(Op::Approve {
                    call_id,
                    scope: ApprovalScope::Once,
                })),
                'a' => Some(Action::Op(Op::Approve {
                    call_id,
                    scope: ApprovalScope::Session,
                })),
                'n' => Some(Action::Op(Op::Deny {
                    call_id,
                    reason: None,
                })),
                'r' => {
                    self.deny_reason = Some(call_id);
                    None
                }
                _ => None,
            };
        }
        let popup = self.popup();
        match key.code {
            KeyCode::Enter
                if key
                    .modifiers
                    .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT) =>
            {
                self.composer.insert("\n");
            }
            KeyCode::Enter => return self.submit(now_ms),
            KeyCode::Tab => {
                self.accept_popup();
            }
            KeyCode::Up if !popup.is_empty() => {
                self.popup_selected = self.popup_selected.saturating_sub(1);
            }
            KeyCode::Down if !popup.is_empty() => {
                self.popup_selected = (self.popup_selected + 1).min(popup.len() - 1);
            }
            KeyCode::Up => self.composer.up(),
            KeyCode::Down => self.composer.down(),
            KeyCode::Left => self.composer.left(),
            KeyCode::Right => self.composer.right(),
            KeyCode::Home => self.composer.home(),
            KeyCode::End => self.composer.end(),
            KeyCode::Backspace => self.composer.backspace(),
            KeyCode::Delete => self.composer.delete(),
            KeyCode::PageUp => self.scroll += 10,
            KeyCode::PageDown => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::Char(c) => {
                self.composer.insert(c.encode_utf8(&mut [0; 4]));
                self.popup_selected = 0;
            }
            _ => {}
        }
        None
    }

    /// Esc or Ctrl-C: cancel a reason or clear the line, interrupt a turn; twice: quit.
    fn on_stop(&mut self, esc: bool, now_ms: u64) -> Option<Action> {
        if self.deny_reason.take().is_some() {
            self.composer.clear();
            return None;
        }
        if let Some(at) = self.armed_ms
            && now_ms.saturating_sub(at) <= DOUBLE_PRESS_MS
        {
            self.quit = true;
            return None;
        }
        self.armed_ms = Some(now_ms);
        if self.running {
            self.notice(
                format!(
                    "interrupting the turn… (press {} again to quit)",
                    if esc { "Esc" } else { "Ctrl-C" }
                ),
                Level::Warn,
            );
            return Some(Action::Op(Op::Interrupt));
        }
        if !self.composer.is_empty() {
            self.composer.clear();
            self.armed_ms = None;
            return None;
        }
        self.notice(
            format!(
                "press {} again to quit (the session stays stored: keel -c continues it)",
                if esc { "Esc" } else { "Ctrl-C" }
            ),
            Level::Info,
        );
        None
    }

    fn submit(&mut self, now_ms: u64) -> Option<Action> {
        if let Some(call_id) = self.deny_reason.take() {
            let reason = self.composer.submit();
            return Some(Action::Op(Op::Deny {
                call_id,
                reason: Some(reason.trim().to_string()).filter(|r| !r.is_empty()),
            }));
        }
        let text = self.composer.text().trim().to_string();
        if text.is_empty() {
            return None;
        }
        if text.starts_with('/') {
            self.composer.submit();
            return match slash::parse(&text) {
                Ok(cmd) => Some(Action::Slash(cmd)),
                Err(e) => {
                    self.notice(e, Level::Error);
                    None
                }
            };
        }
        if let Some(cmd) = text.strip_prefix('!') {
            self.composer.submit();
            let cmd = cmd.trim();
            if cmd.is_empty() {
                self.notice("type a command after `!`", Level::Error);
                return None;
            }
            return Some(Action::Shell(cmd.to_string()));
        }
        if self.running {
            self.notice(
                "a turn is running: wait for it to finish, or press Esc to interrupt it (your message stays in the composer)",
                Level::Warn,
            );
            return None;
        }
        let message = self.composer.submit();
        self.scroll = 0;
        self.transcript.typed(text);
        if let Some(id) = self.transcript.blocker.take() {
            return Some(Action::Op(Op::AnswerBlocker {
                id,
                answer: message,
            }));
        }
        let mut attachments: Vec<Attachment> =
            composer::mentioned_files(&message, &self.workspace, MENTION_MAX_CHARS)
                .into_iter()
                .map(|(name, content)| Attachment { name, content })
                .collect();
        attachments.append(&mut self.shell_outputs);
        self.turn_started(now_ms);
        Some(Action::Op(Op::UserMessage {
            text: message,
            attachments,
        }))
    }

    /// Draws the whole screen at `now_ms`.
    pub fn draw(&self, frame: &mut Frame<'_>, now_ms: u64) {
        let area = frame.area();
        let popup = self.popup();
        let (composer_lines, (crow, ccol)) = self.composer.view();
        let composer_h = composer_lines.len().clamp(1, COMPOSER_ROWS) as u16 + 2;
        let popup_h = if self.picker.is_some() {
            self.picker
                .as_ref()
                .map_or(0, |p| p.items.len().min(POPUP_ROWS * 2) as u16 + 2)
        } else {
            popup.len().min(POPUP_ROWS) as u16
        };
        let [body, pop, input, status] = Layout::vertical([
            Constraint::Min(1),
            Constraint::Length(popup_h),
            Constraint::Length(composer_h),
            Constraint::Length(1),
        ])
        .areas(area);
        self.draw_transcript(frame, body, now_ms);
        if let Some(picker) = &self.picker {
            self.draw_picker(frame, pop, picker);
        } else if !popup.is_empty() {
            let lines: Vec<Line<'_>> = popup
                .iter()
                .take(POPUP_ROWS)
                .enumerate()
                .map(|(i, (v, d))| {
                    let style = if i == self.popup_selected {
                        self.theme.selected
                    } else {
                        self.theme.dim
                    };
                    Line::from(vec![
                        Span::styled(format!(" {v:<12}"), style),
                        Span::styled(format!(" {d}"), self.theme.dim),
                    ])
                })
                .collect();
            frame.render_widget(Paragraph::new(lines), pop);
        }
        self.draw_composer(frame, input, &composer_lines, crow, ccol);
        frame.render_widget(Paragraph::new(self.status_line(now_ms)), status);
    }

    fn draw_transcript(&self, frame: &mut Frame<'_>, area: Rect, now_ms: u64) {
        if self.transcript.cells.is_empty() {
            let welcome = vec![
                Line::styled("keel chat", self.theme.heading),
                Line::styled(
                    format!("workspace {}", self.workspace.display()),
                    self.theme.dim,
                ),
                Line::styled(
                    "Say what to do. /help lists commands; @path attaches a file; !cmd runs a command.",
                    self.theme.dim,
                ),
            ];
            frame.render_widget(Paragraph::new(welcome), area);
            return;
        }
        let height = usize::from(area.height);
        let lines =
            self.transcript
                .last_lines(height + self.scroll, area.width, now_ms, &self.theme);
        let max_scroll = lines.len().saturating_sub(height);
        let scroll = self.scroll.min(max_scroll);
        let end = lines.len() - scroll;
        let start = end.saturating_sub(height);
        let visible: Vec<Line<'static>> = lines[start..end].to_vec();
        frame.render_widget(Paragraph::new(visible), area);
    }

    fn draw_picker(&self, frame: &mut Frame<'_>, area: Rect, picker: &Picker) {
        frame.render_widget(Clear, area);
        let rows = usize::from(area.height.saturating_sub(2)).max(1);
        let first = picker.selected.saturating_sub(rows - 1);
        let lines: Vec<Line<'_>> = picker
            .items
            .iter()
            .enumerate()
            .skip(first)
            .take(rows)
            .map(|(i, (_, label))| {
                let style = if i == picker.selected {
                    self.theme.selected
                } else {
                    ratatui::style::Style::default()
                };
                Line::styled(label.clone(), style)
            })
            .collect();
        let block = Block::default()
            .borders(Borders::ALL)
            .title(format!(" {} · Enter picks · Esc closes ", picker.title));
        frame.render_widget(Paragraph::new(lines).block(block), area);
    }

    fn draw_composer(
        &self,
        frame: &mut Frame<'_>,
        area: Rect,
        lines: &[&str],
        crow: usize,
        ccol: usize,
    ) {
        let title = if self.deny_reason.is_some() {
            " why deny it? Enter sends · Esc cancels ".to_string()
        } else if self.transcript.pending_approval().is_some() && self.composer.is_empty() {
            " approve? y once · a for this session · n no · r no, with a reason ".to_string()
        } else if self.transcript.blocker.is_some() {
            " your answer to the blocker ".to_string()
        } else if self.running {
            " working… Esc interrupts ".to_string()
        } else {
            " message · Enter sends · Ctrl-J new line · /help ".to_string()
        };
        let block = Block::default()
            .borders(Borders::TOP | Borders::BOTTOM)
            .border_style(self.theme.dim)
            .title(Span::styled(title, self.theme.dim));
        let rows = usize::from(area.height.saturating_sub(2)).max(1);
        let first = crow.saturating_sub(rows - 1);
        // A line wider than the composer scrolls sideways so the cursor stays in view.
        let room = usize::from(area.width.saturating_sub(3)).max(1);
        let shift = ccol.saturating_sub(room);
        let shown: Vec<Line<'_>> = lines
            .iter()
            .enumerate()
            .skip(first)
            .take(rows)
            .map(|(i, l)| {
                let text = if i == crow && shift > 0 {
                    skip_columns(l, shift)
                } else {
                    l.to_string()
                };
                Line::from(vec![
                    Span::styled(if i == 0 { "› " } else { "  " }, self.theme.user),
                    Span::raw(text),
                ])
            })
            .collect();
        frame.render_widget(Paragraph::new(shown).block(block), area);
        let x = area.x + 2 + u16::try_from(ccol - shift).unwrap_or(u16::MAX);
        let y = area.y + 1 + u16::try_from(crow - first).unwrap_or(0);
        if x < area.right() && y < area.bottom() {
            frame.set_cursor_position(Position::new(x, y));
        }
    }

    /// `model · mode · tokens · cost · context % · working 3.2s`.
    pub fn status_line(&self, now_ms: u64) -> Line<'static> {
        let st = &self.transcript.status;
        let mut parts = Vec::new();
        if !st.model.is_empty() {
            parts.push(format!("{}/{}", st.provider, st.model));
        }
        parts.push(match &st.phase {
            Some(p) => format!("plan_exec:{p}"),
            None => self.mode.clone(),
        });
        let u = &st.usage;
        parts.push(format!(
            "{} in · {} out",
            compact(u.input_tokens),
            compact(u.output_tokens)
        ));
        if u.cost_usd > 0.0 {
            parts.push(format!("${:.4}", u.cost_usd));
        }
        if let Some(p) = st.context_percent() {
            parts.push(format!("ctx {p}%"));
        }
        let mut spans = vec![Span::styled(parts.join(" · "), self.theme.dim)];
        if self.running {
            spans.insert(
                0,
                Span::styled(
                    format!(
                        "{} working {} · ",
                        spinner(now_ms),
                        elapsed_text(now_ms.saturating_sub(self.turn_started_ms))
                    ),
                    self.theme.tool,
                ),
            );
        }
        Line::from(spans)
    }
}

/// `line` without its first `cols` display columns.
fn skip_columns(line: &str, cols: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let mut seen = 0;
    line.chars()
        .skip_while(|c| {
            if seen >= cols {
                return false;
            }
            seen += c.width().unwrap_or(0);
            true
        })
        .collect()
}

/// `999`, `1.2k`, `12k`, `1.5M`.
pub fn compact(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 10_000 {
        format!("{:.0}k", n as f64 / 1e3)
    } else if n >= 1_000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}
