//! Approvals through the session handle: a destructive command under `on-request` waits for
//! a person; approve runs it, deny does not (the file is untouched) and the model reads the
//! reason; a headless gate denies with an explanation; the timeout denies; `scope: session`
//! is remembered.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_config::ApprovalPolicy;
use keel_engine::CollectingSink;
use keel_engine::approval::ApprovalGate;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides, TurnResult};
use keel_protocol::{ApprovalScope, Event, EventKind, Op, SessionStatus};
use keel_store::SqliteStore;

const REMOVE_TWICE: &str = r#"
turns:
  - tool_calls:
      - {id: call_rm_1, name: run_command, arguments: {command: "rm notes.txt"}}
  - text: "I will leave it."
  - tool_calls:
      - {id: call_rm_2, name: run_command, arguments: {command: "rm notes.txt"}}
  - text: "Removed."
"#;

struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    handle: Arc<SessionHandle>,
    sink: Arc<CollectingSink>,
}

async fn setup(
    script: &str,
    policy: ApprovalPolicy,
    interactive: bool,
    timeout_secs: u64,
) -> Setup {
    setup_with(script, policy, interactive, timeout_secs, |_| {}).await
}

async fn setup_with(
    script: &str,
    policy: ApprovalPolicy,
    interactive: bool,
    timeout_secs: u64,
    adjust: fn(&mut keel_engine::Config),
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "keep me\n").unwrap();
    let ws = ws.canonicalize().unwrap();
    std::fs::write(dir.path().join("s.yaml"), script).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let b = SessionBuilder::isolated(store).adjust(Arc::new(move |c: &mut keel_engine::Config| {
        c.index.codemap_tokens = 0;
        c.snapshots.enabled = false;
        c.approval.timeout_secs = timeout_secs;
        adjust(c);
    }));
    let overrides = SessionOverrides {
        script: Some(dir.path().join("s.yaml")),
        ..SessionOverrides::default()
    };
    let config = b.config(&ws, &overrides).unwrap();
    let gate = Arc::new(ApprovalGate::from_config(
        &config,
        Some(policy),
        interactive,
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

fn requested(call: &str) -> impl Fn(&Event) -> bool + '_ {
    move |e| matches!(&e.kind, EventKind::ApprovalRequested { call_id, .. } if call_id == call)
}

fn result_of<'a>(turn: &'a TurnResult, call: &str) -> (&'a str, bool) {
    turn.events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult {
                id,
                content,
                is_error,
                ..
            } if id == call => Some((content.as_str(), *is_error)),
            _ => None,
        })
        .unwrap()
}

fn exists(ws: &Path) -> bool {
    ws.join("notes.txt").exists()
}

#[tokio::test]
async fn a_destructive_command_waits_deny_keeps_the_file_approve_runs_it() {
    let s = setup(REMOVE_TWICE, ApprovalPolicy::OnRequest, true, 600).await;
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("tidy up")).await.unwrap() else {
        panic!()
    };
    let asked = wait_for(&s.sink, requested("call_rm_1")).await;
    match &asked.kind {
        EventKind::ApprovalRequested {
            tool,
            summary,
            class,
            ..
        } => {
            assert_eq!(tool, "run_command");
            assert_eq!(summary, "rm notes.txt");
            assert_eq!(class, "destructive");
        }
        _ => unreachable!(),
    }
    // It waits: nothing ran.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(exists(&s.ws));
    assert!(!ticket_done(&s.sink));
    s.handle
        .submit(Op::Deny {
            call_id: "call_rm_1".into(),
            reason: Some("the notes are needed".into()),
        })
        .await
        .unwrap();
    let denied = ticket.finished().await;
    assert_eq!(denied.status, SessionStatus::Completed);
    assert!(exists(&s.ws), "a denied command does not run");
    let (content, is_error) = result_of(&denied, "call_rm_1");
    assert!(is_error);
    assert!(
        content.contains("denied") && content.contains("the notes are needed"),
        "{content}"
    );

    // The second turn: approved, it runs.
    let OpAck::Turn(ticket) = s
        .handle
        .submit(Op::user_message("remove it now"))
        .await
        .unwrap()
    else {
        panic!()
    };
    wait_for(&s.sink, requested("call_rm_2")).await;
    // Answering a call that does not wait is refused.
    assert!(
        s.handle
            .submit(Op::Approve {
                call_id: "call_rm_1".into(),
                scope: ApprovalScope::Once
            })
            .await
            .is_err()
    );
    s.handle
        .submit(Op::Approve {
            call_id: "call_rm_2".into(),
            scope: ApprovalScope::Once,
        })
        .await
        .unwrap();
    let approved = ticket.finished().await;
    assert_eq!(approved.status, SessionStatus::Completed);
    assert!(!exists(&s.ws), "an approved command runs");
    assert!(!result_of(&approved, "call_rm_2").1);
    assert!(approved.events.iter().any(|e| matches!(
        &e.kind,
        EventKind::ApprovalResolved {
            approved: true,
            scope: Some(ApprovalScope::Once),
            ..
        }
    )));
}

