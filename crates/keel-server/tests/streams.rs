//! The live endpoints: WebSocket turns and events, reconnection without gaps or duplicates,
//! SSE, the same events as REST, access rules on upgrades, and shutdown that loses nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use futures::StreamExt;
use keel_store::Store;
use serde_json::{Value, json};

const READ_THEN_ANSWER: &str = r#"
turns:
  - text: "Reading the library to see what add does."
    tool_calls:
      - name: read_file
        arguments: {path: "src/lib.rs"}
  - text: "add returns a + b."
  - text: "It is used nowhere else."
"#;

/// Several model turns with pauses, so a client can drop out in the middle.
const PAUSED: &str = r#"
turns:
  - text: "Step one."
    tool_calls:
      - name: list_files
        arguments: {}
  - text: "Step two."
    delay_ms: 150
    tool_calls:
      - name: read_file
        arguments: {path: "src/lib.rs"}
  - text: "Step three."
    delay_ms: 150
    tool_calls:
      - name: list_files
        arguments: {}
  - text: "Done after three steps."
    delay_ms: 150
"#;

#[tokio::test]
async fn a_websocket_turn_streams_every_event_and_ends_with_turn_finished() {
    let mut srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("read.yaml", READ_THEN_ANSWER), "react")
        .await;
    let mut ws = srv.ws(&id, 0).await;
    ws.send(json!({"type": "user_message", "content": "explain add"}))
        .await;
    let events = ws.until_turn_finished().await;
    let t = types(&events);
    assert_eq!(t[0], "session_started");
    assert_eq!(t.last().unwrap(), "turn_finished");
    assert_eq!(events.last().unwrap()["status"], "completed");
    assert!(
        t.iter().filter(|t| *t == "assistant_delta").count() > 3,
        "text streams in pieces: {t:?}"
    );
    assert!(t.contains(&"tool_call".into()) && t.contains(&"tool_result".into()));
    let stored = srv.store.events(&id, 0).await.unwrap();
    let stored: Vec<Value> = stored
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(events, stored, "exactly the stored events, in order");

    // A second message on the same socket; a malformed one is refused without closing it.
    ws.send(json!({"type": "shout"})).await;
    let err = ws.next().await.unwrap();
    assert_eq!(err["type"], "request_error");
    assert_eq!(err["error_code"], "bad_request");
    assert!(err.get("seq").is_none());
    ws.send(json!({"type": "cancel"})).await;
    let err = ws.next().await.unwrap();
    assert_eq!(err["error_code"], "no_turn_running");
    ws.send(json!({"type": "user_message", "content": "used elsewhere?"}))
        .await;
    let more = ws.until_turn_finished().await;
    assert_eq!(more[0]["type"], "session_resumed");
    assert_eq!(more[0]["seq"], events.len() as u64 + 1);
    srv.shutdown().await;
}

#[tokio::test]
async fn a_message_while_a_turn_runs_is_refused_on_the_websocket_and_cancel_works() {
    let mut srv = TestServer::start().await;
    let slow = "turns:\n  - text: \"slow\"\n    delay_ms: 30000\n";
    let id = srv
        .create_session(&srv.script("slow.yaml", slow), "react")
        .await;
    let mut ws = srv.ws(&id, 0).await;
    ws.send(json!({"type": "user_message", "content": "think"}))
        .await;
    // Wait for the run to start.
    loop {
        let e = ws.next().await.unwrap();
        if e["type"] == "turn_started" {
            break;
        }
    }
    ws.send(json!({"type": "user_message", "content": "again"}))
        .await;
    let err = ws.next().await.unwrap();
    assert_eq!(err["type"], "request_error", "{err}");
    assert_eq!(err["error_code"], "turn_running");
    ws.send(json!({"type": "cancel"})).await;
    let rest = ws.until_turn_finished().await;
    let last = rest.last().unwrap();
    assert_eq!(last["type"], "turn_finished");
    assert_eq!(last["status"], "cancelled");
    assert!(types(&rest).contains(&"session_finished".to_string()));
    srv.shutdown().await;
}

#[tokio::test]
async fn reconnecting_with_since_seq_yields_every_event_exactly_once() {
    let mut srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("paused.yaml", PAUSED), "react")
        .await;
    let mut seen: Vec<u64> = Vec::new();
    let mut ws = srv.ws(&id, 0).await;
    ws.send(json!({"type": "user_message", "content": "three steps"}))
        .await;
    // Drop the connection several times mid-turn and come back where we left off.
    let mut finished = false;
    let mut reconnects = 0;
    for round in 0..50 {
        let take = 3 + round % 4;
        for _ in 0..take {
            let Some(e) = ws.next().await else { break };
            seen.push(e["seq"].as_u64().unwrap());
            if e["type"] == "turn_finished" {
                finished = true;
                break;
            }
        }
        if finished {
            break;
        }
        drop(ws);
        tokio::time::sleep(Duration::from_millis(40)).await;
        ws = srv.ws(&id, *seen.last().unwrap()).await;
        reconnects += 1;
    }
    assert!(finished, "the turn finished");
    assert!(
        reconnects >= 3,
        "the client dropped out mid-turn ({reconnects} times)"
    );
    let stored: Vec<u64> = srv
        .store
        .events(&id, 0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seen, stored, "every event once, in order");

    // A late subscriber from 0 gets the whole history, also exactly once.
    let mut late = srv.ws(&id, 0).await;
    let mut again = Vec::new();
    while again.len() < stored.len() {
        again.push(late.next().await.unwrap()["seq"].as_u64().unwrap());
    }
    assert_eq!(again, stored);
    srv.shutdown().await;
}

