//! PLAN_EXEC exit criteria: planning is left only after something was read and a plan stated,
//! building only after a change, verification only after a test run in it passed (delivery is
//! never reached without a change and a passing check); the loop guard does not count calls
//! that changed state (three `advance_phase` calls in a row are progress, not a loop).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use keel_engine::phase::rollback::{RollbackOutcome, RollbackPlan, after_phase_failure};
use keel_engine::{CollectingSink, Config, Emitter, EngineBuilder, RunOptions, RunOutcome};
use keel_llm::retry::RetryPolicy;
use keel_llm::scripted::ScriptedProvider;
use keel_phase::Phase;
use keel_protocol::{EventKind, SessionStatus};
use keel_store::{NewSession, SqliteStore, Store};
use tokio_util::sync::CancellationToken;

/// Runs `script` in plan_exec mode on a workspace whose test checks `hello.txt`.
async fn run(script: &str) -> (RunOutcome, Arc<CollectingSink>) {
    run_task(script, "say hello").await
}

/// Runs `script` for `task` in plan_exec mode on a workspace whose test checks `hello.txt`.
async fn run_task(script: &str, task: &str) -> (RunOutcome, Arc<CollectingSink>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "# demo\n").unwrap();
    std::fs::write(
        dir.path().join("tests.sh"),
        "grep -q hello hello.txt && echo '1 passed'\n",
    )
    .unwrap();
    let mut config = Config::default();
    config.agent.mode = "plan_exec".into();
    config.shell.lint.enabled = false;
    config.shell.test_command = Some("sh tests.sh".into());
    config.verify.enabled = false;
    let sink = CollectingSink::new();
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(ScriptedProvider::from_yaml(script).unwrap()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let options = RunOptions {
        sinks: vec![sink.clone()],
        ..RunOptions::default()
    };
    let out = engine.run(task, options).await.unwrap();
    (out, sink)
}

/// `advance_phase` results, in order: (refused, text).
fn advances(sink: &CollectingSink) -> Vec<(bool, String)> {
    sink.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult {
                name,
                is_error,
                content,
                ..
            } if name == "advance_phase" => Some((is_error, content)),
            _ => None,
        })
        .collect()
}

