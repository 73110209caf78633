//! Subagents through real sessions, with scripted models for the parent and each child:
//! parallel explorers, a worker's edit, a tool outside the role refused, the depth limit,
//! cancellation and timeouts, the usage roll-up and how the events nest.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_engine::agents::ChildProviders;
use keel_engine::{CollectingSink, Config, Engine, EngineBuilder, RunOptions, RunOutcome};
use keel_llm::Provider;
use keel_llm::scripted::ScriptedProvider;
use keel_protocol::{Event, EventKind, SessionStatus};
use keel_store::SqliteStore;

struct Setup {
    dir: tempfile::TempDir,
    parent: ScriptedProvider,
    children: Vec<ScriptedProvider>,
    sink: Arc<CollectingSink>,
    engine: Engine,
}

fn config() -> Config {
    let mut config = Config::default();
    config.verify.enabled = false;
    config.index.enabled = false;
    config.snapshots.enabled = false;
    config
}

fn setup_with(parent: &str, children: &[&str], config: Config) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    )
    .unwrap();
    let parent = ScriptedProvider::from_yaml(parent).unwrap();
    let children: Vec<ScriptedProvider> = children
        .iter()
        .map(|c| ScriptedProvider::from_yaml(c).unwrap())
        .collect();
    let queue = Arc::new(Mutex::new(
        children.iter().cloned().collect::<VecDeque<_>>(),
    ));
    let factory: ChildProviders = Arc::new(move |_model: Option<&str>| {
        let next = queue.lock().unwrap().pop_front();
        next.map(|p| Arc::new(p) as Arc<dyn Provider>)
            .ok_or_else(|| "no child script left".to_string())
    });
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(parent.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .child_providers(factory)
        .build()
        .unwrap();
    Setup {
        dir,
        parent,
        children,
        sink: CollectingSink::new(),
        engine,
    }
}

fn setup(parent: &str, children: &[&str]) -> Setup {
    setup_with(parent, children, config())
}

impl Setup {
    async fn run(&self, task: &str) -> RunOutcome {
        self.engine
            .run(
                task,
                RunOptions {
                    sinks: vec![self.sink.clone()],
                    ..RunOptions::default()
                },
            )
            .await
            .unwrap()
    }

    fn events(&self) -> Vec<Event> {
        self.sink.events()
    }

    /// The text of every tool result the parent's model received in its last request.
    fn parent_saw(&self) -> String {
        let requests = self.parent.requests();
        let last = requests.last().unwrap();
        serde_json::to_string(&last.messages).unwrap()
    }
}

fn child_results(events: &[Event]) -> Vec<(String, bool, String)> {
    events
        .iter()
        .filter(|e| e.parent_run_id.is_some())
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult {
                name,
                is_error,
                content,
                ..
            } => Some((name.clone(), *is_error, content.clone())),
            _ => None,
        })
        .collect()
}

const TWO_EXPLORERS: &str = r#"
turns:
  - text: "Delegating."
    tool_calls:
      - name: agent_open
        arguments: {role: explorer, task: "Find the add function."}
      - name: agent_open
        arguments: {role: explorer, task: "Find the tests."}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
      - name: agent_eval
        arguments: {agent_id: a2}
  - text: "Both explorers reported."
"#;

const EXPLORER: &str = r#"
turns:
  - delay_ms: 400
    tool_calls:
      - name: read_file
        arguments: {path: src/lib.rs}
  - text: "FOUND-MARKER: add is in src/lib.rs line 1."
"#;

#[tokio::test]
async fn parallel_explorers_return_only_their_final_answers() {
    let s = setup(TWO_EXPLORERS, &[EXPLORER, EXPLORER]);
    let started = Instant::now();
    let outcome = s.run("Look around.").await;
    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    // Both children waited 400 ms on their model; in parallel that is well under 2×.
    assert!(
        started.elapsed() < Duration::from_millis(1_400),
        "{:?}",
        started.elapsed()
    );
    let events = s.events();
    let finished: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::AgentFinished { .. }))
        .collect();
    let began: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::AgentStarted { .. }))
        .collect();
    assert_eq!((began.len(), finished.len()), (2, 2));
    // The second child started before the first finished: they overlapped.
    assert!(began[1].seq < finished[0].seq);
    let saw = s.parent_saw();
    assert_eq!(saw.matches("FOUND-MARKER").count(), 2, "{saw}");
    // The child's tool output (the file it read) never reached the parent's model.
    assert!(!saw.contains("a + b"), "{saw}");
    assert_eq!(s.children[0].turns_played(), 2);
    assert_eq!(s.children[1].turns_played(), 2);
}

#[tokio::test]
async fn a_worker_edits_a_file() {
    let parent = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: worker, task: "Create NOTES.md saying hello."}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
  - text: "The worker wrote the notes."
