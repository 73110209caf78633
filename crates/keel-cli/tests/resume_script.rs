//! A resumed scripted session goes on with the script where it stopped (not from its first
//! turn), and a run whose write was refused and never redone, or whose change task changed
//! nothing, gets no success mark (exit 4).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;

use serde_json::Value;

mod common;
use common::*;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn resuming_a_scripted_session_continues_the_script_where_it_stopped() {
    let env = Env::new();
    let script = env.script(
        "steps.yaml",
        "turns:\n  - text: \"Creating the notes.\"\n    tool_calls:\n      - name: create_file\n        arguments: {path: NOTES.md, content: \"first\\n\"}\n  - text: \"Done: wrote NOTES.md.\"\n",
    );
    let run = |extra: &[&str]| {
        env.keel()
            .args(["run", "--json", "--provider", "scripted", "--script"])
            .arg(&script)
            .args(extra)
            .output()
            .unwrap()
    };
    // One iteration: the first turn runs, the run stops while still progressing (blocked).
    let out = run(&["--max-iterations", "1", "write the notes"]);
    assert_exit(&out, 3);
    let id = json_lines(&out.stdout)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        std::fs::read_to_string(env.work.join("NOTES.md")).unwrap(),
        "first\n"
    );

    let out = run(&["--resume", &id, "go on"]);
    assert_exit(&out, 0);
    let events = json_lines(&out.stdout);
    let calls: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_call").collect();
    assert!(
        calls.is_empty(),
        "the first turn was not replayed: {calls:?}"
    );
    let last_text = events
        .iter()
        .rfind(|e| e["type"] == "assistant_message")
        .unwrap();
    assert_eq!(last_text["text"], "Done: wrote NOTES.md.");

    // Resuming once the script is over says so and what to do.
    let out = run(&["--resume", &id, "and more"]);
    assert_exit(&out, 1);
    let error = json_lines(&out.stdout)
        .into_iter()
        .find(|e| e["type"] == "error")
        .unwrap();
    assert!(
        error["suggestions"]
            .to_string()
            .contains("add turns to the script"),
        "{error}"
    );
}

#[test]
fn a_refused_write_that_is_never_redone_gets_no_success_mark_and_exit_4() {
    let env = Env::new();
    let refused = env.script(
        "refused.yaml",
        // The answer without a change is nudged once ("the task asks for a change"); the
        // model says it is done again.
        "turns:\n  - tool_calls:\n      - name: create_file\n        arguments: {path: src/lib.rs, content: \"x\"}\n  - text: \"Done.\"\n  - text: \"Done.\"\n",
    );
    let out = env
        .keel()
        .args(["run", "--provider", "scripted", "--script"])
        .arg(&refused)
        .arg("replace the library")
        .output()
        .unwrap();
    // Not a pass for CI: the work is not in the workspace (exit 4, README).
    assert_exit(&out, 4);
    let text = stdout(&out);
    assert!(!text.contains("✓ completed"), "{text}");
    assert!(
        text.contains("! completed, but a write was refused and not redone (create_file:"),
        "{text}"
    );

    // The same refusal followed by a successful write: the model completed the task.
    let redone = env.script(
        "redone.yaml",
        "turns:\n  - tool_calls:\n      - name: create_file\n        arguments: {path: src/lib.rs, content: \"x\"}\n  - tool_calls:\n      - name: create_file\n        arguments: {path: src/extra.rs, content: \"// extra\\n\"}\n  - text: \"Done.\"\n",
    );
    let out = env
        .keel()
        .args(["run", "--provider", "scripted", "--script"])
        .arg(&redone)
        .arg("add a module")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("✓ completed"), "{}", stdout(&out));
}

#[test]
fn a_change_task_that_changed_nothing_is_not_a_pass_but_a_question_is() {
    let env = Env::new();
    // The model reads, lists with a read-only command, is nudged ("nothing has been changed
    // yet"), and explains that no change is needed: it may finish, but the work asked for is
    // not in the workspace.
    let looked = env.script(
        "looked.yaml",
        "turns:\n  - tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - tool_calls:\n      - name: run_command\n        arguments: {command: \"ls -la src && cat Cargo.toml\"}\n  - text: \"Done.\"\n  - text: \"No change is needed: the parser already handles that.\"\n",
    );
    let run = |script: &std::path::Path, task: &str, json: bool| {
        let mut cmd = env.keel();
        cmd.args(["run", "--provider", "scripted", "--script"])
            .arg(script);
        if json {
            cmd.arg("--json");
        }
        cmd.arg(task).output().unwrap()
    };
    let out = run(&looked, "fix the off-by-one in the parser", false);
    assert_exit(&out, 4);
    let text = stdout(&out);
    assert!(!text.contains("✓ completed"), "{text}");
    assert!(
        text.contains("! completed, but nothing was changed"),
        "{text}"
    );
    let out = run(&looked, "fix the off-by-one in the parser", true);
    assert_exit(&out, 4);
    let finished = json_lines(&out.stdout)
        .into_iter()
        .rfind(|e| e["type"] == "session_finished")
        .unwrap();
    assert_eq!(finished["status"], "completed");
    assert_eq!(finished["unchanged"], true, "{finished}");

    // The same replies to a question: an answer, not an unchanged change task.
    let answered = env.script(
        "answered.yaml",
        "turns:\n  - tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - text: \"It adds two numbers.\"\n",
    );
    let out = run(&answered, "what does the library do?", false);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("✓ completed"), "{}", stdout(&out));

    // A change task whose command wrote a file: completed, exit 0.
    let wrote = env.script(
        "wrote.yaml",
        "turns:\n  - tool_calls:\n      - name: run_command\n        arguments: {command: \"echo '// fixed' >> src/lib.rs\"}\n  - text: \"Fixed.\"\n",
    );
    let out = run(&wrote, "fix the off-by-one in the parser", true);
    assert_exit(&out, 0);
    let finished = json_lines(&out.stdout)
        .into_iter()
        .rfind(|e| e["type"] == "session_finished")
        .unwrap();
    assert!(finished.get("unchanged").is_none(), "{finished}");
}