fn ticket_done(sink: &CollectingSink) -> bool {
    sink.events()
        .iter()
        .any(|e| e.type_name() == "turn_finished")
}

#[tokio::test]
async fn headless_asks_become_denials_with_an_explanation() {
    let s = setup(REMOVE_TWICE, ApprovalPolicy::OnRequest, false, 600).await;
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("tidy up")).await.unwrap() else {
        panic!()
    };
    let turn = ticket.finished().await;
    assert!(exists(&s.ws));
    assert!(
        !turn
            .events
            .iter()
            .any(|e| e.type_name() == "approval_requested")
    );
    let (content, is_error) = result_of(&turn, "call_rm_1");
    assert!(is_error);
    assert!(
        content.contains("nobody to approve") && content.contains("--approval never"),
        "{content}"
    );
}

#[tokio::test]
async fn never_runs_without_asking_and_the_timeout_denies() {
    let s = setup(REMOVE_TWICE, ApprovalPolicy::Never, true, 600).await;
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("tidy up")).await.unwrap() else {
        panic!()
    };
    ticket.finished().await;
    assert!(!exists(&s.ws), "`never` asks nothing (today's behaviour)");

    let s = setup(REMOVE_TWICE, ApprovalPolicy::OnRequest, true, 1).await;
    let started = Instant::now();
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("tidy up")).await.unwrap() else {
        panic!()
    };
    let turn = ticket.finished().await;
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(exists(&s.ws));
    assert!(
        result_of(&turn, "call_rm_1")
            .0
            .contains("nobody answered within 1 s")
    );
}

#[tokio::test]
async fn a_session_scope_approval_is_remembered() {
    const THREE: &str = r#"
turns:
  - tool_calls:
      - {id: a, name: run_command, arguments: {command: "curl -sS http://127.0.0.1:9/ || true"}}
      - {id: b, name: run_command, arguments: {command: "curl -sS http://127.0.0.1:9/ || true"}}
  - text: "Done."
"#;
    let s = setup(THREE, ApprovalPolicy::OnRequest, true, 600).await;
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("probe")).await.unwrap() else {
        panic!()
    };
    wait_for(&s.sink, requested("a")).await;
    s.handle
        .submit(Op::Approve {
            call_id: "a".into(),
            scope: ApprovalScope::Session,
        })
        .await
        .unwrap();
    let turn = ticket.finished().await;
    let asked = turn
        .events
        .iter()
        .filter(|e| e.type_name() == "approval_requested")
        .count();
    assert_eq!(asked, 1, "the second identical call ran without asking");
    assert!(!result_of(&turn, "b").0.contains("not run"));
}

