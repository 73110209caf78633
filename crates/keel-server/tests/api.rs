//! The REST API end to end over loopback: sessions, messages, events, cancel, blockers, errors,
//! limits and the OpenAPI document.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use keel_store::Store;
use serde_json::{Value, json};

const READ_THEN_ANSWER: &str = r#"
turns:
  - text: "Reading the library."
    tool_calls:
      - name: read_file
        arguments: {path: "src/lib.rs"}
  - text: "add returns a + b."
  - text: "It is used nowhere else."
"#;

const SLOW: &str = r#"
turns:
  - text: "Thinking slowly."
    delay_ms: 30000
  - text: "Second turn."
"#;

#[tokio::test]
async fn sessions_are_created_listed_read_and_deleted() {
    let mut srv = TestServer::start().await;
    let script = srv.script("read.yaml", READ_THEN_ANSWER);
    let (status, created) = srv
        .post(
            "/api/v1/sessions",
            json!({"workspace": srv.workspace().display().to_string(), "provider": "scripted", "script": script, "execution_mode": "react"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(created["status"], "idle");
    assert_eq!(created["task"], "");
    assert_eq!(created["execution_mode"], "react");
    assert_eq!(created["provider"], "scripted");
    assert_eq!(created["turn_running"], false);
    assert_eq!(
        created["workspace"],
        srv.workspace()
            .canonicalize()
            .unwrap()
            .display()
            .to_string()
    );

    let (status, got) = srv.get(&format!("/api/v1/sessions/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(got["id"], id.as_str());
    let (status, list) = srv.get("/api/v1/sessions").await;
    assert_eq!(status, 200);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["id"], id.as_str());

    // The store's prefix lookup does not leak into the API: ids are exact.
    let (status, err) = srv.get(&format!("/api/v1/sessions/{}", &id[..10])).await;
    assert_eq!(status, 404, "{err}");
    assert_eq!(err["error_code"], "not_found");

    let (status, _) = srv
        .request("DELETE", &format!("/api/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, 204);
    let (status, err) = srv.get(&format!("/api/v1/sessions/{id}")).await;
    assert_eq!(status, 404);
    assert!(err["message"].as_str().unwrap().contains(&id), "{err}");
    assert!(srv.store.list_sessions(10).await.unwrap().is_empty());
    srv.shutdown().await;
}

#[tokio::test]
async fn a_message_runs_its_turn_and_returns_every_event() {
    let mut srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("read.yaml", READ_THEN_ANSWER), "react")
        .await;
    let (status, turn) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "explain add"}),
        )
        .await;
    assert_eq!(status, 200, "{turn}");
    assert_eq!(turn["status"], "completed");
    assert_eq!(turn["final_text"], "add returns a + b.");
    assert_eq!(turn["phase_events"], json!([]), "react has no phases");
    let events = turn["events"].as_array().unwrap();
    let t = types(events);
    assert_eq!(t.first().map(String::as_str), Some("session_started"));
    assert_eq!(t.last().map(String::as_str), Some("turn_finished"));
    assert!(t.contains(&"tool_call".to_string()), "{t:?}");
    assert!(t.contains(&"assistant_delta".to_string()), "{t:?}");
    assert_eq!(events.last().unwrap()["status"], "completed");
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let result = events.iter().find(|e| e["type"] == "tool_result").unwrap();
    assert!(
        result["content"].as_str().unwrap().contains("a + b"),
        "{result}"
    );

    // The session now has its task; the stored events are exactly the returned ones.
    let (_, session) = srv.get(&format!("/api/v1/sessions/{id}")).await;
    assert_eq!(session["task"], "explain add");
    assert_eq!(session["status"], "completed");
    assert!(session["usage"]["requests"].as_u64().unwrap() >= 2);
    let (status, stored) = srv.get(&format!("/api/v1/sessions/{id}/events")).await;
    assert_eq!(status, 200);
    assert_eq!(&stored, &turn["events"]);
    let (_, tail) = srv
        .get(&format!("/api/v1/sessions/{id}/events?since_seq=3"))
        .await;
    assert_eq!(tail.as_array().unwrap().len(), events.len() - 3);
    assert_eq!(tail[0]["seq"], 4);

    // A follow-up continues the session and its numbering.
    let (status, next) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "is it used elsewhere?"}),
        )
        .await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["final_text"], "It is used nowhere else.");
    assert_eq!(next["events"][0]["type"], "session_resumed");
    assert_eq!(next["events"][0]["seq"], events.len() as u64 + 1);
    srv.shutdown().await;
}