fn phases(sink: &CollectingSink) -> Vec<String> {
    sink.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::PhaseChanged { phase, .. } => Some(phase),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn building_needs_a_change_and_verification_needs_the_tests() {
    let script = r#"
turns:
  - tool_calls: [{name: read_file, arguments: {path: README.md}}]
  - tool_calls: [{name: advance_phase, arguments: {summary: "Plan: create hello.txt saying hello, then run the tests to see them pass."}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "hello\n"}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: run_tests, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - text: "Done: hello.txt says hello and the test passes."
"#;
    let (out, sink) = run(script).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let a = advances(&sink);
    assert_eq!(a.len(), 5, "{a:?}");
    assert!(!a[0].0, "planning → building");
    assert!(
        a[1].0 && a[1].1.contains("nothing changed in the building phase"),
        "{a:?}"
    );
    assert!(!a[2].0, "building → verification after the change");
    assert!(a[3].0 && a[3].1.contains("tests have not run"), "{a:?}");
    assert!(!a[4].0, "verification → delivery after run_tests");
    assert_eq!(phases(&sink), ["building", "verification", "delivery"]);
}

#[tokio::test]
async fn a_stated_reason_does_not_leave_building_and_advancing_is_never_a_loop() {
    // The same advance_phase call four times in a row: the first changes the phase, so it does
    // not count towards the loop guard; a reason in `summary` no longer leaves building
    // without a change (delivery needs one), and two refusals in a row are not a loop.
    let call = r#"{name: advance_phase, arguments: {summary: "the file already says hello, so the plan is to change nothing and only run the tests"}}"#;
    let script = format!(
        "turns:\n  - tool_calls: [{{name: list_files, arguments: {{}}}}]\n  - tool_calls: [{call}]\n  - tool_calls: [{call}]\n  - tool_calls: [{call}]\n  - tool_calls: [{{name: create_file, arguments: {{path: hello.txt, content: \"hello\\n\"}}}}]\n  - tool_calls: [{call}]\n  - tool_calls: [{{name: run_command, arguments: {{command: \"sh tests.sh\"}}}}]\n  - tool_calls: [{call}]\n  - text: \"Done.\"\n"
    );
    let (out, sink) = run(&script).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert_eq!(sink.types().iter().filter(|t| **t == "error").count(), 0);
    let a = advances(&sink);
    assert_eq!(
        a.iter().map(|(refused, _)| *refused).collect::<Vec<_>>(),
        [false, true, true, false, false],
        "{a:?}"
    );
    assert!(
        a[1].1
            .contains("If the task needs no change, do not advance"),
        "{a:?}"
    );
    assert_eq!(phases(&sink), ["building", "verification", "delivery"]);
}

/// Delivery needs a passing check: a failing test run in verification keeps the run there
/// (it ends with the model's answer, not in delivery); a passing run lets it advance.
#[tokio::test]
async fn delivery_needs_a_passing_check_not_only_a_test_run() {
    let script = r#"
turns:
  - tool_calls: [{name: read_file, arguments: {path: README.md}}]
  - tool_calls: [{name: advance_phase, arguments: {summary: "Plan: create hello.txt saying hello, then run the tests."}}]
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "helo\n"}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: run_tests, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - text: "The test fails: hello.txt says helo."
  - text: "The test fails: hello.txt says helo."
"#;
    let (_, sink) = run(script).await;
    let a = advances(&sink);
    assert_eq!(a.len(), 3, "{a:?}");
    assert!(
        a[2].0 && a[2].1.contains("the last test run failed"),
        "{a:?}"
    );
    assert_eq!(
        phases(&sink),
        ["building", "verification"],
        "never delivery"
    );
}

/// Auto-advance moves on after N steps, but not into delivery without a change and a
/// passing check.
#[tokio::test]
async fn auto_advance_does_not_reach_delivery_without_a_change() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tests.sh"), "echo '1 passed'\n").unwrap();
    let mut config = Config::default();
    config.agent.mode = "plan_exec".into();
    config.shell.lint.enabled = false;
    config.shell.test_command = Some("sh tests.sh".into());
    config.verify.enabled = false;
    config.plan_exec.auto_advance_after_steps = Some(1);
    let script = r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: read_file, arguments: {path: tests.sh}}]
  - tool_calls: [{name: run_tests, arguments: {}}]
  - tool_calls: [{name: run_tests, arguments: {}}]
  - text: "Nothing to change."
  - text: "Nothing to change."
"#;
    let sink = CollectingSink::new();
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(ScriptedProvider::from_yaml(script).unwrap()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let options = RunOptions {
        sinks: vec![sink.clone()],
        ..RunOptions::default()
    };
    engine.run("say hello", options).await.unwrap();
    assert_eq!(
        phases(&sink),
        ["building", "verification"],
        "never delivery"
    );
}

/// A weak model calls advance_phase on its first request, with nothing read and no plan: the
/// call is refused with what to do first; reading is not enough, a plan must be stated too.
#[tokio::test]
async fn planning_is_left_only_after_reading_and_a_stated_plan() {
    let script = r#"
turns:
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: read_file, arguments: {path: README.md}}]
  - tool_calls: [{name: advance_phase, arguments: {summary: "ok"}}]
  - tool_calls: [{name: update_plan, arguments: {steps: [{step: "create hello.txt", status: pending}, {step: "run the tests", status: pending}]}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "hello\n"}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: run_tests, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - text: "Done: hello.txt says hello and the test passes."
"#;
    let (out, sink) = run(script).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let a = advances(&sink);
    assert!(
        a[0].0 && a[0].1.contains("nothing has been read yet"),
        "{a:?}"
    );
    assert!(
        a[1].0 && a[1].1.contains("no plan has been stated"),
        "{a:?}"
    );
    assert!(
        a[1].1.contains("update_plan"),
        "the hint names the way: {a:?}"
    );
    assert!(
        !a[2].0,
        "planning → building after a read and a plan: {a:?}"
    );
    assert_eq!(phases(&sink), ["building", "verification", "delivery"]);
}

/// A plan written as numbered steps in the reply's text counts as stated.
#[tokio::test]
async fn a_plan_in_the_reply_text_leaves_planning() {
    let script = r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - text: "1. Create hello.txt with hello.\n2. Run the tests."
    tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
"#;
    let (_, sink) = run(script).await;
    let a = advances(&sink);
    assert!(!a[0].0, "{a:?}");
    assert_eq!(phases(&sink)[0], "building");
}

