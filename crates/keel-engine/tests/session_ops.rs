//! A session driven only through `Op`s, the way every front end drives one: message, blocker
//! answered, undo, a message refused during a turn, interrupt mid-tool, resume on a fresh
//! handle. Each turn ends with `turn_finished`; seq never skips or repeats.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_engine::CollectingSink;
use keel_engine::runtime::{
    OpAck, OpError, SessionBuilder, SessionHandle, SessionOverrides, TurnResult,
};
use keel_protocol::{EventKind, Op, SessionStatus};
use keel_store::{SqliteStore, Store};

const FIRST: &str = r#"
turns:
  - text: "Writing the notes."
    tool_calls:
      - {name: create_file, arguments: {path: notes.txt, content: "one\n"}}
  - tool_calls:
      - {name: ask_user, arguments: {question: "Plain text or Markdown?"}}
  - text: "Done with plain text."
  - text: "Running the slow check."
    tool_calls:
      - {name: run_command, arguments: {command: "sleep 30"}}
  - text: "never reached"
"#;

const SECOND: &str = r#"
turns:
  - text: "Nothing else to do."
"#;

fn builder(store: Arc<SqliteStore>) -> SessionBuilder {
    SessionBuilder::isolated(store).adjust(Arc::new(|c: &mut keel_engine::Config| {
        c.index.codemap_tokens = 0;
    }))
}

fn git_repo(root: &Path) {
    assert!(
        keel_snapshot::git_available(),
        "this test needs git (CI installs it)"
    );
    std::fs::write(root.join("README.md"), "notes live here\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "README.md"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    ] {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }
}

async fn turn(handle: &SessionHandle, op: Op) -> TurnResult {
    match handle.submit(op).await.unwrap() {
        OpAck::Turn(t) => t.finished().await,
        other => panic!("expected a turn, got {other:?}"),
    }
}

fn types(result: &TurnResult) -> Vec<&'static str> {
    result.events.iter().map(|e| e.type_name()).collect()
}

