//! One store test suite, run against every backend: SQLite (always) and PostgreSQL (with the
//! `postgres` feature and `KEEL_TEST_DATABASE_URL`, e.g. the cluster `.ci/run` starts:
//! `postgres://keelpg@127.0.0.1:55432/keel_test`). Without a database the Postgres half says
//! SKIPPED and what to do; in CI (`CI=true`) it fails instead.
//!
//! The Postgres half creates a fresh database on that server per test (and drops it after);
//! every check also uses its own session ids and workspaces.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_protocol::{Event, EventKind, Message, SessionStatus, Usage};
mod common;
use common::*;

use keel_store::work::{NewTask, TaskEdit, TaskStatus, WorkStore};
use keel_store::{
    BlockerStatus, MemoryEntry, MemoryKind, NewBlocker, NewSession, SqliteStore, Store, StoreError,
    StoreFuture,
};

/// A backend under test: the trait object, plus what the trait does not cover (adding memory).
struct Backend {
    name: &'static str,
    store: Arc<dyn Store>,
    add_memory: Box<dyn Fn(String) -> StoreFuture<'static, MemoryEntry> + Send + Sync>,
    work: Arc<dyn WorkStore>,
}

fn new_session(id: &str) -> NewSession {
    NewSession {
        id: id.into(),
        workspace: "/w".into(),
        task: "the task".into(),
        provider: "scripted".into(),
        model: "scripted".into(),
        mode: "react".into(),
        base_url: String::new(),
        script: "s.yaml".into(),
        repo: None,
    }
}

fn event(session_id: &str, iteration: u32) -> Event {
    Event {
        session_id: session_id.into(),
        seq: 999, // ignored: the store assigns seq
        ts: 1,
        run_id: "r-1".into(),
        parent_run_id: None,
        kind: EventKind::TurnStarted { iteration },
    }
}

