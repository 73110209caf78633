//! The fix tracker, the loop guard and the iteration budget end to end.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use keel_protocol::{ErrorCode, EventKind, SessionStatus};
use keel_store::{BlockerStatus, Store};

#[tokio::test]
async fn the_same_error_three_times_raises_a_blocker_with_evidence() {
    // Three different attempts that all fail the same way: not a loop, but no progress.
    let h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: create_file, arguments: {path: "src/lib.rs", content: "v1"}}]
  - tool_calls: [{name: create_file, arguments: {path: "src/lib.rs", content: "v2"}}]
  - tool_calls:
      - name: create_file
        arguments: {path: "src/lib.rs", content: "v3"}
      - name: list_files
        arguments: {}
  - text: "never reached"
"#,
    );
    let out = h.run("replace the library").await;
    assert_eq!(out.status, SessionStatus::Blocked);
    assert!(out.error.is_none());
    let blocker = out.blocker.unwrap();
    assert_eq!(blocker.source, "fix_tracker");
    assert!(blocker.question.contains("3 times"), "{}", blocker.question);
    assert!(
        blocker
            .evidence
            .iter()
            .any(|e| e.starts_with("3× `<path>` already exists")),
        "{:?}",
        blocker.evidence
    );
    assert!(
        blocker
            .evidence
            .iter()
            .any(|e| e == "src/lib.rs: 3 failures")
    );
    // The call after the escalation in the same reply did not run.
    let results = h.tool_results();
    assert!(results[3].2.starts_with("not run:"), "{results:?}");

    // The event, the stored blocker and the session agree.
    let ev = h
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::Blocker { id, source, .. } => Some((id, source)),
            _ => None,
        })
        .unwrap();
    assert_eq!(ev, (blocker.id.clone(), "fix_tracker".to_string()));
    let stored = h.store.get_blocker(&blocker.id).await.unwrap();
    assert_eq!(stored.status, BlockerStatus::Open);
    assert_eq!(stored.session_id, out.session_id);
    assert_eq!(stored.evidence, blocker.evidence);
    let rec = h.store.get_session(&out.session_id).await.unwrap();
    assert_eq!(rec.status, SessionStatus::Blocked);
    let types = h.sink.types();
    assert_eq!(&types[types.len() - 2..], ["blocker", "session_finished"]);
}

/// A command-running tool (a command may change anything, so its repeats are not answered
/// from earlier results).
struct Probe;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ProbeArgs {
    #[allow(dead_code)]
    command: String,
}

impl keel_tools::TypedTool for Probe {
    type Args = ProbeArgs;
    const NAME: &'static str = "probe";
    fn description(&self) -> &str {
        "Runs a probe command."
    }
    fn effect(&self) -> keel_tools::ToolEffect {
        keel_tools::ToolEffect::RunsCommands
    }
    async fn run(
        &self,
        _: ProbeArgs,
        _: &keel_tools::ToolContext,
    ) -> Result<keel_tools::ToolOutput, keel_tools::ToolError> {
        Ok(keel_tools::ToolOutput::text("lib.rs"))
    }
}

#[tokio::test]
async fn identical_commands_three_times_are_a_loop() {
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: probe, arguments: {command: "ls src"}}]
  - tool_calls: [{name: probe, arguments: {command: "ls src"}}]
  - tool_calls: [{name: probe, arguments: {command: "ls src"}}]
  - text: "never reached"
"#,
    );
    h.extra_tools.push(std::sync::Arc::new(Probe));
    h.config.fallback_chain.recovery.enabled = false;
    let out = h.run("look around").await;
    assert_eq!(out.status, SessionStatus::Failed);
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::LoopDetected);
    let results = h.tool_results();
    assert_eq!(results.len(), 3);
    assert!(!results[1].1, "{results:?}");
    assert!(results[2].1 && results[2].2.contains("a loop is not progress"));
}

/// A weak model whose server drops tool results calls `list_files` again and again (17 of 34
/// calls in one run). The same read with nothing changed since is answered with the result
/// the model already got and a note — the run goes on instead of ending `loop_detected`.
#[tokio::test]
async fn the_same_read_again_is_answered_with_the_earlier_result_and_the_run_goes_on() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: list_files, arguments: {path: "src", max_depth: 2}}]
  - tool_calls: [{name: list_files, arguments: {max_depth: 2, path: "src"}}]
  - tool_calls: [{name: list_files, arguments: {path: "src", max_depth: 2}}]
  - text: "src holds lib.rs."
"#,
    );
    let out = h.run("what is in src?").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let results = h.tool_results();
    assert_eq!(results.len(), 3);
    assert!(!results[0].2.contains("[keel: not run again"));
    for r in &results[1..] {
        assert!(!r.1, "{results:?}");
        assert!(
            r.2.starts_with("[keel: not run again: you already made this exact `list_files` call at step 1, and nothing has changed since."),
            "{results:?}"
        );
        assert!(
            r.2.ends_with(&results[0].2),
            "the earlier result follows: {results:?}"
        );
    }
}