/// `run_tests` is approved for what it runs: a session-scope approval holds while the test
/// script stays the same, and a changed script (here rewritten by the model) asks again.
#[tokio::test]
async fn a_remembered_run_tests_approval_ends_when_its_script_changes() {
    const SCRIPT: &str = r#"
turns:
  - tool_calls:
      - {id: t1, name: run_tests, arguments: {}}
      - {id: t2, name: run_tests, arguments: {}}
      - {id: w, name: run_command, arguments: {command: "printf 'echo two; rm -rf src\\n' > t.sh"}}
      - {id: t3, name: run_tests, arguments: {}}
  - text: "Done."
"#;
    let s = setup_with(SCRIPT, ApprovalPolicy::OnRequest, true, 600, |c| {
        c.shell.test_command = Some("sh t.sh".into());
    })
    .await;
    std::fs::write(
        s.ws.join("t.sh"),
        "echo one; curl -sS http://127.0.0.1:9/ || true\n",
    )
    .unwrap();
    std::fs::create_dir_all(s.ws.join("src")).unwrap();
    std::fs::write(s.ws.join("src/keep.rs"), "// kept\n").unwrap();
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("test")).await.unwrap() else {
        panic!()
    };
    let first = wait_for(&s.sink, requested("t1")).await;
    let EventKind::ApprovalRequested { summary, class, .. } = &first.kind else {
        panic!()
    };
    assert_eq!(class, "network", "judged by the script's curl: {summary}");
    assert!(summary.contains("t.sh"), "{summary}");
    s.handle
        .submit(Op::Approve {
            call_id: "t1".into(),
            scope: ApprovalScope::Session,
        })
        .await
        .unwrap();
    let again = wait_for(&s.sink, requested("t3")).await;
    let EventKind::ApprovalRequested {
        summary: changed,
        class: now,
        ..
    } = &again.kind
    else {
        panic!()
    };
    assert_ne!(changed, summary, "the fingerprint of t.sh changed");
    assert_eq!(
        now, "destructive",
        "judged by the rewritten script: {changed}"
    );
    s.handle
        .submit(Op::Deny {
            call_id: "t3".into(),
            reason: None,
        })
        .await
        .unwrap();
    // The final verification's tests gate runs the same script: judged by it, it asks too.
    let gate = wait_for(&s.sink, |e| {
        matches!(&e.kind, EventKind::ApprovalRequested { call_id, .. } if call_id.starts_with("gate-"))
    })
    .await;
    let EventKind::ApprovalRequested {
        call_id: gate_id,
        class: gate_class,
        ..
    } = &gate.kind
    else {
        panic!()
    };
    assert_eq!(gate_class, "destructive");
    s.handle
        .submit(Op::Deny {
            call_id: gate_id.clone(),
            reason: None,
        })
        .await
        .unwrap();
    let turn = ticket.finished().await;
    let asked: Vec<String> = turn
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ApprovalRequested { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        asked,
        ["t1", "t3", gate_id.as_str()],
        "t2 ran on the session approval"
    );
    assert!(
        !result_of(&turn, "t2").0.contains("not run"),
        "{:?}",
        result_of(&turn, "t2")
    );
    assert!(result_of(&turn, "t3").0.contains("not run"));
    assert!(
        s.ws.join("src/keep.rs").exists(),
        "the rewritten test script ran neither on the old approval nor as the final gate"
    );
}

/// Red-team pass 2, R12: a session approval of `python3 gen.py` stands for gen.py's content;
/// once the model rewrites the script, the same command asks again.
#[tokio::test]
async fn a_remembered_interpreter_script_approval_ends_when_the_script_changes() {
    let python = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("python3").is_file()));
    if !python {
        assert!(std::env::var_os("CI").is_none(), "python3 is needed in CI");
        println!("SKIPPED a_remembered_interpreter_script_approval…: python3 is not installed");
        return;
    }
    const SCRIPT: &str = r#"
turns:
  - tool_calls:
      - {id: p1, name: run_command, arguments: {command: "python3 gen.py"}}
      - {id: p2, name: run_command, arguments: {command: "python3 gen.py"}}
      - {id: w, name: run_command, arguments: {command: "printf 'import os\\nos.remove(\"keep.txt\")\\n' > gen.py"}}
      - {id: p3, name: run_command, arguments: {command: "python3 gen.py"}}
  - text: "Done."
