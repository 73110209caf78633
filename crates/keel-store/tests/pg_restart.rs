//! `PgStore` through a PostgreSQL restart: writers append while the server is stopped with
//! `pg_ctl stop -m fast` and started again; every append succeeds once the database is back,
//! none is stored twice and `seq` stays gap-free. Runs on a private cluster of this test (the
//! cluster tests' helper), never the shared server; skipped visibly without PostgreSQL
//! outside CI.

#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use keel_protocol::{Event, EventKind};
use keel_store::{NewSession, PgStore, Store};

#[path = "../../keel-cli/tests/cluster_common/private_pg.rs"]
mod private_pg;

fn event(session_id: &str, iteration: u32) -> Event {
    Event {
        session_id: session_id.into(),
        seq: 0,
        ts: u64::from(iteration),
        run_id: "r-1".into(),
        parent_run_id: None,
        kind: EventKind::TurnStarted { iteration },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_ride_out_a_restart_without_duplicates_or_gaps() {
    let Some(pg) = private_pg::PrivatePg::start() else {
        return;
    };
    let url = pg.create_database("keel_store_restart").await;
    let store = PgStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let store = Arc::new(store);
    let id = "restart-session";
    store
        .create_session(&NewSession {
            id: id.into(),
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
    // Four writers, each appending distinct events for a few seconds.
    let (writers, per_writer) = (4u32, 60u32);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_writer {
                let e = event(id, w * 1000 + i);
                store
                    .append_event(&e)
                    .await
                    .unwrap_or_else(|err| panic!("writer {w}, event {i}: {err}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));
    }
    // Some appends land, then the server goes away for a couple of seconds.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while store.last_seq(id).await.unwrap() < 10 {
        assert!(std::time::Instant::now() < deadline, "no appends");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let impatient = PgStore::connect_with(&url, Duration::from_millis(500))
        .await
        .unwrap()
        .retry_for(Duration::ZERO);
    tokio::task::block_in_place(|| {
        pg.stop_fast();
        std::thread::sleep(Duration::from_secs(2));
    });
    // A read while it is down fails as unavailable (after the retry budget, here none).
    let err = impatient
        .last_seq(id)
        .await
        .expect_err("the database is down");
    assert!(err.is_unavailable(), "{err}");
    assert!(err.to_string().contains("unreachable"), "{err}");
    tokio::task::block_in_place(|| pg.start_again());
    for t in tasks {
        t.await.unwrap();
    }
    let events = store.events(id, 0).await.unwrap();
    let total = (writers * per_writer) as usize;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=total as u64).collect::<Vec<_>>(), "gap-free");
    let distinct: HashSet<u32> = events
        .iter()
        .map(|e| match e.kind {
            EventKind::TurnStarted { iteration } => iteration,
            _ => u32::MAX,
        })
        .collect();
    assert_eq!(distinct.len(), total, "each append stored once");
}
