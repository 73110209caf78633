//! The fallback chain end to end: each error class becomes the right `error_code` with
//! suggestions; recovery retries and can succeed; each tier can be turned off; cancellation
//! is never routed through it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures::future::BoxFuture;
use keel_engine::{EngineBuilder, RunOptions};
use keel_llm::{ChatRequest, EventStream, LlmError, Provider, ProviderInfo};
use keel_protocol::{ErrorCode, ErrorInfo, EventKind, SessionStatus};
use keel_store::{SqliteStore, Store};
use keel_tools::{Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Value, json};

/// A tool that fails in a way the model cannot fix.
struct BrokenDisk;

impl Tool for BrokenDisk {
    fn name(&self) -> &str {
        "save_state"
    }
    fn description(&self) -> &str {
        "Saves state."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::WritesFiles
    }
    fn execute<'a>(
        &'a self,
        _args: Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async { Err(ToolError::Fatal("the disk is full (ENOSPC)".into())) })
    }
}

/// A tool with a bug.
struct Crashes;

impl Tool for Crashes {
    fn name(&self) -> &str {
        "crash"
    }
    fn description(&self) -> &str {
        "Crashes."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    fn execute<'a>(
        &'a self,
        _args: Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async { panic!("index out of bounds: the len is 0 but the index is 3") })
    }
}

/// A provider that always fails the same way.
struct Failing(LlmError);

impl Provider for Failing {
    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            provider: "failing".into(),
            model: "m".into(),
            context_window: None,
        }
    }
    fn stream<'a>(
        &'a self,
        _request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        let e = self.0.clone();
        Box::pin(async move { Err(e) })
    }
}

const LOOP: &str = r#"
turns:
  - tool_calls: [{name: run_command, arguments: {command: "cat src/lib.rs"}}]
  - tool_calls: [{name: run_command, arguments: {command: "cat src/lib.rs"}}]
  - tool_calls: [{name: run_command, arguments: {command: "cat src/lib.rs"}}]
  - tool_calls: [{name: run_command, arguments: {command: "cat src/lib.rs"}}]
  - tool_calls: [{name: run_command, arguments: {command: "cat src/lib.rs"}}]
  - tool_calls: [{name: run_command, arguments: {command: "cat src/lib.rs"}}]
"#;

/// The `error` event of the run, checked against the outcome and the JSON contract.
fn error_event(h: &Harness) -> ErrorInfo {
    let errors: Vec<ErrorInfo> = h
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Error(info) => Some(info),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "exactly one error event");
    let json = serde_json::to_value(EventKind::Error(errors[0].clone())).unwrap();
    for key in ["error_code", "message", "suggestions", "retryable"] {
        assert!(json.get(key).is_some(), "{key} in {json}");
    }
    errors[0].clone()
}

async fn classify(mut h: Harness) -> (SessionStatus, ErrorInfo) {
    h.max_retries = 0;
    let out = h.run("do the task").await;
    let err = out.error.clone().expect("the run failed");
    assert_eq!(error_event(&h), err);
    assert!(!err.suggestions.is_empty(), "{err:?}");
    assert!(err.original_error.is_some());
    (out.status, err)
}

#[tokio::test]
async fn each_error_class_gets_its_code() {
    let (_, e) = classify(Harness::new(
        "turns:\n  - error: timeout\n  - error: timeout\n",
    ))
    .await;
    assert_eq!(e.error_code, ErrorCode::Timeout);
    assert!(e.retryable);

    let (_, e) = classify(Harness::new(
        "turns:\n  - error: server\n  - error: server\n",
    ))
    .await;
    assert_eq!(e.error_code, ErrorCode::LlmFailure);

    let (_, e) = classify(Harness::new(LOOP)).await;
    assert_eq!(e.error_code, ErrorCode::LoopDetected);
    assert!(e.message.contains("3 times in a row"), "{}", e.message);

    let mut h = Harness::new("turns:\n  - tool_calls: [{name: save_state, arguments: {}}]\n");
    h.extra_tools.push(Arc::new(BrokenDisk));
    let (status, e) = classify(h).await;
    assert_eq!(status, SessionStatus::Failed);
    assert_eq!(e.error_code, ErrorCode::ToolFailure);
    assert!(e.message.contains("ENOSPC"));
    assert!(!e.retryable);

    let mut h = Harness::new("turns:\n  - tool_calls: [{name: crash, arguments: {}}]\n");
    h.extra_tools.push(Arc::new(Crashes));
    let (_, e) = classify(h).await;
    assert_eq!(e.error_code, ErrorCode::InternalError);
    assert!(e.message.contains("index out of bounds"), "{}", e.message);

    // A budget spent without progress: new calls that never get anywhere.
    let mut turns = String::from("turns:\n");
    for i in 0..20 {
        let path = format!("src/missing_{i}.rs");
        turns.push_str(&format!(
            "  - tool_calls: [{{name: read_file, arguments: {{path: \"{path}\"}}}}]\n"
        ));
    }
    let mut h = Harness::new(&turns);
    h.config.agent.max_iterations = 8;
    h.config.fallback_chain.recovery.enabled = false;
    let (status, e) = classify(h).await;
    assert_eq!(status, SessionStatus::MaxSteps);
    assert_eq!(e.error_code, ErrorCode::MaxSteps);
    assert!(e.message.contains("no progress"), "{}", e.message);

    // A task too large for the window.
    let mut h = Harness::new("turns:\n  - text: never\n");
    h.config.agent.context_window = Some(1_000);
    h.max_retries = 0;
    let out = h.run(&"a very long task ".repeat(600)).await;
    assert_eq!(out.error.unwrap().error_code, ErrorCode::ContextOverflow);
}