#[tokio::test]
async fn sse_streams_the_same_events_and_resumes_from_last_event_id() {
    let mut srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("read.yaml", READ_THEN_ANSWER), "react")
        .await;
    let (_, turn) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "explain add"}),
        )
        .await;
    let n = turn["events"].as_array().unwrap().len();
    let sse = sse_events(&srv, &id, &[("Last-Event-ID", "2")], n - 2).await;
    assert_eq!(sse.len(), n - 2);
    assert_eq!(sse[0].0, "3", "the id is the seq");
    let data: Vec<Value> = sse
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(data, turn["events"].as_array().unwrap()[2..].to_vec());
    srv.shutdown().await;
}

/// Reads `count` SSE events (`(id, data)`) from the session's stream.
async fn sse_events(
    srv: &TestServer,
    id: &str,
    headers: &[(&str, &str)],
    count: usize,
) -> Vec<(String, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let mut req = format!(
        "GET /api/v1/sessions/{id}/events/stream HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n",
        srv.host()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    for (k, v) in srv.auth_headers() {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = String::new();
    let mut chunk = [0u8; 8192];
    loop {
        let events = parse_sse(&buf);
        if events.len() >= count {
            return events;
        }
        let n = tokio::time::timeout(Duration::from_secs(20), s.read(&mut chunk))
            .await
            .expect("SSE data within 20 s")
            .unwrap();
        assert!(n > 0, "the stream ended early: {buf}");
        buf.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }
}

fn parse_sse(raw: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut id = String::new();
    for line in raw.lines() {
        // Chunked framing lines are not `id:`/`data:` lines; they are skipped.
        if let Some(v) = line.strip_prefix("id:") {
            id = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("data:")
            && !id.is_empty()
        {
            out.push((std::mem::take(&mut id), v.trim().to_string()));
        }
    }
    out
}

#[tokio::test]
async fn rest_and_websocket_produce_the_same_event_sequence() {
    let mut srv = TestServer::start().await;
    let script = srv.script("read.yaml", READ_THEN_ANSWER);
    let rest_id = srv.create_session(&script, "react").await;
    let (_, turn) = srv
        .post(
            &format!("/api/v1/sessions/{rest_id}/messages"),
            json!({"content": "explain add"}),
        )
        .await;
    let ws_id = srv.create_session(&script, "react").await;
    let mut ws = srv.ws(&ws_id, 0).await;
    ws.send(json!({"type": "user_message", "content": "explain add"}))
        .await;
    let streamed = ws.until_turn_finished().await;
    let a: Vec<Value> = turn["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(comparable)
        .collect();
    let b: Vec<Value> = streamed.iter().map(comparable).collect();
    assert_eq!(a, b);
    srv.shutdown().await;
}

#[tokio::test]
async fn a_foreign_origin_cannot_open_the_websocket() {
    let mut srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("read.yaml", READ_THEN_ANSWER), "react")
        .await;
    let url = srv.ws_url(&id, 0);
    let err = ws_with_headers(&url, &[("Origin", "https://evil.example")])
        .await
        .err()
        .expect("refused");
    match err {
        tokio_tungstenite::tungstenite::Error::Http(resp) => {
            assert_eq!(resp.status(), 403);
            let body =
                String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).to_string();
            assert!(body.contains("forbidden_origin"), "{body}");
        }
        other => panic!("expected an HTTP refusal, got {other}"),
    }
    // A DNS-rebinding page: its own host name pointing at 127.0.0.1.
    let err = ws_with_headers(
        &url,
        &[("Host", "evil.example"), ("Origin", "http://evil.example")],
    )
    .await
    .err()
    .expect("refused");
    assert!(matches!(err, tokio_tungstenite::tungstenite::Error::Http(r) if r.status() == 403));
    // The server's own page may.
    let own = format!("http://{}", srv.host());
    let mut ws = ws_with_headers(&url, &[("Origin", own.as_str())])
        .await
        .unwrap();
    ws.send(json!({"type": "cancel"})).await;
    assert_eq!(ws.next().await.unwrap()["error_code"], "no_turn_running");
    // Cross-site POSTs are refused too.
    let (status, _, body) = srv
        .raw(
            "POST",
            "/api/v1/sessions",
            &[
                ("Origin".into(), "https://evil.example".into()),
                ("Content-Type".into(), "application/json".into()),
            ],
            Some("{}"),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    srv.shutdown().await;
}

#[tokio::test]
async fn a_non_loopback_server_requires_its_token() {
    let mut srv = TestServer::start_with("0.0.0.0", None).await;
    let token = srv.token.clone().expect("a token was generated");
    assert_eq!(token.len(), 64);
    let (status, headers, body) = srv.raw("GET", "/api/v1/sessions", &[], None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("unauthorized"));
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "www-authenticate" && v == "Bearer")
    );
    let wrong = [(
        "Authorization".to_string(),
        format!("Bearer {}x", &token[..63]),
    )];
    assert_eq!(
        srv.raw("GET", "/api/v1/sessions", &wrong, None).await.0,
        401
    );
    // With the token everything works, the WebSocket included (token in the query).
    let (status, _) = srv.get("/api/v1/sessions").await;
    assert_eq!(status, 200);
    let id = srv
        .create_session(&srv.script("read.yaml", READ_THEN_ANSWER), "react")
        .await;
    let mut ws = srv.ws(&id, 0).await;
    ws.send(json!({"type": "user_message", "content": "explain"}))
        .await;
    assert_eq!(
        ws.until_turn_finished().await.last().unwrap()["status"],
        "completed"
    );
    let no_token = format!("ws://{}/api/v1/sessions/{id}/ws", srv.host());
    let err = ws_with_headers(&no_token, &[])
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, tokio_tungstenite::tungstenite::Error::Http(r) if r.status() == 401));
    // The page itself loads without the token (it asks for it).
    assert_eq!(srv.raw("GET", "/", &[], None).await.0, 200);
    srv.shutdown().await;

    // A configured token is used as given, and required even on loopback.
    let mut srv = TestServer::start_with("127.0.0.1", Some("a-configured-token-1234")).await;
    assert_eq!(srv.raw("GET", "/api/v1/sessions", &[], None).await.0, 401);
    assert_eq!(srv.get("/api/v1/sessions").await.0, 200);
    srv.shutdown().await;
}

