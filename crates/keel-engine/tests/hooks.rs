//! Custom hooks registered through the session builder: one can deny a tool call (the model
//! reads the reason, nothing runs), hooks run in the order they were added, a note at the
//! finish takes another step, and a stop ends the run `blocked` with a `hook` blocker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_engine::hooks::{Hook, HookAction, HookContext, ToolResultView};
use keel_engine::runtime::{SessionBuilder, SessionOverrides};
use keel_engine::{Engine, RunOptions};
use keel_protocol::{Event, EventKind, SessionStatus, ToolCall};
use keel_store::SqliteStore;

const WRITES: &str = r#"
turns:
  - text: "Writing both files."
    tool_calls:
      - {id: call_secret, name: create_file, arguments: {path: secret.txt, content: "s\n"}}
      - {id: call_notes, name: create_file, arguments: {path: notes.txt, content: "n\n"}}
  - text: "Done: notes written, secret refused."
"#;

type Log = Arc<Mutex<Vec<String>>>;

/// Records every point it sees; denies calls to the paths it guards.
struct Recorder {
    name: String,
    log: Log,
    deny_path: Option<String>,
    finish_note: Option<String>,
    stop_on_finish: bool,
}

impl Recorder {
    fn new(name: &str, log: &Log) -> Self {
        Self {
            name: name.into(),
            log: log.clone(),
            deny_path: None,
            finish_note: None,
            stop_on_finish: false,
        }
    }

    fn push(&self, what: String) {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}:{what}", self.name));
    }
}

impl Hook for Recorder {
    fn name(&self) -> &str {
        &self.name
    }

    fn before_request<'a>(&'a self, cx: &'a HookContext) -> BoxFuture<'a, HookAction> {
        Box::pin(async move {
            self.push(format!("request#{}", cx.iteration));
            HookAction::Continue
        })
    }

    fn before_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, HookAction> {
        Box::pin(async move {
            let path = call.arguments["path"].as_str().unwrap_or_default();
            self.push(format!("before:{path}"));
            match &self.deny_path {
                Some(p) if p == path => {
                    HookAction::Deny(format!("{path} is off limits for this session"))
                }
                _ => HookAction::Continue,
            }
        })
    }

    fn after_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
        result: &'a ToolResultView,
    ) -> BoxFuture<'a, HookAction> {
        Box::pin(async move {
            let path = call.arguments["path"].as_str().unwrap_or_default();
            // Whether it ran or a hook refused it: a guardrail counts only attempts.
            let how = match (result.ran, result.refused) {
                (true, _) => "ran",
                (false, true) => "refused",
                (false, false) => "not run",
            };
            self.push(format!("after:{path}:error={}:{how}", result.is_error));
            HookAction::Continue
        })
    }

    fn on_finish<'a>(&'a self, _cx: &'a HookContext, _text: &'a str) -> BoxFuture<'a, HookAction> {
        Box::pin(async move {
            self.push("finish".into());
            if self.stop_on_finish {
                return HookAction::Stop("A reviewer must sign off first.".into());
            }
            // A note once: the model takes another step.
            let mut log = self.log.lock().unwrap();
            let noted = log.iter().any(|l| l.ends_with(":noted"));
            match &self.finish_note {
                Some(note) if !noted => {
                    log.push(format!("{}:noted", self.name));
                    HookAction::Note(note.clone())
                }
                _ => HookAction::Continue,
            }
        })
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    engine: Engine,
}

fn setup(script: &str, hooks: Vec<Arc<dyn Hook>>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    std::fs::write(dir.path().join("s.yaml"), script).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
    let mut b = SessionBuilder::isolated(store).adjust(Arc::new(|c: &mut keel_engine::Config| {
        c.index.codemap_tokens = 0;
        c.snapshots.enabled = false;
        c.verify.enabled = false;
    }));
    for h in hooks {
        b = b.hook(h);
    }
    let overrides = SessionOverrides {
        script: Some(dir.path().join("s.yaml")),
        ..SessionOverrides::default()
    };
    let engine = b.engine(&ws, &overrides).unwrap();
    Setup {
        _dir: dir,
        ws,
        engine,
    }
}

async fn events(engine: &Engine, session: &str) -> Vec<Event> {
    engine.store().events(session, 0).await.unwrap()
}

