//! Three processes appending to one session in one PostgreSQL store at once (each with its own
//! connection pool): together they produce every seq exactly once — no duplicate, no gap — and
//! each writer's events keep its order. Needs `KEEL_TEST_DATABASE_URL` (see `common`).

#![cfg(feature = "postgres")]
// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::process::Command;

use keel_protocol::{Event, EventKind};
use keel_store::{NewSession, PgStore, Store};

mod common;
use common::*;

const PER_PROCESS: u64 = 150;
const WRITERS: [&str; 3] = ["a", "b", "c"];
const SESSION: &str = "20260101-000000-pgproc";

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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of writers_in_three_processes_never_share_or_skip_a_seq"]
async fn pg_writer() {
    let url = std::env::var("KEEL_PG_TEST_URL").expect("started by the parent test");
    let name = std::env::var("KEEL_PG_TEST_WRITER").expect("started by the parent test");
    let store = PgStore::open(&url).await.unwrap();
    for n in 1..=PER_PROCESS {
        store.append_event(&event(&name, n)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_in_three_processes_never_share_or_skip_a_seq() {
    let Some(base) = test_database_url() else {
        return;
    };
    let db = FreshDb::create(&base).await;
    let store = PgStore::connect(&db.url).await.unwrap();
    store.migrate().await.unwrap();
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
    let children: Vec<_> = WRITERS
        .iter()
        .map(|name| {
            Command::new(&exe)
                .args(["pg_writer", "--exact", "--ignored", "--test-threads=1"])
                .env("KEEL_PG_TEST_URL", &db.url)
                .env("KEEL_PG_TEST_WRITER", name)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a writer failed");
    }
    let events = store.events(SESSION, 0).await.unwrap();
    let total = PER_PROCESS * WRITERS.len() as u64;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=total).collect::<Vec<_>>(),
        "every seq exactly once, in order"
    );
    for writer in WRITERS {
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
    // The writers interleaved (they ran at once), else this proves little.
    let switches = events
        .windows(2)
        .filter(|w| w[0].run_id != w[1].run_id)
        .count();
    eprintln!("writer switches along the seq: {switches}");
    assert_eq!(store.last_seq(SESSION).await.unwrap(), total);
    db.drop_now().await;
}
