//! Compaction on demand (`Op::Compact`, `Engine::compact_session`): the working context is
//! compacted now, far below the threshold; the `compaction` event names the stored
//! checkpoint, and the next turn's request starts from the compacted context while the stored
//! transcript keeps everything.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides};
use keel_engine::{CollectingSink, RunOptions};
use keel_protocol::{EventKind, Op, SessionStatus};
use keel_store::{SqliteStore, Store};

fn script() -> String {
    let mut s = String::from("turns:\n");
    for i in 0..6 {
        s.push_str(&format!(
            "  - tool_calls:\n      - {{id: read_{i}, name: read_file, arguments: {{path: src/m{i}.rs}}}}\n"
        ));
    }
    s.push_str("  - text: \"Read every module.\"\n");
    s.push_str("  - text: \"Continued from the compacted context.\"\n");
    s
}

fn module(i: usize) -> String {
    (0..40)
        .map(|l| format!("pub fn marker_m{i}_line_{l}() -> usize {{ {l} }}\n"))
        .collect()
}

fn compactions(h: &Harness) -> Vec<(Vec<String>, Option<String>, u64, u64)> {
    h.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Compaction {
                stages,
                checkpoint,
                tokens_before,
                tokens_after,
                ..
            } => Some((stages, checkpoint, tokens_before, tokens_after)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn compact_now_shrinks_the_context_the_next_turn_starts_from() {
    let h = Harness::new(&script());
    for i in 0..6 {
        h.write(&format!("src/m{i}.rs"), &module(i));
    }
    let first = h.run("read the modules").await;
    assert_eq!(first.status, SessionStatus::Completed, "{:?}", first.error);
    // Far below the threshold: nothing was compacted automatically.
    assert!(compactions(&h).is_empty());
    assert!(h.request_text(6).contains("marker_m0_line_39"));

    let report = h
        .engine()
        .compact_session(
            &first.session_id,
            RunOptions {
                sinks: vec![h.sink.clone()],
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(
        report.stages.contains(&"clear_tool_results".to_string()),
        "{report:?}"
    );
    assert!(report.tokens_after < report.tokens_before, "{report:?}");
    let events = compactions(&h);
    assert_eq!(events.len(), 1);
    let (stages, checkpoint, before, after) = &events[0];
    assert_eq!(stages, &report.stages);
    assert_eq!(
        (*before, *after),
        (report.tokens_before, report.tokens_after)
    );
    let handle = checkpoint.clone().unwrap();
    assert_eq!(report.checkpoint.as_deref(), Some(handle.as_str()));

    // The next turn starts from the compacted context; the transcript keeps everything.
    let next = h.resume(&first.session_id, "go on").await;
    assert_eq!(next.status, SessionStatus::Completed, "{:?}", next.error);
    assert_eq!(next.final_text, "Continued from the compacted context.");
    let request = h.request_text(7);
    assert!(
        !request.contains("marker_m0_line_39"),
        "old result still sent"
    );
    // Forced, every stage that applies ran: the oldest step is in the summary block.
    assert!(request.contains("<earlier-work>"), "{request}");
    assert!(request.contains("read_file src/m0.rs"), "{request}");
    assert!(request.contains("go on"));
    let stored = h.store.messages(&first.session_id).await.unwrap();
    assert!(
        serde_json::to_string(&stored)
            .unwrap()
            .contains("marker_m0_line_39")
    );
    // The checkpoint is not a result the model can page through.
    assert!(!request.contains(&handle));
}

#[tokio::test]
async fn the_compact_op_goes_through_the_handle() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    for i in 0..6 {
        std::fs::write(ws.join(format!("src/m{i}.rs")), module(i)).unwrap();
    }
    let ws = ws.canonicalize().unwrap();
    std::fs::write(dir.path().join("s.yaml"), script()).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let b = SessionBuilder::isolated(store).adjust(Arc::new(|c: &mut keel_engine::Config| {
        c.index.codemap_tokens = 0;
        c.snapshots.enabled = false;
        c.verify.enabled = false;
    }));
    let overrides = SessionOverrides {
        script: Some(dir.path().join("s.yaml")),
        ..SessionOverrides::default()
    };
    let engine = Arc::new(b.engine(&ws, &overrides).unwrap());
    let sink = CollectingSink::new();
    let (handle, _) = SessionHandle::create(engine, vec![sink.clone()])
        .await
        .unwrap();
    // A session with no conversation yet has nothing to compact: no event.
    assert!(matches!(handle.submit(Op::Compact).await, Ok(OpAck::Done)));
    assert!(!sink.types().contains(&"compaction"));

    let OpAck::Turn(ticket) = handle
        .submit(Op::user_message("read the modules"))
        .await
        .unwrap()
    else {
        panic!("expected a turn")
    };
    assert_eq!(ticket.finished().await.status, SessionStatus::Completed);
    assert!(matches!(handle.submit(Op::Compact).await, Ok(OpAck::Done)));
    let compaction = sink
        .events()
        .into_iter()
        .find(|e| e.type_name() == "compaction")
        .unwrap();
    match compaction.kind {
        EventKind::Compaction {
            checkpoint, stages, ..
        } => {
            assert!(checkpoint.is_some_and(|c| c.starts_with("compact-")));
            assert!(stages.contains(&"clear_tool_results".to_string()));
        }
        _ => unreachable!(),
    }
    // Stored like every event: seq continues after the turn's events.
    let seqs: Vec<u64> = sink.events().iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}
