//! `keel chat` as a daily driver, end to end in a real terminal (tmux), in a workspace that is
//! not a git repository (as the README's demo): a Markdown table renders as columns, a created
//! file shows its content, an approval says why it asks and is recorded above the output,
//! `/diff` shows the session's changes from Keel's snapshots, `/init` and `/mcp` are the real
//! commands, Esc twice does not quit, Ctrl-C clears the message (Up brings it back) and quits
//! only when pressed twice on an empty composer, and after quitting the conversation is in the
//! terminal's scrollback. Also takes the 80×24 screenshot (`docs/screenshots/chat-80x24.png`).
//! Needs tmux: skipped (visibly) without it outside CI, a failure in CI.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

mod common;
#[path = "shared/tmux.rs"]
mod tmux;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use tmux::{Tmux, keel_command};

const SCRIPT: &str = r###"
turns:
  - text: "I'll add the tests first."
    tool_calls:
      - name: create_file
        arguments:
          path: tests/arith.rs
          content: "use demo::{add, mul};\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 3), 5);\n}\n\n#[test]\nfn multiplies() {\n    assert_eq!(mul(4, 5), 20);\n}\n"
  - tool_calls:
      - {id: rm1, name: run_command, arguments: {command: "rm README.md"}}
  - text: "## Done\n\n| file | change |\n|---|---|\n| tests/arith.rs | two new tests |\n| README.md | removed |\n"
"###;

/// The shell line: keel chat, then a marker once it has exited, and the shell stays (so the
/// pane's scrollback can be read).
fn chat_line(env: &Env, script: &Path, color: bool) -> String {
    format!(
        "{}; echo KEEL-EXITED; sleep 300",
        keel_command(
            env,
            &format!("chat --provider scripted --script '{}'", script.display()),
            color
        )
    )
}

#[test]
fn keel_chat_as_a_daily_driver_tables_files_approvals_diff_keys_scrollback() {
    if !Tmux::required("keel chat daily-driver tmux test") {
        return;
    }
    let env = Env::new();
    assert!(
        !env.work.join(".git").exists(),
        "the README's demo workspace is not a git repository"
    );
    let script = env.script("daily.yaml", SCRIPT);
    let term = Tmux::new("daily");
    term.start(&chat_line(&env, &script, false));
    term.wait_for("Enter sends");

    term.type_line("add tests and remove the readme");
    let screen = term.wait_for("[y] yes once");
    // The created file's content, numbered.
    assert!(screen.contains("✓ create_file tests/arith.rs"), "{screen}");
    assert!(screen.contains("1 │ use demo::{add, mul};"), "{screen}");
    // The approval: the class and the classifier's reason.
    assert!(
        screen.contains("? approve run_command (destructive): rm README.md\n  `rm` deletes files"),
        "{screen}"
    );
    term.send(&["y"]);
    let screen = term.wait_for("two new tests");
    // The record reads in order: asked, answered, ran.
    let at = |s: &str| {
        screen
            .find(s)
            .unwrap_or_else(|| panic!("`{s}` missing:\n{screen}"))
    };
    assert!(
        at("✓ approved once") < at("✓ run_command rm README.md"),
        "{screen}"
    );
    // The table is columns, not `| file | change | |---|---|` on one line.
    assert!(!screen.contains("|---|"), "{screen}");
    assert!(screen.contains(" file           │ change"), "{screen}");
    assert!(
        screen.contains(" tests/arith.rs │ two new tests"),
        "{screen}"
    );
    assert!(screen.contains("────────────────┼"), "{screen}");
    term.wait_for("Enter sends");

    // `/diff` outside git: the session's changes from Keel's snapshots, not git's usage text.
    term.type_line("/diff");
    let screen = term.wait_for("+++ b/tests/arith.rs");
    assert!(!screen.contains("usage: git diff"), "{screen}");
    assert!(screen.contains("+use demo::{add, mul};"), "{screen}");
    assert!(
        screen.contains("--- a/README.md\n  +++ /dev/null"),
        "the removed file too:\n{screen}"
    );

    // `/init` is `keel init`; `/mcp` is `keel mcp list`.
    term.type_line("/init");
    term.wait_for("Initialised");
    assert!(env.work.join(".keel/project.md").is_file());
    term.type_line("/mcp");
    term.wait_for("No MCP servers");

    // Esc twice while idle does not quit, nor drop what is typed.
    term.type_text("half a thought");
    term.send(&["Escape"]);
    term.send(&["Escape"]);
    let screen = term.wait_for("to quit: /quit, Ctrl-D, or Ctrl-C twice");
    assert!(screen.contains("› half a thought"), "{screen}");
    assert!(term.alive() && !term.screen().contains("KEEL-EXITED"));
    // Ctrl-C clears the message; Up brings it back.
    term.send(&["C-c"]);
    term.wait_for("message cleared · Up brings it back");
    term.wait_until("an empty composer", |s| !s.contains("› half a thought"));
    term.send(&["Up"]);
    term.wait_for("› half a thought");
    term.send(&["C-u"]);
    // One Ctrl-C on the empty composer arms; after the window it has to start over.
    term.send(&["C-c"]);
    term.wait_for("Ctrl-C again quits");
    std::thread::sleep(Duration::from_millis(2300));
    assert!(
        !term.screen().contains("Ctrl-C again quits"),
        "the hint went"
    );
    term.send(&["C-c"]);
    term.wait_for("Ctrl-C again quits");
    assert!(
        !term.screen().contains("KEEL-EXITED"),
        "one press does not quit"
    );
    term.send(&["C-c"]);
    term.wait_for("KEEL-EXITED");

    // The conversation is in the terminal's scrollback, where it can be scrolled and copied.
    let history = term.history();
    let at = |s: &str| {
        history
            .find(s)
            .unwrap_or_else(|| panic!("`{s}` is not in the scrollback:\n{history}"))
    };
    assert!(at("› add tests and remove the readme") < at("✓ create_file tests/arith.rs"));
    assert!(at("✓ create_file tests/arith.rs") < at(" tests/arith.rs │ two new tests"));
    assert!(at(" tests/arith.rs │ two new tests") < at("KEEL-EXITED"));
    assert!(
        history.contains("is stored; `keel -c` continues it"),
        "{history}"
    );
}

