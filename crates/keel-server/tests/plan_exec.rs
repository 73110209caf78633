//! PLAN_EXEC through the server (R28–R29): REST and WebSocket run the same phase-enforced
//! engine, produce the same events for the same scripted model, and REST returns the phase
//! events; undo restores a turn from the automatic snapshots.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

/// One violation (a write while planning), then every phase in order.
const LIFECYCLE: &str = r#"
turns:
  - text: "Planning: reading the library first."
    tool_calls:
      - name: read_file
        arguments: {path: "src/lib.rs"}
  - text: "Writing the function right away."
    tool_calls:
      - name: create_file
        arguments: {path: "src/sub.rs", content: "pub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n"}
  - text: "Writing belongs to building. Plan: add sub in src/sub.rs."
    tool_calls:
      - name: advance_phase
        arguments: {summary: "plan: add sub in src/sub.rs"}
  - text: "Building."
    tool_calls:
      - name: create_file
        arguments: {path: "src/sub.rs", content: "pub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n"}
  - text: "Built."
    tool_calls:
      - name: advance_phase
        arguments: {}
  - text: "Verifying the new file."
    tool_calls:
      - name: run_tests
        arguments: {}
  - text: "Verified."
    tool_calls:
      - name: advance_phase
        arguments: {}
  - text: "Added sub in src/sub.rs."
"#;

/// The project's tests, which pass (delivery needs a passing check).
const PASSING_TESTS: &str = "sh tests.sh";

/// The workspace's test script.
fn with_passing_tests(ws: &std::path::Path) {
    std::fs::write(ws.join("tests.sh"), "echo '1 passed'\n").unwrap();
}

fn phase_summary(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "phase_changed" => format!(
                "{} -> {}",
                e["previous"].as_str().unwrap(),
                e["phase"].as_str().unwrap()
            ),
            "phase_violation" => format!(
                "violation {} in {}",
                e["tool"].as_str().unwrap(),
                e["phase"].as_str().unwrap()
            ),
            "checkpoint" => format!("checkpoint {}", e["phase"].as_str().unwrap()),
            other => other.to_string(),
        })
        .collect()
}

#[tokio::test]
async fn plan_exec_over_rest_and_websocket_produce_the_same_event_sequence() {
    let mut srv = TestServer::start_with_tests(PASSING_TESTS).await;
    let script = srv.dir.path().join("lifecycle.yaml");
    std::fs::write(&script, LIFECYCLE).unwrap();

    // Two workspaces with paths of the same length: the environment in the first message, and
    // so the token estimates, match.
    let rest_ws = srv.another_workspace("via-rest");
    with_passing_tests(&rest_ws);
    let rest_id = srv.create_session_in(&rest_ws, &script, "plan_exec").await;
    let (_, view) = srv.get(&format!("/api/v1/sessions/{rest_id}")).await;
    assert_eq!(view["execution_mode"], "plan_exec");
    let (status, turn) = srv
        .post(
            &format!("/api/v1/sessions/{rest_id}/messages"),
            json!({"content": "add sub"}),
        )
        .await;
    assert_eq!(status, 200, "{turn}");
    assert_eq!(turn["status"], "completed", "{turn}");
    assert_eq!(turn["final_text"], "Added sub in src/sub.rs.");
    let phase_events = turn["phase_events"].as_array().unwrap();
    assert_eq!(
        phase_summary(phase_events),
        [
            "violation create_file in planning",
            "checkpoint planning",
            "planning -> building",
            "checkpoint building",
            "building -> verification",
            "checkpoint verification",
            "verification -> delivery",
        ]
    );
    let events = turn["events"].as_array().unwrap();
    assert_eq!(
        events[0]["phase"], "planning",
        "session_started names the first phase"
    );
    // The violating write did not happen; the one in building did.
    assert!(rest_ws.join("src/sub.rs").is_file());
    let violation_result = events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["is_error"] == true)
        .unwrap();
    assert!(
        violation_result["content"]
            .as_str()
            .unwrap()
            .contains("phase_violation"),
        "{violation_result}"
    );
    // phase_events is exactly the phase events of the stream, in order.
    let phase_types = [
        "phase_changed",
        "phase_violation",
        "checkpoint",
        "phase_validation",
        "rollback_started",
        "rollback_completed",
        "rollback_failed",
    ];
    let from_stream: Vec<&Value> = events
        .iter()
        .filter(|e| phase_types.contains(&e["type"].as_str().unwrap()))
        .collect();
    assert_eq!(from_stream, phase_events.iter().collect::<Vec<_>>());

    let ws_ws = srv.another_workspace("via-sock");
    with_passing_tests(&ws_ws);
    let ws_id = srv.create_session_in(&ws_ws, &script, "plan_exec").await;
    let mut ws = srv.ws(&ws_id, 0).await;
    ws.send(json!({"type": "user_message", "content": "add sub"}))
        .await;
    let streamed = ws.until_turn_finished().await;
    let a: Vec<Value> = events.iter().map(comparable).collect();
    let b: Vec<Value> = streamed.iter().map(comparable).collect();
    assert_eq!(types(&streamed), types(events));
    assert_eq!(a, b, "the same events, field for field");
    srv.shutdown().await;
}