/// SmolLM2's plan_exec runs, as the real server saw them: `advance_phase` first (refused:
/// nothing read), then `list_files` again and again. A repeated read in planning is answered
/// with the way on — a plan and `advance_phase` — not "an edit", which planning refuses; the
/// model that follows it leaves planning (the rule is unchanged: something read, a plan
/// stated).
#[tokio::test]
async fn a_repeated_read_in_planning_points_to_the_plan_and_advance_phase() {
    let script = r#"
turns:
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {summary: "1. create hello.txt saying hello\n2. run the tests"}}]
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "hello\n"}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: run_tests, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - text: "Done: hello.txt says hello and the test passes."
"#;
    let (out, sink) = run(script).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let repeats: Vec<String> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult { content, .. }
                if content.starts_with("[keel: not run again") =>
            {
                Some(content)
            }
            _ => None,
        })
        .collect();
    assert_eq!(repeats.len(), 2, "{repeats:?}");
    assert!(
        repeats[0].contains("call advance_phase") && !repeats[0].contains("an edit"),
        "in planning: {}",
        repeats[0]
    );
    assert!(
        repeats[1].contains("an edit"),
        "in building: {}",
        repeats[1]
    );
    assert_eq!(phases(&sink), ["building", "verification", "delivery"]);
}

/// What the tool results of `name` said, in order.
fn results_of(sink: &CollectingSink, name: &str) -> Vec<String> {
    sink.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult {
                name: n, content, ..
            } if n == name => Some(content),
            _ => None,
        })
        .collect()
}

const HELLO_TASK: &str = "put a greeting in hello.txt as README.md says: the tests want hello";

/// SmolLM2-135M in plan_exec, as the real server saw it: `advance_phase` first, a garbage
/// `create_file`, a listing, then `advance_phase` again with no plan. Each refusal names the
/// exact next call — the file the task names to read, then `advance_phase` with a plan Keel
/// states from the task — and the model's second bare `advance_phase` takes that plan: the
/// run leaves planning instead of listing files until the iteration cap. Delivery still needs
/// the change and a passing check.
#[tokio::test]
async fn a_model_that_states_no_plan_is_offered_one_and_leaves_planning() {
    let script = r#"
turns:
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: create_file, arguments: {path: "file_name.txt", content: "Your content here!"}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "hello\n"}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: run_tests, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - text: "Done: hello.txt says hello and the test passes."
"#;
    let (out, sink) = run_task(script, HELLO_TASK).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let a = advances(&sink);
    assert!(
        a[0].0
            && a[0]
                .1
                .contains(r#"Your next call: read_file {"path":"README.md"}"#),
        "nothing read: the next call names the task's file: {a:?}"
    );
    let violation = &results_of(&sink, "create_file")[0];
    assert!(
        violation.contains("phase_violation") && violation.contains("Your next call: read_file"),
        "{violation}"
    );
    assert!(
        a[1].0
            && a[1].1.contains("no plan has been stated")
            && a[1]
                .1
                .contains(r#"Your next call: advance_phase {"summary":"1. Change README.md"#),
        "read but no plan: a plan offered as a ready call: {a:?}"
    );
    assert!(
        !a[2].0 && a[2].1.contains("Planning ended with the plan Keel offered"),
        "the second bare advance_phase takes the offer: {a:?}"
    );
    assert_eq!(phases(&sink), ["building", "verification", "delivery"]);
}

/// After the offer, a model that goes for a building tool instead of advance_phase leaves
/// planning with the offered plan: the call made in planning is still refused, and the model
/// is told to make it again.
#[tokio::test]
async fn a_building_call_after_the_offer_takes_it() {
    let script = r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "hello\n"}}]
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "hello\n"}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: run_tests, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - text: "Done."
"#;
    let (out, sink) = run_task(script, HELLO_TASK).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let created = results_of(&sink, "create_file");
    assert!(
        created[0].contains("phase_violation") && created[0].contains("Make this call again"),
        "{created:?}"
    );
    assert!(!created[1].contains("phase_violation"), "{created:?}");
    assert_eq!(phases(&sink), ["building", "verification", "delivery"]);
}