#[tokio::test]
async fn a_session_driven_only_through_ops() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    git_repo(&ws);
    let ws = ws.canonicalize().unwrap();
    std::fs::write(dir.path().join("first.yaml"), FIRST).unwrap();
    std::fs::write(dir.path().join("second.yaml"), SECOND).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let b = builder(store.clone());
    let overrides = SessionOverrides {
        script: Some(dir.path().join("first.yaml")),
        ..SessionOverrides::default()
    };
    let sink = CollectingSink::new();
    let engine = Arc::new(b.engine(&ws, &overrides).unwrap());
    let (handle, record) = SessionHandle::create(engine, vec![sink.clone()])
        .await
        .unwrap();
    let handle = Arc::new(handle.rebuild_with(b.clone(), &ws, overrides));
    assert_eq!(record.status, SessionStatus::Idle);

    // An empty first message is refused; nothing is recorded.
    let err = handle.submit(Op::user_message("  ")).await.unwrap_err();
    assert!(matches!(err, OpError::Invalid(_)), "{err}");
    assert_eq!(store.last_seq(&record.id).await.unwrap(), 0);

    // 1. A message: the file is written, then the model asks a question → blocked.
    let first = turn(&handle, Op::user_message("write the notes")).await;
    assert_eq!(first.status, SessionStatus::Blocked, "{:?}", first.message);
    let t = types(&first);
    assert_eq!(t.first(), Some(&"session_started"));
    assert_eq!(
        &t[t.len() - 3..],
        ["blocker", "session_finished", "turn_finished"]
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "one\n"
    );
    let blocker = first.outcome.as_ref().unwrap().blocker.clone().unwrap();

    // Approving a call nobody asked about is refused, and says so.
    let err = handle
        .submit(Op::Approve {
            call_id: "nope".into(),
            scope: Default::default(),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, OpError::NoPendingApproval(_)), "{err}");

    // 2. The answer continues the session; the model reads it.
    let answered = turn(
        &handle,
        Op::AnswerBlocker {
            id: blocker.id.clone(),
            answer: "plain text".into(),
        },
    )
    .await;
    assert_eq!(
        answered.status,
        SessionStatus::Completed,
        "{:?}",
        answered.message
    );
    match &answered.events[0].kind {
        EventKind::SessionResumed {
            answered_blockers, ..
        } => {
            assert_eq!(answered_blockers, &vec![blocker.id.clone()]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(types(&answered).last(), Some(&"turn_finished"));

    // 3. Undo restores the workspace as it was before the write, and is recorded.
    let OpAck::Undone(report) = handle.submit(Op::Undo { to_turn: None }).await.unwrap() else {
        panic!("no undo report");
    };
    assert_eq!(report.session, record.id);
    assert!(!ws.join("notes.txt").exists(), "the write was undone");
    assert!(
        sink.events()
            .iter()
            .any(|e| matches!(e.kind, EventKind::Undo { .. }))
    );

    // 4. Interrupt mid-tool; a message during the turn is refused by the one rule.
    let OpAck::Turn(ticket) = handle
        .submit(Op::user_message("run the slow check"))
        .await
        .unwrap()
    else {
        panic!("no turn");
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !sink
        .events()
        .iter()
        .any(|e| matches!(&e.kind, EventKind::ToolCall { name, .. } if name == "run_command"))
    {
        assert!(Instant::now() < deadline, "the tool never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let err = handle
        .submit(Op::user_message("and another"))
        .await
        .unwrap_err();
    assert!(matches!(err, OpError::TurnRunning(_)), "{err}");
    let err = handle.submit(Op::Undo { to_turn: None }).await.unwrap_err();
    assert!(matches!(err, OpError::TurnRunning(_)), "{err}");
    let started = Instant::now();
    assert!(matches!(
        handle.submit(Op::Interrupt).await.unwrap(),
        OpAck::Done
    ));
    let interrupted = ticket.finished().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the tool was not stopped"
    );
    assert_eq!(interrupted.status, SessionStatus::Cancelled);
    assert_eq!(types(&interrupted).last(), Some(&"turn_finished"));
    let err = handle.submit(Op::Interrupt).await.unwrap_err();
    assert!(matches!(err, OpError::NoTurnRunning(_)), "{err}");

    // 5. Shut the handle down; a fresh one (another process, say) resumes the session from
    // its record: same provider and mode, seq continues.
    handle.submit(Op::Shutdown).await.unwrap();
    assert!(matches!(
        handle.submit(Op::user_message("hello?")).await.unwrap_err(),
        OpError::ShuttingDown
    ));
    let stored = store.get_session(&record.id).await.unwrap();
    let again = SessionOverrides::from_record(&stored).with(&SessionOverrides {
        script: Some(dir.path().join("second.yaml")),
        ..SessionOverrides::default()
    });
    let engine = Arc::new(b.engine(&ws, &again).unwrap());
    let resumed = SessionHandle::new(engine, record.id.clone(), vec![sink.clone()]);
    let last = turn(&resumed, Op::user_message("anything else?")).await;
    assert_eq!(last.status, SessionStatus::Completed, "{:?}", last.message);
    assert!(matches!(
        last.events[0].kind,
        EventKind::SessionResumed { .. }
    ));

    // Everything published was stored, in order, with no gap; four turns, four turn_finished.
    let stored = store.events(&record.id, 0).await.unwrap();
    assert_eq!(stored, sink.events());
    let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=stored.len() as u64).collect::<Vec<_>>());
    let finished = stored
        .iter()
        .filter(|e| e.type_name() == "turn_finished")
        .count();
    assert_eq!(finished, 4);
    // Each turn is one run: its events, turn_finished included, share a run id no other
    // turn has; the undo is a run of its own.
    let mut runs: Vec<&str> = Vec::new();
    for e in &stored {
        assert!(e.run_id.starts_with("r-"), "{e:?}");
        assert_eq!(e.parent_run_id, None);
        if runs.last() != Some(&e.run_id.as_str()) {
            assert!(
                !runs.contains(&e.run_id.as_str()),
                "a run's events are contiguous"
            );
            runs.push(&e.run_id);
        }
    }
    assert_eq!(runs.len(), 5, "four turns and one undo");
    for t in [&first, &answered, &interrupted, &last] {
        assert!(t.events.iter().all(|e| e.run_id == t.events[0].run_id));
    }
}

#[tokio::test]
async fn set_model_and_set_mode_rebuild_between_turns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.yaml"), SECOND).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let b = builder(store.clone());
    let overrides = SessionOverrides {
        script: Some(dir.path().join("s.yaml")),
        ..SessionOverrides::default()
    };
    let ws = dir.path().canonicalize().unwrap();
    let engine = Arc::new(b.engine(&ws, &overrides).unwrap());
    let (handle, record) = SessionHandle::create(engine, vec![]).await.unwrap();
    let handle = handle.rebuild_with(b.clone(), &ws, overrides);

    // Before the first message the mode can change; it is recorded.
    handle
        .submit(Op::SetMode {
            mode: "plan_exec".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        store.get_session(&record.id).await.unwrap().mode,
        "plan_exec"
    );
    assert!(handle.engine().await.phase_policy().is_some());
    handle
        .submit(Op::SetMode {
            mode: "react".into(),
        })
        .await
        .unwrap();
    let err = handle
        .submit(Op::SetMode {
            mode: "yolo".into(),
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown mode"), "{err}");

    let done = turn(&handle, Op::user_message("hi")).await;
    assert_eq!(done.status, SessionStatus::Completed);
    // Once started, a session keeps its mode.
    let err = handle
        .submit(Op::SetMode {
            mode: "plan_exec".into(),
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("keeps its mode"), "{err}");
    // A model switch rebuilds the engine between turns (the scripted provider answers to
    // any model name, so the record still says `scripted`).
    let before = handle.engine().await;
    handle
        .submit(Op::SetModel {
            model: "other-script-model".into(),
        })
        .await
        .unwrap();
    assert!(!Arc::ptr_eq(&before, &handle.engine().await));
    let err = handle
        .submit(Op::SetModel { model: " ".into() })
        .await
        .unwrap_err();
    assert!(matches!(err, OpError::Invalid(_)), "{err}");
    // A handle given a ready-made engine cannot switch.
    let plain = SessionHandle::new(handle.engine().await, record.id.clone(), vec![]);
    let err = plain
        .submit(Op::SetModel { model: "x".into() })
        .await
        .unwrap_err();
    assert!(matches!(err, OpError::Unsupported(_)), "{err}");
}