async fn sessions_round_trip(b: &Backend) {
    let s = b.store.as_ref();
    let id = unique("rt");
    s.create_session(&new_session(&id)).await.unwrap();
    let rec = s.get_session(&id).await.unwrap();
    assert_eq!(rec.status, SessionStatus::Running);
    assert_eq!(
        (rec.task.as_str(), rec.script.as_str()),
        ("the task", "s.yaml")
    );
    assert!(rec.lease.is_none());
    assert!(rec.repo.is_none());
    let with_repo = unique("repo");
    let repo = keel_store::RepoSource::new("/srv/git/app.git", Some("v1.0")).unwrap();
    s.create_session(&NewSession {
        repo: Some(repo.clone()),
        ..new_session(&with_repo)
    })
    .await
    .unwrap();
    assert_eq!(s.get_session(&with_repo).await.unwrap().repo, Some(repo));

    let usage = Usage {
        input_tokens: 7,
        ..Usage::default()
    };
    s.update_session(&id, SessionStatus::Completed, 3, &usage)
        .await
        .unwrap();
    s.set_session_task(&id, "new task").await.unwrap();
    s.set_session_model(&id, "openai", "gpt-x", "plan_exec")
        .await
        .unwrap();
    let rec = s.get_session(&id[..id.len() - 2]).await.unwrap();
    assert_eq!(rec.id, id, "a unique prefix finds the session");
    assert_eq!(rec.status, SessionStatus::Completed);
    assert_eq!((rec.iterations, rec.usage.input_tokens), (3, 7));
    assert_eq!(
        (
            rec.task.as_str(),
            rec.provider.as_str(),
            rec.model.as_str(),
            rec.mode.as_str()
        ),
        ("new task", "openai", "gpt-x", "plan_exec")
    );
    assert!(
        s.list_sessions(1000)
            .await
            .unwrap()
            .iter()
            .any(|r| r.id == id)
    );
    assert!(matches!(
        s.update_session("no-such-session", SessionStatus::Failed, 0, &usage)
            .await,
        Err(StoreError::NotFound(_))
    ));

    s.append_message(&id, &Message::user_text("one"))
        .await
        .unwrap();
    s.append_message(&id, &Message::user_text("two"))
        .await
        .unwrap();
    let texts: Vec<String> = s
        .messages(&id)
        .await
        .unwrap()
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(texts, ["one", "two"]);

    s.save_result(&id, "h1", "first").await.unwrap();
    s.save_result(&id, "h1", "replaced").await.unwrap();
    assert_eq!(
        s.stored_results(&id).await.unwrap(),
        [("h1".to_string(), "replaced".to_string())]
    );

    s.delete_session(&id).await.unwrap();
    assert!(matches!(
        s.get_session(&id).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(s.events(&id, 0).await.unwrap().is_empty());
}

async fn events_round_trip(b: &Backend) {
    let s = b.store.as_ref();
    let id = unique("ev");
    s.create_session(&new_session(&id)).await.unwrap();
    assert_eq!(s.last_seq(&id).await.unwrap(), 0);
    for i in 1..=5 {
        let stored = s.append_event(&event(&id, i)).await.unwrap();
        assert_eq!(stored.seq, u64::from(i), "the store assigns seq");
    }
    let all = s.events(&id, 0).await.unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(all[2], {
        let mut e = event(&id, 3);
        e.seq = 3;
        e
    });
    let since = s.events(&id, 3).await.unwrap();
    assert_eq!(since.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(s.last_seq(&id).await.unwrap(), 5);
    assert!(
        s.append_event(&event("no-such-session", 1)).await.is_err(),
        "an event of an unknown session is refused"
    );
}

/// N writers append to one session at once: every seq from 1 to the total, once.
async fn seq_gap_free_under_concurrent_writers(b: &Backend) {
    const WRITERS: u32 = 8;
    const EACH: u32 = 25;
    let id = unique("seq");
    b.store.create_session(&new_session(&id)).await.unwrap();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (store, id) = (b.store.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for i in 0..EACH {
                seqs.push(
                    store
                        .append_event(&event(&id, w * 1000 + i))
                        .await
                        .unwrap()
                        .seq,
                );
            }
            seqs
        }));
    }
    let mut returned = Vec::new();
    for t in tasks {
        returned.extend(t.await.unwrap());
    }
    returned.sort_unstable();
    let expected: Vec<u64> = (1..=u64::from(WRITERS * EACH)).collect();
    assert_eq!(returned, expected, "{}: returned seqs are gap-free", b.name);
    let stored: Vec<u64> = b
        .store
        .events(&id, 0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(stored, expected, "{}: stored seqs are gap-free", b.name);
}

async fn leases_expire_and_renew(b: &Backend) {
    let s = b.store.as_ref();
    let id = unique("lease");
    s.create_session(&new_session(&id)).await.unwrap();
    assert!(s.acquire_lease(&id, "a", 400).await.unwrap());
    assert!(
        !s.acquire_lease(&id, "b", 400).await.unwrap(),
        "a live lease keeps others out"
    );
    assert!(
        s.acquire_lease(&id, "a", 400).await.unwrap(),
        "its holder may take it again"
    );
    let rec = s.get_session(&id).await.unwrap();
    assert_eq!(rec.lease.as_ref().map(|l| l.holder.as_str()), Some("a"));
    assert!(!rec.is_interrupted());
    assert!(s.renew_lease(&id, "a", 400).await.unwrap());
    assert!(!s.renew_lease(&id, "b", 400).await.unwrap());

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        s.get_session(&id).await.unwrap().is_interrupted(),
        "expired"
    );
    assert!(
        s.acquire_lease(&id, "b", 10_000).await.unwrap(),
        "an expired lease is taken over"
    );
    assert!(
        !s.renew_lease(&id, "a", 400).await.unwrap(),
        "the old holder lost it"
    );
    s.release_lease(&id, "a").await.unwrap();
    assert_eq!(
        s.lease(&id).await.unwrap().map(|l| l.holder),
        Some("b".into())
    );
    s.release_lease(&id, "b").await.unwrap();
    assert_eq!(s.lease(&id).await.unwrap(), None);
}

