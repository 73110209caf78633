//! The SQLite store's tests.
use super::*;
use keel_protocol::EventKind;

fn session(id: &str) -> NewSession {
    NewSession {
        id: id.into(),
        workspace: "/tmp/w".into(),
        task: "do it".into(),
        provider: "scripted".into(),
        model: "scripted".into(),
        mode: "react".into(),
        base_url: String::new(),
        script: String::new(),
        repo: None,
    }
}

fn event(id: &str, seq: u64) -> Event {
    Event {
        session_id: id.into(),
        seq,
        ts: 1,
        run_id: "r-1".into(),
        parent_run_id: None,
        kind: EventKind::TurnStarted {
            iteration: seq as u32,
        },
    }
}

#[test]
fn round_trips_sessions_events_and_messages() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().map_err(|e| StoreError::Open {
        path: "tmp".into(),
        reason: e.to_string(),
    })?;
    let path = dir.path().join("keel.db");
    {
        let store = SqliteDb::open(&path)?;
        store.create_session(&session("abc123"))?;
        // The store numbers events: whatever seq they carry, they get the next one.
        assert_eq!(store.append_event(&event("abc123", 7))?.seq, 1);
        assert_eq!(store.append_event(&event("abc123", 1))?.seq, 2);
        store.append_message("abc123", &Message::user_text("hi"))?;
        store.append_message("abc123", &Message::assistant_text("hello"))?;
        let usage = Usage {
            input_tokens: 5,
            ..Usage::default()
        };
        store.update_session("abc123", SessionStatus::Completed, 2, &usage)?;
    }
    // Reopen: everything is durable.
    let store = SqliteDb::open(&path)?;
    let rec = store.get_session("abc")?;
    assert_eq!(rec.status, SessionStatus::Completed);
    assert_eq!(rec.iterations, 2);
    assert_eq!(rec.usage.input_tokens, 5);
    assert_eq!(store.events("abc123", 1)?.len(), 1);
    assert_eq!(store.last_seq("abc123")?, 2);
    let msgs = store.messages("abc123")?;
    assert_eq!(msgs[1].text(), "hello");
    assert!(matches!(
        store.get_session("zzz"),
        Err(StoreError::NotFound(_))
    ));
    Ok(())
}

#[test]
fn a_task_is_set_later_and_a_deleted_session_takes_its_records_along() -> Result<(), StoreError> {
    let store = SqliteDb::open_in_memory()?;
    let mut new = session("s1");
    new.task = String::new();
    store.create_session(&new)?;
    store.set_session_task("s1", "first message")?;
    assert_eq!(store.get_session("s1")?.task, "first message");
    store.append_event(&event("s1", 1))?;
    store.append_message("s1", &Message::user_text("hi"))?;
    store.create_blocker(&NewBlocker {
        id: "b1".into(),
        session_id: "s1".into(),
        question: "?".into(),
        source: "model".into(),
        evidence: vec![],
    })?;
    store.create_session(&session("s2"))?;
    store.delete_session("s1")?;
    assert!(matches!(
        store.get_session("s1"),
        Err(StoreError::NotFound(_))
    ));
    assert!(store.events("s1", 0)?.is_empty());
    assert!(store.messages("s1")?.is_empty());
    assert!(store.list_blockers(None, true)?.is_empty());
    assert_eq!(store.list_sessions(10)?.len(), 1, "other sessions stay");
    assert!(matches!(
        store.delete_session("s1"),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.set_session_task("nope", "x"),
        Err(StoreError::NotFound(_))
    ));
    Ok(())
}

