//! Run leases across processes: a process holding a session's lease (heartbeat running)
//! keeps every other process out; kill -9 it and another process takes over once the lease
//! expires — no pid, no /proc.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_store::{NewSession, RunLease, SqliteStore, Store};
use tokio_util::sync::CancellationToken;

const SESSION: &str = "20260101-000000-lease1";
const TTL_MS: u64 = 1_500;

fn new_session() -> NewSession {
    NewSession {
        id: SESSION.into(),
        workspace: "/w".into(),
        task: "t".into(),
        provider: "scripted".into(),
        model: "scripted".into(),
        mode: "react".into(),
        base_url: String::new(),
        script: String::new(),
        repo: None,
    }
}

/// The holder each child process runs (started by the test below, never on its own): takes
/// the lease, heartbeats, and waits to be killed.
#[tokio::test]
#[ignore = "a child process of a_killed_holder_is_taken_over_after_its_lease_expires"]
async fn holder() {
    let path = std::env::var("KEEL_LEASE_TEST_DB").expect("started by the parent test");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(std::path::Path::new(&path)).unwrap());
    let lease = RunLease::acquire(
        store,
        SESSION,
        "child".into(),
        TTL_MS,
        CancellationToken::new(),
    )
    .await
    .unwrap()
    .expect("the lease is free");
    println!("holding");
    // Far longer than the test waits: only kill -9 ends this process.
    tokio::time::sleep(Duration::from_secs(120)).await;
    drop(lease);
}

#[tokio::test]
async fn a_killed_holder_is_taken_over_after_its_lease_expires() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keel.db");
    let store = SqliteStore::open(&db).unwrap();
    store.create_session(&new_session()).await.unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "holder",
            "--exact",
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env("KEEL_LEASE_TEST_DB", &db)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the child to hold the lease.
    let start = Instant::now();
    while store.lease(SESSION).await.unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the child never took the lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Alive and heartbeating: refused, well past one time-to-live.
    let held_until = Instant::now() + Duration::from_millis(TTL_MS * 2);
    while Instant::now() < held_until {
        assert!(
            !store
                .acquire_lease(SESSION, "parent", TTL_MS)
                .await
                .unwrap(),
            "a live holder's lease was taken"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let record = store.get_session(SESSION).await.unwrap();
    assert!(
        !record.is_interrupted(),
        "a heartbeating run is not interrupted"
    );

    child.kill().unwrap(); // SIGKILL: no cleanup, no release
    child.wait().unwrap();
    let killed = Instant::now();
    let mut taken = false;
    while killed.elapsed() < Duration::from_millis(TTL_MS * 4) {
        if store
            .acquire_lease(SESSION, "parent", TTL_MS)
            .await
            .unwrap()
        {
            taken = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(taken, "the dead holder's lease never expired");
    assert_eq!(
        store.lease(SESSION).await.unwrap().unwrap().holder,
        "parent"
    );
}

#[tokio::test]
async fn a_released_lease_is_free_at_once_and_a_lost_one_cancels_its_run() {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
    store.create_session(&new_session()).await.unwrap();
    let lost = CancellationToken::new();
    let lease = RunLease::acquire(store.clone(), SESSION, "a".into(), 300, lost.clone())
        .await
        .unwrap()
        .unwrap();
    assert!(
        RunLease::acquire(
            store.clone(),
            SESSION,
            "b".into(),
            300,
            CancellationToken::new()
        )
        .await
        .unwrap()
        .is_none(),
        "held"
    );
    lease.release().await.unwrap();
    assert!(store.lease(SESSION).await.unwrap().is_none());

    // A holder whose lease another run took (it stalled past its time-to-live) learns it at
    // its next heartbeat: its run is cancelled.
    let lease = RunLease::acquire(store.clone(), SESSION, "a".into(), 300, lost.clone())
        .await
        .unwrap()
        .unwrap();
    store.release_lease(SESSION, "a").await.unwrap();
    assert!(store.acquire_lease(SESSION, "b", 10_000).await.unwrap());
    tokio::time::timeout(Duration::from_secs(5), lost.cancelled())
        .await
        .expect("the lost lease cancels the run");
    drop(lease);
}
