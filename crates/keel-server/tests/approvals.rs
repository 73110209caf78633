//! Approvals over the server: under `on-request` (the server's default) a destructive command
//! waits for `approval_requested` to be answered — REST `approve` runs it, a WebSocket `deny`
//! keeps the file and the model reads the reason.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

const REMOVE: &str = r#"
turns:
  - tool_calls:
      - {id: rm1, name: run_command, arguments: {command: "rm src/lib.rs"}}
  - text: "Done."
"#;

async fn wait_for_request(srv: &TestServer, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, events) = srv.get(&format!("/api/v1/sessions/{id}/events")).await;
        assert_eq!(status, 200, "{events}");
        if let Some(e) = events
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "approval_requested")
        {
            return e.clone();
        }
        assert!(Instant::now() < deadline, "no approval_requested");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn rest_approve_runs_the_waiting_command() {
    let srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("rm.yaml", REMOVE), "react")
        .await;
    let url = format!("/api/v1/sessions/{id}/messages");
    let answer = async {
        let asked = wait_for_request(&srv, &id).await;
        assert_eq!(asked["call_id"], "rm1");
        assert_eq!(asked["class"], "destructive");
        assert_eq!(asked["summary"], "rm src/lib.rs");
        assert!(srv.workspace().join("src/lib.rs").exists(), "it waits");

        // Nothing else is waiting.
        let (status, err) = srv
            .post(
                &format!("/api/v1/sessions/{id}/approve"),
                json!({"call_id": "other"}),
            )
            .await;
        assert_eq!(status, 409, "{err}");
        assert_eq!(err["error_code"], "no_pending_approval");

        let (status, body) = srv
            .post(
                &format!("/api/v1/sessions/{id}/approve"),
                json!({"call_id": "rm1", "scope": "once"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["approved"], true);
    };
    let ((status, done), ()) = tokio::join!(srv.post(&url, json!({"content": "tidy up"})), answer);
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "completed");
    assert!(
        !srv.workspace().join("src/lib.rs").exists(),
        "approved: it ran"
    );
    let types = types(done["events"].as_array().unwrap());
    let requested = types
        .iter()
        .position(|t| t == "approval_requested")
        .unwrap();
    assert_eq!(types[requested + 1], "approval_resolved");
    // The snapshot before the write is taken only once the call may run.
    let snapshot = types.iter().position(|t| t == "snapshot").unwrap();
    assert!(snapshot > requested + 1, "{types:?}");
}

#[tokio::test]
async fn websocket_deny_keeps_the_file_and_tells_the_model_why() {
    let srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("rm.yaml", REMOVE), "react")
        .await;
    let mut ws = srv.ws(&id, 0).await;
    ws.send(json!({"type": "user_message", "content": "tidy up"}))
        .await;
    loop {
        let e = ws.next().await.unwrap();
        if e["type"] == "approval_requested" {
            assert_eq!(e["call_id"], "rm1");
            break;
        }
    }
    ws.send(json!({"type": "deny", "call_id": "rm1", "reason": "keep the library"}))
        .await;
    let rest = ws.until_turn_finished().await;
    assert_eq!(rest.last().unwrap()["status"], "completed");
    assert!(
        srv.workspace().join("src/lib.rs").exists(),
        "denied: untouched"
    );
    let result = rest
        .iter()
        .find(|e| e["type"] == "tool_result" && e["id"] == "rm1")
        .unwrap();
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("keep the library"),
        "{result}"
    );
    // A second answer has nothing to answer.
    ws.send(json!({"type": "approve", "call_id": "rm1"})).await;
    let err = ws.next().await.unwrap();
    assert_eq!(err["type"], "request_error");
    assert_eq!(err["error_code"], "no_pending_approval");
}