#[tokio::test]
async fn bad_requests_get_json_errors_with_fitting_status_codes() {
    let mut srv = TestServer::start().await;
    let script = srv.script("read.yaml", READ_THEN_ANSWER);
    let id = srv.create_session(&script, "react").await;
    // (method, path, body, content type, status, error code)
    type Case<'a> = (&'a str, String, Option<&'a str>, &'a str, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/api/v1/sessions".into(),
            Some("{not json"),
            "application/json",
            400,
            "invalid_json",
        ),
        (
            "POST",
            "/api/v1/sessions".into(),
            Some(r#"{"workspace": 3}"#),
            "application/json",
            422,
            "bad_request",
        ),
        (
            "POST",
            "/api/v1/sessions".into(),
            Some(r#"{"colour": "red"}"#),
            "application/json",
            422,
            "bad_request",
        ),
        (
            "POST",
            "/api/v1/sessions".into(),
            Some(r#"{"execution_mode": "yolo"}"#),
            "application/json",
            422,
            "bad_request",
        ),
        (
            "POST",
            "/api/v1/sessions".into(),
            Some(r#"{}"#),
            "text/plain",
            415,
            "unsupported_media_type",
        ),
        (
            "POST",
            "/api/v1/sessions".into(),
            Some(r#"{"workspace": "definitely/not/here"}"#),
            "application/json",
            400,
            "bad_request",
        ),
        (
            "POST",
            "/api/v1/sessions".into(),
            Some(r#"{"provider": "scripted", "script": "missing.yaml"}"#),
            "application/json",
            422,
            "provider_error",
        ),
        (
            "POST",
            "/api/v1/sessions".into(),
            Some(r#"{"provider": "nope"}"#),
            "application/json",
            422,
            "provider_error",
        ),
        (
            "POST",
            format!("/api/v1/sessions/{id}/messages"),
            Some(r#"{"content": "  "}"#),
            "application/json",
            400,
            "bad_request",
        ),
        (
            "POST",
            format!("/api/v1/sessions/{id}/messages"),
            Some(r#"{"text": "hi"}"#),
            "application/json",
            422,
            "bad_request",
        ),
        (
            "POST",
            "/api/v1/sessions/nope/messages".into(),
            Some(r#"{"content": "hi"}"#),
            "application/json",
            404,
            "not_found",
        ),
        (
            "GET",
            "/api/v1/sessions/nope/events".into(),
            None,
            "",
            404,
            "not_found",
        ),
        (
            "GET",
            format!("/api/v1/sessions/{id}/events?since_seq=minus"),
            None,
            "",
            400,
            "bad_request",
        ),
        (
            "POST",
            format!("/api/v1/sessions/{id}/cancel"),
            None,
            "",
            409,
            "no_turn_running",
        ),
        (
            "GET",
            "/api/v1/nothing-here".into(),
            None,
            "",
            404,
            "not_found",
        ),
        (
            "PUT",
            "/api/v1/sessions".into(),
            None,
            "",
            405,
            "method_not_allowed",
        ),
        (
            "GET",
            format!("/api/v1/sessions/{id}/ws"),
            None,
            "",
            400,
            "bad_request",
        ),
    ];
    for (method, path, body, content_type, status, code) in cases {
        let mut headers = srv.auth_headers();
        if !content_type.is_empty() {
            headers.push(("Content-Type".to_string(), content_type.to_string()));
        }
        let (got, _, text) = srv.raw(method, &path, &headers, body).await;
        let json: Value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{method} {path}: not JSON: {text}"));
        assert_eq!(got, status, "{method} {path} {body:?}: {text}");
        assert_eq!(json["error_code"], code, "{method} {path} {body:?}: {text}");
        assert!(
            json["message"].as_str().is_some_and(|m| m.len() > 10),
            "{method} {path}: the message explains: {text}"
        );
    }

    // A body over the limit is refused before it is read.
    let huge = format!(
        r#"{{"content": "{}"}}"#,
        "x".repeat(keel_server::MAX_BODY_BYTES + 10)
    );
    let (status, _, text) = srv
        .raw(
            "POST",
            &format!("/api/v1/sessions/{id}/messages"),
            &[
                ("Content-Type".into(), "application/json".into()),
                srv.auth_headers()[0].clone(),
            ],
            Some(&huge),
        )
        .await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("payload_too_large"), "{text}");
    srv.shutdown().await;
}

#[tokio::test]
async fn a_second_message_while_a_turn_runs_is_a_conflict_and_cancel_ends_the_turn() {
    let mut srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("slow.yaml", SLOW), "react")
        .await;
    let path = format!("/api/v1/sessions/{id}/messages");
    let first = {
        let addr = srv.addr;
        let token = srv.token.clone().unwrap();
        let path = path.clone();
        tokio::spawn(async move {
            let probe = Probe { addr, token };
            probe.post(&path, json!({"content": "think"})).await
        })
    };
    // Wait until the model request is under way (its scripted turn taken).
    let mut running = false;
    for _ in 0..200 {
        let (_, s) = srv.get(&format!("/api/v1/sessions/{id}")).await;
        let (_, events) = srv.get(&format!("/api/v1/sessions/{id}/events")).await;
        let started = events
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["type"] == "turn_started"));
        if s["turn_running"] == true && started {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(running, "the turn started");
    // turn_started precedes the request by a few instructions; leave them time.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, err) = srv.post(&path, json!({"content": "again"})).await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error_code"], "turn_running");
    assert!(err["message"].as_str().unwrap().contains("cancel"), "{err}");
    let (status, err) = srv
        .request("DELETE", &format!("/api/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, 409, "{err}");

    let (status, body) = srv
        .request("POST", &format!("/api/v1/sessions/{id}/cancel"), None)
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, turn) = tokio::time::timeout(Duration::from_secs(10), first)
        .await
        .expect("the cancelled turn ends quickly")
        .unwrap();
    assert_eq!(status, 200, "{turn}");
    assert_eq!(turn["status"], "cancelled");
    assert_eq!(turn["error"]["error_code"], "cancelled");
    let last = turn["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["type"], "turn_finished");
    assert_eq!(last["status"], "cancelled");

    // The session takes messages again.
    let (status, turn) = srv.post(&path, json!({"content": "go on"})).await;
    assert_eq!(status, 200, "{turn}");
    assert_eq!(turn["status"], "completed");
    assert_eq!(turn["final_text"], "Second turn.");
    srv.shutdown().await;
}

/// A second client on the same server (for requests made from spawned tasks).
struct Probe {
    addr: std::net::SocketAddr,
    token: String,
}

impl Probe {
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let body = body.to_string();
        let mut s = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            self.token,
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.unwrap();
        let text = String::from_utf8_lossy(&raw).to_string();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }
}

const ASKS: &str = r#"
turns:
  - text: "Two databases are configured."
    tool_calls:
      - name: ask_user
        arguments: {question: "Which database should the migration target?"}
  - text: "Wrote the Postgres migration."
"#;

#[tokio::test]
async fn blockers_are_listed_answered_and_delivered_with_the_next_message() {
    let mut srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("asks.yaml", ASKS), "react")
        .await;
    let (_, turn) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "write the migration"}),
        )
        .await;
    assert_eq!(turn["status"], "blocked", "{turn}");
    let blocker_id = turn["blocker"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        turn["blocker"]["question"],
        "Which database should the migration target?"
    );

    let (status, open) = srv.get(&format!("/api/v1/sessions/{id}/blockers")).await;
    assert_eq!(status, 200);
    assert_eq!(open.as_array().unwrap().len(), 1);
    assert_eq!(open[0]["id"], blocker_id.as_str());
    assert_eq!(open[0]["status"], "open");

    let answer = format!("/api/v1/sessions/{id}/blockers/{blocker_id}/answer");
    let (status, err) = srv.post(&answer, json!({"answer": " "})).await;
    assert_eq!(
        (status, err["error_code"].as_str()),
        (400, Some("bad_request"))
    );
    let (status, err) = srv
        .post(
            &format!("/api/v1/sessions/{id}/blockers/nope/answer"),
            json!({"answer": "x"}),
        )
        .await;
    assert_eq!(
        (status, err["error_code"].as_str()),
        (404, Some("not_found"))
    );
    let (status, answered) = srv.post(&answer, json!({"answer": "Postgres 16"})).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["status"], "answered");
    assert_eq!(answered["answer"], "Postgres 16");
    let (_, open) = srv.get(&format!("/api/v1/sessions/{id}/blockers")).await;
    assert_eq!(open, json!([]), "answered blockers are not open");

    let (_, turn) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "go ahead"}),
        )
        .await;
    assert_eq!(turn["status"], "completed", "{turn}");
    assert_eq!(
        turn["events"][0]["answered_blockers"][0],
        blocker_id.as_str()
    );
    let (_, all) = srv
        .get(&format!("/api/v1/sessions/{id}/blockers?all=true"))
        .await;
    assert_eq!(all[0]["status"], "delivered");
    srv.shutdown().await;
}