#[test]
fn ambiguous_prefix_is_an_error() -> Result<(), StoreError> {
    let store = SqliteDb::open_in_memory()?;
    store.create_session(&session("ab1"))?;
    store.create_session(&session("ab2"))?;
    assert!(matches!(
        store.get_session("ab"),
        Err(StoreError::Ambiguous { count: 2, .. })
    ));
    // LIKE wildcards in user input are literal.
    assert!(matches!(
        store.get_session("a%"),
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.list_sessions(10)?.len(), 2);
    Ok(())
}

#[test]
fn blockers_are_raised_answered_and_delivered() -> Result<(), StoreError> {
    let store = SqliteDb::open_in_memory()?;
    store.create_session(&session("s1"))?;
    store.create_session(&session("s2"))?;
    let blocker = |id: &str, session: &str| NewBlocker {
        id: id.into(),
        session_id: session.into(),
        question: format!("question {id}?"),
        source: "model".into(),
        evidence: vec!["seen twice".into()],
    };
    store.create_blocker(&blocker("blk-aa1", "s1"))?;
    store.create_blocker(&blocker("blk-aa2", "s1"))?;
    store.create_blocker(&blocker("blk-b", "s2"))?;
    assert!(
        store.create_blocker(&blocker("blk-b", "s2")).is_err(),
        "dup id"
    );

    assert_eq!(store.list_blockers(None, false)?.len(), 3);
    let s1 = store.list_blockers(Some("s1"), false)?;
    assert_eq!(s1.len(), 2);
    assert_eq!(s1[0].evidence, vec!["seen twice".to_string()]);
    assert!(matches!(
        store.get_blocker("blk-a"),
        Err(StoreError::AmbiguousBlocker { count: 2, .. })
    ));
    assert!(matches!(
        store.get_blocker("nope"),
        Err(StoreError::BlockerNotFound(_))
    ));

    let answered = store.answer_blocker("blk-aa1", "use the v2 API")?;
    assert_eq!(answered.status, BlockerStatus::Answered);
    assert_eq!(answered.answer.as_deref(), Some("use the v2 API"));
    assert!(answered.answered_at.is_some());
    // Open-only listing drops it; `all` keeps it.
    assert_eq!(store.list_blockers(Some("s1"), false)?.len(), 1);
    assert_eq!(store.list_blockers(Some("s1"), true)?.len(), 2);

    store.mark_blockers_delivered(&["blk-aa1".into(), "blk-aa2".into()])?;
    assert_eq!(
        store.get_blocker("blk-aa1")?.status,
        BlockerStatus::Delivered
    );
    // Only answered blockers become delivered.
    assert_eq!(store.get_blocker("blk-aa2")?.status, BlockerStatus::Open);
    assert!(matches!(
        store.answer_blocker("blk-aa1", "again"),
        Err(StoreError::Conflict(_))
    ));
    Ok(())
}

#[test]
fn a_version_1_database_gains_the_blockers_table() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().map_err(|e| StoreError::Open {
        path: "tmp".into(),
        reason: e.to_string(),
    })?;
    let path = dir.path().join("old.db");
    {
        let conn = Connection::open(&path).map_err(sql("open"))?;
        conn.execute_batch(MIGRATIONS[0]).map_err(sql("v1"))?;
        conn.pragma_update(None, "user_version", 1)
            .map_err(sql("version"))?;
    }
    let store = SqliteDb::open(&path)?;
    store.create_session(&session("s"))?;
    store.create_blocker(&NewBlocker {
        id: "b1".into(),
        session_id: "s".into(),
        question: "?".into(),
        source: "model".into(),
        evidence: vec![],
    })?;
    assert_eq!(store.list_blockers(None, false)?.len(), 1);
    Ok(())
}

#[test]
fn leases_refuse_a_live_holder_and_yield_to_an_expired_one() -> Result<(), StoreError> {
    let store = SqliteDb::open_in_memory()?;
    store.create_session(&session("s1"))?;
    // No lease: a running session is interrupted.
    assert!(store.get_session("s1")?.is_interrupted());
    assert!(store.acquire_lease("s1", "a", 60_000)?);
    let rec = store.get_session("s1")?;
    assert!(!rec.is_interrupted());
    assert_eq!(rec.display_status(), "running");
    assert_eq!(rec.lease.map(|l| l.holder), Some("a".to_string()));
    // Held: another holder is refused; the holder itself may take it again (renew).
    assert!(!store.acquire_lease("s1", "b", 60_000)?);
    assert!(store.acquire_lease("s1", "a", 60_000)?);
    assert!(store.renew_lease("s1", "a", 60_000)?);
    assert!(!store.renew_lease("s1", "b", 60_000)?);
    // A dead holder: its lease has expired (time-to-live 0) and the next one takes over.
    assert!(store.acquire_lease("s1", "a", 0)?);
    assert!(store.get_session("s1")?.is_interrupted());
    assert_eq!(store.get_session("s1")?.display_status(), "interrupted");
    assert!(store.acquire_lease("s1", "b", 60_000)?);
    assert!(!store.renew_lease("s1", "a", 60_000)?, "a lost its lease");
    // Releasing someone else's lease does nothing; the holder's own release frees it.
    store.release_lease("s1", "a")?;
    assert!(store.lease("s1")?.is_some());
    store.release_lease("s1", "b")?;
    assert!(store.lease("s1")?.is_none());
    // Deleting the session removes its lease.
    assert!(store.acquire_lease("s1", "c", 60_000)?);
    store.delete_session("s1")?;
    assert!(store.lease("s1")?.is_none());
    Ok(())
}

#[test]
fn processes_opening_a_fresh_database_at_once_migrate_it_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("keel.db");
    let opens: Vec<_> = (0..6)
        .map(|_| {
            let p = path.clone();
            std::thread::spawn(move || SqliteDb::open(&p).map(|_| ()))
        })
        .collect();
    for t in opens {
        let opened = t.join().unwrap_or_else(|_| panic!("thread panicked"));
        assert!(opened.is_ok(), "{opened:?}");
    }
    let db = SqliteDb::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let version: i64 = db.with_connection(|c| {
        c.pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap_or(0)
    });
    assert_eq!(version as usize, MIGRATIONS.len());
    let flows: i64 = db.with_connection(|c| {
        c.query_row("SELECT COUNT(*) FROM flow_runs", [], |r| r.get(0))
            .unwrap_or(-1)
    });
    assert_eq!(flows, 0);
}
