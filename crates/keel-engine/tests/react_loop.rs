//! The ReAct loop end to end with the scripted provider, an in-memory store and a temp
//! workspace.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use keel_engine::{CollectingSink, Config, EngineBuilder, RunOptions, RunOutcome};
use keel_llm::retry::RetryPolicy;
use keel_llm::scripted::ScriptedProvider;
use keel_protocol::{ContentBlock, ErrorCode, Event, EventKind, SessionStatus};
use keel_store::{SqliteStore, Store};

struct Harness {
    dir: tempfile::TempDir,
    provider: ScriptedProvider,
    store: Arc<SqliteStore>,
    sink: Arc<CollectingSink>,
    config: Config,
}

impl Harness {
    fn new(script: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(
            dir.path().join("src/lib.rs"),
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("README.md"), "# demo\n").unwrap();
        Self {
            dir,
            provider: ScriptedProvider::from_yaml(script).unwrap(),
            store: Arc::new(SqliteStore::open_in_memory().unwrap()),
            sink: CollectingSink::new(),
            config: Config::default(),
        }
    }

    async fn run(&self, task: &str) -> RunOutcome {
        self.run_with(task, RunOptions::default()).await
    }

    async fn run_with(&self, task: &str, mut options: RunOptions) -> RunOutcome {
        let engine = EngineBuilder::new(self.config.clone(), self.dir.path())
            .provider(Arc::new(self.provider.clone()))
            .store(self.store.clone())
            .retry_policy(RetryPolicy {
                base_delay: Duration::from_millis(1),
                ..RetryPolicy::default()
            })
            .build()
            .unwrap();
        options.sinks.push(self.sink.clone());
        engine.run(task, options).await.unwrap()
    }

    fn events(&self) -> Vec<Event> {
        self.sink.events()
    }

    fn tool_results(&self) -> Vec<(String, bool, String)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::ToolResult {
                    name,
                    is_error,
                    content,
                    ..
                } => Some((name, is_error, content)),
                _ => None,
            })
            .collect()
    }
}

#[tokio::test]
async fn lists_reads_creates_and_completes() {
    let h = Harness::new(
        r##"
turns:
  - text: "Let me look around."
    tool_calls:
      - name: list_files
        arguments: {}
  - tool_calls:
      - name: read_file
        arguments: {path: "src/lib.rs"}
  - text: "I'll add a test file."
    tool_calls:
      - name: create_file
        arguments:
          path: "tests/add.rs"
          content: "#[test]\nfn adds() { assert_eq!(demo::add(1, 2), 3); }\n"
  - text: "Done: created tests/add.rs."
"##,
    );
    let out = h.run("add a test for add").await;
    assert_eq!(out.status, SessionStatus::Completed);
    assert_eq!(out.iterations, 4);
    assert_eq!(out.final_text, "Done: created tests/add.rs.");
    let created = std::fs::read_to_string(h.dir.path().join("tests/add.rs")).unwrap();
    assert!(created.contains("demo::add(1, 2)"));

    let results = h.tool_results();
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|(_, err, _)| !err), "{results:?}");
    assert!(results[0].2.contains("src/lib.rs"));
    assert!(results[1].2.contains("1\tpub fn add"));

    // The model saw each tool result in its next request.
    let reqs = h.provider.requests();
    let last = reqs.last().unwrap();
    let saw_read = last.messages.iter().any(|m| {
        m.content.iter().any(
            |b| matches!(b, ContentBlock::ToolResult { content, .. } if content.contains("a + b")),
        )
    });
    assert!(saw_read);

    // Event stream shape: starts and ends right, seq strictly increasing, stored == published.
    let events = h.events();
    assert_eq!(events.first().unwrap().type_name(), "session_started");
    assert_eq!(events.last().unwrap().type_name(), "session_finished");
    assert!(events.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    let stored = h.store.events(&out.session_id, 0).await.unwrap();
    assert_eq!(stored, events);
    let rec = h.store.get_session(&out.session_id).await.unwrap();
    assert_eq!(rec.status, SessionStatus::Completed);
    assert_eq!(rec.iterations, 4);
    assert!(rec.usage.input_tokens > 0);
    // Transcript: task, then assistant/user alternating, final assistant answer.
    let msgs = h.store.messages(&out.session_id).await.unwrap();
    assert_eq!(msgs.len(), 8);
    assert!(msgs[0].text().starts_with("add a test for add"));
    assert_eq!(msgs[7].text(), "Done: created tests/add.rs.");
}