/// SmolLM2's default-mode runs listed the files again and again and never read `calc.py`, the
/// file the task named: a repeated read's answer names that read as the exact next call while
/// the file is unread, and the phase's way on once it was read.
#[tokio::test]
async fn a_repeated_read_names_the_unread_file_of_the_task_as_the_next_call() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: read_file, arguments: {path: "src/lib.rs"}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - text: "lib.rs is short."
"#,
    );
    h.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a - b }\n",
    );
    let out = h.run("what does add in src/lib.rs return?").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let results = h.tool_results();
    assert!(
        results[1]
            .2
            .contains(r#"your next call: read_file {"path":"src/lib.rs"}"#),
        "{results:?}"
    );
    assert!(
        results[3].2.starts_with("[keel: not run again"),
        "{results:?}"
    );
    assert!(
        !results[3].2.contains("your next call: read_file"),
        "read already: {results:?}"
    );
}

/// Alternating reads (A, B, A, B) are answered the same way, named as going back and forth;
/// a change in between makes the same read run again and show the change.
#[tokio::test]
async fn alternating_reads_are_answered_and_a_change_makes_a_read_run_again() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: read_file, arguments: {path: "src/lib.rs"}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: read_file, arguments: {path: "src/lib.rs"}}]
  - tool_calls: [{name: create_file, arguments: {path: "notes.md", content: "n\n"}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - text: "Added notes.md."
"#,
    );
    let out = h.run("add notes.md").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let results = h.tool_results();
    assert!(
        results[2]
            .2
            .contains("going back and forth between `list_files` and `read_file`"),
        "{results:?}"
    );
    assert!(
        results[3]
            .2
            .contains("going back and forth between `read_file` and `list_files`")
    );
    assert!(
        !results[5].2.contains("[keel: not run again"),
        "{results:?}"
    );
    assert!(
        results[5].2.contains("notes.md"),
        "the read ran again: {results:?}"
    );
}

/// SmolLM2's real-server runs (eighth session, default runs 2 and 6): `list_files`, an
/// `edit_file` whose search text matched nothing (or a `create_file` of a file that exists),
/// `list_files` again — the second listing ran as if the failed write had changed something.
/// A failed file write changes nothing: the repeat is answered with the first listing.
#[tokio::test]
async fn a_failed_write_between_two_reads_is_no_change() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: edit_file, arguments: {path: "src/lib.rs", edits: [{search: "true", replace: "string"}]}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: create_file, arguments: {path: "src/lib.rs", content: "]["}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: create_file, arguments: {path: "notes.md", content: "n\n"}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - text: "Added notes.md."
"#,
    );
    h.write("src/lib.rs", "pub fn one() -> i32 { 1 }\n");
    let out = h.run("add notes.md").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let results = h.tool_results();
    assert!(
        results[1].1 && results[3].1,
        "both writes failed: {results:?}"
    );
    for i in [2, 4] {
        assert!(
            results[i].2.starts_with(
                "[keel: not run again: you already made this exact `list_files` call at step 1"
            ),
            "{i}: {results:?}"
        );
    }
    assert!(
        !results[6].2.contains("[keel: not run again") && results[6].2.contains("notes.md"),
        "a write that succeeded makes the listing run again: {results:?}"
    );
}

/// Answering repeats has a limit: SmolLM2 listed the files again after every answer that
/// named the next step, between failed reads (which broke any count of repeats in a row),
/// until the iteration cap. Three answers unused — nothing new done since the first — and the
/// run stops with a blocker that names the loop and the step the model did not take.
#[tokio::test]
async fn repeats_whose_answers_go_unused_end_in_a_blocker_naming_the_loop() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: read_file, arguments: {path: "example.csv"}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: read_file, arguments: {path: "example.csv"}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - text: "done"
"#,
    );
    h.write("calc.py", "def add(a, b):\n    return a - b\n");
    let out = h.run("fix the bug in calc.py").await;
    assert_eq!(out.status, SessionStatus::Blocked, "{:?}", out.error);
    let blocker = out.blocker.expect("a blocker");
    assert!(
        blocker.question.contains("3 calls it had already made")
            && blocker.question.contains("calc.py"),
        "{}",
        blocker.question
    );
    // The third unused answer ended it: list_files, an answer, the failed read, an answer, the
    // failed read again (not run).
    assert_eq!(h.tool_results().len(), 5, "{:?}", h.tool_results());
}

/// A model that uses the answer is not stopped: a repeat answered, then the file the answer
/// named read, then more repeats — the count starts again after the new read.
#[tokio::test]
async fn a_repeat_whose_answer_is_used_does_not_count_toward_the_loop() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: read_file, arguments: {path: "calc.py"}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: list_files, arguments: {}}]
  - text: "calc.py subtracts; add should add."