async fn workspace_leases_keep_one_session_per_workspace(b: &Backend) {
    let s = b.store.as_ref();
    let ws = format!("/work/{}", unique("ws"));
    assert_eq!(s.workspace_lease(&ws).await.unwrap(), None);
    assert!(
        s.acquire_workspace_lease(&ws, "s1", "h:1:a", 400)
            .await
            .unwrap()
    );
    assert!(
        !s.acquire_workspace_lease(&ws, "s2", "h:2:b", 400)
            .await
            .unwrap(),
        "another session's live lease keeps others out"
    );
    let held = s.workspace_lease(&ws).await.unwrap().unwrap();
    assert_eq!(
        (held.session_id.as_str(), held.holder.as_str()),
        ("s1", "h:1:a")
    );
    assert!(held.is_live());
    assert!(
        s.acquire_workspace_lease(&format!("{ws}-other"), "s2", "h:2:b", 400)
            .await
            .unwrap(),
        "another workspace is free"
    );
    assert!(s.renew_workspace_lease(&ws, "h:1:a", 400).await.unwrap());
    assert!(!s.renew_workspace_lease(&ws, "h:2:b", 400).await.unwrap());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!s.workspace_lease(&ws).await.unwrap().unwrap().is_live());
    assert!(
        s.acquire_workspace_lease(&ws, "s2", "h:2:b", 10_000)
            .await
            .unwrap(),
        "an expired lease is taken over"
    );
    assert!(!s.renew_workspace_lease(&ws, "h:1:a", 400).await.unwrap());
    s.release_workspace_lease(&ws, "h:1:a").await.unwrap();
    assert_eq!(
        s.workspace_lease(&ws).await.unwrap().map(|l| l.session_id),
        Some("s2".into()),
        "only its holder releases it"
    );
    s.release_workspace_lease(&ws, "h:2:b").await.unwrap();
    assert_eq!(s.workspace_lease(&ws).await.unwrap(), None);
}

async fn blockers(b: &Backend) {
    let s = b.store.as_ref();
    let id = unique("blk");
    s.create_session(&new_session(&id)).await.unwrap();
    let blocker_id = format!("{id}-b1");
    s.create_blocker(&NewBlocker {
        id: blocker_id.clone(),
        session_id: id.clone(),
        question: "which database?".into(),
        source: "model".into(),
        evidence: vec!["e1".into()],
    })
    .await
    .unwrap();
    let open = s.list_blockers(Some(&id), false).await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(
        (open[0].status, open[0].evidence.clone()),
        (BlockerStatus::Open, vec!["e1".to_string()])
    );
    assert!(
        s.list_blockers(None, false)
            .await
            .unwrap()
            .iter()
            .any(|b| b.id == blocker_id)
    );

    let answered = s.answer_blocker(&blocker_id, "postgres").await.unwrap();
    assert_eq!(answered.status, BlockerStatus::Answered);
    assert_eq!(answered.answer.as_deref(), Some("postgres"));
    assert!(answered.answered_at.is_some());
    assert!(s.list_blockers(Some(&id), false).await.unwrap().is_empty());
    assert_eq!(s.list_blockers(Some(&id), true).await.unwrap().len(), 1);

    s.mark_blockers_delivered(std::slice::from_ref(&blocker_id))
        .await
        .unwrap();
    let got = s
        .get_blocker(&blocker_id[..blocker_id.len() - 1])
        .await
        .unwrap();
    assert_eq!(got.status, BlockerStatus::Delivered);
    assert!(matches!(
        s.answer_blocker(&blocker_id, "again").await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        s.get_blocker("no-such-blocker").await,
        Err(StoreError::BlockerNotFound(_))
    ));
}

async fn memory(b: &Backend) {
    let text = unique("prefers tabs");
    let added = (b.add_memory)(text.clone()).await.unwrap();
    assert_eq!(added.kind, MemoryKind::Fact);
    let all = b.store.memory_entries().await.unwrap();
    let found = all
        .iter()
        .find(|e| e.text == text)
        .expect("the entry is listed");
    assert_eq!((found.id, found.source.as_str()), (added.id, "user"));
    assert!(all.windows(2).all(|w| w[0].id < w[1].id), "oldest first");
}

