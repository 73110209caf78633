//! The first commands a new user types: a task piped in (`keel run -`, or a pipe and no
//! task), `@path` attaching a file, `--help` with examples, and shell completions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Output, Stdio};

use serde_json::Value;

mod common;
use common::*;

const SCRIPT: &str = "turns:\n  - text: \"Done.\"\n";

/// `keel run --json` with `args`, `stdin` piped in; the `session_started` event's task.
fn run_piped(env: &Env, args: &[&str], stdin: &str) -> (Output, Option<String>) {
    let script = env.script("done.yaml", SCRIPT);
    let mut child = env
        .keel()
        .args(["run", "--json", "--provider", "scripted", "--script"])
        .arg(&script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let task = json_lines(&out.stdout)
        .into_iter()
        .find(|e: &Value| e["type"] == "session_started")
        .and_then(|e| e["task"].as_str().map(str::to_string));
    (out, task)
}

#[test]
fn a_piped_task_is_read_with_a_dash_or_without_arguments() {
    let env = Env::new();
    let (out, task) = run_piped(&env, &["-"], "list the tests of the demo library\n");
    assert_exit(&out, 0);
    assert_eq!(task.as_deref(), Some("list the tests of the demo library"));

    let (out, task) = run_piped(&env, &[], "explain the layout\n");
    assert_exit(&out, 0);
    assert_eq!(task.as_deref(), Some("explain the layout"));

    // Arguments win over a pipe; an empty pipe is an empty task (exit 2, saying how).
    let (out, task) = run_piped(&env, &["from", "arguments"], "ignored");
    assert_exit(&out, 0);
    assert_eq!(task.as_deref(), Some("from arguments"));
    let (out, _) = run_piped(&env, &["-"], "  \n");
    assert_exit(&out, 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("keel run -"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn at_path_attaches_a_workspace_file_to_the_task() {
    let env = Env::new();
    std::fs::write(env.work.join("NOTES.md"), "Use tabs, never spaces.\n").unwrap();
    let (out, task) = run_piped(&env, &["follow @NOTES.md when editing"], "");
    assert_exit(&out, 0);
    let task = task.unwrap();
    assert!(task.starts_with("follow @NOTES.md when editing"), "{task}");
    assert!(
        task.contains("Attached files:\n\nNOTES.md\n```\nUse tabs, never spaces.\n```"),
        "{task}"
    );
    // A file outside the workspace is refused before anything runs.
    let (out, _) = run_piped(&env, &["read @../home/done.yaml"], "");
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside the workspace"));
}

#[test]
fn help_shows_examples_for_run_serve_and_undo() {
    let env = Env::new();
    for (command, example) in [
        ("run", "keel run -"),
        ("serve", "keel serve --provider scripted"),
        ("undo", "keel undo --session"),
    ] {
        let out = env.keel().args([command, "--help"]).output().unwrap();
        assert_exit(&out, 0);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Examples:") && text.contains(example),
            "{command}: {text}"
        );
    }
}

#[test]
fn completions_are_generated_for_each_shell() {
    let env = Env::new();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef keel"),
        ("fish", "complete -c keel"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = env.keel().args(["completions", shell]).output().unwrap();
        assert_exit(&out, 0);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(marker),
            "{shell}: {}",
            &text[..text.len().min(300)]
        );
        for sub in ["sessions", "undo", "doctor"] {
            assert!(text.contains(sub), "{shell} completes `{sub}`");
        }
    }
    let out = env.keel().args(["completions", "tcsh"]).output().unwrap();
    assert_exit(&out, 2);
}

/// In a fresh HOME the completion directory does not exist yet: `--install` creates it (a
/// shell redirect cannot).
#[test]
fn completions_install_into_a_fresh_home() {
    let env = Env::new();
    let out = env
        .keel()
        .args(["completions", "bash", "--install"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let path = env
        .home
        .join(".local/share/bash-completion/completions/keel");
    let script = std::fs::read_to_string(&path).unwrap();
    assert!(script.contains("complete -F"), "{script}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(path.to_str().unwrap()));
    let out = env
        .keel()
        .args(["completions", "fish", "--install"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        env.home
            .join(".config/fish/completions/keel.fish")
            .is_file()
    );
    let out = env
        .keel()
        .args(["completions", "powershell", "--install"])
        .output()
        .unwrap();
    assert_exit(&out, 2);
}