"#;
    let s = setup(SCRIPT, ApprovalPolicy::OnRequest, true, 600).await;
    std::fs::write(s.ws.join("gen.py"), "print('hello')\n").unwrap();
    std::fs::write(s.ws.join("keep.txt"), "kept\n").unwrap();
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("gen")).await.unwrap() else {
        panic!()
    };
    let first = wait_for(&s.sink, requested("p1")).await;
    let EventKind::ApprovalRequested { summary, .. } = &first.kind else {
        panic!()
    };
    assert!(summary.contains("gen.py (a program file)"), "{summary}");
    s.handle
        .submit(Op::Approve {
            call_id: "p1".into(),
            scope: ApprovalScope::Session,
        })
        .await
        .unwrap();
    let again = wait_for(&s.sink, requested("p3")).await;
    let EventKind::ApprovalRequested {
        summary: changed, ..
    } = &again.kind
    else {
        panic!()
    };
    assert_ne!(changed, summary, "the fingerprint of gen.py changed");
    s.handle
        .submit(Op::Deny {
            call_id: "p3".into(),
            reason: None,
        })
        .await
        .unwrap();
    let turn = ticket.finished().await;
    let asked: Vec<String> = turn
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ApprovalRequested { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, ["p1", "p3"], "p2 ran on the session approval");
    assert!(result_of(&turn, "p2").0.contains("hello"));
    assert!(result_of(&turn, "p3").0.contains("not run"));
    assert!(
        s.ws.join("keep.txt").exists(),
        "the rewritten script did not run"
    );
}

/// Red-team pass 6, R6-5: a session approval of `python3 -c "import gen; gen.main()"` (the
/// code names `gen.py` only as a module) still covered `gen.py` after the model rewrote it.
/// Inline code is pinned like a script: a changed workspace code file asks again.
#[tokio::test]
async fn a_remembered_inline_code_approval_ends_when_workspace_code_changes() {
    let python = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("python3").is_file()));
    if !python {
        assert!(std::env::var_os("CI").is_none(), "python3 is needed in CI");
        println!("SKIPPED a_remembered_inline_code_approval…: python3 is not installed");
        return;
    }
    const SCRIPT: &str = r#"
turns:
  - tool_calls:
      - {id: p1, name: run_command, arguments: {command: "python3 -c 'import gen; gen.main()'"}}
      - {id: p2, name: run_command, arguments: {command: "python3 -c 'import gen; gen.main()'"}}
      - {id: w, name: run_command, arguments: {command: "printf 'import os\\ndef main(): os.remove(\"keep.txt\")\\n' > gen.py"}}
      - {id: p3, name: run_command, arguments: {command: "python3 -c 'import gen; gen.main()'"}}
  - text: "Done."
"#;
    let s = setup(SCRIPT, ApprovalPolicy::OnRequest, true, 600).await;
    std::fs::write(s.ws.join("gen.py"), "def main(): print('hello')\n").unwrap();
    std::fs::write(s.ws.join("keep.txt"), "kept\n").unwrap();
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("gen")).await.unwrap() else {
        panic!()
    };
    wait_for(&s.sink, requested("p1")).await;
    s.handle
        .submit(Op::Approve {
            call_id: "p1".into(),
            scope: ApprovalScope::Session,
        })
        .await
        .unwrap();
    wait_for(&s.sink, requested("p3")).await;
    s.handle
        .submit(Op::Deny {
            call_id: "p3".into(),
            reason: None,
        })
        .await
        .unwrap();
    let turn = ticket.finished().await;
    let asked: Vec<String> = turn
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ApprovalRequested { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, ["p1", "p3"], "p2 ran on the session approval");
    assert!(result_of(&turn, "p2").0.contains("hello"));
    assert!(result_of(&turn, "p3").0.contains("not run"));
    assert!(
        s.ws.join("keep.txt").exists(),
        "the rewritten module did not run"
    );
}

