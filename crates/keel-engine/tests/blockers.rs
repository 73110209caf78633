//! Blockers end to end: raised by the model, by patterns; answered; delivered into the resumed
//! session, which continues its event numbering and completes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use futures::future::BoxFuture;
use keel_engine::blockers::{
    BlockerSource, ambiguity_blocker, answers_text, credentials_blocker, new_blocker_id,
    requested_question,
};
use keel_engine::{RunOptions, UserPrompt};
use keel_protocol::ToolDetails;
use keel_protocol::{EventKind, SessionStatus};
use keel_store::BlockerRecord;
use keel_store::{BlockerStatus, NewSession, Store};
use keel_tools::{Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Value, json};

const ASKS: &str = r#"
turns:
  - text: "Two databases are configured."
    tool_calls:
      - name: ask_user
        arguments: {question: "Which database should the migration target?", context: "Both Postgres and SQLite are configured."}
  - text: "never reached in the first run"
"#;

#[tokio::test]
async fn a_blocked_run_is_answered_and_the_resumed_run_sees_the_answer() {
    let mut h = Harness::new(ASKS);
    let out = h.run("write the migration").await;
    assert_eq!(out.status, SessionStatus::Blocked);
    let blocker = out.blocker.clone().unwrap();
    assert_eq!(blocker.source, "model");
    assert_eq!(
        blocker.question,
        "Which database should the migration target?"
    );
    assert_eq!(
        blocker.evidence,
        ["Both Postgres and SQLite are configured."]
    );
    assert_eq!(h.provider.turns_played(), 1);
    let first_run_events = h.events().len() as u64;

    // Stored with its question; a human answers it.
    let open = h.store.list_blockers(None, false).await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].id, blocker.id);
    let prefix = &blocker.id[..7];
    let answered = h.store.answer_blocker(prefix, "Postgres 16").await.unwrap();
    assert_eq!(answered.status, BlockerStatus::Answered);

    // The resumed run gets the answer in its next message and completes.
    h.provider = scripted("turns:\n  - text: \"Wrote the Postgres 16 migration.\"\n");
    let out2 = h.resume(&out.session_id[..15], "").await;
    assert_eq!(out2.status, SessionStatus::Completed, "{:?}", out2.error);
    assert_eq!(out2.session_id, out.session_id);
    let req = &h.provider.requests()[0];
    let last = req.messages.last().unwrap();
    let text = serde_json::to_string(last).unwrap();
    assert!(
        text.contains("Q (blk-") && text.contains("Which database should the migration target?"),
        "{text}"
    );
    assert!(text.contains("A: Postgres 16"), "{text}");
    // The ask_user result and the answer arrive together: roles still alternate.
    assert!(req.messages.windows(2).all(|w| w[0].role != w[1].role));
    assert_eq!(
        h.store.get_blocker(&blocker.id).await.unwrap().status,
        BlockerStatus::Delivered
    );

    // One session, one gap-free event stream across both runs.
    let stored = h.store.events(&out.session_id, 0).await.unwrap();
    assert!(stored.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    let resumed = &stored[first_run_events as usize];
    assert_eq!(resumed.seq, first_run_events + 1);
    match &resumed.kind {
        EventKind::SessionResumed {
            answered_blockers, ..
        } => assert_eq!(answered_blockers, &vec![blocker.id.clone()]),
        other => panic!("expected session_resumed, got {other:?}"),
    }
    let rec = h.store.get_session(&out.session_id).await.unwrap();
    assert_eq!(rec.status, SessionStatus::Completed);
    assert_eq!(rec.iterations, 2);
}

struct Answers(&'static str);

impl UserPrompt for Answers {
    fn ask<'a>(
        &'a self,
        question: &'a str,
        _context: Option<&'a str>,
    ) -> BoxFuture<'a, Option<String>> {
        assert!(question.contains("Which database"));
        Box::pin(async move { Some(self.0.to_string()) })
    }
}

#[tokio::test]
async fn an_interactive_run_answers_ask_user_without_blocking() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls:
      - name: ask_user
        arguments: {question: "Which database?"}
  - text: "Using SQLite."
"#,
    );
    let out = h
        .run_with(
            "which database should the migration use?",
            RunOptions {
                ask_user: Some(Arc::new(Answers("SQLite"))),
                ..RunOptions::default()
            },
        )
        .await;
    assert_eq!(out.status, SessionStatus::Completed);
    assert!(out.blocker.is_none());
    assert_eq!(h.tool_results()[0].2, "The user answered: SQLite");
}

#[tokio::test]
async fn a_final_answer_asking_for_clarification_is_a_blocker() {
    let h = Harness::new(
        "turns:\n  - text: \"There are two parsers. Could you clarify which one the task means?\"\n",
    );
    let out = h.run("fix the parser").await;
    assert_eq!(out.status, SessionStatus::Blocked);
    let b = out.blocker.unwrap();
    assert_eq!(b.source, "pattern");
    assert!(b.question.contains("two parsers"));
}

/// A command runner that fails for a missing key.
struct NeedsKey;

