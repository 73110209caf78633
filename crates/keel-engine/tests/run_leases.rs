//! The busy rule reads run leases: a session whose run holds a live lease (another process,
//! heartbeating) refuses a second handle; once that holder is dead (its lease expired) the
//! next handle takes the session over, and releases the lease when its turn ends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_engine::runtime::{OpAck, OpError, SessionBuilder, SessionHandle, SessionOverrides};
use keel_protocol::{Op, SessionStatus, Usage};
use keel_store::{SqliteStore, Store};

const SCRIPT: &str = "turns:\n  - text: \"Taken over and done.\"\n";

#[tokio::test]
async fn a_live_lease_refuses_a_second_handle_and_an_expired_one_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    std::fs::write(dir.path().join("s.yaml"), SCRIPT).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let builder =
        SessionBuilder::isolated(store.clone()).adjust(Arc::new(|c: &mut keel_engine::Config| {
            c.index.codemap_tokens = 0;
            c.snapshots.enabled = false;
        }));
    let overrides = SessionOverrides {
        script: Some(dir.path().join("s.yaml")),
        ..SessionOverrides::default()
    };
    let engine = Arc::new(builder.engine(&ws, &overrides).unwrap());
    let (_, record) = SessionHandle::create(engine.clone(), vec![]).await.unwrap();
    let id = record.id.clone();

    // Another process runs the session and heartbeats its lease.
    store
        .update_session(&id, SessionStatus::Running, 0, &Usage::default())
        .await
        .unwrap();
    assert!(
        store
            .acquire_lease(&id, "other-host:4242:run-a", 60_000)
            .await
            .unwrap()
    );
    let handle = SessionHandle::new(engine.clone(), id.clone(), vec![]);
    match handle.submit(Op::user_message("go on")).await {
        Err(OpError::Busy(m)) => {
            assert!(m.contains("still running"), "{m}");
            assert!(m.contains("other-host:4242:run-a"), "names the holder: {m}");
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    assert_eq!(
        store.get_session(&id).await.unwrap().display_status(),
        "running"
    );

    // That process is killed: no more heartbeats, its lease expires (here: at once).
    assert!(
        store
            .acquire_lease(&id, "other-host:4242:run-a", 0)
            .await
            .unwrap()
    );
    assert_eq!(
        store.get_session(&id).await.unwrap().display_status(),
        "interrupted"
    );
    let ticket = match handle.submit(Op::user_message("go on")).await.unwrap() {
        OpAck::Turn(t) => t,
        other => panic!("expected a turn, got {other:?}"),
    };
    let result = ticket.finished().await;
    assert_eq!(
        result.status,
        SessionStatus::Completed,
        "{:?}",
        result.message
    );
    // The turn's run released its lease at the end.
    assert!(store.lease(&id).await.unwrap().is_none());
    assert_eq!(
        store.get_session(&id).await.unwrap().status,
        SessionStatus::Completed
    );
}

/// One running session per workspace, whichever front end (a `keel run`, a chat, a server
/// turn: all go through a session handle): a second session's turn is refused with the first
/// session's id before it records anything, runs once the first has finished, and a
/// subagent or a flow node (which share their parent's workspace) is not refused.
#[tokio::test]
async fn a_second_session_in_a_busy_workspace_is_refused_with_the_first_ones_id() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    std::fs::write(
        dir.path().join("slow.yaml"),
        "turns:\n  - text: \"slow\"\n    delay_ms: 1500\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("s.yaml"), SCRIPT).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let builder =
        SessionBuilder::isolated(store.clone()).adjust(Arc::new(|c: &mut keel_engine::Config| {
            c.index.codemap_tokens = 0;
            c.snapshots.enabled = false;
        }));
    let engine = |script: &str| {
        let overrides = SessionOverrides {
            script: Some(dir.path().join(script)),
            ..SessionOverrides::default()
        };
        Arc::new(builder.engine(&ws, &overrides).unwrap())
    };
    let (first, first_record) = SessionHandle::create(engine("slow.yaml"), vec![])
        .await
        .unwrap();
    let OpAck::Turn(running) = first
        .submit(Op::user_message("take a while"))
        .await
        .unwrap()
    else {
        panic!("no turn")
    };
    // The run holds the workspace's lease once it started.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while keel_engine::workspace_busy(store.as_ref(), &ws, None)
        .await
        .unwrap()
        .is_none()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the lease was never taken"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (second, second_record) = SessionHandle::create(engine("s.yaml"), vec![])
        .await
        .unwrap();
    match second.submit(Op::user_message("me too")).await {
        Err(OpError::WorkspaceBusy(lease)) => {
            assert_eq!(lease.session_id, first_record.id);
            let m = OpError::WorkspaceBusy(lease).to_string();
            assert!(m.contains(&first_record.id) && m.contains("--wait"), "{m}");
        }
        other => panic!("expected WorkspaceBusy, got {other:?}"),
    }
    assert!(store.events(&second_record.id, 0).await.unwrap().is_empty());

    // An engine run that shares the workspace (a flow's node) is not refused.
    let shared = engine("s.yaml")
        .run(
            "a flow node",
            keel_engine::RunOptions {
                shared_workspace: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(shared.status, SessionStatus::Completed);

    // A handle that waits (a queue worker, `keel run --wait`) starts and runs once the
    // workspace is free.
    let (waiting, _) = SessionHandle::create(engine("s.yaml"), vec![])
        .await
        .unwrap();
    let waiting = waiting.wait_for_workspace();
    let OpAck::Turn(queued) = waiting.submit(Op::user_message("after you")).await.unwrap() else {
        panic!("no turn")
    };

    assert_eq!(running.finished().await.status, SessionStatus::Completed);
    assert_eq!(queued.finished().await.status, SessionStatus::Completed);
    assert!(
        keel_engine::workspace_busy(store.as_ref(), &ws, None)
            .await
            .unwrap()
            .is_none(),
        "released at the end of the turn"
    );
    let OpAck::Turn(t) = second.submit(Op::user_message("me too")).await.unwrap() else {
        panic!("no turn")
    };
    assert_eq!(t.finished().await.status, SessionStatus::Completed);
}

/// A run waiting for its workspace does not take the workspace lease of a run that only lost
/// the store for a while: an expired lease there holds until the waiting run has seen it
/// unrenewed for a lease's time-to-live, so its holder, back, renews it and keeps the
/// workspace (CI: after a PostgreSQL restart a queued turn took the workspace the moment the
/// database answered, and the live turn there ended `cancelled`).
#[tokio::test]
async fn a_waiting_run_leaves_an_expired_workspace_lease_to_a_holder_that_renews_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    std::fs::write(dir.path().join("s.yaml"), SCRIPT).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let builder =
        SessionBuilder::isolated(store.clone()).adjust(Arc::new(|c: &mut keel_engine::Config| {
            c.index.codemap_tokens = 0;
            c.snapshots.enabled = false;
            c.store.lease_ttl_secs = 5;
        }));
    let overrides = SessionOverrides {
        script: Some(dir.path().join("s.yaml")),
        ..SessionOverrides::default()
    };
    // Another run's lease of the workspace (a live process: this one), expired already — as
    // every lease is when the database comes back after a restart.
    let key = ws.display().to_string();
    let other = keel_store::lease_holder("r-cut-off");
    assert!(
        store
            .acquire_workspace_lease(&key, "other-session", &other, 1)
            .await
            .unwrap()
    );
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let holder = || async { store.workspace_lease(&key).await.unwrap().unwrap().holder };
    let engine = Arc::new(builder.engine(&ws, &overrides).unwrap());
    let (waiting, _) = SessionHandle::create(engine, vec![]).await.unwrap();
    let waiting = waiting.wait_for_workspace();
    let OpAck::Turn(turn) = waiting.submit(Op::user_message("after you")).await.unwrap() else {
        panic!("no turn")
    };
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(holder().await, other, "an expired lease was taken at once");
    // Its holder is back and renews it: still its own.
    assert!(
        store
            .renew_workspace_lease(&key, &other, 60_000)
            .await
            .unwrap()
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(holder().await, other);
    // Released at the end of its turn: the waiting run goes on.
    store.release_workspace_lease(&key, &other).await.unwrap();
    assert_eq!(turn.finished().await.status, SessionStatus::Completed);
}
