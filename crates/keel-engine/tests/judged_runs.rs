//! Red-team pass 6, R6-15: a race between judging and running. `run_tests` (and `sh t.sh`)
//! is judged by the script it runs and a person approves it as shown; meanwhile another
//! command of the session (a subagent's) swaps the script, and the approved call ran what
//! nobody judged. The one runner now starts a judged line only with the files it was judged
//! by, and nothing else in the workspace runs or writes while it does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_config::ApprovalPolicy;
use keel_engine::CollectingSink;
use keel_engine::approval::ApprovalGate;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides};
use keel_protocol::{ApprovalScope, Event, EventKind, Op};
use keel_store::SqliteStore;

struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    handle: Arc<SessionHandle>,
    sink: Arc<CollectingSink>,
}

async fn setup(script: &str, test_command: &'static str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/keep.rs"), "// kept\n").unwrap();
    let ws = ws.canonicalize().unwrap();
    std::fs::write(dir.path().join("s.yaml"), script).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let b = SessionBuilder::isolated(store).adjust(Arc::new(move |c: &mut keel_engine::Config| {
        c.index.codemap_tokens = 0;
        c.snapshots.enabled = false;
        c.verify.enabled = false;
        c.approval.timeout_secs = 600;
        c.shell.test_command = Some(test_command.into());
    }));
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
    Setup {
        _dir: dir,
        ws,
        handle: Arc::new(handle.approvals(gate)),
        sink,
    }
}

async fn wait_for(sink: &CollectingSink, what: impl Fn(&Event) -> bool) -> Event {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(e) = sink.events().into_iter().find(|e| what(e)) {
            return e;
        }
        assert!(Instant::now() < deadline, "timed out waiting for an event");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn result(events: &[Event], call: &str) -> String {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult { id, content, .. } if id == call => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_script_swapped_while_its_approval_is_read_does_not_run() {
    const SCRIPT: &str = r#"
turns:
  - tool_calls:
      - {id: t1, name: run_tests, arguments: {}}
      - {id: t2, name: run_command, arguments: {command: "sh t.sh"}}
  - text: "Done."
"#;
    let s = setup(SCRIPT, "sh t.sh").await;
    let judged = "echo one; curl -sS http://127.0.0.1:9/ || true\n";
    std::fs::write(s.ws.join("t.sh"), judged).unwrap();
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("test")).await.unwrap() else {
        panic!()
    };
    for (k, call) in ["t1", "t2"].into_iter().enumerate() {
        let asked = wait_for(
            &s.sink,
            |e| matches!(&e.kind, EventKind::ApprovalRequested { call_id, .. } if call_id == call),
        )
        .await;
        let EventKind::ApprovalRequested { summary, .. } = &asked.kind else {
            panic!()
        };
        assert!(summary.contains("t.sh"), "{summary}");
        // While the person reads, another command of the session swaps the script.
        std::fs::write(s.ws.join("t.sh"), format!("echo swapped{k}; rm -rf src\n")).unwrap();
        s.handle
            .submit(Op::Approve {
                call_id: call.into(),
                scope: ApprovalScope::Once,
            })
            .await
            .unwrap();
        wait_for(
            &s.sink,
            |e| matches!(&e.kind, EventKind::ToolResult { id, .. } if id == call),
        )
        .await;
    }
    let turn = ticket.finished().await;
    for call in ["t1", "t2"] {
        let text = result(&turn.events, call);
        assert!(
            text.contains("`t.sh` changed after this command was judged"),
            "{call}: {text}"
        );
    }
    assert!(
        s.ws.join("src/keep.rs").exists(),
        "the swapped script ran on the approval of the judged one"
    );
}
