//! The chat screen under ratatui's `TestBackend`: what a person sees at 80×24 for a streamed
//! answer, a diff, an approval, a failed command and a subagent, and what keys do.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use keel_protocol::{ApprovalScope, DeltaChannel, Event, EventKind, Op, Usage};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use serde_json::json;

use super::app::{Action, App};
use super::composer::Composer;
use super::slash::Slash;
use super::theme::Theme;

pub(super) const T0: u64 = 1_700_000_000_000;

pub(super) fn ev(seq: u64, kind: EventKind) -> Event {
    Event {
        session_id: "s1".into(),
        seq,
        ts: T0 + seq * 100,
        run_id: "r1".into(),
        parent_run_id: None,
        kind,
    }
}

pub(super) fn app() -> App {
    let mut app = App::new("/work/demo".into(), Composer::default(), Theme::plain());
    let st = &mut app.transcript.status;
    st.provider = "scripted".into();
    st.model = "demo-model".into();
    st.context_window = Some(100_000);
    app
}

pub(super) fn screen(app: &App, w: u16, h: u16, now: u64) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| app.draw(f, now)).unwrap();
    buffer_text(term.backend().buffer())
}

pub(super) fn buffer_text(buf: &ratatui::buffer::Buffer) -> String {
    let area = buf.area;
    (0..area.height)
        .map(|y| {
            let row: String = (0..area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect();
            row.trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

pub(super) fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

pub(super) fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        app.on_key(key(KeyCode::Char(c)), T0);
    }
}

/// The complete answer `text`, from a request of 12.4k tokens in, 230 out, $0.0123.
pub(super) fn answered(seq: u64, text: &str) -> Event {
    ev(
        seq,
        EventKind::AssistantMessage {
            text: text.into(),
            reasoning: None,
            tool_calls: 0,
            usage: Usage {
                input_tokens: 12_400,
                output_tokens: 230,
                cost_usd: 0.0123,
                requests: 1,
                ..Usage::default()
            },
        },
    )
}

pub(super) fn delta(seq: u64, text: &str) -> Event {
    ev(
        seq,
        EventKind::AssistantDelta {
            text: text.into(),
            channel: DeltaChannel::Text,
        },
    )
}

#[test]
fn a_streamed_markdown_answer_renders_as_it_grows() {
    let mut app = app();
    type_text(&mut app, "explain the plan");
    let action = app.on_key(key(KeyCode::Enter), T0);
    assert!(matches!(action, Some(Action::Op(Op::UserMessage { .. }))));
    app.on_event(&ev(1, EventKind::TurnStarted { iteration: 1 }), T0);
    let answer = "## Plan\n\nI will **fix** the `add` function:\n\n1. read it\n2. change it\n\n```rust\nfn add(a: i32) -> i32 {\n    a + 1 // bump\n}\n```\n";
    // Mid-stream: a heading, a paragraph and an unterminated code fence.
    let cut = answer.find("    a + 1").unwrap();
    let (head, tail) = answer.split_at(cut);
    for (i, piece) in head.as_bytes().chunks(7).enumerate() {
        app.on_event(
            &delta(2 + i as u64, std::str::from_utf8(piece).unwrap()),
            T0,
        );
    }
    insta::assert_snapshot!("streaming_mid_answer", screen(&app, 80, 24, T0 + 1500));
    app.on_event(&delta(90, tail), T0);
    app.on_event(&answered(91, answer), T0);
    app.on_event(
        &ev(
            92,
            EventKind::TurnFinished {
                status: keel_protocol::SessionStatus::Completed,
                message: None,
            },
        ),
        T0,
    );
    assert!(!app.running);
    insta::assert_snapshot!("streaming_finished_80x24", screen(&app, 80, 24, T0 + 3000));
}

fn edit_events(app: &mut App) {
    app.on_event(
        &ev(
            1,
            EventKind::ToolCall {
                id: "e1".into(),
                name: "edit_file".into(),
                arguments: json!({"path": "src/lib.rs"}),
            },
        ),
        T0,
    );
    app.on_event(
        &ev(
            4,
            EventKind::ToolResult {
                id: "e1".into(),
                name: "edit_file".into(),
                is_error: false,
                content: "Edited `src/lib.rs` (1 edit).".into(),
                details: keel_protocol::ToolDetails {
                    diff: Some("--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -3,3 +3,3 @@\n /// Adds two numbers.\n pub fn add(a: i32, b: i32) -> i32 {\n-    a + b\n+    a.wrapping_add(b)\n".into()),
                    ..Default::default()
                },
                metadata: None,
            },
        ),
        T0,
    );
}

#[test]
fn an_edit_shows_its_diff_coloured() {
    let mut app = app();
    edit_events(&mut app);
    insta::assert_snapshot!("edit_diff", screen(&app, 80, 12, T0 + 500));

    app.theme = Theme::colored();
    let mut term = Terminal::new(TestBackend::new(80, 12)).unwrap();
    term.draw(|f| app.draw(f, T0 + 500)).unwrap();
    let buf = term.backend().buffer();
    let text = buffer_text(buf);
    let row_of = |needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not on screen:\n{text}")) as u16
    };
    assert_eq!(buf[(2, row_of("-    a + b"))].fg, Color::Red);
    assert_eq!(buf[(2, row_of("+    a.wrapping_add(b)"))].fg, Color::Green);
    assert_eq!(buf[(0, row_of("edit_file"))].fg, Color::Green, "✓ in green");
}

#[test]
fn an_approval_prompt_waits_inline_and_keys_answer_it() {
    let mut app = app();
    app.turn_started(T0);
    app.on_event(
        &ev(
            1,
            EventKind::ToolCall {
                id: "c1".into(),
                name: "run_command".into(),
                arguments: json!({"command": "rm -rf build"}),
            },
        ),
        T0,
    );
    app.on_event(
        &ev(
            2,
            EventKind::ApprovalRequested {
                call_id: "c1".into(),
                tool: "run_command".into(),
                summary: "rm -rf build".into(),
                class: "destructive".into(),
                reason: "`rm` deletes files".into(),
            },
        ),
        T0,
    );
    insta::assert_snapshot!("approval_prompt", screen(&app, 80, 12, T0 + 2300));
    assert_eq!(
        app.on_key(key(KeyCode::Char('a')), T0),
        Some(Action::Op(Op::Approve {
            call_id: "c1".into(),
            scope: ApprovalScope::Session
        }))
    );
    // `r`: deny with a reason typed in the composer.
    assert_eq!(app.on_key(key(KeyCode::Char('r')), T0), None);
    type_text(&mut app, "not the build dir");
    assert_eq!(
        app.on_key(key(KeyCode::Enter), T0),
        Some(Action::Op(Op::Deny {
            call_id: "c1".into(),
            reason: Some("not the build dir".into())
        }))
    );
    app.on_event(
        &ev(
            3,
            EventKind::ApprovalResolved {
                call_id: "c1".into(),
                approved: false,
                scope: None,
                reason: Some("not the build dir".into()),
            },
        ),
        T0,
    );
    assert!(screen(&app, 80, 12, T0).contains("✗ denied: not the build dir"));
    assert!(app.transcript.pending_approval().is_none());
}

#[test]
fn a_failed_command_is_marked_and_long_output_folds() {
    let mut app = app();
    app.on_event(
        &ev(
            1,
            EventKind::ToolCall {
                id: "t1".into(),
                name: "run_command".into(),
                arguments: json!({"command": "cargo test"}),
            },
        ),
        T0,
    );
    let output: String = std::iter::once("exit code: 101".to_string())
        .chain((1..=9).map(|i| format!("test case_{i} ... FAILED")))
        .collect::<Vec<_>>()
        .join("\n");
    app.on_event(
        &ev(
            25,
            EventKind::ToolResult {
                id: "t1".into(),
                name: "run_command".into(),
                is_error: true,
                details: keel_protocol::ToolDetails {
                    exit_code: Some(101),
                    output_tail: Some(keel_protocol::Excerpt::tail(&output)),
                    ..Default::default()
                },
                content: output,
                metadata: None,
            },
        ),
        T0,
    );
    let folded = screen(&app, 80, 14, T0 + 5000);
    insta::assert_snapshot!("failed_command", folded);
    app.on_key(ctrl('o'), T0);
    assert!(screen(&app, 80, 24, T0).contains("test case_9 ... FAILED"));
}

#[test]
fn a_subagent_is_nested_under_its_parent() {
    let mut app = app();
    app.on_event(
        &ev(
            1,
            EventKind::ToolCall {
                id: "a1".into(),
                name: "delegate".into(),
                arguments: json!({"task": "survey the tests"}),
            },
        ),
        T0,
    );
    let sub = |seq, kind| Event {
        run_id: "r2".into(),
        parent_run_id: Some("r1".into()),
        ..ev(seq, kind)
    };
    app.on_event(&sub(2, EventKind::TurnStarted { iteration: 1 }), T0);
    app.on_event(
        &sub(
            3,
            EventKind::ToolCall {
                id: "g1".into(),
                name: "grep".into(),
                arguments: json!({"pattern": "#[test]"}),
            },
        ),
        T0,
    );
    app.on_event(
        &sub(
            5,
            EventKind::ToolResult {
                id: "g1".into(),
                name: "grep".into(),
                is_error: false,
                content: "tests/a.rs:3".into(),
                details: Default::default(),
                metadata: None,
            },
        ),
        T0,
    );
    app.on_event(
        &sub(
            6,
            EventKind::AssistantDelta {
                text: "Found **one** test.".into(),
                channel: DeltaChannel::Text,
            },
        ),
        T0,
    );
    insta::assert_snapshot!("nested_subagent", screen(&app, 80, 10, T0 + 800));
}

#[test]
fn reasoning_is_dimmed_one_line_until_expanded() {
    let mut app = app();
    app.on_event(
        &ev(
            1,
            EventKind::AssistantDelta {
                text: "first thought\nsecond thought".into(),
                channel: DeltaChannel::Reasoning,
            },
        ),
        T0,
    );
    let s = screen(&app, 80, 8, T0);
    assert!(
        s.contains("▸ thinking, 2 lines (Ctrl-T shows): second thought"),
        "{s}"
    );
    assert!(!s.contains("first thought"));
    app.on_key(ctrl('t'), T0);
    assert!(screen(&app, 80, 8, T0).contains("  first thought"));
}

#[test]
fn a_message_during_a_turn_stays_in_the_composer() {
    let mut app = app();
    app.turn_started(T0);
    type_text(&mut app, "also fix the docs");
    assert_eq!(app.on_key(key(KeyCode::Enter), T0), None);
    assert_eq!(app.composer.text(), "also fix the docs");
    assert!(screen(&app, 80, 12, T0).contains("a turn is running"));
}

#[test]
fn a_blocker_is_answered_from_the_composer() {
    let mut app = app();
    app.on_event(
        &ev(
            1,
            EventKind::Blocker {
                id: "blk-1".into(),
                question: "Which database?".into(),
                source: "model".into(),
                evidence: vec![],
            },
        ),
        T0,
    );
    assert!(screen(&app, 80, 12, T0).contains("your answer to the blocker"));
    type_text(&mut app, "postgres");
    assert_eq!(
        app.on_key(key(KeyCode::Enter), T0),
        Some(Action::Op(Op::AnswerBlocker {
            id: "blk-1".into(),
            answer: "postgres".into()
        }))
    );
}

#[test]
fn slash_commands_complete_and_parse() {
    let mut app = app();
    type_text(&mut app, "/und");
    assert!(
        screen(&app, 80, 12, T0).contains("/undo"),
        "the popup offers /undo"
    );
    app.on_key(key(KeyCode::Tab), T0);
    type_text(&mut app, "2");
    assert_eq!(
        app.on_key(key(KeyCode::Enter), T0),
        Some(Action::Slash(Slash::Undo(Some(2))))
    );
    type_text(&mut app, "/bogus");
    assert_eq!(app.on_key(key(KeyCode::Enter), T0), None);
    assert!(screen(&app, 80, 12, T0).contains("unknown command /bogus"));
    type_text(&mut app, "!ls -la");
    assert_eq!(
        app.on_key(key(KeyCode::Enter), T0),
        Some(Action::Shell("ls -la".into()))
    );
}

#[test]
fn a_narrow_terminal_still_shows_composer_and_status() {
    let mut app = app();
    edit_events(&mut app);
    let s = screen(&app, 40, 10, T0);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 10);
    assert!(lines[9].starts_with("scripted/demo-model"), "{s}");
    assert!(lines[7].starts_with("›"), "{s}");
}

