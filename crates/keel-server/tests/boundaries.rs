//! The server's boundaries: a token on every address, sessions and scripts only under the
//! workspace roots, errors that never quote a file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use keel_store::Store;
use serde_json::json;

#[tokio::test]
async fn a_loopback_server_requires_its_token_too() {
    let mut srv = TestServer::start().await;
    let token = srv.token.clone().expect("a token is generated on loopback");
    assert_eq!(token.len(), 64);
    let (status, _, body) = srv.raw("GET", "/api/v1/sessions", &[], None).await;
    assert_eq!(
        status, 401,
        "another local process without the token: {body}"
    );
    let (status, _, _) = srv
        .raw(
            "POST",
            "/api/v1/sessions",
            &[("Content-Type".into(), "application/json".into())],
            Some(r#"{"workspace": "/", "script": "/etc/passwd"}"#),
        )
        .await;
    assert_eq!(status, 401);
    // The right token with its last character changed (never to itself).
    let last = if token.ends_with('0') { '1' } else { '0' };
    let wrong = [(
        "Authorization".to_string(),
        format!("Bearer {}{last}", &token[..63]),
    )];
    assert_eq!(
        srv.raw("GET", "/api/v1/sessions", &wrong, None).await.0,
        401
    );
    assert_eq!(srv.get("/api/v1/sessions").await.0, 200);
    srv.shutdown().await;
}

/// A token in a URL ends up in logs and browser history: it opens the two streams a browser
/// cannot send headers to (WebSocket, EventSource), and nothing else.
#[tokio::test]
async fn the_query_token_opens_only_the_streams() {
    let mut srv = TestServer::start().await;
    let token = srv.token.clone().expect("a token is generated on loopback");
    let id = srv
        .create_session(&srv.script("s.yaml", "turns:\n  - text: hi\n"), "react")
        .await;
    let q = format!("token={token}");
    for (method, path, body) in [
        ("GET", "/api/v1/sessions".to_string(), None),
        ("GET", format!("/api/v1/sessions/{id}"), None),
        ("GET", format!("/api/v1/sessions/{id}/events"), None),
        (
            "POST",
            format!("/api/v1/sessions/{id}/messages"),
            Some(r#"{"text":"hi"}"#),
        ),
        (
            "POST",
            format!("/api/v1/sessions/{id}/approve"),
            Some(r#"{"call_id":"c"}"#),
        ),
        ("DELETE", format!("/api/v1/sessions/{id}"), None),
        ("GET", "/api/v1/tasks".to_string(), None),
    ] {
        let json = [("Content-Type".to_string(), "application/json".to_string())];
        let (status, _, text) = srv.raw(method, &format!("{path}?{q}"), &json, body).await;
        assert_eq!(
            status, 401,
            "{method} {path}?token= must need the header: {text}"
        );
    }
    // The session is still there: the DELETE above did not go through.
    assert_eq!(srv.get(&format!("/api/v1/sessions/{id}")).await.0, 200);
    // The event stream (SSE) and the WebSocket accept it.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
        let req = format!(
            "GET /api/v1/sessions/{id}/events/stream?{q} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
            srv.host()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut head = [0u8; 64];
        let n = tokio::time::timeout(std::time::Duration::from_secs(20), s.read(&mut head))
            .await
            .expect("an answer within 20 s")
            .unwrap();
        let head = String::from_utf8_lossy(&head[..n]).to_string();
        assert!(
            head.starts_with("HTTP/1.1 200"),
            "the event stream takes ?token=: {head}"
        );
    }
    // The WebSocket handshake succeeds (a 401 would fail `connect_async`).
    let ws = srv.ws(&id, 0).await;
    drop(ws);
    srv.shutdown().await;
}

#[tokio::test]
async fn sessions_run_only_under_the_workspace_roots() {
    let mut srv = TestServer::start().await;
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/etc", srv.workspace().join("etc-link")).unwrap();
    let foreign = [
        "/".to_string(),
        "/etc".to_string(),
        elsewhere.path().display().to_string(),
        "../..".to_string(),
        "etc-link".to_string(),
        "/nonexistent/dir".to_string(),
    ];
    for workspace in foreign {
        let (status, body) = srv
            .post(
                "/api/v1/sessions",
                json!({"workspace": workspace, "provider": "scripted"}),
            )
            .await;
        assert_eq!(status, 403, "{workspace}: {body}");
        assert_eq!(body["error_code"], "outside_workspace_roots", "{body}");
    }
    let (status, body) = srv.get("/api/v1/sessions").await;
    assert_eq!((status, body.as_array().map(Vec::len)), (200, Some(0)));
    srv.shutdown().await;
}

#[tokio::test]
async fn scripts_come_only_from_the_roots_and_errors_never_quote_files() {
    let mut srv = TestServer::start().await;
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.yaml");
    std::fs::write(&secret, "root:$6$SECRET-HASH:19000:0:99999:7:::\n").unwrap();
    for script in [
        "/etc/shadow".to_string(),
        "/etc/passwd".to_string(),
        secret.display().to_string(),
        "../../../../../../etc/passwd".to_string(),
    ] {
        let (status, body) = srv
            .post(
                "/api/v1/sessions",
                json!({"provider": "scripted", "script": script}),
            )
            .await;
        assert_eq!(status, 403, "{script}: {body}");
        let text = body.to_string();
        assert!(
            !text.contains("root:") && !text.contains("SECRET-HASH"),
            "{script}: the file's content leaked: {text}"
        );
    }
    // A file under the roots that is not a script: refused without quoting it.
    let bad = srv.script("notes.yaml", "password: SECRET-IN-WORKSPACE: [\n");
    let (status, body) = srv
        .post(
            "/api/v1/sessions",
            json!({"provider": "scripted", "script": bad}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(!body.to_string().contains("SECRET-IN-WORKSPACE"), "{body}");
    // A project config that does not parse: the error names it without quoting it.
    std::fs::create_dir_all(srv.workspace().join(".keel")).unwrap();
    std::fs::write(
        srv.workspace().join(".keel/config.toml"),
        "api_key = SECRET-IN-CONFIG\n",
    )
    .unwrap();
    let ok = srv.script("ok.yaml", "turns:\n  - text: \"Hello.\"\n");
    let (status, body) = srv
        .post(
            "/api/v1/sessions",
            json!({"provider": "scripted", "script": ok}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("config.toml"),
        "{body}"
    );
    assert!(!body.to_string().contains("SECRET-IN-CONFIG"), "{body}");
    srv.shutdown().await;
}

#[tokio::test]
async fn a_session_stored_by_another_process_outside_the_roots_cannot_be_read_or_driven() {
    let mut srv = TestServer::start().await;
    // `keel run` in another directory left this session in the shared store.
    let elsewhere = tempfile::tempdir().unwrap();
    srv.store
        .create_session(&keel_store::NewSession {
            id: "20260101-000000-abcdef".into(),
            workspace: elsewhere.path().display().to_string(),
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
    let id = "20260101-000000-abcdef";
    let (status, body) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "go on"}),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error_code"], "outside_workspace_roots");
    let (status, body) = srv
        .post(&format!("/api/v1/sessions/{id}/undo"), json!({}))
        .await;
    assert_eq!(status, 403, "{body}");
    // Nor read, streamed or deleted: the server is confined to its roots, as its list is.
    for path in ["", "/events", "/blockers"] {
        let (status, body) = srv.get(&format!("/api/v1/sessions/{id}{path}")).await;
        assert_eq!(status, 403, "GET {path}: {body}");
        assert_eq!(body["error_code"], "outside_workspace_roots");
    }
    let (status, body) = srv
        .request("DELETE", &format!("/api/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        srv.store.get_session(id).await.is_ok(),
        "the other process's session is still stored"
    );
    srv.shutdown().await;
}