"#;
    let worker = r#"
turns:
  - tool_calls:
      - name: create_file
        arguments: {path: NOTES.md, content: "hello\n"}
  - text: "Created NOTES.md."
"#;
    // The parent verifies what its worker changed (the child itself does not).
    let mut c = config();
    c.verify.enabled = true;
    c.verify.commands = Some(vec!["test -f NOTES.md".into()]);
    let s = setup_with(parent, &[worker], c);
    let outcome = s.run("Write notes.").await;
    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    let written = std::fs::read_to_string(s.dir.path().join("NOTES.md")).unwrap();
    assert_eq!(written, "hello\n");
    assert!(s.parent_saw().contains("Created NOTES.md."));
    let verified: Vec<(bool, bool)> = s
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Verification { passed, .. } => Some((e.parent_run_id.is_none(), *passed)),
            _ => None,
        })
        .collect();
    assert_eq!(verified, vec![(true, true)]);
}

#[tokio::test]
async fn a_tool_outside_the_role_is_refused_naming_the_role() {
    let parent = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: explorer, task: "Look, do not touch."}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
  - text: "ok"
"#;
    let explorer = r#"
turns:
  - tool_calls:
      - name: create_file
        arguments: {path: EVIL.md, content: "x"}
      - name: run_command
        arguments: {command: "touch EVIL2.md"}
  - text: "I could not write."
"#;
    let s = setup(parent, &[explorer]);
    let outcome = s.run("Explore.").await;
    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    assert!(!s.dir.path().join("EVIL.md").exists());
    assert!(!s.dir.path().join("EVIL2.md").exists());
    let results = child_results(&s.events());
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].1 && results[0].2.contains("`explorer` role"),
        "{results:?}"
    );
    assert!(
        results[1].1 && results[1].2.contains("read-only"),
        "{results:?}"
    );
    // Opening with a tool the role lacks is refused at once.
    let parent = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: reviewer, task: "Review.", tools: [create_file]}
  - text: "ok"
"#;
    let s = setup(parent, &[]);
    s.run("Review.").await;
    let refused = s.parent_saw();
    assert!(
        refused.contains("the `reviewer` role has no tool `create_file`"),
        "{refused}"
    );
}

#[tokio::test]
async fn the_depth_limit_holds() {
    let parent = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: worker, task: "Delegate further."}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
  - text: "ok"
"#;
    let worker = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: explorer, task: "grandchild"}
  - text: "I was not allowed to nest."
"#;
    let s = setup(parent, &[worker]);
    let outcome = s.run("Nest.").await;
    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    let results = child_results(&s.events());
    assert!(
        results[0].1 && results[0].2.contains("agents.max_depth = 1"),
        "{results:?}"
    );
    // No grandchild was ever started.
    let started = s
        .events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::AgentStarted { .. }))
        .count();
    assert_eq!(started, 1);
    // With max_depth = 0 there are no subagent tools at all.
    let mut none = config();
    none.agents.max_depth = 0;
    let s = setup_with("turns:\n  - text: hi\n", &[], none);
    assert!(s.engine.tools().get("agent_open").is_none());
}

#[tokio::test]
async fn cancelling_the_parent_cancels_its_children() {
    let parent = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: explorer, task: "Take forever."}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
  - text: "never"