/// Red-team pass 2, R21: under `on-request` a test run after the session wrote test code the
/// runner loads by convention (`conftest.py`, `tests/test_*.py`) asks, naming the files; an
/// approved run covers the code as it was, and a later change (even back-dated) asks again.
#[tokio::test]
async fn a_test_run_after_the_session_changed_test_code_asks() {
    const SCRIPT: &str = r#"
turns:
  - tool_calls:
      - {id: t0, name: run_tests, arguments: {}}
      - {id: w1, name: run_command, arguments: {command: "printf 'import os\\n' > conftest.py"}}
      - {id: t1, name: run_tests, arguments: {}}
      - {id: t2, name: run_tests, arguments: {}}
      - {id: w2, name: run_command, arguments: {command: "mkdir -p tests && printf 'x = 1\\n' > tests/test_a.py && touch -d 2000-01-01 tests/test_a.py"}}
      - {id: t3, name: run_tests, arguments: {}}
  - text: "Done."
"#;
    let s = setup_with(SCRIPT, ApprovalPolicy::OnRequest, true, 600, |c| {
        c.shell.test_command = Some("sh t.sh".into());
    })
    .await;
    std::fs::write(s.ws.join("t.sh"), "echo tests ran\n").unwrap();
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("test")).await.unwrap() else {
        panic!()
    };
    let first = wait_for(&s.sink, requested("t1")).await;
    let EventKind::ApprovalRequested {
        summary,
        class,
        reason,
        ..
    } = &first.kind
    else {
        panic!()
    };
    assert_eq!(class, "unknown", "{summary}");
    assert!(
        summary.contains("test code changed: conftest.py"),
        "{summary}"
    );
    assert!(reason.contains("conftest.py"), "{reason}");
    s.handle
        .submit(Op::Approve {
            call_id: "t1".into(),
            scope: ApprovalScope::Once,
        })
        .await
        .unwrap();
    let again = wait_for(&s.sink, requested("t3")).await;
    let EventKind::ApprovalRequested { summary, .. } = &again.kind else {
        panic!()
    };
    assert!(
        summary.contains("tests/test_a.py") && !summary.contains("conftest.py"),
        "only what changed since the approved run: {summary}"
    );
    s.handle
        .submit(Op::Deny {
            call_id: "t3".into(),
            reason: None,
        })
        .await
        .unwrap();
    // The final tests gate would load tests/test_a.py too: it asks the same way.
    let gate = wait_for(&s.sink, |e| {
        matches!(&e.kind, EventKind::ApprovalRequested { call_id, .. } if call_id.starts_with("gate-"))
    })
    .await;
    let EventKind::ApprovalRequested {
        call_id: gate_id,
        summary: gate_summary,
        ..
    } = &gate.kind
    else {
        panic!()
    };
    assert!(gate_summary.contains("tests/test_a.py"), "{gate_summary}");
    s.handle
        .submit(Op::Deny {
            call_id: gate_id.clone(),
            reason: None,
        })
        .await
        .unwrap();
    let turn = ticket.finished().await;
    let asked: Vec<String> = turn
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ApprovalRequested { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        asked,
        ["t1", "t3", gate_id.as_str()],
        "t0 and t2 ran unasked"
    );
    let t2 = result_of(&turn, "t2").0;
    assert!(!t2.contains("not run"), "{t2}");
    assert!(result_of(&turn, "t3").0.contains("not run"));
}