#[tokio::test]
async fn shutdown_cancels_running_turns_and_loses_no_committed_event() {
    let mut srv = TestServer::start().await;
    let slow = "turns:\n  - text: \"Looking.\"\n    tool_calls:\n      - name: list_files\n        arguments: {}\n  - text: \"slow\"\n    delay_ms: 30000\n";
    let script = srv.script("slow.yaml", slow);
    let ws_id = srv.create_session(&script, "react").await;
    // One running session per workspace: the second runs in a workspace of its own.
    let other = srv.another_workspace("other");
    let rest_id = srv
        .create_session_in(&other, &srv.workspace().join(&script), "react")
        .await;
    let mut ws = srv.ws(&ws_id, 0).await;
    ws.send(json!({"type": "user_message", "content": "look"}))
        .await;
    let rest = {
        let addr = srv.addr;
        let token = srv.token.clone().unwrap();
        let path = format!("/api/v1/sessions/{rest_id}/messages");
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let body = json!({"content": "look"}).to_string();
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let req = format!(
                "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(req.as_bytes()).await.unwrap();
            let mut raw = Vec::new();
            s.read_to_end(&mut raw).await.unwrap();
            String::from_utf8_lossy(&raw).to_string()
        })
    };
    let mut received = Vec::new();
    // Both turns are in their slow model request.
    loop {
        let e = ws.next().await.unwrap();
        let second_request = e["type"] == "turn_started" && e["iteration"] == 2;
        received.push(e);
        if second_request {
            break;
        }
    }
    for _ in 0..100 {
        if srv.store.last_seq(&rest_id).await.unwrap() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let stopping = tokio::time::Instant::now();
    srv.shutdown().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "shutdown does not wait for the model"
    );

    // The WebSocket got every event up to turn_finished before the server closed it.
    while let Some(e) = ws.next().await {
        received.push(e);
    }
    let last = received.last().unwrap();
    assert_eq!(last["type"], "turn_finished", "{received:?}");
    assert_eq!(last["status"], "cancelled");
    let stored: Vec<Value> = srv
        .store
        .events(&ws_id, 0)
        .await
        .unwrap()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(received, stored);
    // The REST caller got its cancelled result.
    let response = rest.await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(r#""status":"cancelled""#), "{response}");
    for id in [&ws_id, &rest_id] {
        let events = srv.store.events(id, 0).await.unwrap();
        let kinds: BTreeSet<&str> = events.iter().map(|e| e.type_name()).collect();
        assert!(
            kinds.contains("session_finished") && kinds.contains("turn_finished"),
            "{kinds:?}"
        );
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
        let record = srv.store.get_session(id).await.unwrap();
        assert_eq!(record.status, keel_protocol::SessionStatus::Cancelled);
    }
}

#[tokio::test]
async fn a_deleted_session_closes_its_streams() {
    let mut srv = TestServer::start().await;
    let id = srv
        .create_session(&srv.script("read.yaml", READ_THEN_ANSWER), "react")
        .await;
    let mut ws = srv.ws(&id, 0).await;
    let (status, _) = srv
        .request("DELETE", &format!("/api/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, 204);
    let closed = tokio::time::timeout(Duration::from_secs(5), ws.socket.next())
        .await
        .unwrap();
    assert!(
        matches!(
            closed,
            None | Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_)))
        ),
        "{closed:?}"
    );
    srv.shutdown().await;
}