async fn ambiguous_prefixes(b: &Backend) {
    let s = b.store.as_ref();
    let base = unique("amb");
    for n in ["x1", "x2"] {
        s.create_session(&new_session(&format!("{base}{n}")))
            .await
            .unwrap();
    }
    assert!(matches!(
        s.get_session(&format!("{base}x")).await,
        Err(StoreError::Ambiguous { count: 2, .. })
    ));
    assert!(matches!(
        s.get_session("").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        s.get_session("%").await,
        Err(StoreError::NotFound(_))
    ));
}

fn task(title: &str, after: &[usize]) -> NewTask {
    NewTask {
        title: title.into(),
        description: format!("do {title}"),
        criteria: vec![format!("{title} works")],
        size: "s".into(),
        depends_on: vec![],
        after: after.to_vec(),
    }
}

async fn prds_keep_every_version(b: &Backend) {
    let w = b.work.as_ref();
    let ws = unique("/ws-prd");
    let p = w.add_prd(&ws, "Tool", "v1 text").await.unwrap();
    assert_eq!((p.id, p.version, p.title.as_str()), (1, 1, "Tool"));
    let p = w.edit_prd(&ws, 1, "v2 text").await.unwrap();
    assert_eq!(p.version, 2);
    assert_eq!(
        w.edit_prd(&ws, 1, "v2 text").await.unwrap().version,
        2,
        "unchanged: no version"
    );
    assert_eq!(w.prd(&ws, Some(1), Some(1)).await.unwrap().body, "v1 text");
    assert_eq!(w.prd(&ws, None, None).await.unwrap().body, "v2 text");
    assert!(matches!(
        w.prd(&ws, Some(1), Some(9)).await,
        Err(StoreError::Missing(_))
    ));
    assert!(matches!(
        w.prd(&unique("/other"), None, None).await,
        Err(StoreError::Missing(_))
    ));
    w.add_prd(&ws, "Second", "b").await.unwrap();
    let ids: Vec<u32> = w
        .list_prds(&ws)
        .await
        .unwrap()
        .iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(ids, [1, 2]);
}

async fn tasks_dependencies_and_proofs(b: &Backend) {
    let w = b.work.as_ref();
    let ws = unique("/ws-task");
    let mut bad = task("b", &[0]);
    bad.size = "huge".into();
    let err = w
        .add_tasks(&ws, None, &[task("a", &[]), bad])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("huge"), "{err}");
    assert!(
        w.list_tasks(&ws).await.unwrap().is_empty(),
        "a failing list stores nothing"
    );

    let ids = w
        .add_tasks(
            &ws,
            None,
            &[task("a", &[]), task("b", &[0]), task("c", &[1])],
        )
        .await
        .unwrap();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(w.task(&ws, 3).await.unwrap().depends_on, [2]);
    let err = w.claim_task(&ws, 2, "s1", 1).await.unwrap_err();
    assert!(err.to_string().contains("depends on #1"), "{err}");
    let cycle = TaskEdit {
        depends_on: Some(vec![3]),
        ..TaskEdit::default()
    };
    let err = w.edit_task(&ws, 1, &cycle).await.unwrap_err();
    assert!(err.to_string().contains("cycle"), "{err}");
    let err = w.remove_task(&ws, 1).await.unwrap_err();
    assert!(err.to_string().contains("#2 depend"), "{err}");

    let rename = TaskEdit {
        title: Some(" renamed ".into()),
        size: Some("m".into()),
        ..TaskEdit::default()
    };
    let t1 = w.edit_task(&ws, 1, &rename).await.unwrap();
    assert_eq!(
        (t1.title.as_str(), t1.size.as_str(), t1.status),
        ("renamed", "m", TaskStatus::Ready)
    );

    let session = unique("task-session");
    let me = std::process::id();
    let claimed = w.claim_task(&ws, 1, &session, me).await.unwrap();
    assert_eq!(
        (claimed.status, claimed.pid),
        (TaskStatus::InProgress, Some(me))
    );
    assert_eq!(claimed.sessions, std::slice::from_ref(&session));
    assert_eq!(
        w.tasks_of_session(&session).await.unwrap(),
        [(ws.clone(), 1)]
    );
    w.finish_task(&ws, 1, TaskStatus::Blocked, Some("which port?"))
        .await
        .unwrap();
    let t1 = w.task(&ws, 1).await.unwrap();
    assert_eq!(
        (t1.status, t1.question.as_deref(), t1.pid),
        (TaskStatus::Blocked, Some("which port?"), None)
    );
    assert_eq!(w.ready_tasks_of_session(&session).await.unwrap(), [1]);
    assert_eq!(w.task(&ws, 1).await.unwrap().status, TaskStatus::Ready);
    w.claim_task(&ws, 1, &session, me).await.unwrap();
    w.finish_task(&ws, 1, TaskStatus::Done, None).await.unwrap();
    assert_eq!(
        w.claim_task(&ws, 2, "s2", me).await.unwrap().status,
        TaskStatus::InProgress
    );

    w.add_proof(&ws, 1, &session, &serde_json::json!({"tests": "passed"}))
        .await
        .unwrap();
    w.add_proof(&ws, 1, &session, &serde_json::json!({"n": 2}))
        .await
        .unwrap();
    let proofs = w.proofs(&ws, 1).await.unwrap();
    assert_eq!(proofs.len(), 2);
    assert_eq!(proofs[1].body, serde_json::json!({"n": 2}), "oldest first");

    w.remove_task(&ws, 3).await.unwrap();
    assert!(matches!(w.task(&ws, 3).await, Err(StoreError::Missing(_))));
    assert_eq!(w.list_tasks(&ws).await.unwrap().len(), 2);
}

