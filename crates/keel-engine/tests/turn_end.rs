//! `SessionHandle::on_turn_end`: work done after a turn's run and before its `turn_finished`
//! (a queue worker pushing the session's checkout). Its events belong to the turn, before
//! `turn_finished`; its error fails the turn with the message, and the session's status says
//! failed too. A session whose workspace is a git source may continue in another directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use futures::future::BoxFuture;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides, TurnEnd};
use keel_engine::{CollectingSink, Emitter};
use keel_protocol::{EventKind, Op, SessionStatus};
use keel_store::{NewSession, RepoSource, SqliteStore, Store};

const SCRIPT: &str = r#"
turns:
  - text: "First."
  - text: "Second."
"#;

/// Emits a `workspace_pushed`, or fails with `error`.
struct End {
    error: Option<&'static str>,
}

impl TurnEnd for End {
    fn turn_ended<'a>(
        &'a self,
        emitter: &'a Emitter,
        status: SessionStatus,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            assert_eq!(status, SessionStatus::Completed);
            if let Some(e) = self.error {
                return Err(e.to_string());
            }
            emitter
                .emit(EventKind::WorkspacePushed {
                    url: "/srv/r.git".into(),
                    branch: "keel/x".into(),
                    commit: "abc".into(),
                })
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
    }
}

fn builder(store: Arc<SqliteStore>) -> SessionBuilder {
    SessionBuilder::isolated(store).adjust(Arc::new(|c: &mut keel_engine::Config| {
        c.index.codemap_tokens = 0;
    }))
}

#[tokio::test]
async fn the_turn_end_runs_before_turn_finished_and_its_error_fails_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let (ws_a, ws_b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&ws_a).unwrap();
    std::fs::create_dir_all(&ws_b).unwrap();
    std::fs::write(dir.path().join("s.yaml"), SCRIPT).unwrap();
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let b = builder(store.clone());
    let overrides = SessionOverrides {
        script: Some(dir.path().join("s.yaml")),
        ..SessionOverrides::default()
    };
    let engine = Arc::new(b.engine(&ws_a, &overrides).unwrap());
    let record = engine
        .create_repo_session(RepoSource::new("/srv/r.git", Some("main")).unwrap())
        .await
        .unwrap();
    assert_eq!(record.repo.as_ref().unwrap().git_ref, "main");

    // Turn 1 in workspace a: the end's event comes right before turn_finished.
    let sink = CollectingSink::new();
    let handle = SessionHandle::new(engine, record.id.clone(), vec![sink.clone()])
        .on_turn_end(Arc::new(End { error: None }));
    let OpAck::Turn(t) = handle.submit(Op::user_message("one")).await.unwrap() else {
        panic!("no turn");
    };
    let first = t.finished().await;
    assert_eq!(
        first.status,
        SessionStatus::Completed,
        "{:?}",
        first.message
    );
    let names: Vec<&str> = first.events.iter().map(|e| e.type_name()).collect();
    assert_eq!(
        names[names.len() - 2..],
        ["workspace_pushed", "turn_finished"]
    );

    // Turn 2 in another directory (another worker's checkout), its end failing.
    let engine = Arc::new(b.engine(&ws_b, &overrides).unwrap());
    let handle =
        SessionHandle::new(engine, record.id.clone(), Vec::new()).on_turn_end(Arc::new(End {
            error: Some("the push was rejected"),
        }));
    let OpAck::Turn(t) = handle.submit(Op::user_message("two")).await.unwrap() else {
        panic!("no turn");
    };
    let second = t.finished().await;
    assert_eq!(second.status, SessionStatus::Failed);
    assert_eq!(second.message.as_deref(), Some("the push was rejected"));
    let last = second.events.last().unwrap();
    assert!(matches!(
        &last.kind,
        EventKind::TurnFinished { status: SessionStatus::Failed, message: Some(m) } if m == "the push was rejected"
    ));
    let stored = store.get_session(&record.id).await.unwrap();
    assert_eq!(stored.status, SessionStatus::Failed);

    // A session without a git source still refuses another workspace.
    let plain = NewSession {
        id: "plain-1".into(),
        workspace: ws_a.display().to_string(),
        task: String::new(),
        provider: "scripted".into(),
        model: "scripted".into(),
        mode: "react".into(),
        base_url: String::new(),
        script: String::new(),
        repo: None,
    };
    store.create_session(&plain).await.unwrap();
    store
        .update_session("plain-1", SessionStatus::Completed, 0, &Default::default())
        .await
        .unwrap();
    let engine = Arc::new(b.engine(&ws_b, &overrides).unwrap());
    let handle = SessionHandle::new(engine, "plain-1", Vec::new());
    let err = handle.submit(Op::user_message("x")).await.unwrap_err();
    assert!(err.to_string().contains("works in"), "{err}");
}
