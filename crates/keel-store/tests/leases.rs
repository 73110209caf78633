//! Run leases across processes: a process holding a session's lease (heartbeat running)
//! keeps every other process out; kill -9 it and another process takes over once the lease
//! expires; a run on this machine whose process is gone gives way at once.

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
    // As a real run names itself (`host:pid:run`), with a long time-to-live and the
    // workspace's lease too — or as a name from nowhere with a short one.
    let real = std::env::var_os("KEEL_LEASE_TEST_REAL").is_some();
    let (holder, ttl) = if real {
        (keel_store::lease_holder("r-child"), 600_000)
    } else {
        ("child".to_string(), TTL_MS)
    };
    let lease = RunLease::acquire(store, SESSION, holder, ttl, CancellationToken::new())
        .await
        .unwrap()
        .expect("the lease is free");
    if real {
        lease.claim_workspace("/w").await.unwrap().unwrap();
    }
    println!("holding");
    // Far longer than the test waits: only kill -9 ends this process.
    tokio::time::sleep(Duration::from_secs(120)).await;
    drop(lease);
}

/// Starts the holder child on `db` and waits until it holds the session's lease.
async fn start_holder(
    store: &SqliteStore,
    db: &std::path::Path,
    real: bool,
) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "holder",
        "--exact",
        "--ignored",
        "--test-threads=1",
        "--nocapture",
    ])
    .env("KEEL_LEASE_TEST_DB", db)
    .stdout(Stdio::null());
    if real {
        cmd.env("KEEL_LEASE_TEST_REAL", "1");
    }
    let child = cmd.spawn().unwrap();
    let start = Instant::now();
    while store.lease(SESSION).await.unwrap().is_none()
        || (real && store.workspace_lease("/w").await.unwrap().is_none())
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the child never took the lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child
}

/// A run killed with -9 on this machine does not keep its session and workspace busy for its
/// lease's time-to-live: its process is gone, so the next run takes both at once and the
/// session shows interrupted (red-team pass 8, R8-24: a killed `keel run` kept the
/// workspace busy).
#[tokio::test]
async fn a_killed_holder_on_this_machine_gives_way_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keel.db");
    let store = SqliteStore::open(&db).unwrap();
    store.create_session(&new_session()).await.unwrap();
    let mut child = start_holder(&store, &db, true).await;
    let shared: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).unwrap());
    let me = keel_store::lease_holder("r-parent");
    assert!(
        RunLease::acquire(
            shared.clone(),
            SESSION,
            me.clone(),
            600_000,
            CancellationToken::new()
        )
        .await
        .unwrap()
        .is_none(),
        "a live holder's lease was taken"
    );
    assert!(!store.get_session(SESSION).await.unwrap().is_interrupted());

    child.kill().unwrap(); // SIGKILL: no cleanup, no release
    child.wait().unwrap();
    let held = store.workspace_lease("/w").await.unwrap().unwrap();
    assert!(held.expires_at > keel_store::now_ms() + 60_000, "{held:?}");
    assert!(
        !held.is_live(),
        "a gone holder's workspace lease counts as live"
    );
    assert!(store.get_session(SESSION).await.unwrap().is_interrupted());
    let lease = RunLease::acquire(
        shared,
        SESSION,
        me.clone(),
        600_000,
        CancellationToken::new(),
    )
    .await
    .unwrap()
    .expect("the killed run's session lease was not given up");
    lease
        .claim_workspace("/w")
        .await
        .unwrap()
        .expect("the killed run's workspace lease was not given up");
    assert_eq!(
        store.workspace_lease("/w").await.unwrap().unwrap().holder,
        me
    );
    // Holders elsewhere, or not named as a run is, never count as gone.
    assert!(!keel_store::holder_is_gone("another-host:1:r-1"));
    assert!(!keel_store::holder_is_gone("child"));
    assert!(!keel_store::holder_is_gone(&me));
    lease.release().await.unwrap();
}

#[tokio::test]
async fn a_killed_holder_is_taken_over_after_its_lease_expires() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keel.db");
    let store = SqliteStore::open(&db).unwrap();
    store.create_session(&new_session()).await.unwrap();
    let mut child = start_holder(&store, &db, false).await;
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