"#;
    let slow = "turns:\n  - delay_ms: 20000\n    text: late\n";
    let s = setup(parent, &[slow]);
    let cancel = tokio_util::sync::CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let outcome = s
        .engine
        .run(
            "Wait.",
            RunOptions {
                sinks: vec![s.sink.clone()],
                cancel,
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(outcome.status, SessionStatus::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let child_end = s.events().into_iter().find_map(|e| match e.kind {
        EventKind::AgentFinished { status, .. } => Some(status),
        _ => None,
    });
    assert_eq!(child_end, Some(SessionStatus::Cancelled));
}

#[tokio::test]
async fn a_child_that_times_out_is_a_result_not_a_crash() {
    let parent = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: explorer, task: "Take too long."}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
  - text: "The explorer timed out; I carried on."
"#;
    let slow = "turns:\n  - delay_ms: 20000\n    text: late\n";
    let mut c = config();
    c.agents.timeout_secs = 1;
    let s = setup_with(parent, &[slow], c);
    let outcome = s.run("Go.").await;
    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    let saw = s.parent_saw();
    assert!(saw.contains("timed out after 1s"), "{saw}");
}

#[tokio::test]
async fn usage_rolls_up_into_the_parents_session_finished() {
    let parent = r#"
turns:
  - usage: {input_tokens: 100, output_tokens: 10}
    tool_calls:
      - name: agent_open
        arguments: {role: explorer, task: "one"}
      - name: agent_open
        arguments: {role: reviewer, task: "two"}
  - usage: {input_tokens: 200, output_tokens: 20}
    tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
      - name: agent_eval
        arguments: {agent_id: a2}
  - usage: {input_tokens: 300, output_tokens: 30}
    text: done
"#;
    let one = r#"
turns:
  - usage: {input_tokens: 1000, output_tokens: 1}
    tool_calls:
      - name: list_files
        arguments: {}
  - usage: {input_tokens: 2000, output_tokens: 2}
    text: "one done"
"#;
    let two = "turns:\n  - usage: {input_tokens: 5000, output_tokens: 5}\n    text: \"VERDICT: approve\"\n";
    let s = setup(parent, &[one, two]);
    let outcome = s.run("Count.").await;
    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.usage.input_tokens, 600 + 3000 + 5000);
    assert_eq!(outcome.usage.output_tokens, 60 + 3 + 5);
    let (usage, children) = s
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::SessionFinished {
                usage, children, ..
            } => Some((usage, children)),
            _ => None,
        })
        .unwrap();
    assert_eq!(usage, outcome.usage);
    assert_eq!(children.len(), 2);
    assert_eq!(
        (children[0].agent_id.as_str(), children[0].role.as_str()),
        ("a1", "explorer")
    );
    assert_eq!(children[0].usage.input_tokens, 3000);
    assert_eq!(children[1].usage.input_tokens, 5000);
    assert_eq!(children[1].role, "reviewer");
    let stored = s
        .engine
        .store()
        .get_session(&outcome.session_id)
        .await
        .unwrap();
    assert_eq!(stored.usage.input_tokens, 8600);
    // The children's own records are not sessions of the workspace (`--continue` skips them).
    let here = s.engine.workspace().root().display().to_string();
    let listed = s.engine.store().list_sessions(10).await.unwrap();
    assert_eq!(listed.len(), 3);
    let of_workspace: Vec<_> = listed.iter().filter(|r| r.workspace == here).collect();
    assert_eq!(of_workspace.len(), 1);
    assert_eq!(of_workspace[0].id, outcome.session_id);
    let children_records = listed
        .iter()
        .filter(|r| keel_engine::agents::is_subagent_session(&r.workspace))
        .count();
    assert_eq!(children_records, 2);
}

#[tokio::test]
async fn child_events_nest_under_the_parent_run_in_the_parents_session() {
    let s = setup(TWO_EXPLORERS, &[EXPLORER, EXPLORER]);
    let outcome = s.run("Look around.").await;
    let events = s
        .engine
        .store()
        .events(&outcome.session_id, 0)
        .await
        .unwrap();
    let parent_run = events[0].run_id.clone();
    assert!(events[0].parent_run_id.is_none());
    let child_runs: std::collections::BTreeSet<String> = events
        .iter()
        .filter(|e| e.parent_run_id.is_some())
        .map(|e| {
            assert_eq!(e.parent_run_id.as_deref(), Some(parent_run.as_str()));
            assert_eq!(e.session_id, outcome.session_id);
            assert!(
                !matches!(
                    e.kind,
                    EventKind::SessionStarted { .. } | EventKind::SessionFinished { .. }
                ),
                "{e:?}"
            );
            e.run_id.clone()
        })
        .collect();
    assert_eq!(child_runs.len(), 2);
    assert!(!child_runs.contains(&parent_run));
    for run in &child_runs {
        let mine: Vec<&str> = events
            .iter()
            .filter(|e| &e.run_id == run)
            .map(Event::type_name)
            .collect();
        assert_eq!(mine.first(), Some(&"agent_started"), "{mine:?}");
        assert_eq!(mine.last(), Some(&"agent_finished"), "{mine:?}");
        assert!(mine.contains(&"tool_result"));
    }
    // One session_finished: the parent's, last.
    let finished = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::SessionFinished { .. }))
        .count();
    assert_eq!(finished, 1);
    assert_eq!(
        events.last().map(Event::type_name),
        Some("session_finished")
    );
}

#[tokio::test]
async fn a_finished_child_takes_follow_up_input() {
    let parent = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: explorer, task: "first"}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1, input: "and now the second thing"}
  - tool_calls:
      - name: agent_close
        arguments: {agent_id: a1}
  - text: done
"#;
    let child = "turns:\n  - text: FIRST-ANSWER\n  - text: SECOND-ANSWER\n";
    let s = setup(parent, &[child]);
    let outcome = s.run("Two questions.").await;
    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    let saw = s.parent_saw();
    assert!(
        saw.contains("FIRST-ANSWER") && saw.contains("SECOND-ANSWER"),
        "{saw}"
    );
    assert!(saw.contains("subagent a1 closed"), "{saw}");
    // The child's second turn saw its own first one, not the parent's conversation.
    let child_requests = s.children[0].requests();
    let second = serde_json::to_string(&child_requests[1].messages).unwrap();
    assert!(second.contains("FIRST-ANSWER") && !second.contains("Two questions."));
}