#[tokio::test]
async fn iteration_cap_on_a_progressing_run_is_a_resumable_block() {
    let mut turns = String::from("turns:\n");
    for i in 0..10 {
        // Distinct calls each turn: this run makes progress, it just never finishes.
        turns.push_str(&format!(
            "  - tool_calls:\n      - name: list_files\n        arguments: {{max_depth: {}}}\n",
            i + 1
        ));
    }
    let mut h = Harness::new(&turns);
    h.config.agent.max_iterations = 3;
    let out = h.run("loop forever").await;
    assert_eq!(out.status, SessionStatus::Blocked);
    assert_eq!(out.iterations, 3);
    assert_eq!(h.provider.turns_played(), 3);
    assert!(out.error.is_none());
    let blocker = out.blocker.unwrap();
    assert_eq!(blocker.source, "budget");
    assert!(blocker.question.contains("3 iterations"));
    let types: Vec<_> = h.sink.types();
    assert_eq!(&types[types.len() - 2..], ["blocker", "session_finished"]);
}

#[tokio::test]
async fn iteration_cap_without_progress_ends_with_max_steps() {
    let mut turns = String::from("turns:\n");
    // New calls every time, none of which gets anywhere (files that do not exist).
    for i in 0..20 {
        turns.push_str(&format!(
            "  - tool_calls:\n      - name: read_file\n        arguments: {{path: src/missing_{i}.rs}}\n"
        ));
    }
    let mut h = Harness::new(&turns);
    h.config.agent.max_iterations = 8;
    h.config.fallback_chain.recovery.enabled = false;
    let out = h.run("loop forever").await;
    assert_eq!(out.status, SessionStatus::MaxSteps);
    assert_eq!(out.iterations, 8);
    let err = out.error.unwrap();
    assert_eq!(err.error_code, ErrorCode::MaxSteps);
    assert!(err.message.contains("8 iterations"));
    let types: Vec<_> = h.sink.types();
    assert_eq!(&types[types.len() - 2..], ["error", "session_finished"]);
}

#[tokio::test]
async fn tool_errors_go_back_to_the_model_and_the_loop_goes_on() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls:
      - name: read_file
        arguments: {path: "src/missing.rs"}
  - tool_calls:
      - name: read_file
        arguments: {path: "src/lib.rs"}
  - text: "Found it."
"#,
    );
    let out = h.run("read the lib").await;
    assert_eq!(out.status, SessionStatus::Completed);
    let results = h.tool_results();
    assert!(results[0].1, "first result is an error");
    assert!(results[0].2.contains("does not exist"), "{}", results[0].2);
    assert!(!results[1].1);
    // The error reached the model as an is_error tool result.
    let second = &h.provider.requests()[1];
    let last = second.messages.last().unwrap();
    assert!(matches!(
        &last.content[0],
        ContentBlock::ToolResult { is_error: true, .. }
    ));
}

#[tokio::test]
async fn unknown_tools_and_malformed_arguments_are_errors_for_the_model() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls:
      - name: delete_everything
        arguments: {}
      - name: read_file
        arguments: {path: 42}
      - name: read_file
        arguments: {start_line: 1}
      - name: create_file
        raw_arguments: "[1, 2]"
  - text: "Sorry."
"#,
    );
    let out = h.run("do something").await;
    assert_eq!(out.status, SessionStatus::Completed);
    let results = h.tool_results();
    assert_eq!(results.len(), 4);
    assert!(
        results.iter().all(|r| r.1),
        "all four are errors: {results:?}"
    );
    assert!(results[0].2.contains("unknown tool `delete_everything`"));
    assert!(results[0].2.contains("Available tools"));
    assert!(results[1].2.contains("`path`"), "{}", results[1].2);
    assert!(
        results[3].2.contains("expected a JSON object"),
        "{}",
        results[3].2
    );
    assert!(
        results[2].2.contains("missing required field `path`")
            && results[2].2.contains("Schema of read_file")
            && results[2].2.contains("Example: read_file {\"path\":"),
        "{}",
        results[2].2
    );
}

