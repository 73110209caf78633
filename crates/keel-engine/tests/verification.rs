//! Final verification and self-correction end to end, with real gate commands.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use keel_engine::Gate;
use keel_protocol::{ErrorCode, EventKind, SessionStatus};

fn verifications(h: &Harness) -> Vec<(String, bool, u32, String, Option<i32>)> {
    h.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Verification {
                gate,
                passed,
                attempt,
                output,
                exit_code,
                ..
            } => Some((gate, passed, attempt, output, exit_code)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_failing_gate_goes_back_to_the_agent_which_fixes_it() {
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: create_file, arguments: {path: "feature.txt", content: "new feature"}}]
  - text: "Done: added the feature."
  - text: "The gate wants a changelog entry; adding it."
    tool_calls: [{name: create_file, arguments: {path: "CHANGELOG.md", content: "- feature"}}]
  - text: "Done: feature and changelog."
"#,
    );
    h.config.verify.commands = Some(vec![
        "test -f feature.txt".into(),
        "test -f CHANGELOG.md || { echo 'missing CHANGELOG.md entry' >&2; exit 4; }".into(),
    ]);
    let out = h.run("add the feature").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert_eq!(out.final_text, "Done: feature and changelog.");
    let v = verifications(&h);
    assert_eq!(v.len(), 4, "two gates, two rounds: {v:?}");
    assert!(v[0].1 && v[0].2 == 1);
    assert!(!v[1].1 && v[1].2 == 1);
    assert_eq!(v[1].4, Some(4));
    assert!(v[1].3.contains("missing CHANGELOG.md entry"));
    assert!(v[2].1 && v[3].1 && v[3].2 == 2);
    // The agent saw the failing gate's output.
    let text = h.request_text(2);
    assert!(
        text.contains("Final verification failed (round 1"),
        "{text}"
    );
    assert!(text.contains("missing CHANGELOG.md entry"));
    assert!(
        !text.contains("## Gate `test -f feature.txt`"),
        "only failing gates"
    );
}

#[tokio::test]
async fn still_failing_after_the_cap_fails_with_the_gate_output() {
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: create_file, arguments: {path: "a.txt", content: "a"}}]
  - text: "Done."
  - text: "Fixed, done."
  - text: "Really done."
"#,
    );
    h.config.agent.self_correction_cap = 1;
    h.config.verify.commands = Some(vec![
        "echo 'assertion failed: left == right' >&2; exit 1".into(),
    ]);
    let out = h.run("x").await;
    assert_eq!(out.status, SessionStatus::Failed);
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::VerificationFailed);
    assert!(
        e.message.contains("after 1 self-correction round"),
        "{}",
        e.message
    );
    assert!(
        e.original_error
            .unwrap_or_default()
            .contains("assertion failed: left == right")
    );
    assert_eq!(
        verifications(&h).len(),
        2,
        "first check plus one correction round"
    );
    assert_eq!(h.provider.turns_played(), 3);
    assert_eq!(h.count("recovery"), 0, "self-correction was the recovery");
}

#[tokio::test]
async fn a_run_that_changed_nothing_is_not_verified_unless_asked() {
    let mut h = Harness::new("turns:\n  - text: \"add() adds.\"\n");
    h.config.verify.commands = Some(vec!["exit 1".into()]);
    let out = h.run("what does add do?").await;
    assert_eq!(out.status, SessionStatus::Completed);
    assert!(verifications(&h).is_empty());

    let mut h = Harness::new("turns:\n  - text: \"add() adds.\"\n  - text: \"still\"\n");
    h.config.verify.commands = Some(vec!["exit 1".into()]);
    h.config.verify.always = true;
    h.config.agent.self_correction_cap = 0;
    let out = h.run("what does add do?").await;
    assert_eq!(out.status, SessionStatus::Failed);
    assert_eq!(verifications(&h).len(), 1);
}

#[tokio::test]
async fn gates_are_killed_at_their_timeout() {
    let mut h = Harness::new(
        "turns:\n  - tool_calls: [{name: create_file, arguments: {path: a.txt, content: a}}]\n  - text: \"Done.\"\n",
    );
    h.config.verify.commands = Some(vec!["sleep 30".into()]);
    h.config.verify.timeout_secs = 1;
    h.config.agent.self_correction_cap = 0;
    let started = std::time::Instant::now();
    let out = h.run("x").await;
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert_eq!(out.status, SessionStatus::Failed);
    let v = verifications(&h);
    assert_eq!(v[0].4, None, "killed, no exit code");
    assert!(
        out.error
            .unwrap()
            .original_error
            .unwrap_or_default()
            .contains("timed out after 1 s")
    );
}

