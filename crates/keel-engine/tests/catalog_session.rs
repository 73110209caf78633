//! The tool catalog in scripted sessions: deferred tools, `tool_search`, foreign tool names and
//! their arguments, repaired and refused argument JSON — through the whole loop, with the
//! default tool set (shell tools included).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_engine::{CollectingSink, Config, EngineBuilder, RunOptions, RunOutcome};
use keel_llm::ChatRequest;
use keel_llm::scripted::ScriptedProvider;
use keel_protocol::{ContentBlock, ErrorCode, Event, EventKind, SessionStatus};
use keel_store::SqliteStore;

struct Session {
    dir: tempfile::TempDir,
    provider: ScriptedProvider,
    sink: Arc<CollectingSink>,
}

impl Session {
    fn new(script: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        for f in ["src/a.rs", "src/b.rs"] {
            std::fs::write(
                dir.path().join(f),
                "fn main() {\n    let total = 1 + 2;\n    println!(\"{total}\");\n}\n",
            )
            .unwrap();
        }
        Self {
            dir,
            provider: ScriptedProvider::from_yaml(script).unwrap(),
            sink: CollectingSink::new(),
        }
    }

    async fn run(&self) -> RunOutcome {
        let engine = EngineBuilder::new(Config::default(), self.dir.path())
            .provider(Arc::new(self.provider.clone()))
            .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
            .build()
            .unwrap();
        let options = RunOptions {
            sinks: vec![self.sink.clone()],
            ..RunOptions::default()
        };
        engine.run("work", options).await.unwrap()
    }

    fn events(&self) -> Vec<Event> {
        self.sink.events()
    }

    fn results(&self) -> Vec<(String, bool, String)> {
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

    fn repairs(&self) -> Vec<(String, String, String)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::ToolRepaired { from, to, how, .. } => Some((from, to, how)),
                _ => None,
            })
            .collect()
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(rel)).unwrap_or_default()
    }
}

fn head(r: &ChatRequest) -> String {
    format!("{}{}", r.system, serde_json::to_string(&r.tools).unwrap())
}

#[tokio::test]
async fn a_deferred_tool_called_by_name_runs_at_once() {
    let s = Session::new(
        r#"
turns:
  - tool_calls:
      - name: update_plan
        arguments: {steps: [{step: "read the code", status: in_progress}, {step: "fix it", status: pending}]}
  - text: "done"
"#,
    );
    let out = s.run().await;
    assert_eq!(out.status, SessionStatus::Completed);
    let reqs = s.provider.requests();
    assert_eq!(reqs.len(), 2, "one call, no second attempt");
    let listed: Vec<&str> = reqs[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        !listed.contains(&"update_plan"),
        "deferred, not listed: {listed:?}"
    );
    assert!(listed.len() <= 10, "at most ten active tools: {listed:?}");
    let search = reqs[0]
        .tools
        .iter()
        .find(|t| t.name == "tool_search")
        .unwrap();
    assert!(
        search.description.contains("update_plan"),
        "{}",
        search.description
    );
    let results = s.results();
    assert_eq!(results.len(), 1);
    assert!(!results[0].1, "{results:?}");
    assert!(
        results[0].2.starts_with("Plan updated (0/2 done)"),
        "{}",
        results[0].2
    );
    assert!(
        s.repairs().is_empty(),
        "a deferred call by name is not a repair"
    );
}

#[tokio::test]
async fn tool_search_hydrates_in_the_tail_and_the_head_never_changes() {
    let s = Session::new(
        r#"
turns:
  - tool_calls:
      - name: tool_search
        arguments: {query: "checklist plan steps"}
      - name: update_plan
        arguments: {steps: [{step: "a", status: done}]}
  - tool_calls:
      - name: tool_search
        arguments: {query: "^git_"}
  - tool_calls:
      - name: read_file
        arguments: {path: "src/a.rs"}
  - text: "done"
"#,
    );
    s.run().await;
    let results = s.results();
    assert!(
        results[0].2.contains("## update_plan (deferred)"),
        "{}",
        results[0].2
    );
    assert!(results[0].2.contains("Schema: {"), "{}", results[0].2);
    assert!(
        !results[1].1,
        "found and called in the same reply: {results:?}"
    );
    assert!(results[2].2.contains("## git_diff") && results[2].2.contains("## git_status"));
    let reqs = s.provider.requests();
    assert_eq!(reqs.len(), 4);
    assert!(
        reqs.iter().all(|r| head(r) == head(&reqs[0])),
        "the head is byte-identical before and after hydration"
    );
    // The schemas travel in the conversation's tail.
    let tail = serde_json::to_string(&reqs[1].messages).unwrap();
    assert!(tail.contains("## update_plan (deferred)"));
}