#[tokio::test]
async fn provider_auth_failures_are_config_errors_and_skip_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let engine = EngineBuilder::new(keel_engine::Config::default(), dir.path())
        .provider(Arc::new(Failing(LlmError::Auth {
            status: 401,
            message: "invalid x-api-key".into(),
        })))
        .store(store.clone())
        .build()
        .unwrap();
    let sink = keel_engine::CollectingSink::new();
    let out = engine
        .run(
            "x",
            RunOptions {
                sinks: vec![sink.clone()],
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::ConfigError);
    assert!(!e.retryable);
    assert!(e.suggestions[0].contains("API key"), "{:?}", e.suggestions);
    assert!(
        !sink.types().contains(&"recovery"),
        "recovery cannot fix a key"
    );
}

#[tokio::test]
async fn recovery_reflects_and_can_succeed() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: run_command, arguments: {command: "cat src/lib.rs"}}]
  - tool_calls: [{name: run_command, arguments: {command: "cat src/lib.rs"}}]
  - tool_calls: [{name: run_command, arguments: {command: "cat src/lib.rs"}}]
  - text: "I kept re-reading the same file. I'll answer from what I read."
    tool_calls: [{name: list_files, arguments: {}}]
  - text: "Done: add() returns a + b."
"#,
    );
    let out = h.run("what does add do?").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert_eq!(out.final_text, "Done: add() returns a + b.");
    assert!(out.error.is_none());
    let recovery: Vec<_> = h
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Recovery {
                attempt,
                error_code,
                evaluation,
            } => Some((attempt, error_code, evaluation)),
            _ => None,
        })
        .collect();
    assert_eq!(recovery.len(), 1);
    assert_eq!(recovery[0].1, ErrorCode::LoopDetected);
    // The third identical call never ran; the model was told so, then given the evaluation.
    let results = h.tool_results();
    assert!(
        results[2].1 && results[2].2.starts_with("not run:"),
        "{results:?}"
    );
    let text = h.request_text(3);
    assert!(text.contains("[Recovery attempt 1]"), "{text}");
    assert!(text.contains("reflect"));
    assert_eq!(h.count("error"), 0);
}

#[tokio::test]
async fn with_recovery_disabled_the_failure_goes_straight_to_emergency() {
    let mut h = Harness::new(LOOP);
    h.config.fallback_chain.recovery.enabled = false;
    let out = h.run("x").await;
    assert_eq!(out.status, SessionStatus::Failed);
    assert_eq!(out.error.unwrap().error_code, ErrorCode::LoopDetected);
    assert_eq!(h.count("recovery"), 0);
    assert_eq!(h.provider.turns_played(), 3);
}

#[tokio::test]
async fn failed_recovery_ends_in_the_emergency_error_of_the_root_cause() {
    let h = Harness::new(LOOP);
    let out = h.run("x").await;
    assert_eq!(out.status, SessionStatus::Failed);
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::LoopDetected);
    assert!(
        e.message.contains("recovery attempt 1 also failed"),
        "{}",
        e.message
    );
    assert_eq!(h.count("recovery"), 1);
}

#[tokio::test]
async fn with_emergency_disabled_the_original_error_surfaces() {
    let mut h = Harness::new(LOOP);
    h.config.fallback_chain.emergency.enabled = false;
    h.config.fallback_chain.recovery.enabled = false;
    let out = h.run("x").await;
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::LoopDetected);
    assert!(e.suggestions.is_empty(), "no rule-based suggestions");
    assert!(
        e.message.starts_with("`run_command` was called 3 times"),
        "{}",
        e.message
    );

    let mut h = Harness::new(LOOP);
    h.config.fallback_chain.enabled = false;
    let out = h.run("x").await;
    assert!(out.error.unwrap().suggestions.is_empty());
    assert_eq!(
        h.count("recovery"),
        0,
        "the master switch turns off recovery too"
    );
}

#[tokio::test]
async fn cancellation_is_never_routed_to_recovery_or_emergency() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - text: "slow"
    delay_ms: 10000
  - text: "never"
"#,
    );
    let options = RunOptions::default();
    let cancel = options.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        cancel.cancel();
    });
    let out = h.run_with("go", options).await;
    assert_eq!(out.status, SessionStatus::Cancelled);
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::Cancelled);
    assert!(e.suggestions.is_empty());
    assert_eq!(h.count("recovery"), 0);
    let rec = h.store.get_session(&out.session_id).await.unwrap();
    assert_eq!(rec.status, SessionStatus::Cancelled);
}

/// A provider with a bug.
struct Panics;

impl Provider for Panics {
    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            provider: "buggy".into(),
            model: "m".into(),
            context_window: None,
        }
    }
    fn stream<'a>(
        &'a self,
        _request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        Box::pin(async { panic!("provider bug") })
    }
}

#[tokio::test]
async fn a_panic_anywhere_in_the_loop_is_an_internal_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let engine = EngineBuilder::new(keel_engine::Config::default(), dir.path())
        .provider(Arc::new(Panics))
        .store(store.clone())
        .build()
        .unwrap();
    let sink = keel_engine::CollectingSink::new();
    let out = engine
        .run(
            "x",
            RunOptions {
                sinks: vec![sink.clone()],
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out.status, SessionStatus::Failed);
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::InternalError);
    assert!(e.message.contains("provider bug"), "{}", e.message);
    assert_eq!(sink.types().last(), Some(&"session_finished"));
    assert_eq!(
        store.get_session(&out.session_id).await.unwrap().status,
        SessionStatus::Failed
    );
}
