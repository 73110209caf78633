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
use crate::render::text::compact;

/// A second Ctrl-C on an empty composer within this many milliseconds quits; the hint saying
/// so is shown for as long.
pub const DOUBLE_PRESS_MS: u64 = 1800;
/// How long a hint stays in the composer's title.
const HINT_MS: u64 = 3000;
/// Lines PgUp/PgDn scroll.
const PAGE: usize = 10;
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
    /// When Ctrl-C was pressed on an empty composer (a second press soon after quits).
    armed_ms: Option<u64>,
    /// A short hint in the composer's title, until the given time (ms).
    hint: Option<(String, u64)>,
    /// Lines scrolled up from the bottom (0 follows the stream).
    pub scroll: usize,
    /// While scrolled up: the transcript's length in lines when the view was last placed, so
    /// new output below does not move what is being read (set while drawing).
    anchor: std::cell::Cell<Option<usize>>,
    /// Lines that arrived below the view since it was scrolled up (set while drawing).
    below: std::cell::Cell<usize>,
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
            hint: None,
            scroll: 0,
            anchor: std::cell::Cell::new(None),
            below: std::cell::Cell::new(0),
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
        self.follow();
    }

    /// Back to the bottom of the transcript, following new output.
    pub fn follow(&mut self) {
        self.scroll = 0;
        self.anchor.set(None);
        self.below.set(0);
    }

    /// Scrolls `up` lines up (negative: down) from where the view is now.
    fn scroll_by(&mut self, up: isize) {
        // The lines that arrived below while scrolled count as scrolled past.
        let from_bottom = self.scroll + self.below.get();
        let to = from_bottom.saturating_add_signed(up);
        if to == 0 {
            self.follow();
        } else {
            self.scroll = to;
            self.anchor.set(None);
            self.below.set(0);
        }
    }

    /// Shows `text` in the composer's title for `ms` from `now_ms`.
    fn show_hint(&mut self, text: impl Into<String>, now_ms: u64, ms: u64) {
        self.hint = Some((text.into(), now_ms + ms));
    }

    /// The hint to show at `now_ms`, if any.
    pub fn hint_at(&self, now_ms: u64) -> Option<&str> {
        self.hint
            .as_ref()
            .filter(|(_, until)| now_ms < *until)
            .map(|(t, _)| t.as_str())
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
        let ctrl_c = ctrl && key.code == KeyCode::Char('c');
        let stop = key.code == KeyCode::Esc || ctrl_c;
        if !ctrl_c {
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
        if ctrl_c {
            return self.on_ctrl_c(now_ms);
        }
        if key.code == KeyCode::Esc {
            return self.on_esc(now_ms);
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
            KeyCode::End if self.composer.is_empty() => self.follow(),
            KeyCode::End => self.composer.end(),
            KeyCode::Backspace => self.composer.backspace(),
            KeyCode::Delete => self.composer.delete(),
            KeyCode::PageUp => self.scroll_by(PAGE as isize),
            KeyCode::PageDown => self.scroll_by(-(PAGE as isize)),
            KeyCode::Char(c) => {
                self.composer.insert(c.encode_utf8(&mut [0; 4]));
                self.popup_selected = 0;
            }
            _ => {}
        }
        None
    }

    /// Esc: cancels typing a reason, or interrupts the running turn. It never quits and never
    /// throws text away (people used to Esc-Esc elsewhere get a hint saying how to quit).
    fn on_esc(&mut self, now_ms: u64) -> Option<Action> {
        if self.deny_reason.take().is_some() {
            self.composer.clear();
            return None;
        }
        if self.running {
            self.notice("interrupting the turn…", Level::Warn);
            return Some(Action::Op(Op::Interrupt));
        }
        self.show_hint(
            "Esc interrupts a turn · to quit: /quit, Ctrl-D, or Ctrl-C twice",
            now_ms,
            HINT_MS,
        );
        None
    }

    /// Ctrl-C: clears the composer (Up brings the text back), else interrupts the running
    /// turn, else — pressed twice within [`DOUBLE_PRESS_MS`] on an empty composer — quits.
    fn on_ctrl_c(&mut self, now_ms: u64) -> Option<Action> {
        if self.deny_reason.take().is_some() {
            self.composer.clear();
            return None;
        }
        if !self.composer.is_empty() {
            self.composer.stash();
            self.armed_ms = None;
            self.show_hint("message cleared · Up brings it back", now_ms, HINT_MS);
            return None;
        }
        if let Some(at) = self.armed_ms
            && now_ms.saturating_sub(at) <= DOUBLE_PRESS_MS
        {
            self.quit = true;
            return None;
        }
        self.armed_ms = Some(now_ms);
        self.show_hint(
            if self.running {
                "interrupting · Ctrl-C again quits"
            } else {
                "Ctrl-C again quits (the session stays stored: keel -c continues it)"
            },
            now_ms,
            DOUBLE_PRESS_MS,
        );
        if self.running {
            self.notice("interrupting the turn…", Level::Warn);
            return Some(Action::Op(Op::Interrupt));
        }
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
        self.follow();
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
        self.draw_composer(frame, input, &composer_lines, crow, ccol, now_ms);
        frame.render_widget(
            Paragraph::new(self.status_line(now_ms, usize::from(status.width))),
            status,
        );
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
        if self.scroll == 0 {
            let lines = self
                .transcript
                .last_lines(height, area.width, now_ms, &self.theme);
            let start = lines.len().saturating_sub(height);
            frame.render_widget(Paragraph::new(lines[start..].to_vec()), area);
            return;
        }
        // Scrolled up: the view stays on what is being read while output arrives below it,
        // and the last row says there is more.
        let lines = self
            .transcript
            .last_lines(usize::MAX, area.width, now_ms, &self.theme);
        let total = lines.len();
        let anchor = self.anchor.get().unwrap_or(total);
        self.anchor.set(Some(anchor));
        let below = total.saturating_sub(anchor);
        self.below.set(below);
        let rows = height.saturating_sub(1).max(1);
        let from_bottom = (self.scroll + below).min(total.saturating_sub(rows));
        let end = total - from_bottom;
        let start = end.saturating_sub(rows);
        let [view, mark] =
            Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(area);
        frame.render_widget(Paragraph::new(lines[start..end].to_vec()), view);
        let what = if below > 0 {
            format!(
                "↓ {below} new line{} below",
                if below == 1 { "" } else { "s" }
            )
        } else {
            format!("↓ {from_bottom} more lines below")
        };
        let style = if below > 0 {
            self.theme.warn
        } else {
            self.theme.dim
        };
        frame.render_widget(
            Paragraph::new(Line::styled(
                format!("{what} · PgDn scrolls, End on an empty line jumps to the latest"),
                style,
            )),
            mark,
        );
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
        now_ms: u64,
    ) {
        let hint = self.hint_at(now_ms);
        let title = if let Some(hint) = hint {
            format!(" {hint} ")
        } else if self.deny_reason.is_some() {
            " why deny it? Enter sends · Esc cancels ".to_string()
        } else if self.transcript.pending_approval().is_some() && self.composer.is_empty() {
            " approve? y once · a for this session · n no · r no, with a reason ".to_string()
        } else if self.transcript.blocker.is_some() {
            " your answer to the blocker ".to_string()
        } else if self.running {
            " working… Esc interrupts · Ctrl-C twice quits ".to_string()
        } else {
            " message · Enter sends · Ctrl-J new line · /help ".to_string()
        };
        let title_style = if hint.is_some() {
            self.theme.warn
        } else {
            self.theme.dim
        };
        let block = Block::default()
            .borders(Borders::TOP | Borders::BOTTOM)
            .border_style(self.theme.dim)
            .title(Span::styled(title, title_style));
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

    /// `working 3.2s · provider/model · mode · ctx 12% of 128k · $0.0123 · 12k in · 230 out`,
    /// the least important parts left out when `width` columns cannot hold them all.
    pub fn status_line(&self, now_ms: u64, width: usize) -> Line<'static> {
        let st = &self.transcript.status;
        let working = self.running.then(|| {
            format!(
                "{} working {}",
                spinner(now_ms),
                elapsed_text(now_ms.saturating_sub(self.turn_started_ms))
            )
        });
        let mut parts = Vec::new();
        if !st.model.is_empty() {
            parts.push(format!("{}/{}", st.provider, st.model));
        }
        parts.push(match &st.phase {
            Some(p) => format!("plan_exec:{p}"),
            None => self.mode.clone(),
        });
        parts.push(st.context_text());
        let u = &st.usage;
        parts.push(if u.cost_usd > 0.0 || st.priced {
            format!("${:.4}", u.cost_usd)
        } else {
            "cost unknown".to_string()
        });
        parts.push(format!(
            "{} in · {} out",
            compact(u.input_tokens),
            compact(u.output_tokens)
        ));
        let lead = working.as_ref().map_or(0, |w| w.chars().count() + 3);
        while parts.len() > 2 && lead + parts.join(" · ").chars().count() > width {
            parts.pop();
        }
        let mut spans = Vec::new();
        if let Some(w) = working {
            spans.push(Span::styled(format!("{w} · "), self.theme.tool));
        }
        spans.push(Span::styled(parts.join(" · "), self.theme.dim));
        Line::from(spans)
    }

    /// The whole transcript as terminal text `width` columns wide (styled unless colour is
    /// off), printed to the normal screen on quit so the conversation stays in the
    /// terminal's scrollback. Empty when nothing was said.
    pub fn scrollback(&self, width: u16, now_ms: u64) -> String {
        if self.transcript.cells.is_empty() {
            return String::new();
        }
        let lines = self
            .transcript
            .last_lines(usize::MAX, width, now_ms, &self.theme);
        let mut text = super::markdown::to_ansi(&lines, self.theme.color);
        text.push('\n');
        text
    }

    /// Whether something on screen changes by itself (a spinner, a hint that expires).
    pub fn animating(&self, now_ms: u64) -> bool {
        self.running || self.hint_at(now_ms).is_some()
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