#[tokio::test]
async fn the_text_editor_edits_exactly_as_edit_file_does() {
    let s = Session::new(
        r#"
turns:
  - tool_calls:
      - name: str_replace_editor
        arguments: {command: view, path: "src/a.rs"}
      - name: read_file
        arguments: {path: "src/b.rs"}
  - tool_calls:
      - name: str_replace_editor
        arguments: {command: str_replace, path: "src/a.rs", old_str: "1 + 2", new_str: "1 + 3"}
      - name: edit_file
        arguments: {path: "src/b.rs", edits: [{search: "1 + 2", replace: "1 + 3"}]}
  - tool_calls:
      - name: str_replace_based_edit_tool
        arguments: {command: insert, path: "src/a.rs", insert_line: 1, new_str: "    // added"}
      - name: str_replace_based_edit_tool
        arguments: {command: create, path: "src/c.rs", file_text: "pub fn c() {}\n"}
  - text: "done"
"#,
    );
    s.run().await;
    let results = s.results();
    assert!(results.iter().all(|r| !r.1), "{results:?}");
    assert_eq!(results[0].0, "read_file");
    assert_eq!(results[2].0, "edit_file");
    assert!(s.read("src/b.rs").contains("1 + 3"));
    let a = s.read("src/a.rs");
    assert_eq!(
        a,
        s.read("src/b.rs")
            .replacen("fn main() {\n", "fn main() {\n    // added\n", 1)
    );
    assert_eq!(s.read("src/c.rs"), "pub fn c() {}\n");
    let repairs = s.repairs();
    assert!(
        repairs
            .iter()
            .any(|r| r.0 == "str_replace_editor" && r.1 == "edit_file")
    );
    assert!(repairs.iter().any(|r| r.1 == "insert_lines"));
    assert!(
        results[2]
            .2
            .starts_with("[keel: ran `str_replace_editor` as `edit_file`"),
        "{}",
        results[2].2
    );
}

#[tokio::test]
async fn foreign_shell_names_run_through_the_safety_analyser() {
    let s = Session::new(
        r#"
turns:
  - tool_calls:
      - name: Bash
        arguments: {command: "echo from-bash", timeout: 5000, description: "say it"}
      - name: shell
        arguments: {command: ["bash", "-lc", "echo from-codex"], workdir: "src"}
      - name: Bash
        arguments: {command: "sudo rm -rf /"}
      - name: run_shell_command
        arguments: {command: "pwd"}
  - text: "done"
"#,
    );
    s.run().await;
    let results = s.results();
    assert!(results.iter().all(|r| r.0 == "run_command"), "{results:?}");
    assert!(
        !results[0].1 && results[0].2.contains("from-bash"),
        "{results:?}"
    );
    assert!(
        !results[1].1 && results[1].2.contains("from-codex"),
        "{results:?}"
    );
    assert!(
        results[2].1 && results[2].2.contains("deny list"),
        "{}",
        results[2].2
    );
    assert!(!results[3].1, "{results:?}");
    let repairs = s.repairs();
    assert!(
        repairs
            .iter()
            .any(|r| r.0 == "Bash" && r.2 == "name: Claude Code alias")
    );
    assert!(
        repairs
            .iter()
            .any(|r| r.0 == "shell" && r.2 == "name: Codex alias")
    );
}

#[tokio::test]
async fn claude_code_file_tools_and_todos_map_onto_the_canonical_ones() {
    let s = Session::new(
        r#"
turns:
  - tool_calls:
      - name: Write
        arguments: {file_path: "notes.md", content: "one\ntwo\n"}
      - name: Read
        arguments: {file_path: "src/a.rs", offset: 2, limit: 1}
  - tool_calls:
      - name: Edit
        arguments: {file_path: "src/a.rs", old_string: "1 + 2", new_string: "40 + 2"}
      - name: MultiEdit
        arguments: {file_path: "notes.md", edits: [{old_string: "one", new_string: "uno"}, {old_string: "two", new_string: "dos"}]}
      - name: TodoWrite
        arguments: {todos: [{content: "edit", status: completed, activeForm: "Editing"}, {content: "test", status: in_progress, activeForm: "Testing"}]}
      - name: Glob
        arguments: {pattern: "*.rs", path: "src"}
  - text: "done"
"#,
    );
    s.run().await;
    let results = s.results();
    assert!(results.iter().all(|r| !r.1), "{results:?}");
    assert!(results[1].2.contains("let total"), "{}", results[1].2);
    assert!(
        !results[1].2.contains("println"),
        "only line 2: {}",
        results[1].2
    );
    assert_eq!(s.read("notes.md"), "uno\ndos\n");
    assert!(s.read("src/a.rs").contains("40 + 2"));
    assert!(results[4].2.contains("[>] test"), "{}", results[4].2);
    assert!(results[5].2.contains("a.rs"), "{}", results[5].2);
}

