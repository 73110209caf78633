//! Red-team pass 10, R10-23: a person's "yes" was noted in a process-wide list keyed by the
//! session and the model-chosen call id, and taken only when the call ran. A call approved
//! and then ended before it ran (a cancel, an error while the turn's snapshot was taken) left
//! its note behind; the next turn's unasked call with the same id (ids repeat: `call_0` for a
//! provider that sends none, or whatever a hostile endpoint sends) took it and ran with what
//! an approval lifts — the workspace's virtual environment writable, a `.pth` planted there
//! that the user's next `python` runs. Now the approval travels with the call it was given
//! for and ends with it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use keel_config::ApprovalPolicy;
use keel_engine::CollectingSink;
use keel_engine::approval::ApprovalGate;
use keel_engine::hooks::{Hook, HookContext};
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides};
use keel_phase::CommandAccess;
use keel_protocol::{ApprovalScope, Event, EventKind, Op, ToolCall};
use keel_store::SqliteStore;

const SITE: &str = ".venv/lib/python3.11/site-packages";

/// Every call has the id `x`: the first is asked (it deletes), the second only writes, the
/// third is asked and says it changes installed dependencies.
const SAME_ID: &str = r#"
turns:
  - tool_calls:
      - {id: x, name: run_command, arguments: {command: "rm notes.txt"}}
  - tool_calls:
      - {id: x, name: run_command, arguments: {command: "echo 'import os' > .venv/lib/python3.11/site-packages/zz.pth"}}
  - text: "Done."
  - tool_calls:
      - {id: x, name: run_command, arguments: {command: "rm notes.txt && echo 'import os' > .venv/lib/python3.11/site-packages/ok.pth"}}
  - text: "Done."
"#;

/// Fails the run the first time a call is about to run (the store could not record the
/// turn's snapshot), after the call was approved.
struct FailsOnce(AtomicBool);

impl Hook for FailsOnce {
    fn name(&self) -> &str {
        "fails-once"
    }

    fn before_run<'a>(
        &'a self,
        cx: &'a HookContext,
        _call: &'a ToolCall,
        _access: CommandAccess,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if !self.0.swap(true, Ordering::SeqCst) {
                cx.fail(keel_engine::EngineError::Internal(
                    "the store could not record the snapshot".into(),
                ));
            }
        })
    }
}

fn write(ws: &Path, rel: &str, text: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

async fn wait_for(sink: &CollectingSink, what: impl Fn(&Event) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sink.events().iter().any(&what) {
        assert!(Instant::now() < deadline, "timed out waiting for an event");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_approval_ends_with_its_call_and_no_later_call_takes_it() {
    if !keel_tools::sandbox::is_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs the kernel sandbox"
        );
        println!("SKIPPED: no kernel sandbox here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    write(&ws, "notes.txt", "keep me\n");
    write(&ws, ".gitignore", ".venv/\n");
    write(&ws, ".venv/pyvenv.cfg", "home = /usr/bin\n");
    write(&ws, &format!("{SITE}/pip/__init__.py"), "# pip\n");
    std::fs::write(dir.path().join("s.yaml"), SAME_ID).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let b = SessionBuilder::isolated(store)
        .adjust(Arc::new(|c: &mut keel_engine::Config| {
            c.index.codemap_tokens = 0;
            c.snapshots.enabled = false;
            c.verify.enabled = false;
        }))
        .hook(Arc::new(FailsOnce(AtomicBool::new(false))));
    let overrides = SessionOverrides {
        script: Some(dir.path().join("s.yaml")),
        ..SessionOverrides::default()
    };
    let config = b.config(&ws, &overrides).unwrap();
    let gate = Arc::new(ApprovalGate::from_config(
        &config,
        Some(ApprovalPolicy::OnRequest),
        true,
    ));
    let engine = Arc::new(b.engine_with(config, &ws).unwrap());
    let sink = CollectingSink::new();
    let (handle, _) = SessionHandle::create(engine, vec![sink.clone()])
        .await
        .unwrap();
    let handle = handle.approvals(gate);

    // The first call is asked and approved, but the run ends before it runs.
    let OpAck::Turn(ticket) = handle.submit(Op::user_message("tidy up")).await.unwrap() else {
        panic!()
    };
    wait_for(
        &sink,
        |e| matches!(&e.kind, EventKind::ApprovalRequested { call_id, .. } if call_id == "x"),
    )
    .await;
    handle
        .submit(Op::Approve {
            call_id: "x".into(),
            scope: ApprovalScope::Once,
        })
        .await
        .unwrap();
    ticket.finished().await;
    assert!(ws.join("notes.txt").exists(), "the approved call never ran");

    // The next turn's call with the same id is nobody's approved call: the environment stays
    // read-only to it (or what it wrote there is moved aside).
    let OpAck::Turn(ticket) = handle.submit(Op::user_message("go on")).await.unwrap() else {
        panic!()
    };
    let turn = ticket.finished().await;
    let asked = turn
        .events
        .iter()
        .filter(|e| e.type_name() == "approval_requested")
        .count();
    assert_eq!(asked, 0, "the write was not asked about: {:?}", turn.events);
    assert!(
        turn.events.iter().any(|e| matches!(
            &e.kind,
            EventKind::ToolResult { id, .. } if id == "x"
        )),
        "the second call ran"
    );
    assert!(
        !ws.join(SITE).join("zz.pth").exists(),
        "an unapproved command planted a .pth into the workspace's virtual environment"
    );

    // A call a person approves still runs with what the approval lifts.
    let OpAck::Turn(ticket) = handle.submit(Op::user_message("now")).await.unwrap() else {
        panic!()
    };
    wait_for(&sink, |e| {
        matches!(&e.kind, EventKind::ApprovalRequested { call_id, summary, .. }
            if call_id == "x" && summary.contains("ok.pth"))
    })
    .await;
    handle
        .submit(Op::Approve {
            call_id: "x".into(),
            scope: ApprovalScope::Once,
        })
        .await
        .unwrap();
    ticket.finished().await;
    assert!(!ws.join("notes.txt").exists(), "the approved call ran");
    assert!(
        ws.join(SITE).join("ok.pth").exists(),
        "the approved write into the environment was kept"
    );
}
