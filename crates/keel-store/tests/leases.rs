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

/// A store whose lease renewals stall while `down` is set, as `PgStore`'s do while PostgreSQL
/// restarts: a renewal sent during the outage waits for a connection and retries with growing
/// pauses, so it returns well after the database is back (here: `STALL` after).
struct Restarting {
    inner: SqliteStore,
    down: Arc<std::sync::atomic::AtomicBool>,
    /// When each renewal that went through was made.
    renewed: Arc<std::sync::Mutex<Vec<Instant>>>,
}

const STALL: Duration = Duration::from_secs(30);

impl Store for Restarting {
    keel_store::delegate_store!(inner;
        create_session update_session set_session_task set_session_model delete_session
        append_event append_message list_sessions get_session events messages last_seq
        create_blocker list_blockers get_blocker answer_blocker mark_blockers_delivered
        memory_entries save_result stored_results acquire_lease release_lease lease
        acquire_workspace_lease renew_workspace_lease release_workspace_lease workspace_lease
    );
    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> keel_store::StoreFuture<'a, bool> {
        use std::sync::atomic::Ordering;
        Box::pin(async move {
            if self.down.load(Ordering::SeqCst) {
                while self.down.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                tokio::time::sleep(STALL).await;
            }
            let kept = self.inner.renew_lease(session_id, holder, ttl_ms).await;
            self.renewed.lock().unwrap().push(Instant::now());
            kept
        })
    }
}

/// A database outage longer than the lease's time-to-live: the holder renews its lease as soon
/// as the database is back — within one renewal interval, not when a renewal sent during the
/// outage finally returns — so a worker that finds the lease expired and waits out its grace
/// (the lease's time-to-live) before taking the session over never takes a live run's
/// session (CI: a turn ended `cancelled` after a PostgreSQL restart at load ~15, its session
/// taken over by another worker while its own renewal was still in the store's retries).
#[tokio::test]
async fn a_holder_renews_its_lease_as_soon_as_the_database_is_back() {
    let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let renewed = Arc::new(std::sync::Mutex::new(Vec::new()));
    let store = Restarting {
        inner: SqliteStore::open_in_memory().unwrap(),
        down: down.clone(),
        renewed: renewed.clone(),
    };
    store.create_session(&new_session()).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let lost = CancellationToken::new();
    let ttl = Duration::from_millis(600);
    let lease = RunLease::acquire(
        store.clone(),
        SESSION,
        "a".into(),
        ttl.as_millis() as u64,
        lost.clone(),
    )
    .await
    .unwrap()
    .unwrap();
    down.store(true, std::sync::atomic::Ordering::SeqCst);
    // Down for longer than the lease lives.
    tokio::time::sleep(ttl * 3).await;
    let back = Instant::now();
    down.store(false, std::sync::atomic::Ordering::SeqCst);
    let limit = Duration::from_secs(10);
    loop {
        let after = renewed.lock().unwrap().iter().any(|t| *t >= back);
        if after {
            break;
        }
        assert!(
            back.elapsed() < limit,
            "the lease was not renewed within {limit:?} of the database's return (a renewal \
             sent during the outage held the heartbeat)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("renewed {:?} after the database was back", back.elapsed());
    assert!(store.lease(SESSION).await.unwrap().unwrap().is_live());
    assert!(!lost.is_cancelled());
    drop(lease);
}

#[test]
fn an_expired_lease_is_taken_once_it_stays_unrenewed_for_the_grace() {
    let now = keel_store::now_ms;
    let grace = Duration::from_millis(300);
    let wait = |ms| std::thread::sleep(Duration::from_millis(ms));
    // A holder elsewhere (its process cannot be looked at).
    let holder = "elsewhere:1:r-1";
    let mut watch = keel_store::ExpiryWatch::new(grace);
    // A live lease holds, however long it is watched.
    assert!(watch.holds(holder, now() + 60_000));
    // Expired long ago (a killed worker's): held only until this watcher watched it for the
    // grace, not for a fixed time after its expiry.
    let dead = now() - 60_000;
    assert!(watch.holds(holder, dead));
    wait(100);
    assert!(watch.holds(holder, dead));
    wait(250);
    assert!(!watch.holds(holder, dead), "taken after the grace");
    // Renewed meanwhile (its holder had lost the database): watched afresh.
    let mut watch = keel_store::ExpiryWatch::new(grace);
    assert!(watch.holds(holder, now() - 5_000));
    wait(250);
    let renewed = now() - 1;
    assert!(watch.holds(holder, renewed));
    wait(100);
    assert!(
        watch.holds(holder, renewed),
        "a new expiry starts a new watch"
    );
    // A holder on this machine whose process is gone gives way at once.
    let gone = format!(
        "{}:{}:r-1",
        keel_store::lease_holder("x").split(':').next().unwrap(),
        u32::MAX - 1
    );
    assert!(!keel_store::ExpiryWatch::new(grace).holds(&gone, now() - 1));
}