#[test]
fn a_long_line_scrolls_sideways_to_keep_the_cursor_in_view() {
    let mut app = app();
    let text: String = (0..30).map(|i| format!("w{i:02} ")).collect();
    type_text(&mut app, text.trim_end());
    let mut term = Terminal::new(TestBackend::new(40, 10)).unwrap();
    term.draw(|f| app.draw(f, T0)).unwrap();
    let s = buffer_text(term.backend().buffer());
    assert!(s.contains("w28 w29"), "the end of the line is shown:\n{s}");
    let pos = term.get_cursor_position().unwrap();
    assert!(pos.x < 40, "the cursor is on screen: {pos:?}");
}

/// `/memory`, `/skills`, `/rules` and `/context` show issue 17's data (they used to say the
/// feature does not exist).
#[test]
fn memory_skills_rules_and_context_slash_commands_show_the_workspace_layers() {
    use super::layers;
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    std::fs::create_dir_all(root.join(".keel/rules")).unwrap();
    std::fs::write(root.join(".keel/rules/style.md"), "Use tabs.\nNo unwrap.\n").unwrap();
    std::fs::write(
        root.join(".keel/rules/sql.md"),
        "---\nglobs: [\"**/*.sql\"]\n---\nUse snake_case columns.\n",
    )
    .unwrap();
    keel_engine::skills::create(root, "release", "Cut a release.").unwrap();

    let rules = layers::rules_text(&keel_engine::rules::rule_files(root));
    assert_eq!(
        rules,
        ".keel/rules/sql.md (when touching **/*.sql, 1 line)\n.keel/rules/style.md (always, 2 lines)"
    );
    assert!(layers::rules_text(&[]).starts_with("No rules files"));

    let skills = layers::skills_text(&keel_engine::skills::discover(root, None));
    assert!(skills.starts_with("release ("), "{skills}");
    assert!(skills.contains("Cut a release."), "{skills}");
    assert!(layers::skills_text(&Default::default()).contains("keel skills new"));

    let entry = keel_store::MemoryEntry {
        id: 7,
        kind: keel_store::MemoryKind::Fact,
        text: "prefers small commits".into(),
        source: "user".into(),
        created_at: 0,
        updated_at: 0,
    };
    let memory = layers::memory_text(std::slice::from_ref(&entry));
    assert!(memory.starts_with("m7"), "{memory}");
    assert!(memory.contains("prefers small commits") && memory.contains("[user]"));
    assert!(layers::memory_text(&[]).starts_with("No memory entries"));

    let dashboard = keel_engine::context::Dashboard {
        workspace: root.display().to_string(),
        system_prompt_bytes: 400,
        system_prompt_tokens: 100,
        layers: vec![keel_engine::context::Layer {
            name: "project rules".into(),
            source: ".keel/rules".into(),
            placement: keel_engine::context::Placement::Head,
            bytes: 40,
            tokens: 10,
            items: 2,
            view: "/rules".into(),
            clear: "delete the files".into(),
        }],
        skipped: Vec::new(),
    };
    assert_eq!(
        layers::context_text(&dashboard),
        "system prompt: 400 bytes, about 100 tokens\nproject rules: 10 tokens, 2 items (head) — .keel/rules"
    );
}