fn result_of(events: &[Event], call: &str) -> (String, bool) {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult {
                id,
                content,
                is_error,
                ..
            } if id == call => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn a_custom_hook_denies_a_call_and_the_model_reads_why() {
    let log: Log = Arc::default();
    let mut guard = Recorder::new("guard", &log);
    guard.deny_path = Some("secret.txt".into());
    let s = setup(WRITES, vec![Arc::new(guard)]);
    let out = s
        .engine
        .run("write the files", RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let events = events(&s.engine, &out.session_id).await;
    let (content, is_error) = result_of(&events, "call_secret");
    assert!(is_error);
    assert_eq!(content, "secret.txt is off limits for this session");
    assert!(
        !s.ws.join("secret.txt").exists(),
        "a denied call must not run"
    );
    // The other call ran.
    let (_, notes_error) = result_of(&events, "call_notes");
    assert!(!notes_error);
    assert_eq!(
        std::fs::read_to_string(s.ws.join("notes.txt")).unwrap(),
        "n\n"
    );
}

#[tokio::test]
async fn hooks_run_in_the_order_they_were_added() {
    let log: Log = Arc::default();
    let mut first = Recorder::new("first", &log);
    first.deny_path = Some("secret.txt".into());
    let second = Recorder::new("second", &log);
    let s = setup(WRITES, vec![Arc::new(first), Arc::new(second)]);
    let out = s
        .engine
        .run("write the files", RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        vec![
            "first:request#1",
            "second:request#1",
            // The first hook denies: the second is not asked about that call.
            "first:before:secret.txt",
            "first:after:secret.txt:error=true:refused",
            "second:after:secret.txt:error=true:refused",
            "first:before:notes.txt",
            "second:before:notes.txt",
            "first:after:notes.txt:error=false:ran",
            "second:after:notes.txt:error=false:ran",
            "first:request#2",
            "second:request#2",
            "first:finish",
            "second:finish",
        ]
    );
}

#[tokio::test]
async fn a_note_at_the_finish_takes_another_step() {
    const TWO_ANSWERS: &str = r#"
turns:
  - text: "All done."
  - text: "Checked the changelog too; done."
"#;
    let log: Log = Arc::default();
    let mut reviewer = Recorder::new("reviewer", &log);
    reviewer.finish_note = Some("Before finishing, check the changelog.".into());
    let s = setup(TWO_ANSWERS, vec![Arc::new(reviewer)]);
    let out = s
        .engine
        .run("tidy up", RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert_eq!(out.final_text, "Checked the changelog too; done.");
    assert_eq!(out.iterations, 2);
    let messages = s.engine.store().messages(&out.session_id).await.unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m.text() == "Before finishing, check the changelog."),
        "the model must read the hook's note"
    );
}

#[tokio::test]
async fn a_stop_ends_the_run_blocked_with_a_hook_blocker() {
    const ANSWER: &str = "turns:\n  - text: \"Done.\"\n";
    let log: Log = Arc::default();
    let mut gate = Recorder::new("sign-off", &log);
    gate.stop_on_finish = true;
    let s = setup(ANSWER, vec![Arc::new(gate)]);
    let out = s
        .engine
        .run("ship it", RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, SessionStatus::Blocked);
    let blocker = out.blocker.unwrap();
    assert_eq!(blocker.source, "hook");
    assert_eq!(blocker.question, "A reviewer must sign off first.");
    assert!(
        blocker.evidence[0].contains("sign-off"),
        "{:?}",
        blocker.evidence
    );
}

/// Records a check of its own in the run's event stream at the finish.
struct Reviewer;

impl Hook for Reviewer {
    fn name(&self) -> &str {
        "review"
    }

    fn on_finish<'a>(&'a self, cx: &'a HookContext, text: &'a str) -> BoxFuture<'a, HookAction> {
        Box::pin(async move {
            cx.events
                .emit(EventKind::Verification {
                    gate: "review".into(),
                    passed: true,
                    output: format!("signed off: {text}"),
                    attempt: 1,
                    exit_code: None,
                    duration_ms: 0,
                    required: false,
                })
                .await
                .unwrap();
            HookAction::Continue
        })
    }
}

#[tokio::test]
async fn a_hook_records_its_own_events_in_the_runs_stream() {
    const ANSWER: &str = "turns:\n  - text: \"Done.\"\n";
    let s = setup(ANSWER, vec![Arc::new(Reviewer)]);
    let out = s
        .engine
        .run("ship it", RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let events = events(&s.engine, &out.session_id).await;
    let at = |name: &str| events.iter().position(|e| e.type_name() == name).unwrap();
    let review = &events[at("verification")];
    match &review.kind {
        EventKind::Verification { gate, output, .. } => {
            assert_eq!(gate, "review");
            assert_eq!(output, "signed off: Done.");
        }
        other => panic!("{other:?}"),
    }
    // Stored and numbered like the loop's own, in the run's place in the stream.
    assert!(at("assistant_message") < at("verification"));
    assert!(at("verification") < at("session_finished"));
    assert_eq!(review.run_id, events[at("session_finished")].run_id);
}
