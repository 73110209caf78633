//! Skills through real sessions: `$name` in the task and in a follow-up message (the path the
//! CLI, chat, REST and WebSocket all take), the `skill` tool for model skills, and a skill's
//! tool restriction refusing another tool with a message naming the skill — all in the tail,
//! with the head unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_engine::{Config, EngineBuilder, RunOptions};
use keel_llm::scripted::ScriptedProvider;
use keel_store::SqliteStore;

fn skill(root: &std::path::Path, dir: &str, text: &str) {
    std::fs::create_dir_all(root.join(dir)).unwrap();
    std::fs::write(root.join(dir).join("SKILL.md"), text).unwrap();
}

#[tokio::test]
async fn dollar_names_the_skill_tool_and_tool_restriction() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    skill(
        r,
        ".keel/skills/audit",
        "---\nname: audit\ndescription: Audit only\nactivation: manual\ntools: [read_file, grep]\n---\nAUDIT-BODY: never edit.\n",
    );
    skill(
        r,
        ".claude/skills/pdf",
        "---\nname: pdf\ndescription: Fill PDF forms\n---\nPDF-BODY\n",
    );
    skill(
        r,
        ".agents/skills/notes",
        "---\nname: notes\ndescription: Release notes\nactivation: manual\n---\nNOTES-BODY\n",
    );
    std::fs::write(r.join("a.txt"), "hello\n").unwrap();
    let mut config = Config::default();
    config.verify.enabled = false;
    let provider = ScriptedProvider::from_yaml(
        "turns:\n  - tool_calls:\n      - name: skill\n        arguments: {name: pdf}\n  - tool_calls:\n      - name: create_file\n        arguments: {path: b.txt, content: x}\n      - name: read_file\n        arguments: {path: a.txt}\n  - text: done\n  - text: notes done\n",
    )
    .unwrap();
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let engine = EngineBuilder::new(config, r)
        .provider(Arc::new(provider.clone()))
        .store(store)
        .build()
        .unwrap();
    let out = engine
        .run("check the code, $audit please", RunOptions::default())
        .await
        .unwrap();
    let requests = provider.requests();
    let first = serde_json::to_string(&requests[0].messages).unwrap();
    assert!(first.contains("AUDIT-BODY"), "$audit in the task loads it");
    assert!(
        first.contains("- pdf: Fill PDF forms"),
        "model skills are listed"
    );
    assert!(!first.contains("PDF-BODY") && !first.contains("NOTES-BODY"));
    let second = serde_json::to_string(&requests[1].messages).unwrap();
    assert!(
        second.contains("PDF-BODY"),
        "the skill tool loads a model skill"
    );
    let third = serde_json::to_string(&requests[2].messages).unwrap();
    assert!(
        third.contains("skill `audit` is active and restricts tools to read_file, grep; `create_file` is not one of them"),
        "{third}"
    );
    assert!(!r.join("b.txt").exists());
    assert!(third.contains("hello"), "read_file is allowed");
    // A follow-up message names a manual skill (the REST/WebSocket message path).
    engine
        .continue_session(&out.session_id, "now $notes", RunOptions::default())
        .await
        .unwrap();
    let requests = provider.requests();
    let last = serde_json::to_string(&requests.last().unwrap().messages).unwrap();
    assert_eq!(last.matches("NOTES-BODY").count(), 1);
    assert_eq!(last.matches("AUDIT-BODY").count(), 1, "not loaded twice");
    assert!(requests.iter().all(|q| q.system == requests[0].system));
    assert!(!requests[0].system.contains("pdf"));
}

/// `keel chat` submits the composer's text as `Op::UserMessage` on a `SessionHandle` (as the
/// server does): `$name` there loads the manual skill into the first message, once.
#[tokio::test]
async fn dollar_name_in_a_chat_message_on_a_session_handle_loads_the_skill() {
    use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides};
    use keel_protocol::Op;
    use keel_store::Store;

    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    skill(
        &ws,
        ".keel/skills/notes",
        "---\nname: notes\ndescription: Release notes\nactivation: manual\n---\nNOTES-BODY\n",
    );
    let ws = ws.canonicalize().unwrap();
    std::fs::write(dir.path().join("s.yaml"), "turns:\n  - text: done\n").unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let b = SessionBuilder::isolated(store.clone()).adjust(Arc::new(|c: &mut Config| {
        c.index.codemap_tokens = 0;
        c.verify.enabled = false;
    }));
    let overrides = SessionOverrides {
        script: Some(dir.path().join("s.yaml")),
        ..SessionOverrides::default()
    };
    let engine = Arc::new(b.engine(&ws, &overrides).unwrap());
    let (handle, record) = SessionHandle::create(engine, vec![]).await.unwrap();
    match handle
        .submit(Op::user_message("write the notes, $notes"))
        .await
        .unwrap()
    {
        OpAck::Turn(t) => {
            t.finished().await;
        }
        other => panic!("expected a turn, got {other:?}"),
    }
    let transcript = serde_json::to_string(&store.messages(&record.id).await.unwrap()).unwrap();
    assert_eq!(transcript.matches("NOTES-BODY").count(), 1, "{transcript}");
}
