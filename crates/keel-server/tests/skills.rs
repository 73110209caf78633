//! `$name` in a REST message and in a WebSocket `user_message` loads the named skill: the
//! engine parses it at submit time, so every front end behaves the same.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use keel_store::Store;
use serde_json::json;

const TWO_TURNS: &str = "turns:\n  - text: first\n  - text: second\n";

async fn transcript(srv: &TestServer, id: &str) -> String {
    serde_json::to_string(&srv.store.messages(id).await.unwrap()).unwrap()
}

#[tokio::test]
async fn dollar_name_in_rest_and_websocket_messages_loads_the_skill() {
    let mut srv = TestServer::start().await;
    for (name, body) in [("notes", "NOTES-BODY"), ("audit", "AUDIT-BODY")] {
        let dir = srv.workspace().join(".keel/skills").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {name}\nactivation: manual\n---\n{body}\n"),
        )
        .unwrap();
    }
    let id = srv
        .create_session(&srv.script("two.yaml", TWO_TURNS), "react")
        .await;
    let (status, turn) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "summarize the release with $notes"}),
        )
        .await;
    assert_eq!(status, 200, "{turn}");
    let t = transcript(&srv, &id).await;
    assert!(t.contains("NOTES-BODY") && !t.contains("AUDIT-BODY"), "{t}");

    let seen = turn["events"].as_array().unwrap().len() as u64;
    let mut ws = srv.ws(&id, seen).await;
    ws.send(json!({"type": "user_message", "content": "now $keel:audit it"}))
        .await;
    let events = ws.until_turn_finished().await;
    assert_eq!(events.last().unwrap()["status"], "completed", "{events:?}");
    let t = transcript(&srv, &id).await;
    assert_eq!(t.matches("AUDIT-BODY").count(), 1, "{t}");
    assert_eq!(t.matches("NOTES-BODY").count(), 1);
    srv.shutdown().await;
}