#[tokio::test]
async fn malformed_arguments_are_repaired_or_returned_never_a_provider_failure() {
    let s = Session::new(
        r#"
turns:
  - tool_calls:
      - name: create_file
        raw_arguments: "{'path': 'x.txt', 'content': 'line one\nline two',}"
      - name: create_file
        raw_arguments: "{\"path\": \"y.txt\", \"content\": \"it\"s\"}"
      - name: read_file
        raw_arguments: "{\"path\": \"src/a.rs\", \"start_line\": \"2\", \"end_line\": \"3\"}"
  - text: "done"
"#,
    );
    let out = s.run().await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert_eq!(s.read("x.txt"), "line one\nline two");
    assert!(
        !s.dir.path().join("y.txt").exists(),
        "ambiguous JSON is never guessed"
    );
    let results = s.results();
    assert!(!results[0].1, "{results:?}");
    assert!(
        results[0].2.starts_with("[keel: arguments repaired"),
        "{}",
        results[0].2
    );
    assert!(
        results[1].1 && results[1].2.contains("not valid JSON"),
        "{}",
        results[1].2
    );
    assert!(
        results[1].2.contains("Schema of create_file"),
        "{}",
        results[1].2
    );
    assert!(
        !results[1].2.contains("cut off"),
        "only a `length` finish is a cut-off"
    );
    assert!(
        !results[2].1 && results[2].2.contains("let total"),
        "{results:?}"
    );
    // The transcript sent back holds objects only (providers reject string inputs).
    let second = serde_json::to_value(&s.provider.requests()[1].messages).unwrap();
    let uses: Vec<&serde_json::Value> = second
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert!(uses.iter().all(|u| u["input"].is_object()), "{uses:?}");
}

#[tokio::test]
async fn a_call_cut_off_at_the_output_limit_is_returned_and_its_tokens_counted() {
    let s = Session::new(
        r#"
turns:
  - tool_calls:
      - name: create_file
        raw_arguments: "{\"path\": \"big.txt\", \"content\": \"aaaa"
    stop_reason: max_tokens
    usage: {input_tokens: 100, output_tokens: 4096}
  - text: "done"
"#,
    );
    let out = s.run().await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let results = s.results();
    assert!(results[0].1 && results[0].2.contains("cut off at the output token limit"));
    assert!(out.usage.output_tokens >= 4096, "{:?}", out.usage);
    assert!(!s.dir.path().join("big.txt").exists());
}

#[tokio::test]
async fn the_same_broken_call_three_times_is_a_loop() {
    let s = Session::new(
        r#"
turns:
  - tool_calls: [{name: create_file, raw_arguments: "{path: oops"}]
  - tool_calls: [{name: create_file, raw_arguments: "{path: oops"}]
  - tool_calls: [{name: create_file, raw_arguments: "{path: oops"}]
  - text: "done"
"#,
    );
    s.run().await;
    let results = s.results();
    assert_eq!(results.len(), 3);
    assert!(
        results[2].1 && results[2].2.contains("a loop is not progress"),
        "{results:?}"
    );
    assert!(
        s.events().iter().any(|e| matches!(
            e.kind,
            EventKind::Recovery {
                error_code: ErrorCode::LoopDetected,
                ..
            }
        )),
        "the loop guard counted the broken calls"
    );
}

#[tokio::test]
async fn unknown_names_get_the_nearest_tool_and_its_schema() {
    let s = Session::new(
        r#"
turns:
  - tool_calls:
      - name: read_fil
        arguments: {path: "src/a.rs"}
      - name: search
        arguments: {pattern: "total"}
      - name: inspect
        arguments: {path: "src/a.rs"}
  - text: "done"
"#,
    );
    s.run().await;
    let results = s.results();
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0].2.contains("nearest tool is `read_file`"),
        "{}",
        results[0].2
    );
    assert!(
        results[0].2.contains("Schema of read_file"),
        "{}",
        results[0].2
    );
    assert_eq!(results[1].0, "grep");
    assert!(
        !results[1].1 && results[1].2.contains("src/a.rs"),
        "{results:?}"
    );
    assert_eq!(results[2].0, "read_file");
    assert!(!results[2].1, "{results:?}");
    let first_reply = &s.provider.requests()[1].messages;
    assert!(first_reply.iter().any(|m| {
        m.content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
    }));
}
