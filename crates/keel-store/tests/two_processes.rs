//! Two processes appending to one SQLite store: the store numbers events inside the write, so
//! together they produce every seq exactly once — no duplicate, no gap.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::process::Command;

use keel_protocol::{Event, EventKind};
use keel_store::{NewSession, SqliteStore, Store};

const PER_PROCESS: u64 = 400;
const SESSION: &str = "20260101-000000-abcdef";

fn event(writer: &str, n: u64) -> Event {
    Event {
        session_id: SESSION.into(),
        seq: 0,
        ts: n,
        run_id: writer.into(),
        parent_run_id: None,
        kind: EventKind::TurnStarted {
            iteration: n as u32,
        },
    }
}

/// The writer each child process runs (started by the test below, never on its own).
#[tokio::test]
#[ignore = "a child process of two_writers_never_share_or_skip_a_seq"]
async fn writer() {
    let path = std::env::var("KEEL_STORE_TEST_DB").expect("started by the parent test");
    let name = std::env::var("KEEL_STORE_TEST_WRITER").expect("started by the parent test");
    let store = SqliteStore::open(std::path::Path::new(&path)).unwrap();
    for n in 1..=PER_PROCESS {
        store.append_event(&event(&name, n)).await.unwrap();
    }
}

#[tokio::test]
async fn two_writers_never_share_or_skip_a_seq() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keel.db");
    let store = SqliteStore::open(&db).unwrap();
    store
        .create_session(&NewSession {
            id: SESSION.into(),
            workspace: "/w".into(),
            task: "t".into(),
            provider: "scripted".into(),
            model: "scripted".into(),
            mode: "react".into(),
            base_url: String::new(),
            script: String::new(),
            repo: None,
        })
        .await
        .unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = ["a", "b"]
        .iter()
        .map(|name| {
            Command::new(&exe)
                .args(["writer", "--exact", "--ignored", "--test-threads=1"])
                .env("KEEL_STORE_TEST_DB", &db)
                .env("KEEL_STORE_TEST_WRITER", name)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a writer failed");
    }
    let events = store.events(SESSION, 0).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=2 * PER_PROCESS).collect::<Vec<_>>(),
        "every seq exactly once, in order"
    );
    for writer in ["a", "b"] {
        let mine: Vec<u64> = events
            .iter()
            .filter(|e| e.run_id == writer)
            .map(|e| e.ts)
            .collect();
        assert_eq!(
            mine,
            (1..=PER_PROCESS).collect::<Vec<_>>(),
            "writer {writer}'s events are all there, in its order"
        );
    }
    assert_eq!(store.last_seq(SESSION).await.unwrap(), 2 * PER_PROCESS);
}