const ESCAPES: &str = r#"
turns:
  - text: "Reading outside."
    tool_calls:
      - name: read_file
        arguments: {path: "../secret.txt"}
      - name: read_file
        arguments: {path: "/etc/hostname"}
  - text: "Could not."
"#;

#[tokio::test]
async fn a_session_is_confined_to_its_workspace_as_on_the_cli() {
    let mut srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("escape.yaml", ESCAPES), "react")
        .await;
    let (_, turn) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "read the secret"}),
        )
        .await;
    let results: Vec<&Value> = turn["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 2, "{turn}");
    for r in results {
        assert_eq!(r["is_error"], true, "{r}");
        assert!(
            !r["content"]
                .as_str()
                .unwrap()
                .contains("outside the workspace"),
            "{r}"
        );
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn many_sessions_run_at_once() {
    let mut srv = TestServer::start().await;
    let script = srv.script("read.yaml", READ_THEN_ANSWER);
    let script = srv.workspace().join(script);
    let mut ids = Vec::new();
    // One running session per workspace: eight workspaces, eight turns at once.
    for i in 0..8 {
        let ws = srv.another_workspace(&format!("ws{i}"));
        ids.push(srv.create_session_in(&ws, &script, "react").await);
    }
    let addr = srv.addr;
    let token = srv.token.clone().unwrap();
    let turns: Vec<_> = ids
        .iter()
        .map(|id| {
            let path = format!("/api/v1/sessions/{id}/messages");
            let token = token.clone();
            tokio::spawn(async move {
                Probe { addr, token }
                    .post(&path, json!({"content": "explain"}))
                    .await
            })
        })
        .collect();
    for t in turns {
        let (status, turn) = t.await.unwrap();
        assert_eq!(status, 200, "{turn}");
        assert_eq!(turn["status"], "completed", "{turn}");
    }
    for id in &ids {
        let events = srv.store.events(id, 0).await.unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
        assert!(events.iter().all(|e| &e.session_id == id));
    }
    srv.shutdown().await;
}

/// A second session's turn in a workspace where another session's turn runs is refused with
/// 409 `workspace_busy`, naming the running session; it runs once that one has finished.
#[tokio::test]
async fn a_turn_in_a_busy_workspace_is_refused_naming_the_running_session() {
    let mut srv = TestServer::start().await;
    let slow = srv.script(
        "slow.yaml",
        "turns:\n  - text: \"slow\"\n    delay_ms: 1500\n",
    );
    let quick = srv.script("quick.yaml", "turns:\n  - text: \"quick\"\n");
    let first = srv.create_session(&slow, "react").await;
    let second = srv.create_session(&quick, "react").await;
    let (addr, token) = (srv.addr, srv.token.clone().unwrap());
    let path = format!("/api/v1/sessions/{first}/messages");
    let running = tokio::spawn(async move {
        Probe { addr, token }
            .post(&path, json!({"content": "take your time"}))
            .await
    });
    // Wait until the first turn holds the workspace.
    for _ in 0..200 {
        if srv.store.last_seq(&first).await.unwrap() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (status, body) = srv
        .post(
            &format!("/api/v1/sessions/{second}/messages"),
            json!({"content": "me too"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error_code"], "workspace_busy", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains(&first),
        "names the running session: {body}"
    );
    let (status, done) = running.await.unwrap();
    assert_eq!((status, done["status"].as_str()), (200, Some("completed")));
    let (status, turn) = srv
        .post(
            &format!("/api/v1/sessions/{second}/messages"),
            json!({"content": "me too"}),
        )
        .await;
    assert_eq!(
        (status, turn["status"].as_str()),
        (200, Some("completed")),
        "{turn}"
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn the_openapi_document_describes_every_endpoint() {
    let mut srv = TestServer::start().await;
    let (status, doc) = srv.get("/api/v1/openapi.json").await;
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{doc}");
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/api/v1/sessions", "post"),
        ("/api/v1/sessions", "get"),
        ("/api/v1/sessions/{id}", "get"),
        ("/api/v1/sessions/{id}", "delete"),
        ("/api/v1/sessions/{id}/messages", "post"),
        ("/api/v1/sessions/{id}/cancel", "post"),
        ("/api/v1/sessions/{id}/events", "get"),
        ("/api/v1/sessions/{id}/events/stream", "get"),
        ("/api/v1/sessions/{id}/ws", "get"),
        ("/api/v1/sessions/{id}/blockers", "get"),
        ("/api/v1/sessions/{id}/blockers/{blocker_id}/answer", "post"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} missing"
        );
    }
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for s in [
        "CreateSessionRequest",
        "SessionView",
        "MessageResponse",
        "ErrorBody",
        "ExecutionMode",
    ] {
        assert!(schemas.contains_key(s), "schema {s} missing");
    }
    let mode = &schemas["ExecutionMode"]["enum"];
    assert_eq!(mode, &json!(["react", "plan_exec"]));
    let create = &schemas["CreateSessionRequest"]["properties"];
    for field in ["workspace", "provider", "model", "script", "execution_mode"] {
        assert!(create.get(field).is_some(), "{field}");
    }
    assert!(
        schemas["MessageResponse"]["properties"]
            .get("phase_events")
            .is_some()
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn the_ui_is_served_with_a_strict_content_security_policy() {
    let mut srv = TestServer::start().await;
    let (status, headers, body) = srv.raw("GET", "/", &[], None).await;
    assert_eq!(status, 200);
    assert!(body.contains("<script type=\"module\""), "{body}");
    let csp = headers
        .iter()
        .find(|(k, _)| k == "content-security-policy")
        .map(|(_, v)| v.clone());
    assert!(csp.is_some_and(|c| c.contains("script-src 'self'")));
    for name in keel_server::ui::names() {
        let (status, headers, _) = srv.raw("GET", &format!("/ui/{name}"), &[], None).await;
        assert_eq!(status, 200, "{name}");
        let ct = headers
            .iter()
            .find(|(k, _)| k == "content-type")
            .map(|(_, v)| v.clone())
            .unwrap();
        assert!(ct.starts_with("text/"), "{name}: {ct}");
    }
    let (status, _, body) = srv.raw("GET", "/ui/../Cargo.toml", &[], None).await;
    assert_eq!(status, 404, "{body}");
    srv.shutdown().await;
}