/// The 80×24 screenshot: the same session in colour, after the approval, captured with its
/// colours and drawn by headless Chromium (`web/tests/terminal-shot.mjs`). Written to
/// `docs/screenshots/chat-80x24.png` with `KEEL_UPDATE_SCREENSHOTS=1`, else under target/.
#[test]
fn keel_chat_at_80x24_in_colour_is_captured_as_a_screenshot() {
    if !Tmux::required("keel chat 80×24 screenshot") {
        return;
    }
    let env = Env::new();
    let script = env.script("daily.yaml", SCRIPT);
    let term = Tmux::new("shot");
    term.start_sized(&chat_line(&env, &script, true), 80, 24);
    term.wait_for("Enter sends");
    term.type_line("add tests and remove the readme");
    term.wait_for("[y] yes once");
    term.send(&["y"]);
    term.wait_for("two new tests");
    term.wait_for("Enter sends");
    let ansi = term.screen_ansi();
    assert!(ansi.contains("\x1b["), "the capture has colours");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let capture = dir.join("chat-80x24.ansi");
    std::fs::write(&capture, &ansi).unwrap();
    let tests_dir = repo_root().join("web/tests");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() || !tests_dir.join("node_modules/playwright-core").is_dir() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium and playwright-core are missing; .ci/run installs them"
        );
        eprintln!(
            "SKIPPED the 80×24 PNG (no chromium or playwright-core); the capture is {}",
            capture.display()
        );
        return;
    }
    let png = if std::env::var_os("KEEL_UPDATE_SCREENSHOTS").is_some() {
        repo_root().join("docs/screenshots/chat-80x24.png")
    } else {
        dir.join("chat-80x24.png")
    };
    let out = Command::new("node")
        .arg(tests_dir.join("terminal-shot.mjs"))
        .arg(&capture)
        .arg(&png)
        .args(["80", "24"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::metadata(&png).unwrap().len() > 1000,
        "a real image"
    );
}
