//! The human renderer's tests: what a person sees for each event.

use super::*;
use keel_protocol::Usage;

fn ev(kind: EventKind) -> Event {
    Event {
        session_id: "s".into(),
        seq: 1,
        ts: 0,
        run_id: String::new(),
        parent_run_id: None,
        kind,
    }
}

#[test]
fn live_mode_streams_deltas_and_summarises_tools() {
    let h = Human::new(false, true);
    let mut st = HumanState::default();
    let mut out = String::new();
    for kind in [
        EventKind::AssistantDelta {
            text: "Let me ".into(),
            channel: DeltaChannel::Text,
        },
        EventKind::AssistantDelta {
            text: "look.".into(),
            channel: DeltaChannel::Text,
        },
        EventKind::AssistantMessage {
            text: "Let me look.".into(),
            reasoning: None,
            tool_calls: 1,
            usage: Usage::default(),
        },
        EventKind::ToolCall {
            id: "1".into(),
            name: "read_file".into(),
            arguments: serde_json::json!({"path": "src/lib.rs", "start_line": 3, "end_line": 9}),
        },
        EventKind::ToolResult {
            id: "1".into(),
            name: "read_file".into(),
            is_error: false,
            content: "3\tfn a()\n4\t}\n".into(),
            details: Default::default(),
            metadata: None,
        },
        EventKind::ToolResult {
            id: "2".into(),
            name: "edit_file".into(),
            is_error: false,
            content: "Edited `src/lib.rs`.".into(),
            details: keel_protocol::ToolDetails {
                files: vec!["src/lib.rs".into()],
                truncated: Some(keel_protocol::Truncation {
                    original_chars: 90_000,
                    shown_chars: 30_000,
                }),
                ..Default::default()
            },
            metadata: None,
        },
    ] {
        out.push_str(&h.render(&ev(kind), &mut st));
    }
    assert_eq!(
        out,
        "Let me look.\n  → read_file src/lib.rs:3-9\n    ✓ 3\tfn a() (+1 line)\n    ✓ Edited `src/lib.rs`.\n      changed: src/lib.rs\n      (output cut: 30000 of 90000 characters shown)\n"
    );
}

#[test]
fn repairs_and_the_plan_are_shown() {
    let h = Human::new(false, true);
    let mut st = HumanState::default();
    let mut out = String::new();
    for kind in [
        EventKind::ToolRepaired {
            call_id: "1".into(),
            from: "TodoWrite".into(),
            to: "update_plan".into(),
            how: "name: Claude Code alias".into(),
        },
        EventKind::ToolResult {
            id: "1".into(),
            name: "update_plan".into(),
            is_error: false,
            content: "[keel: ran `TodoWrite` as `update_plan`]\nPlan updated (1/3 done):".into(),
            details: Default::default(),
            metadata: Some(serde_json::json!({"plan": {"steps": [
                {"step": "write the test", "status": "done"},
                {"step": "fix the bug", "status": "in_progress"},
                {"step": "run the suite", "status": "pending"}
            ]}})),
        },
    ] {
        out.push_str(&h.render(&ev(kind), &mut st));
    }
    assert_eq!(
        out,
        "    ↪ TodoWrite → update_plan (Claude Code alias)\n    plan (1/3 done)\n      ✓ write the test\n      ▸ fix the bug\n      ○ run the suite\n"
    );
}

#[test]
fn blockers_say_how_to_answer_and_resume() {
    let h = Human::new(false, true);
    let mut st = HumanState::default();
    let out = h.render(
        &ev(EventKind::Blocker {
            id: "blk-12ab34cd".into(),
            question: "Which database?".into(),
            source: "model".into(),
            evidence: vec!["both are configured".into()],
        }),
        &mut st,
    );
    assert_eq!(
        out,
        "? blocked (blk-12ab34cd): Which database?\n  - both are configured\n  answer: keel blocker answer blk-12ab34cd \"…\"  then: keel run --resume s\n"
    );
    let out = h.render(
        &ev(EventKind::Blocker {
            id: "blk-1".into(),
            question: "Budget exhausted".into(),
            source: "budget".into(),
            evidence: vec![],
        }),
        &mut st,
    );
    assert!(out.ends_with("  continue: keel run --resume s\n"), "{out}");
    let out = h.render(
        &ev(EventKind::SessionResumed {
            message: "use postgres".into(),
            answered_blockers: vec![],
        }),
        &mut st,
    );
    assert_eq!(out, "● resumed session s: use postgres\n");
}

#[test]
fn answers_render_as_markdown_and_edits_show_their_diff() {
    let h = Human::new(false, true);
    let mut st = HumanState::default();
    let mut out = String::new();
    for piece in ["## Plan\n\n- read **", "it**\n- fix `add`\n"] {
        out.push_str(&h.render(
            &ev(EventKind::AssistantDelta {
                text: piece.into(),
                channel: DeltaChannel::Text,
            }),
            &mut st,
        ));
    }
    assert_eq!(
        out, "## Plan\n",
        "the heading is out as soon as its block is complete"
    );
    out.push_str(&h.render(
        &ev(EventKind::AssistantMessage {
            text: "## Plan\n\n- read **it**\n- fix `add`\n".into(),
            reasoning: None,
            tool_calls: 0,
            usage: Usage::default(),
        }),
        &mut st,
    ));
    assert_eq!(out, "## Plan\n\n• read it\n• fix `add`\n");
    let out = h.render(
        &ev(EventKind::ToolResult {
            id: "e".into(),
            name: "edit_file".into(),
            is_error: false,
            content: "Edited `a.rs` (1 edit).".into(),
            details: keel_protocol::ToolDetails {
                diff: Some("@@ -1 +1 @@\n-old\n+new\n".into()),
                ..Default::default()
            },
            metadata: None,
        }),
        &mut st,
    );
    assert_eq!(
        out,
        "    ✓ Edited `a.rs` (1 edit).\n  @@ -1 +1 @@\n  -old\n  +new\n"
    );
}

