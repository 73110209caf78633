//! `keel chat`: the interactive terminal UI. One live session ([`SessionHandle`]) driven by
//! ops from the keyboard; its events drawn as a transcript (full-screen, alternate screen —
//! see docs/ARCHITECTURE.md for why).
//!
//! - `app`: the screen's state, keys and drawing (no terminal, no session: testable);
//! - `session`: creating, resuming and driving the session; `commands`: slash commands and
//!   `!command`; `msg`: what reaches the chat loop;
//! - `transcript`, `markdown`, `wrap`, `theme`: what is drawn;
//! - `composer`, `slash`: what is typed.

pub mod app;
mod commands;
pub mod composer;
mod diff;
pub mod layers;
pub mod markdown;
mod msg;
mod session;
pub mod slash;
pub mod theme;
pub mod tool_cell;
pub mod transcript;
pub mod workflow;
pub mod wrap;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cells;
#[cfg(test)]
mod tests_keys;
#[cfg(test)]
mod workflow_tests;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, Event as TermEvent, KeyboardEnhancementFlags,
    PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc;

use crate::args::ChatArgs;
use crate::{exit, setup};
use keel_store::now_ms;
use msg::Msg;
use session::Chat;

/// How often the screen is redrawn while something moves (spinners, elapsed times).
const TICK: Duration = Duration::from_millis(100);
/// The shortest time between two frames drawn for session events (keys draw at once).
const FRAME: Duration = Duration::from_millis(33);

/// Milliseconds since the Unix epoch (event timestamps use the same clock).
pub fn execute(args: ChatArgs) -> anyhow::Result<u8> {
    if !std::io::stdin().is_terminal() || !crate::out::stdout_is_terminal() {
        return Err(setup::UsageError(
            "keel chat needs a terminal; for scripts and pipes use keel run \"task\" (add -c to continue the latest session)".into(),
        )
        .into());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime
        .block_on(async move {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let mut chat = Chat::open(&args, tx.clone()).await?;
            let _guard = TerminalGuard::enter()?;
            let backend = CrosstermBackend::new(crate::out::raw_stdout());
            let mut terminal = Terminal::new(backend).context("cannot draw on the terminal")?;
            terminal.clear()?;
            // Only now: the set-up above reads the terminal's answers itself.
            spawn_input(tx.clone());
            if let Some(prompt) = args.prompt() {
                chat.app.composer.set_text(&prompt);
                chat.send_composer().await;
            }
            run_loop(&mut terminal, &mut chat, &mut rx).await?;
            let id = chat.session_id();
            chat.shutdown().await;
            // What the shutdown recorded (a cancelled turn) belongs in the printed transcript.
            while let Ok(msg) = rx.try_recv() {
                if matches!(msg, Msg::Event(_)) {
                    chat.on_msg(msg).await;
                }
            }
            let width = crossterm::terminal::size().map_or(80, |(w, _)| w);
            Ok((id, chat.app.scrollback(width, now_ms())))
        })
        .map(|(id, transcript)| {
            // Back on the normal screen: the conversation goes into the terminal's scrollback
            // (where people scroll and copy, as after Codex or Claude Code), then how to come
            // back to it.
            use std::io::Write;
            let mut out = crate::out::raw_stdout().lock();
            let _ = out.write_all(transcript.as_bytes());
            let _ = out.flush();
            if let Some(id) = id {
                tell!("keel: session {id} is stored; `keel -c` continues it");
            }
            exit::COMPLETED
        })
}

async fn run_loop(
    terminal: &mut Terminal<CrosstermBackend<std::io::Stdout>>,
    chat: &mut Chat,
    rx: &mut mpsc::UnboundedReceiver<Msg>,
) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // A key is drawn at once; a streamed answer at most every FRAME.
    let mut dirty = true;
    let mut urgent = true;
    let mut last_draw = Instant::now();
    loop {
        if dirty && (urgent || last_draw.elapsed() >= FRAME) {
            let now = now_ms();
            terminal.draw(|f| chat.app.draw(f, now))?;
            last_draw = Instant::now();
            (dirty, urgent) = (false, false);
        }
        if chat.app.quit {
            return Ok(());
        }
        let animate = chat.app.animating(now_ms()) || chat.shell_running();
        let next_frame = FRAME.saturating_sub(last_draw.elapsed());
        tokio::select! {
            msg = rx.recv() => {
                let Some(msg) = msg else { return Ok(()) };
                urgent |= msg.is_input();
                chat.on_msg(msg).await;
                // Take whatever else is queued before drawing again.
                while let Ok(msg) = rx.try_recv() {
                    urgent |= msg.is_input();
                    chat.on_msg(msg).await;
                    if chat.app.quit {
                        break;
                    }
                }
                dirty = true;
            }
            _ = tick.tick(), if animate => dirty = true,
            _ = tokio::time::sleep(next_frame), if dirty => {}
        }
    }
}

/// Reads the terminal's input on its own thread (crossterm's read blocks).
fn spawn_input(tx: mpsc::UnboundedSender<Msg>) {
    std::thread::spawn(move || {
        while let Ok(event) = crossterm::event::read() {
            let msg = match event {
                TermEvent::Key(k) => Msg::Key(k),
                TermEvent::Paste(p) => Msg::Paste(p),
                TermEvent::Resize(..) => Msg::Redraw,
                _ => continue,
            };
            if tx.send(msg).is_err() {
                break;
            }
        }
    });
}

/// Whether the keyboard protocol was switched on (and must be switched off).
static ENHANCED_KEYS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Raw mode, the alternate screen and bracketed paste while it lives; the terminal as it
/// was when dropped — also when a panic unwinds.
struct TerminalGuard;

impl TerminalGuard {
    fn enter() -> anyhow::Result<Self> {
        enable_raw_mode().context("cannot switch the terminal to raw mode")?;
        let mut out = crate::out::raw_stdout();
        execute!(out, EnterAlternateScreen, EnableBracketedPaste)
            .context("cannot set up the terminal")?;
        // Shift-Enter is only told apart from Enter by terminals that speak the keyboard
        // protocol; elsewhere Ctrl-J makes a new line.
        if crossterm::terminal::supports_keyboard_enhancement().unwrap_or(false)
            && execute!(
                out,
                PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
            )
            .is_ok()
        {
            ENHANCED_KEYS.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            default(info);
        }));
        Ok(Self)
    }
}

fn restore() {
    let mut out = crate::out::raw_stdout();
    if ENHANCED_KEYS.swap(false, std::sync::atomic::Ordering::Relaxed) {
        let _ = execute!(out, PopKeyboardEnhancementFlags);
    }
    let _ = execute!(
        out,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = disable_raw_mode();
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}
