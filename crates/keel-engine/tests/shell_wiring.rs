//! The engine's default tool set includes the shell tools configured from `[shell]`, and the
//! model can drive them through the loop.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_engine::{CollectingSink, Config, EngineBuilder, RunOptions};
use keel_llm::scripted::ScriptedProvider;
use keel_protocol::{EventKind, SessionStatus};
use keel_store::SqliteStore;

const SCRIPT: &str = r#"
turns:
  - tool_calls:
      - name: run_command
        arguments: {command: "echo hello > out.txt && cat out.txt"}
  - tool_calls:
      - name: run_command
        arguments: {command: "sudo rm -rf /"}
  - text: "done"
"#;

#[tokio::test]
async fn the_model_runs_commands_through_the_configured_shell_tools() {
    let dir = tempfile::tempdir().unwrap();
    let sink = CollectingSink::new();
    let engine = EngineBuilder::new(Config::default(), dir.path())
        .provider(Arc::new(ScriptedProvider::from_yaml(SCRIPT).unwrap()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    let names: Vec<&str> = engine.tools().names().collect();
    assert!(
        names.contains(&"run_command") && names.contains(&"run_tests"),
        "{names:?}"
    );
    let outcome = engine
        .run(
            "say hello",
            RunOptions {
                sinks: vec![sink.clone()],
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(outcome.status, SessionStatus::Completed);
    let results: Vec<(bool, String)> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult {
                is_error, content, ..
            } => Some((is_error, content)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results[0],
        (false, "exit code: 0\nstdout:\nhello".to_string())
    );
    assert!(results[1].0, "the deny list refuses sudo");
    assert!(results[1].1.contains("deny list"), "{}", results[1].1);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "hello\n"
    );
}

#[tokio::test]
async fn shell_tools_can_be_switched_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.shell.enabled = false;
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(ScriptedProvider::from_yaml(SCRIPT).unwrap()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    assert!(engine.tools().get("run_command").is_none());
}

/// A failing test run is a failed call (✗ for the model and the user) whose result event keeps
/// what the run did — exit code, output tail, counts — for the renderers.
#[tokio::test]
async fn a_failing_test_run_is_an_error_result_with_its_details() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.shell.test_command =
        Some("echo 'test tests::adds ... ok'; echo 'checked 41 things' >&2; exit 3".into());
    let script = "turns:\n  - tool_calls: [{name: run_tests, arguments: {}}]\n  - text: done\n";
    let sink = CollectingSink::new();
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(ScriptedProvider::from_yaml(script).unwrap()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    engine
        .run(
            "run the tests",
            RunOptions {
                sinks: vec![sink.clone()],
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    let (is_error, content, details, metadata) = sink
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::ToolResult {
                is_error,
                content,
                details,
                metadata,
                ..
            } => Some((is_error, content, details, metadata)),
            _ => None,
        })
        .unwrap();
    assert!(is_error, "a failed run is ✗: {content}");
    assert!(content.contains("FAILED"), "{content}");
    assert_eq!(details.exit_code, Some(3), "{details:?}");
    let tail = details.output_tail.expect("the output tail is kept");
    assert!(tail.text.contains("checked 41 things"), "{tail:?}");
    let metadata = metadata.expect("the counts are kept");
    assert_eq!(metadata["status"], "failed", "{metadata}");
    assert_eq!(metadata["failed"], 0, "{metadata}");
}

/// Issue 29 / R10-22: what the checks after a command did reaches the user as an event of the
/// session's stream (`workspace_check`), not only as text in the tool result the model reads:
/// an ignored file a command nobody approved left is moved aside, and the event says so.
#[tokio::test]
async fn what_the_checks_moved_is_an_event_for_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join(".gitignore"), "data/\n").unwrap();
    #[allow(clippy::disallowed_methods)]
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws)
        .status()
        .unwrap();
    assert!(ok.success());
    let script = r#"
turns:
  - tool_calls:
      - name: run_command
        arguments: {command: "mkdir -p data && echo 'curl evil' > data/plant.sh"}
  - text: "done"
"#;
    let sink = CollectingSink::new();
    let engine = EngineBuilder::new(Config::default(), ws)
        .provider(Arc::new(ScriptedProvider::from_yaml(script).unwrap()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    let outcome = engine
        .run(
            "plant",
            RunOptions {
                sinks: vec![sink.clone()],
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(outcome.status, SessionStatus::Completed);
    let events = sink.events();
    let call = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCall { id, .. } => Some(id.clone()),
            _ => None,
        })
        .unwrap();
    let told = events.iter().find_map(|e| match &e.kind {
        EventKind::WorkspaceCheck {
            call_id, message, ..
        } => Some((call_id.clone(), message.clone())),
        _ => None,
    });
    let (call_id, message) = told.expect("a workspace_check event");
    assert_eq!(call_id.as_deref(), Some(call.as_str()));
    assert!(message.contains("data/plant.sh"), "{message}");
    assert!(!ws.join("data/plant.sh").exists(), "{message}");
}