#[tokio::test]
async fn running_out_of_script_fails_clearly() {
    let h =
        Harness::new("turns:\n  - tool_calls:\n      - name: list_files\n        arguments: {}\n");
    let out = h.run("go").await;
    assert_eq!(out.status, SessionStatus::Failed);
    let err = out.error.unwrap();
    assert_eq!(err.error_code, ErrorCode::LlmFailure);
    assert!(err.message.contains("no turn left"), "{}", err.message);
}

#[tokio::test]
async fn transient_provider_errors_are_retried() {
    let h = Harness::new(
        r#"
turns:
  - error: rate_limit
  - error: overloaded
  - text: "Hello."
"#,
    );
    let out = h.run("say hello").await;
    assert_eq!(out.status, SessionStatus::Completed);
    assert_eq!(out.final_text, "Hello.");
    assert_eq!(out.iterations, 1);
    let retries = h
        .sink
        .types()
        .iter()
        .filter(|t| **t == "model_retry")
        .count();
    assert_eq!(retries, 2);
}

#[tokio::test]
async fn retry_budget_exhaustion_is_a_typed_failure() {
    let h = Harness::new(
        "turns:\n  - error: server\n  - error: server\n  - error: server\n  - error: server\n  - error: server\n  - error: server\n",
    );
    let out = h.run("x").await;
    assert_eq!(out.status, SessionStatus::Failed);
    let err = out.error.unwrap();
    assert_eq!(err.error_code, ErrorCode::LlmFailure);
    assert!(err.retryable);
    assert!(err.message.contains("HTTP 500"), "{}", err.message);
}

#[tokio::test]
async fn cancellation_ends_the_turn_cleanly() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls:
      - name: list_files
        arguments: {}
  - text: "slow"
    delay_ms: 10000
"#,
    );
    let options = RunOptions::default();
    let cancel = options.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        cancel.cancel();
    });
    let started = std::time::Instant::now();
    let out = h.run_with("go", options).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out.status, SessionStatus::Cancelled);
    assert_eq!(out.error.unwrap().error_code, ErrorCode::Cancelled);
    let rec = h.store.get_session(&out.session_id).await.unwrap();
    assert_eq!(rec.status, SessionStatus::Cancelled);
    assert_eq!(h.events().last().unwrap().type_name(), "session_finished");
}

#[tokio::test]
async fn the_head_is_byte_identical_across_turns() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls:
      - name: list_files
        arguments: {}
  - tool_calls:
      - name: read_file
        arguments: {path: "README.md"}
  - tool_calls:
      - name: tool_search
        arguments: {query: "plan"}
  - tool_calls:
      - name: update_plan
        arguments: {steps: [{step: "look", status: done}]}
  - text: "ok"
"#,
    );
    h.run("look").await;
    let reqs = h.provider.requests();
    // Before and after tool_search hydrates a deferred tool (its schema rides in the tail).
    assert_eq!(reqs.len(), 5);
    assert!(
        !h.tool_results().iter().any(|r| r.1),
        "{:?}",
        h.tool_results()
    );
    let head = |r: &keel_llm::ChatRequest| {
        format!("{}{}", r.system, serde_json::to_string(&r.tools).unwrap())
    };
    assert!(reqs.iter().all(|r| head(r) == head(&reqs[0])));
    // Volatile data lives in the first user message, not the head.
    assert!(!reqs[0].system.contains(&h.dir.path().display().to_string()));
    assert!(reqs[0].messages[0].text().contains("<environment>"));
}

#[tokio::test]
async fn empty_replies_are_nudged_not_taken_as_done() {
    let h = Harness::new("turns:\n  - {}\n  - text: \"done\"\n");
    let out = h.run("x").await;
    assert_eq!(out.status, SessionStatus::Completed);
    assert_eq!(out.iterations, 2);
    let second = &h.provider.requests()[1];
    assert!(second.messages.last().unwrap().text().contains("empty"));
}

/// Gemma 3 270M answered "add a function that returns 42" with two spaces and no tool call
/// (exit 0, nothing changed): a whitespace answer is nudged, and twice in a row is no
/// completion.
#[tokio::test]
async fn a_whitespace_answer_to_a_change_task_is_not_a_completion() {
    let h = Harness::new("turns:\n  - text: \"  \"\n  - text: \" \\n \"\n");
    let out = h.run("add a function that returns 42").await;
    assert_ne!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let second = &h.provider.requests()[1];
    assert!(second.messages.last().unwrap().text().contains("empty"));
}