#[tokio::test]
async fn undo_restores_a_turn_and_is_recorded_in_the_stream() {
    let mut srv = TestServer::start_with_tests(PASSING_TESTS).await;
    let script = srv.dir.path().join("lifecycle.yaml");
    std::fs::write(&script, LIFECYCLE).unwrap();
    let ws = srv.another_workspace("undo");
    with_passing_tests(&ws);
    let id = srv.create_session_in(&ws, &script, "plan_exec").await;
    let (_, turn) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "add sub"}),
        )
        .await;
    assert_eq!(turn["status"], "completed", "{turn}");
    assert!(ws.join("src/sub.rs").is_file());

    let (status, undone) = srv
        .post(&format!("/api/v1/sessions/{id}/undo"), json!({"turn": 0}))
        .await;
    assert_eq!(status, 200, "{undone}");
    assert_eq!(undone["turn"], 0);
    assert_eq!(undone["removed"], json!(["src/sub.rs"]));
    assert!(
        !ws.join("src/sub.rs").exists(),
        "the file the session created is gone"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("src/lib.rs")).unwrap(),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    );
    let (_, events) = srv
        .get(&format!(
            "/api/v1/sessions/{id}/events?since_seq={}",
            turn["events"].as_array().unwrap().len()
        ))
        .await;
    assert_eq!(events[0]["type"], "undo", "{events}");
    assert_eq!(events[0]["removed"], json!(["src/sub.rs"]));

    // A session that changed nothing has nothing to undo.
    let other = srv
        .create_session(
            &srv.script("answer.yaml", "turns:\n  - text: \"Nothing to change.\"\n"),
            "react",
        )
        .await;
    srv.post(
        &format!("/api/v1/sessions/{other}/messages"),
        json!({"content": "look"}),
    )
    .await;
    let (status, err) = srv
        .post(&format!("/api/v1/sessions/{other}/undo"), json!({}))
        .await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error_code"], "nothing_to_undo");
    srv.shutdown().await;
}

#[tokio::test]
async fn a_project_file_cannot_switch_plan_exec_off_for_the_session() {
    // A repository's `.keel/config.toml` may turn plan_exec on, never off over the user's
    // choice (issue 29): the mode asked for is kept, and the setting is ignored with a warning.
    let mut srv = TestServer::start().await;
    std::fs::create_dir_all(srv.workspace().join(".keel")).unwrap();
    std::fs::write(
        srv.workspace().join(".keel/config.toml"),
        "[plan_exec]\nenabled = false\n",
    )
    .unwrap();
    let (status, body) = srv
        .post(
            "/api/v1/sessions",
            json!({"provider": "scripted", "script": srv.script("s.yaml", LIFECYCLE), "execution_mode": "plan_exec"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["execution_mode"], "plan_exec", "{body}");
    srv.shutdown().await;
}