/// SmolLM2 in plan_exec (a real run of this session): it listed the files, then read invented
/// paths and listed again, and never asked to move on — the offer, made only on a refusal,
/// never came. After three planning steps with something read and no plan, Keel offers the
/// plan unasked; the model's bare `advance_phase` takes it.
#[tokio::test]
async fn a_model_stuck_reading_in_planning_is_offered_a_plan_unasked() {
    let script = r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: read_file, arguments: {path: "data.csv/test_calc.py:1704"}}]
  - tool_calls: [{name: read_file, arguments: {path: "{object"}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "hello\n"}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - tool_calls: [{name: run_tests, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - text: "Done."
"#;
    let (out, sink) = run_task(script, HELLO_TASK).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let a = advances(&sink);
    assert!(
        !a[0].0 && a[0].1.contains("Planning ended with the plan Keel offered"),
        "{a:?}"
    );
    assert_eq!(phases(&sink), ["building", "verification", "delivery"]);
}

// A failed phase's validation and rollback commands (phase::rollback, R21): the checkpoint is
// saved only when the workspace validates, after a rollback or without one.

async fn outcome(
    validation: Option<&str>,
    rollback: Option<&str>,
) -> (RollbackOutcome, Vec<&'static str>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = Arc::new(SqliteStore::open_in_memory().unwrap_or_else(|e| panic!("{e}")));
    store
        .create_session(&NewSession {
            id: "s".into(),
            workspace: "/w".into(),
            task: "t".into(),
            provider: "p".into(),
            model: "m".into(),
            mode: "plan_exec".into(),
            base_url: String::new(),
            script: String::new(),
            repo: None,
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let sink = CollectingSink::new();
    let emitter = Emitter::new("s".into(), store, vec![sink.clone()]);
    let shell = keel_tools::shell::ShellSettings::default();
    let plan = RollbackPlan {
        phase: Phase::Building,
        validation_command: validation,
        rollback_command: rollback,
        cwd: dir.path(),
        timeout: Duration::from_secs(20),
        shell: &shell,
    };
    let out = after_phase_failure(&plan, &emitter, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (out, sink.types(), dir)
}

#[tokio::test]
async fn no_commands_saves_the_checkpoint() {
    let (out, events, _d) = outcome(None, None).await;
    assert_eq!(out, RollbackOutcome::NotConfigured);
    assert!(out.saves_checkpoint());
    assert!(events.is_empty());
}

#[tokio::test]
async fn passing_validation_needs_no_rollback() {
    let (out, events, dir) = outcome(Some("true"), Some("touch rolled-back")).await;
    assert_eq!(out, RollbackOutcome::ValidationPassed);
    assert!(out.saves_checkpoint());
    assert_eq!(events, ["phase_validation"]);
    assert!(!dir.path().join("rolled-back").exists(), "no rollback ran");
}

#[tokio::test]
async fn failing_validation_without_rollback_still_saves() {
    let (out, events, _d) = outcome(Some("false"), None).await;
    assert_eq!(out, RollbackOutcome::NoRollback);
    assert!(out.saves_checkpoint());
    assert_eq!(events, ["phase_validation"]);
}

#[tokio::test]
async fn a_successful_rollback_is_validated_then_saved() {
    // Validation passes only once the rollback created the marker.
    let (out, events, dir) = outcome(Some("test -e ok"), Some("touch ok")).await;
    assert_eq!(out, RollbackOutcome::RolledBack);
    assert!(out.saves_checkpoint());
    assert_eq!(
        events,
        [
            "phase_validation",
            "rollback_started",
            "phase_validation",
            "rollback_completed"
        ]
    );
    assert!(dir.path().join("ok").exists());
}

#[tokio::test]
async fn a_failing_rollback_is_not_saved() {
    let (out, events, _d) = outcome(Some("false"), Some("exit 3")).await;
    let RollbackOutcome::RollbackFailed(why) = &out else {
        panic!("expected a failed rollback, got {out:?}");
    };
    assert!(why.contains("exit code 3"), "{why}");
    assert!(!out.saves_checkpoint());
    assert_eq!(
        events,
        ["phase_validation", "rollback_started", "rollback_failed"]
    );
}

#[tokio::test]
async fn validation_still_failing_after_rollback_is_not_saved() {
    let (out, events, _d) = outcome(Some("false"), Some("true")).await;
    assert!(matches!(out, RollbackOutcome::RollbackFailed(ref w) if w.contains("still fails")));
    assert!(!out.saves_checkpoint());
    assert_eq!(
        events,
        [
            "phase_validation",
            "rollback_started",
            "phase_validation",
            "rollback_failed"
        ]
    );
}