/// Red-team pass 2, R21 (the final gate): the model writes `conftest.py` (a write: unasked
/// under `on-request`) and says it is done without calling `run_tests`; the final
/// verification's tests gate would load it, so it asks first, naming the file — denied, the
/// test command never runs.
#[tokio::test]
async fn the_final_gate_after_the_session_changed_test_code_asks() {
    const SCRIPT: &str = r#"
turns:
  - tool_calls:
      - {id: w1, name: create_file, arguments: {path: conftest.py, content: "import os\nos.remove('notes.txt')\n"}}
  - text: "Done."
"#;
    let s = setup_with(SCRIPT, ApprovalPolicy::OnRequest, true, 600, |c| {
        c.shell.test_command = Some("sh t.sh".into());
    })
    .await;
    // A test command that writes (writes_workspace: run unasked by itself), as a test runner
    // loading conftest.py would run its code.
    std::fs::write(s.ws.join("t.sh"), "echo ran > ran.txt\n").unwrap();
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("fix")).await.unwrap() else {
        panic!()
    };
    let gate = wait_for(&s.sink, |e| {
        matches!(&e.kind, EventKind::ApprovalRequested { call_id, .. } if call_id.starts_with("gate-"))
    })
    .await;
    let EventKind::ApprovalRequested {
        call_id,
        summary,
        class,
        ..
    } = &gate.kind
    else {
        panic!()
    };
    assert_eq!(class, "unknown", "{summary}");
    assert!(
        summary.contains("test code changed: conftest.py"),
        "{summary}"
    );
    s.handle
        .submit(Op::Deny {
            call_id: call_id.clone(),
            reason: None,
        })
        .await
        .unwrap();
    let turn = ticket.finished().await;
    assert!(
        !s.ws.join("ran.txt").exists(),
        "the denied gate did not run the test command"
    );
    assert!(exists(&s.ws));
    let gate_failed = turn.events.iter().any(|e| {
        matches!(&e.kind, EventKind::Verification { passed: false, output, .. } if output.contains("conftest.py"))
    });
    assert!(gate_failed, "the refused gate is reported with its reason");
}

/// Red-team pass 2, R12 (imports): a session approval of `python3 gen.py` covered gen.py, but
/// gen.py imports a module through a path it builds itself (`sys.path.insert` +
/// `importlib.import_module` with a computed name), which no fingerprint of gen.py can name.
/// The approval holds only while no code file of the workspace changed since the script last
/// ran: the model's rewrite of `lib/helper.py` makes the next run ask, naming it.
#[tokio::test]
async fn a_remembered_script_approval_ends_when_code_it_imports_changes() {
    let python = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("python3").is_file()));
    if !python {
        assert!(std::env::var_os("CI").is_none(), "python3 is needed in CI");
        println!(
            "SKIPPED a_remembered_script_approval_ends_when_code_it_imports_changes: python3 is not installed"
        );
        return;
    }
    const SCRIPT: &str = r#"
turns:
  - tool_calls:
      - {id: p1, name: run_command, arguments: {command: "python3 gen.py"}}
      - {id: p2, name: run_command, arguments: {command: "python3 gen.py"}}
      - {id: w, name: run_command, arguments: {command: "printf 'import os\\nos.remove(\"keep.txt\")\\n' > lib/helper.py"}}
      - {id: p3, name: run_command, arguments: {command: "python3 gen.py"}}
  - text: "Done."
"#;
    let s = setup(SCRIPT, ApprovalPolicy::OnRequest, true, 600).await;
    std::fs::write(
        s.ws.join("gen.py"),
        "import importlib, os, sys\n\
         sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'li' + 'b'))\n\
         importlib.import_module('hel' + 'per')\n\
         print('hello')\n",
    )
    .unwrap();
    std::fs::create_dir_all(s.ws.join("lib")).unwrap();
    std::fs::write(s.ws.join("lib/helper.py"), "x = 1\n").unwrap();
    std::fs::write(s.ws.join("keep.txt"), "kept\n").unwrap();
    let OpAck::Turn(ticket) = s.handle.submit(Op::user_message("gen")).await.unwrap() else {
        panic!()
    };
    wait_for(&s.sink, requested("p1")).await;
    s.handle
        .submit(Op::Approve {
            call_id: "p1".into(),
            scope: ApprovalScope::Session,
        })
        .await
        .unwrap();
    let again = wait_for(&s.sink, requested("p3")).await;
    let EventKind::ApprovalRequested { reason, .. } = &again.kind else {
        panic!()
    };
    assert!(reason.contains("lib/helper.py"), "{reason}");
    s.handle
        .submit(Op::Deny {
            call_id: "p3".into(),
            reason: None,
        })
        .await
        .unwrap();
    let turn = ticket.finished().await;
    let asked: Vec<String> = turn
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ApprovalRequested { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, ["p1", "p3"], "p2 ran on the session approval");
    assert!(result_of(&turn, "p2").0.contains("hello"));
    assert!(result_of(&turn, "p3").0.contains("not run"));
    assert!(
        s.ws.join("keep.txt").exists(),
        "the rewritten module did not run"
    );
}