#[tokio::test]
async fn unset_commands_use_the_gate_detector() {
    let h = Harness::new(
        "turns:\n  - tool_calls: [{name: create_file, arguments: {path: a.txt, content: a}}]\n  - text: \"Done.\"\n",
    );
    let detector = |root: &std::path::Path| {
        vec![Gate {
            name: "tests".into(),
            command: format!("test -f {}/a.txt", root.display()),
        }]
    };
    let sink = keel_engine::CollectingSink::new();
    let engine = keel_engine::EngineBuilder::new(h.config.clone(), h.dir.path())
        .provider(Arc::new(h.provider.clone()))
        .store(h.store.clone())
        .gate_detector(Arc::new(detector))
        .build()
        .unwrap();
    let out = engine
        .run(
            "x",
            keel_engine::RunOptions {
                sinks: vec![sink.clone()],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out.status, SessionStatus::Completed);
    let gates: Vec<String> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Verification { gate, passed, .. } if passed => Some(gate),
            _ => None,
        })
        .collect();
    assert_eq!(gates, ["tests"]);
}

#[tokio::test]
async fn without_configured_gates_the_detected_test_command_verifies() {
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: create_file, arguments: {path: "notes.txt", content: "draft"}}]
  - text: "Done."
  - text: "The tests want a result file; adding it."
    tool_calls: [{name: create_file, arguments: {path: "result.txt", content: "ok"}}]
  - text: "Done, with the result file."
"#,
    );
    // No [verify] commands: the engine's default detector finds the project's test command.
    h.config.verify.commands = None;
    h.config.shell.test_command = Some("test -f result.txt".into());
    let out = h.run("write the result").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let v = verifications(&h);
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!(v[0].0, "tests");
    assert!(!v[0].1, "first round fails: no result.txt yet");
    assert!(v[1].1, "second round passes");
}

/// The escape through gates: the model plants a `package.json` whose test script dumps the
/// environment, reads Keel's own through /proc and writes outside the workspace; the default
/// gate (`npm test`) runs it. Now it runs confined with the allowlisted environment: nothing
/// is written outside and the `verification` event holds none of Keel's variables.
#[tokio::test]
async fn a_planted_test_script_runs_confined_and_sees_no_secrets() {
    if keel_tools::shell::exec::find_program("npm").is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "npm is missing (CI installs it)"
        );
        println!("SKIPPED: npm is not installed");
        return;
    }
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let pwned = outside.path().join("pwned");
    let script = format!(
        "env; cat /proc/$PPID/environ; for p in /proc/[0-9]*; do cat $p/environ; done; echo x > {}; exit 1",
        pwned.display()
    );
    let package = serde_json::json!({"name": "x", "version": "1.0.0", "scripts": {"test": script}});
    let mut h = Harness::new(&format!(
        "turns:\n  - tool_calls: [{{name: create_file, arguments: {{path: package.json, content: {}}}}}]\n  - text: \"Done.\"\n  - text: \"Done again.\"\n",
        serde_json::to_string(&package.to_string()).unwrap()
    ));
    h.config.agent.self_correction_cap = 0;
    let _ = h.run("add tests").await;
    let v = verifications(&h);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].0, "tests");
    let output = &v[0].3;
    assert!(output.contains("PATH="), "the script ran: {output}");
    assert!(!pwned.exists(), "the gate wrote outside the workspace");
    // Cargo sets these for the test process (Keel): never allowlisted.
    for leaked in ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "RUST_TEST_THREADS"] {
        assert!(!output.contains(leaked), "{leaked} leaked: {output}");
    }
}

/// The issue's demo: the gate fails because the sandbox refuses a write to a tool's home,
/// Keel asks the model to fix it, and the script has no turn left. The error leads with the
/// gate (name, command, exit code, output tail) and the sandbox, not with the model.
#[tokio::test]
async fn a_model_failure_during_a_correction_round_names_the_failing_gate_first() {
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: create_file, arguments: {path: "answer.txt", content: "42\n"}}]
  - text: "Wrote 42."
"#,
    );
    h.config.verify.commands = Some(vec![
        "echo \"error: could not create home directory: '/nonexistent-home/.rustup': Permission denied (os error 13)\" >&2; exit 1".into(),
    ]);
    let out = h.run("fix answer.txt").await;
    assert_eq!(out.status, SessionStatus::Failed);
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::VerificationFailed, "{}", e.message);
    let m = &e.message;
    assert!(
        m.starts_with("Final verification still fails: verification gate `echo"),
        "{m}"
    );
    assert!(m.contains("failed (exit code 1)"), "{m}");
    assert!(m.contains("Permission denied"), "{m}");
    assert!(
        m.contains("the sandbox caused this") && m.contains("/nonexistent-home/.rustup"),
        "{m}"
    );
    assert!(m.contains("correction round 1 of 3"), "{m}");
    assert!(
        m.contains("no turn left"),
        "the model's part comes last: {m}"
    );
    assert!(
        e.suggestions.iter().any(|s| s.contains("sandbox")),
        "{:?}",
        e.suggestions
    );
}