"#,
    );
    h.write("calc.py", "def add(a, b):\n    return a - b\n");
    let out = h.run("explain the bug in calc.py").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.blocker);
}

#[tokio::test]
async fn a_progressing_run_out_of_budget_is_blocked_and_resumes() {
    let mut turns = String::from("turns:\n");
    for i in 1..=3 {
        turns.push_str(&format!(
            "  - tool_calls: [{{name: create_file, arguments: {{path: \"part{i}.txt\", content: \"{i}\"}}}}]\n"
        ));
    }
    let mut h = Harness::new(&turns);
    h.config.agent.max_iterations = 3;
    let out = h.run("write three parts, then a fourth").await;
    assert_eq!(out.status, SessionStatus::Blocked);
    let b = out.blocker.unwrap();
    assert_eq!(b.source, "budget");
    assert!(b.question.starts_with("Budget exhausted"), "{}", b.question);
    assert!(
        b.evidence.iter().any(|e| e.contains("part3.txt")),
        "{:?}",
        b.evidence
    );

    // Resume: a fresh budget, the same session, and the model carries on.
    h.provider = scripted(
        "turns:\n  - tool_calls: [{name: create_file, arguments: {path: part4.txt, content: \"4\"}}]\n  - text: \"All four parts written.\"\n",
    );
    let out2 = h.resume(&out.session_id, "").await;
    assert_eq!(out2.session_id, out.session_id);
    assert_eq!(out2.status, SessionStatus::Completed, "{:?}", out2.error);
    assert_eq!(out2.iterations, 5, "iterations count the whole session");
    assert!(h.dir.path().join("part4.txt").exists());
    let first = h.request_text(0);
    assert!(first.contains("part3.txt"), "the transcript was reloaded");
    assert!(first.contains("Continue the task"));
}

#[tokio::test]
async fn resuming_settles_the_sessions_open_blockers() {
    let mut h = Harness::new(
        "turns:\n  - tool_calls: [{name: list_files, arguments: {}}]\n  - tool_calls: [{name: list_files, arguments: {max_depth: 1}}]\n",
    );
    h.config.agent.max_iterations = 2;
    let out = h.run("explore").await;
    let id = out.blocker.unwrap().id;
    h.provider = scripted("turns:\n  - text: \"Explored.\"\n");
    let out2 = h.resume(&out.session_id, "that is enough exploring").await;
    assert_eq!(out2.status, SessionStatus::Completed);
    let b = h.store.get_blocker(&id).await.unwrap();
    assert_eq!(b.status, BlockerStatus::Delivered);
    assert_eq!(b.answer.as_deref(), Some("that is enough exploring"));
    assert!(h.store.list_blockers(None, false).await.unwrap().is_empty());
    let text = h.request_text(0);
    assert!(
        !text.contains("Budget exhausted"),
        "budget questions need no Q&A"
    );
}

/// A test runner that reports failures as output with a non-zero `exit_code` (not as a tool
/// error), like a command tool does.
struct FailingTests;

impl keel_tools::Tool for FailingTests {
    fn name(&self) -> &str {
        "run_tests"
    }
    fn description(&self) -> &str {
        "Runs the tests."
    }
    fn input_schema(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn effect(&self) -> keel_tools::ToolEffect {
        keel_tools::ToolEffect::RunsCommands
    }
    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        _ctx: &'a keel_tools::ToolContext,
    ) -> futures::future::BoxFuture<'a, Result<keel_tools::ToolOutput, keel_tools::ToolError>> {
        let n = args["n"].as_u64().unwrap_or(0);
        Box::pin(async move {
            Ok(keel_tools::ToolOutput::text(format!(
                "running 4 tests\nerror[E0425]: cannot find value `total` in this scope\n --> src/sum{n}.rs:{n}:9"
            ))
            .with_exit_code(Some(101)))
        })
    }
}

#[tokio::test]
async fn failing_commands_reported_by_exit_code_count_as_failures() {
    let mut h = Harness::new(
        "turns:\n  - tool_calls: [{name: run_tests, arguments: {n: 1}}]\n  - tool_calls: [{name: run_tests, arguments: {n: 2}}]\n  - tool_calls: [{name: run_tests, arguments: {n: 3}}]\n  - text: never\n",
    );
    h.extra_tools.push(std::sync::Arc::new(FailingTests));
    let out = h.run("make the tests pass").await;
    assert_eq!(out.status, SessionStatus::Blocked);
    let b = out.blocker.unwrap();
    assert_eq!(b.source, "fix_tracker");
    assert!(
        b.question
            .contains("error[E0425]: cannot find value `total` in this scope"),
        "{}",
        b.question
    );
}