impl Tool for NeedsKey {
    fn name(&self) -> &str {
        "run_command"
    }
    fn description(&self) -> &str {
        "Runs a command."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::RunsCommands
    }
    fn execute<'a>(
        &'a self,
        _args: Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async {
            Err(ToolError::model(
                "exit code 1\nError: STRIPE_API_KEY is not set; export it before running the e2e suite",
            ))
        })
    }
}

#[tokio::test]
async fn missing_credentials_in_command_output_are_a_blocker() {
    let mut h = Harness::new(
        "turns:\n  - tool_calls: [{name: run_command, arguments: {command: \"npm run e2e\"}}]\n  - text: never\n",
    );
    h.extra_tools.push(Arc::new(NeedsKey));
    let out = h.run("run the e2e suite").await;
    assert_eq!(out.status, SessionStatus::Blocked);
    let b = out.blocker.unwrap();
    assert_eq!(b.source, "pattern");
    assert!(
        b.question.contains("STRIPE_API_KEY is not set"),
        "{}",
        b.question
    );
}

#[tokio::test]
async fn resume_refuses_sessions_it_cannot_continue() {
    let h = Harness::new("turns: []\n");
    // A session whose run (another process) holds its lease and heartbeats.
    h.store
        .create_session(&NewSession {
            id: "20260101-000000-abcdef".into(),
            workspace: h.dir.path().canonicalize().unwrap().display().to_string(),
            task: "t".into(),
            provider: "scripted".into(),
            model: "scripted".into(),
            mode: "react".into(),
            base_url: String::new(),
            script: String::new(),
            repo: None,
        })
        .await
        .unwrap();
    assert!(
        h.store
            .acquire_lease("20260101-000000-abcdef", "elsewhere:1:run", 60_000)
            .await
            .unwrap()
    );
    let e = h
        .engine()
        .continue_session("20260101", "go", RunOptions::default())
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("still running"), "{e}");

    let e = h
        .engine()
        .continue_session("nope", "go", RunOptions::default())
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("no session matches `nope`"), "{e}");
}

// What raises a blocker, read alone: credential failures in a command's output, a final
// answer that asks for clarification, the typed request; how answers are handed back.

#[test]
fn credential_failures_are_blockers() {
    for out in [
        "Error: OPENAI_API_KEY environment variable is not set",
        "error: api key missing for the staging service",
        "git@github.com: Permission denied (publickey).",
        "fatal: could not read Username for 'https://github.com': terminal prompts disabled",
        "HTTP 401: authentication required",
        "Missing credentials for the registry",
    ] {
        let b = credentials_blocker("run_command", &format!("running…\n{out}\n"))
            .unwrap_or_else(|| panic!("no blocker for {out:?}"));
        assert_eq!(b.source, BlockerSource::Pattern);
        assert!(b.question.contains(out.trim()), "{}", b.question);
    }
    for out in [
        "test result: FAILED. 3 passed; 1 failed",
        "error[E0308]: mismatched types",
        "the key was not found in the map",
    ] {
        assert!(credentials_blocker("run_command", out).is_none(), "{out}");
    }
}

#[test]
fn clarification_requests_are_blockers_and_answers_are_not() {
    let b = ambiguity_blocker(
        "The task says \"the parser\" but there are two. Could you clarify which one you mean?",
    );
    assert!(b.is_some_and(|b| b.question.contains("two")));
    assert!(ambiguity_blocker("I cannot proceed without the database schema.").is_some());
    assert!(ambiguity_blocker("Done: added the test; all 12 tests pass.").is_none());
    assert!(ambiguity_blocker("Fixed the off-by-one in the parser.").is_none());
}

#[test]
fn questions_come_from_the_typed_blocker_request() {
    let ask = |question: &str, context: Option<&str>| ToolDetails {
        blocker: Some(keel_protocol::BlockerRequest {
            question: question.into(),
            context: context.map(str::to_string),
        }),
        ..ToolDetails::default()
    };
    assert_eq!(
        requested_question(&ask(" Which DB? ", Some(""))),
        Some(("Which DB?".to_string(), None))
    );
    assert_eq!(
        requested_question(&ask("Which DB?", Some(" both exist "))),
        Some(("Which DB?".to_string(), Some("both exist".to_string())))
    );
    assert_eq!(requested_question(&ask("  ", None)), None);
    assert_eq!(requested_question(&ToolDetails::default()), None);
}

#[test]
fn answers_read_as_questions_and_answers() {
    let rec = |id: &str, answer: Option<&str>| BlockerRecord {
        id: id.into(),
        session_id: "s".into(),
        question: "Which database?".into(),
        source: "model".into(),
        evidence: vec![],
        status: BlockerStatus::Answered,
        answer: answer.map(str::to_string),
        created_at: 0,
        answered_at: None,
    };
    let text =
        answers_text(&[rec("blk-1", Some("Postgres 16")), rec("blk-2", None)]).unwrap_or_default();
    assert!(
        text.contains("Q (blk-1): Which database?\nA: Postgres 16"),
        "{text}"
    );
    assert!(!text.contains("blk-2"));
    assert_eq!(answers_text(&[rec("blk-2", None)]), None);
    assert!(new_blocker_id().starts_with("blk-"));
    assert_eq!(new_blocker_id().len(), 12);
}