/// Writers adding tasks to one workspace at once get distinct, consecutive numbers.
async fn concurrent_task_numbering(b: &Backend) {
    let ws = unique("/ws-par");
    let mut handles = Vec::new();
    for i in 0..6 {
        let (w, ws) = (b.work.clone(), ws.clone());
        handles.push(tokio::spawn(async move {
            w.add_tasks(&ws, None, &[task(&format!("t{i}"), &[])])
                .await
                .unwrap()
        }));
    }
    let mut ids = Vec::new();
    for h in handles {
        ids.extend(h.await.unwrap());
    }
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6], "{}", b.name);
}

async fn run_suite(b: Backend) {
    let started = Instant::now();
    sessions_round_trip(&b).await;
    events_round_trip(&b).await;
    seq_gap_free_under_concurrent_writers(&b).await;
    leases_expire_and_renew(&b).await;
    workspace_leases_keep_one_session_per_workspace(&b).await;
    blockers(&b).await;
    memory(&b).await;
    ambiguous_prefixes(&b).await;
    prds_keep_every_version(&b).await;
    tasks_dependencies_and_proofs(&b).await;
    concurrent_task_numbering(&b).await;
    eprintln!("{}: store suite passed in {:?}", b.name, started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_store_passes_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let mem = store.clone();
    run_suite(Backend {
        name: "sqlite",
        work: store.clone(),
        store,
        add_memory: Box::new(move |text| {
            let mem = mem.clone();
            Box::pin(async move {
                mem.call(move |db| db.add_memory(MemoryKind::Fact, &text, "user"))
                    .await
            })
        }),
    })
    .await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_store_passes_the_suite() {
    let Some(base) = test_database_url() else {
        return;
    };
    let db = FreshDb::create(&base).await;
    let url = db.url.clone();
    let err = keel_store::PgStore::open(&url).await.unwrap_err();
    assert!(err.to_string().contains("keel db migrate"), "{err}");
    let store = Arc::new(keel_store::PgStore::connect(&url).await.unwrap());
    store.migrate().await.unwrap();
    // Opened after migrating, the schema check passes.
    keel_store::PgStore::open(&url).await.unwrap();
    postgres_memory_editing(&store).await;
    postgres_event_notices(&store).await;
    let mem = store.clone();
    run_suite(Backend {
        name: "postgres",
        work: store.clone(),
        store,
        add_memory: Box::new(move |text| {
            let mem = mem.clone();
            Box::pin(async move { mem.add_memory(MemoryKind::Fact, &text, "user").await })
        }),
    })
    .await;
    db.drop_now().await;
}

/// Every append notifies listeners (`seq:session id` at commit), whichever connection wrote.
#[cfg(feature = "postgres")]
async fn postgres_event_notices(store: &keel_store::PgStore) {
    let mut notices = store.listen_events().await.unwrap();
    let id = unique("notify");
    store.create_session(&new_session(&id)).await.unwrap();
    let (writer, wid) = (store.clone(), id.clone());
    tokio::spawn(async move {
        for i in 1..=3 {
            writer.append_event(&event(&wid, i)).await.unwrap();
        }
    })
    .await
    .unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        let notice = tokio::time::timeout(Duration::from_secs(10), notices.next())
            .await
            .expect("a notice within 10 s")
            .unwrap();
        if let keel_store::Notice::Stored { session, seq } = notice
            && session == id
        {
            got.push(seq);
        }
    }
    assert_eq!(got, [1, 2, 3], "one notice per event, in order");
}

/// Memory editing beyond the trait (the SQLite side has the same methods on `SqliteDb`,
/// covered by its unit tests).
#[cfg(feature = "postgres")]
async fn postgres_memory_editing(store: &keel_store::PgStore) {
    let tag = unique("tabs");
    let a = store
        .add_memory(MemoryKind::Fact, &format!("  prefers\n{tag} "), "user")
        .await
        .unwrap();
    assert_eq!(a.text, format!("prefers {tag}"));
    let l = store
        .add_memory(
            MemoryKind::Lesson,
            &format!("run fmt {tag}"),
            "session 0123",
        )
        .await
        .unwrap();
    assert!(
        store
            .list_memory(Some(MemoryKind::Lesson))
            .await
            .unwrap()
            .contains(&l)
    );
    assert!(
        !store
            .list_memory(Some(MemoryKind::Fact))
            .await
            .unwrap()
            .contains(&l)
    );
    assert_eq!(
        store.search_memory(&tag.to_uppercase()).await.unwrap(),
        [a.clone(), l.clone()]
    );
    let edited = store.edit_memory(a.id, "prefers spaces").await.unwrap();
    assert_eq!((edited.id, edited.text.as_str()), (a.id, "prefers spaces"));
    assert!(store.edit_memory(-1, "x").await.is_err());
    assert!(
        store
            .add_memory(MemoryKind::Fact, " ", "user")
            .await
            .is_err()
    );
    assert!(
        store
            .add_memory(MemoryKind::Fact, &"x".repeat(600), "user")
            .await
            .is_err()
    );
    assert_eq!(store.remove_memory(l.id).await.unwrap().id, l.id);
    assert!(store.remove_memory(l.id).await.is_err());
    assert_eq!(
        store.clear_memory(Some(MemoryKind::Lesson)).await.unwrap(),
        0
    );
    assert_eq!(store.clear_memory(None).await.unwrap(), 1);
    assert!(store.list_memory(None).await.unwrap().is_empty());
}

/// Several migrators at once (several servers starting): each migration applies once.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_migrators_apply_each_migration_once() {
    let Some(base) = test_database_url() else {
        return;
    };
    let db = FreshDb::create(&base).await;
    let url = db.url.clone();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            keel_store::PgStore::connect(&url)
                .await
                .unwrap()
                .migrate()
                .await
                .unwrap()
        }));
    }
    let mut versions = Vec::new();
    for t in tasks {
        versions.extend(t.await.unwrap().into_iter().map(|m| m.version));
    }
    versions.sort_unstable();
    let every: Vec<i64> = (1..=keel_store::PgStore::schema_version()).collect();
    assert_eq!(versions, every, "each migration ran exactly once");
    db.drop_now().await;
}

#[cfg(not(feature = "postgres"))]
#[test]
fn postgres_store_passes_the_suite() {
    skipped_without_postgres_feature("store suite", "store_suite");
}