#[test]
fn usage_is_compact() {
    let u = Usage {
        input_tokens: 12_345,
        output_tokens: 999,
        cache_read_tokens: 1_500,
        ..Usage::default()
    };
    assert_eq!(usage_line(&u), "12k tokens in · 999 out · 1.5k cached");
    assert_eq!(usage_line(&Usage::default()), "tokens not reported");
    // A streaming server that ignored `stream_options`: Keel's estimate, marked.
    let estimated = Usage {
        input_tokens: 1_234,
        output_tokens: 56,
        estimated: true,
        ..Usage::default()
    };
    assert_eq!(usage_line(&estimated), "~1.2k tokens in · ~56 out");
}

/// `keel run` draws the same tool bodies and tables as the chat: a created file's first
/// lines, a command's output tail, an approval's reason, a table as columns, and a
/// cancellation that is not an error.
#[test]
fn keel_run_shows_created_files_command_output_tables_and_reasons() {
    let h = Human::new(false, true);
    let mut st = HumanState::default();
    let mut out = String::new();
    let content = "fn main() {\n    say!(\"hi\");\n}\n";
    for kind in [
        EventKind::ToolCall {
            id: "w".into(),
            name: "create_file".into(),
            arguments: serde_json::json!({"path": "src/main.rs", "content": content}),
        },
        EventKind::ToolResult {
            id: "w".into(),
            name: "create_file".into(),
            is_error: false,
            content: "Created `src/main.rs` (3 lines, 34 B).".into(),
            details: keel_protocol::ToolDetails {
                files: vec!["src/main.rs".into()],
                created: Some(keel_protocol::Excerpt::head(content)),
                ..Default::default()
            },
            metadata: None,
        },
        EventKind::ApprovalRequested {
            call_id: "c".into(),
            tool: "run_command".into(),
            summary: "rm -r build".into(),
            class: "destructive".into(),
            reason: "`rm` deletes files".into(),
        },
        EventKind::ToolCall {
            id: "c".into(),
            name: "run_command".into(),
            arguments: serde_json::json!({"command": "cargo test"}),
        },
        EventKind::ToolResult {
            id: "c".into(),
            name: "run_command".into(),
            is_error: false,
            content: "exit code: 101\nstdout:\n…".into(),
            details: keel_protocol::ToolDetails {
                exit_code: Some(101),
                output_tail: Some(keel_protocol::Excerpt::tail(
                    "running 2 tests\ntest a ... FAILED\n",
                )),
                ..Default::default()
            },
            metadata: None,
        },
        EventKind::AssistantMessage {
            text: "| file | change |\n|---|---|\n| src/main.rs | new |\n".into(),
            reasoning: None,
            tool_calls: 0,
            usage: Usage::default(),
        },
        EventKind::Error(keel_protocol::ErrorInfo {
            error_code: ErrorCode::Cancelled,
            message: "the run was cancelled by the user".into(),
            suggestions: vec![],
            retryable: false,
            original_error: None,
        }),
    ] {
        out.push_str(&h.render(&ev(kind), &mut st));
    }
    assert!(
        out.contains("    ✓ Created `src/main.rs` (3 lines, 34 B).\n  1 │ fn main() {\n  2 │     say!(\"hi\");\n  3 │ }\n"),
        "{out}"
    );
    assert!(
        out.contains("? approval needed (destructive: `rm` deletes files): rm -r build"),
        "{out}"
    );
    assert!(
        out.contains("  running 2 tests\n  test a ... FAILED\n  exit code 101\n"),
        "{out}"
    );
    assert!(
        out.contains(" file        │ change\n─────────────┼───────\n src/main.rs │ new\n"),
        "{out}"
    );
    assert!(!out.contains("error [cancelled]"), "{out}");
}

#[test]
fn model_and_tool_text_cannot_drive_the_terminal() {
    // Red-team B11: OSC 52 (clipboard), cursor-up + erase (hiding the lines that showed a
    // command), a window title and clear screen reached the terminal verbatim.
    let h = Human::new(true, false);
    let mut out = String::new();
    for kind in [
        EventKind::AssistantMessage {
            text: "hi \u{1b}]52;c;cm0gLXJmIH4K\u{7} \u{1b}[1A\u{1b}[2K HIDDEN".into(),
            reasoning: None,
            tool_calls: 1,
            usage: Usage::default(),
        },
        EventKind::ToolCall {
            id: "1".into(),
            name: "run_command".into(),
            arguments: serde_json::json!({"command": "printf 'out \\033]0;T\\007'"}),
        },
        EventKind::ToolResult {
            id: "1".into(),
            name: "run_command".into(),
            is_error: false,
            content: "out \u{1b}]0;TITLE-PWNED\u{7} \u{1b}[2J".into(),
            details: Default::default(),
            metadata: None,
        },
    ] {
        out.push_str(&h.line(&ev(kind)));
    }
    for bad in ["\u{1b}]", "\u{7}", "\u{1b}[1A", "\u{1b}[2K", "\u{1b}[2J"] {
        assert!(!out.contains(bad), "{bad:?} reached the terminal: {out:?}");
    }
    assert!(out.contains("^[]52;c;cm0gLXJmIH4K^G"), "{out:?}");
    assert!(out.contains("^[]0;TITLE-PWNED^G"), "{out:?}");
}