/// The figure for the closing note: the parent's next request after one exploration done
/// directly versus delegated to an explorer (same file, same scripted exploration).
#[tokio::test]
async fn delegating_an_exploration_keeps_the_parents_context_small() {
    let big: String = (0..400)
        .map(|i| format!("pub fn item_{i}(x: u64) -> u64 {{ x * {i} + 1 }}\n"))
        .collect();
    let direct = r#"
turns:
  - tool_calls:
      - name: read_file
        arguments: {path: src/big.rs}
  - text: "item_7 multiplies by 7."
"#;
    let delegated = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: explorer, task: "What does item_7 in src/big.rs do?"}
      - name: agent_eval
        arguments: {agent_id: a1}
  - text: "item_7 multiplies by 7."
"#;
    let explorer = r#"
turns:
  - tool_calls:
      - name: read_file
        arguments: {path: src/big.rs}
  - text: "item_7 (src/big.rs line 8) returns x * 7 + 1."
"#;
    let mut tokens = Vec::new();
    for (parent, children) in [(direct, vec![]), (delegated, vec![explorer])] {
        let s = setup(parent, &children);
        std::fs::write(s.dir.path().join("src/big.rs"), &big).unwrap();
        let outcome = s.run("What does item_7 do?").await;
        assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
        let requests = s.parent.requests();
        let next = requests.last().unwrap();
        tokens.push(keel_llm::tokens::estimate_request(
            &next.system,
            &next.tools,
            &next.messages,
        ));
    }
    println!(
        "parent's next request: {} tokens reading directly, {} tokens delegating to an explorer",
        tokens[0], tokens[1]
    );
    // A direct read costs the parent a whole result budget (4,000 characters, about 1,000
    // tokens); the explorer's answer is one line.
    assert!(tokens[1] + 600 < tokens[0], "{tokens:?}");
}

#[tokio::test]
async fn a_childs_approval_goes_to_the_parents_gate_labelled_with_the_child() {
    use keel_config::ApprovalPolicy;
    use keel_engine::approval::{ApprovalGate, Decision};
    let parent = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: worker, task: "Write the notes."}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
  - text: "done"
"#;
    let worker = r#"
turns:
  - tool_calls:
      - {id: child_write, name: create_file, arguments: {path: NOTES.md, content: "hi\n"}}
  - text: "Wrote NOTES.md."
"#;
    let s = setup(parent, &[worker]);
    let gate = Arc::new(ApprovalGate::from_config(
        s.engine.config(),
        Some(ApprovalPolicy::Untrusted),
        true,
    ));
    let (answerer, sink) = (gate.clone(), s.sink.clone());
    let asked = tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let found = sink.events().into_iter().find(|e| {
                matches!(&e.kind, EventKind::ApprovalRequested { call_id, .. } if call_id == "child_write")
            });
            if let Some(e) = found {
                assert!(answerer.resolve(
                    "child_write",
                    Decision::Approve(keel_protocol::ApprovalScope::Once)
                ));
                return e;
            }
            assert!(Instant::now() < deadline, "no approval was asked for");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let outcome = s
        .engine
        .run(
            "Notes.",
            RunOptions {
                sinks: vec![s.sink.clone()],
                approvals: Some(gate),
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(outcome.status, SessionStatus::Completed, "{outcome:?}");
    let request = asked.await.unwrap();
    // Labelled with the child: its run, under the parent's.
    let child_run = s
        .events()
        .into_iter()
        .find(|e| matches!(e.kind, EventKind::AgentStarted { .. }))
        .unwrap()
        .run_id;
    assert_eq!(request.run_id, child_run);
    assert!(request.parent_run_id.is_some());
    assert!(s.dir.path().join("NOTES.md").exists());
}

#[tokio::test]
async fn in_a_read_only_plan_exec_phase_a_worker_is_read_only() {
    let parent = r#"
turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: worker, task: "Write the notes."}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
  - text: "done"
"#;
    let worker = r#"
turns:
  - tool_calls:
      - name: create_file
        arguments: {path: NOTES.md, content: "hi\n"}
  - text: "I could not write."
"#;
    let mut c = config();
    c.agent.mode = "plan_exec".into();
    let s = setup_with(parent, &[worker], c);
    s.run("Plan first.").await;
    assert!(!s.dir.path().join("NOTES.md").exists());
    let results = child_results(&s.events());
    assert!(results[0].1, "{results:?}");
    assert!(results[0].2.contains("`worker` role"), "{results:?}");
}
