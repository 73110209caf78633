//! PLAN_EXEC end to end (R24–R34) with the scripted provider, the default tool set (shell
//! tools included), an in-memory store and a temp workspace.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::sync::Arc;

use keel_engine::{CollectingSink, Config, Engine, EngineBuilder, RunOptions, RunOutcome};
use keel_llm::retry::RetryPolicy;
use keel_llm::scripted::ScriptedProvider;
use keel_phase::ExecutionMode;
use keel_protocol::{ErrorCode, Event, EventKind, SessionStatus};
use keel_store::SqliteStore;

struct Harness {
    dir: tempfile::TempDir,
    provider: ScriptedProvider,
    store: Arc<SqliteStore>,
    sink: Arc<CollectingSink>,
    config: Config,
}

/// The project's test: `hello.txt` must say hello.
const TESTS_SH: &str = "grep -q hello hello.txt && echo '1 passed'\n";

impl Harness {
    fn new(script: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("README.md"), "# demo\n").unwrap();
        std::fs::write(dir.path().join("tests.sh"), TESTS_SH).unwrap();
        let mut config = Config::default();
        config.agent.mode = "plan_exec".into();
        config.shell.lint.enabled = false;
        config.shell.test_command = Some("sh tests.sh".into());
        // Final verification gates are issue 7's; most tests here look at phases only.
        config.verify.enabled = false;
        Self {
            dir,
            provider: ScriptedProvider::from_yaml(script).unwrap(),
            store: Arc::new(SqliteStore::open_in_memory().unwrap()),
            sink: CollectingSink::new(),
            config,
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn engine(&self) -> Engine {
        EngineBuilder::new(self.config.clone(), self.root())
            .provider(Arc::new(self.provider.clone()))
            .store(self.store.clone())
            .retry_policy(RetryPolicy::none())
            .build()
            .unwrap()
    }

    async fn run(&self, task: &str) -> RunOutcome {
        let options = RunOptions {
            sinks: vec![self.sink.clone()],
            ..RunOptions::default()
        };
        self.engine().run(task, options).await.unwrap()
    }

    fn events(&self) -> Vec<Event> {
        self.sink.events()
    }

    fn count(&self, name: &str) -> usize {
        self.sink.types().iter().filter(|t| **t == name).count()
    }

    fn phase_changes(&self) -> Vec<(String, String)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::PhaseChanged { phase, previous } => Some((previous, phase)),
                _ => None,
            })
            .collect()
    }

    /// (tool, is_error, content) of every tool result.
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

    /// The system prompt and tool catalog of every request, serialised.
    fn heads(&self) -> Vec<String> {
        self.provider
            .requests()
            .iter()
            .map(|r| format!("{}\n{}", r.system, serde_json::to_string(&r.tools).unwrap()))
            .collect()
    }
}

const LIFECYCLE: &str = r#"
turns:
  - text: "Planning: look around first."
    tool_calls:
      - name: list_files
        arguments: {}
  - text: "I'll write the file right away."
    tool_calls:
      - name: create_file
        arguments: {path: "hello.txt", content: "written while planning\n"}
  - text: "Right, planning first. The plan: create hello.txt saying hello."
    tool_calls:
      - name: advance_phase
        arguments: {summary: "plan: create hello.txt"}
  - tool_calls:
      - name: create_file
        arguments: {path: "hello.txt", content: "hello, world\n"}
  - tool_calls:
      - name: advance_phase
        arguments: {}
  - tool_calls:
      - name: run_tests
        arguments: {}
  - tool_calls:
      - name: advance_phase
        arguments: {summary: "tests pass"}
  - text: "Done: hello.txt says hello and the tests pass."
"#;

#[tokio::test]
async fn the_whole_lifecycle_runs_under_the_phase_policy() {
    let mut h = Harness::new(LIFECYCLE);
    h.config.verify.enabled = true;
    let out = h.run("create hello.txt").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert_eq!(
        out.final_text,
        "Done: hello.txt says hello and the tests pass."
    );

    // Exactly three phase changes, in order, and one violation.
    assert_eq!(
        h.phase_changes(),
        [
            ("planning".to_string(), "building".to_string()),
            ("building".into(), "verification".into()),
            ("verification".into(), "delivery".into()),
        ]
    );
    assert_eq!(h.count("phase_changed"), 3);
    assert_eq!(h.count("phase_violation"), 1);

    // The write in planning was refused with the structured error and never ran.
    let results = h.results();
    let (name, is_error, content) = &results[1];
    assert_eq!(name, "create_file");
    assert!(is_error);
    let json: serde_json::Value = serde_json::from_str(content).unwrap();
    assert_eq!(json["error"], "phase_violation");
    assert_eq!(json["tool"], "create_file");
    assert_eq!(json["phase"], "planning");
    assert!(
        json["hint"]
            .as_str()
            .unwrap()
            .contains("allowed from the building phase"),
        "{json}"
    );
    let violation = h
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::PhaseViolation { tool, phase, hint } => Some((tool, phase, hint)),
            _ => None,
        })
        .unwrap();
    assert_eq!(violation.0, "create_file");
    assert_eq!(violation.1, "planning");
    assert_eq!(violation.2, json["hint"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(h.root().join("hello.txt")).unwrap(),
        "hello, world\n",
        "only the building-phase write happened"
    );

    // advance_phase answers with what the new phase allows; the write in building worked;
    // the tests ran in verification.
    assert_eq!(results[2].0, "advance_phase");
    assert!(!results[2].1);
    assert!(
        results[2].2.contains("Moved from planning to building"),
        "{}",
        results[2].2
    );
    assert!(results[2].2.contains("create_file"), "{}", results[2].2);
    assert_eq!(
        results[3],
        ("create_file".into(), false, results[3].2.clone())
    );
    assert_eq!(results[5].0, "run_tests");
    assert!(!results[5].1, "{}", results[5].2);

    // The violation still counted as a step: 8 model requests.
    assert_eq!(out.iterations, 8);

    // The head (system prompt + catalog) is byte-identical on every request, across all three
    // phase changes, and the catalog offers advance_phase.
    let heads = h.heads();
    assert_eq!(heads.len(), 8);
    assert!(heads.iter().all(|x| *x == heads[0]), "the head changed");
    assert!(heads[0].contains("\"advance_phase\""));
    let head_tokens = keel_llm::tokens::estimate_text(&heads[0]);
    assert!(head_tokens <= 4_000, "the head is {head_tokens} tokens");
    assert_eq!(
        h.events()
            .iter()
            .filter(|e| e.kind.is_phase_event())
            .count(),
        3 + 1 + 3,
        "phase changes, the violation, checkpoints"
    );

    // The model was told about the phases in its task message, not in the system prompt.
    let first = &h.provider.requests()[0];
    assert!(!first.system.contains("plan_exec"));
    assert!(
        first.messages[0].text().contains("Current phase: planning"),
        "{}",
        first.messages[0].text()
    );

    // Each completed phase left a checkpoint; the session records its start phase.
    assert_eq!(h.count("checkpoint"), 3);
    let started = h.events().into_iter().next().unwrap();
    let EventKind::SessionStarted { mode, phase, .. } = started.kind else {
        panic!("first event is session_started");
    };
    assert_eq!(mode, "plan_exec");
    assert_eq!(phase.as_deref(), Some("planning"));
}

#[tokio::test]
async fn advancing_past_delivery_is_an_error() {
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - text: "done"
"#,
    );
    h.config.plan_exec.start_phase = "delivery".into();
    let out = h.run("t").await;
    assert_eq!(out.status, SessionStatus::Completed);
    let (_, is_error, content) = &h.results()[0];
    assert!(is_error);
    assert!(content.contains("already at final phase"), "{content}");
    assert_eq!(h.count("phase_changed"), 0);
}

#[tokio::test]
async fn auto_advance_moves_on_after_n_steps() {
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: read_file, arguments: {path: README.md}}]
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "hello\n"}}]
  - tool_calls: [{name: read_file, arguments: {path: hello.txt}}]
  - tool_calls: [{name: run_tests, arguments: {}}]
  - text: "done"
  - text: "done"
"#,
    );
    h.config.plan_exec.auto_advance_after_steps = Some(2);
    let out = h.run("t").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    // Two steps in planning, two in building, then verification (the text reply there is
    // nudged once, then accepted).
    assert_eq!(
        h.phase_changes(),
        [
            ("planning".to_string(), "building".to_string()),
            ("building".into(), "verification".into()),
        ]
    );
    assert!(h.results().iter().all(|(_, e, _)| !e), "{:?}", h.results());
    // The model learns about the automatic move after the tool results of the 2nd step.
    let third = &h.provider.requests()[2];
    let last = third.messages.last().unwrap().text();
    assert!(
        last.contains("Moved automatically from planning to building after 2 steps"),
        "{last}"
    );
}

#[tokio::test]
async fn a_plan_only_answer_is_nudged_once_towards_delivery() {
    let h = Harness::new(
        r#"
turns:
  - text: "Plan: create hello.txt."
  - text: "Nothing else is needed."
"#,
    );
    let out = h.run("t").await;
    assert_eq!(out.status, SessionStatus::Completed);
    assert_eq!(out.final_text, "Nothing else is needed.");
    let second = &h.provider.requests()[1];
    assert!(
        second
            .messages
            .last()
            .unwrap()
            .text()
            .contains("still in the planning phase"),
    );
}

#[tokio::test]
async fn planning_shell_commands_that_write_never_change_the_workspace() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls:
      - {name: run_command, arguments: {command: ":>f"}}
      - {name: run_command, arguments: {command: "python3 -c \"open('f','w')\""}}
      - {name: run_command, arguments: {command: "echo x | tee f"}}
      - {name: run_command, arguments: {command: "sh -c 'touch f'"}}
      - {name: run_command, arguments: {command: "ls"}}
  - text: "done looking"
  - text: "done"
"#,
    );
    let out = h.run("look around").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert!(!h.root().join("f").exists(), "the workspace changed");
    let results = h.results();
    for (i, (_, is_error, content)) in results.iter().take(4).enumerate() {
        assert!(is_error, "command {i} ran: {content}");
        assert!(content.contains("phase_violation"), "{content}");
        assert!(content.contains("read-only"), "{content}");
    }
    assert!(!results[4].1, "a read-only command runs: {}", results[4].2);
    assert!(results[4].2.contains("README.md"), "{}", results[4].2);
    assert_eq!(h.count("phase_violation"), 4);
}

#[tokio::test]
async fn a_command_the_analysis_lets_through_still_cannot_write_in_planning() {
    assert!(
        keel_tools::sandbox::is_available(),
        "this test needs the Landlock sandbox (Linux 5.13+ with Landlock enabled): {}",
        keel_tools::sandbox::describe_support()
    );
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls:
      - {name: run_command, arguments: {command: "python3 -c \"open('f','w').write('x')\""}}
  - text: "done"
  - text: "done"
"#,
    );
    // The user declares python3 read-only: the analysis is now wrong on purpose, and only
    // the read-only sandbox stands between the command and the workspace.
    h.config.shell.allow = vec!["python3".into()];
    let out = h.run("t").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert_eq!(h.count("phase_violation"), 0, "the analysis allowed it");
    assert!(!h.root().join("f").exists(), "the sandbox let it write");
    let (_, _, content) = &h.results()[0];
    assert!(
        // Landlock's refusal, or the read-only mount of everything the policy does not let
        // the command write (red-team B1), whichever comes first.
        content.contains("exit code: 1")
            && (content.contains("PermissionError") || content.contains("Read-only file system")),
        "{content}"
    );
}

#[tokio::test]
async fn verification_runs_read_only_and_test_commands_only() {
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls:
      - {name: run_command, arguments: {command: "sh tests.sh"}}
      - {name: run_command, arguments: {command: "touch made-in-verification"}}
      - {name: run_command, arguments: {command: "cat README.md"}}
  - text: "verified"
  - text: "verified"
"#,
    );
    h.config.plan_exec.start_phase = "verification".into();
    std::fs::write(h.root().join("hello.txt"), "hello\n").unwrap();
    let out = h.run("t").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let results = h.results();
    assert!(!results[0].1, "the test command runs: {}", results[0].2);
    assert!(results[0].2.contains("1 passed"), "{}", results[0].2);
    assert!(results[1].1 && results[1].2.contains("phase_violation"));
    assert!(!results[2].1);
    assert!(!h.root().join("made-in-verification").exists());
}

#[tokio::test]
async fn bash_deny_patterns_refuse_matching_commands() {
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls:
      - {name: run_command, arguments: {command: "echo deploy-now > marker"}}
      - {name: run_command, arguments: {command: "echo fine > marker"}}
  - text: "done"
  - text: "done"
"#,
    );
    h.config.plan_exec.start_phase = "building".into();
    h.config.plan_exec.phases.building.bash_deny = vec!["deploy".into()];
    let out = h.run("t").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let results = h.results();
    assert!(
        results[0].1 && results[0].2.contains("bash_deny"),
        "{}",
        results[0].2
    );
    assert!(!results[1].1);
    assert_eq!(
        std::fs::read_to_string(h.root().join("marker")).unwrap(),
        "fine\n"
    );
}

#[tokio::test]
async fn without_a_policy_react_is_unchanged_and_has_no_advance_phase() {
    let mut h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "hello\n"}}]
  - tool_calls: [{name: advance_phase, arguments: {}}]
  - text: "done"
"#,
    );
    h.config.agent.mode = "react".into();
    let engine = h.engine();
    assert_eq!(engine.mode(), ExecutionMode::React);
    assert!(engine.tools().get("advance_phase").is_none());
    let out = h.run("t").await;
    assert_eq!(out.status, SessionStatus::Completed);
    assert!(h.root().join("hello.txt").exists(), "writes run at once");
    let results = h.results();
    assert!(results[1].1);
    assert!(
        results[1].2.contains("unknown tool `advance_phase`"),
        "{}",
        results[1].2
    );
    assert_eq!(h.count("phase_changed") + h.count("phase_violation"), 0);
    assert!(!h.heads()[0].contains("advance_phase"));
    let EventKind::SessionStarted { phase, .. } = &h.events()[0].kind else {
        panic!();
    };
    assert_eq!(phase, &None);
}

#[tokio::test]
async fn the_builder_mode_switch_gives_the_same_engine_as_config() {
    let mut h = Harness::new("turns: []\n");
    h.config.agent.mode = "react".into();
    let via_builder = EngineBuilder::new(h.config.clone(), h.root())
        .mode(ExecutionMode::PlanExec)
        .provider(Arc::new(h.provider.clone()))
        .store(h.store.clone())
        .build()
        .unwrap();
    h.config.agent.mode = "plan_exec".into();
    let via_config = h.engine();
    assert_eq!(via_builder.mode(), ExecutionMode::PlanExec);
    assert_eq!(
        serde_json::to_string(&via_builder.tools().specs()).unwrap(),
        serde_json::to_string(&via_config.tools().specs()).unwrap()
    );
    // plan_exec switched off in config cannot be selected through the builder either.
    let mut off = h.config.clone();
    off.plan_exec.enabled = false;
    off.agent.mode = "react".into();
    let e = EngineBuilder::new(off, h.root())
        .mode(ExecutionMode::PlanExec)
        .provider(Arc::new(h.provider.clone()))
        .store(h.store.clone())
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("plan_exec.enabled = false"), "{e}");
    // A whitelist naming no tool is refused when the engine is built.
    h.config.plan_exec.phases.planning.whitelist = Some(vec!["raed_file".into()]);
    let e = EngineBuilder::new(h.config.clone(), h.root())
        .provider(Arc::new(h.provider.clone()))
        .store(h.store.clone())
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plan_exec.phases.planning.whitelist names `raed_file`"),
        "{e}"
    );
}

#[tokio::test]
async fn a_resumed_session_continues_in_its_phase() {
    let h = Harness::new(
        r#"
turns:
  - tool_calls: [{name: list_files, arguments: {}}]
  - tool_calls: [{name: advance_phase, arguments: {summary: "plan: create hello.txt saying hello"}}]
  - text: "paused"
  - text: "paused"
  - tool_calls: [{name: create_file, arguments: {path: hello.txt, content: "hello\n"}}]
  - text: "done"
  - text: "done"
"#,
    );
    let first = h.run("t").await;
    assert_eq!(first.status, SessionStatus::Completed);
    let options = RunOptions {
        sinks: vec![h.sink.clone()],
        ..RunOptions::default()
    };
    let second = h
        .engine()
        .continue_session(&first.session_id, "go on", options)
        .await
        .unwrap();
    assert_eq!(
        second.status,
        SessionStatus::Completed,
        "{:?}",
        second.error
    );
    assert!(
        h.root().join("hello.txt").exists(),
        "building allowed the write"
    );
    assert_eq!(h.count("phase_violation"), 0);
    let resumed = &h.provider.requests()[4];
    assert!(
        resumed
            .messages
            .last()
            .unwrap()
            .text()
            .contains("in the building phase"),
    );

    // A react engine refuses to continue a plan_exec session.
    let mut react = h.config.clone();
    react.agent.mode = "react".into();
    let e = EngineBuilder::new(react, h.root())
        .provider(Arc::new(h.provider.clone()))
        .store(h.store.clone())
        .build()
        .unwrap()
        .continue_session(&first.session_id, "x", RunOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("runs in plan_exec mode"), "{e}");
}

/// A git repository with `foo.py` committed as good.
fn git_fixture(root: &Path) {
    assert!(
        keel_snapshot::git_available(),
        "this test needs git (CI installs it)"
    );
    std::fs::write(root.join("foo.py"), "print('good')\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "foo.py"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    ] {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }
}

const BREAK_THEN_FAIL: &str = r#"
turns:
  - tool_calls:
      - {name: run_command, arguments: {command: "echo \"print('broken')\" > foo.py"}}
  - error: server
"#;

#[tokio::test]
async fn a_failed_phase_is_rolled_back_with_git_and_validated() {
    let mut h = Harness::new(BREAK_THEN_FAIL);
    git_fixture(h.root());
    h.config.plan_exec.start_phase = "building".into();
    h.config.plan_exec.phases.building.validation_command = Some("grep -q good foo.py".into());
    h.config.plan_exec.phases.building.rollback_command = Some("git checkout -- foo.py".into());
    let out = h.run("t").await;
    assert_eq!(out.status, SessionStatus::Failed);
    assert_eq!(
        std::fs::read_to_string(h.root().join("foo.py")).unwrap(),
        "print('good')\n",
        "the rollback restored the file"
    );
    let types = h.sink.types();
    let tail: Vec<&str> = types
        .iter()
        .copied()
        .skip_while(|t| *t != "phase_validation")
        .collect();
    assert_eq!(
        tail,
        [
            "phase_validation",
            "rollback_started",
            "phase_validation",
            "rollback_completed",
            "checkpoint",
            "error",
            "session_finished"
        ]
    );
    assert_eq!(h.count("recovery"), 0, "plan_exec bypasses recovery");
    let err = out.error.unwrap();
    assert_eq!(err.error_code, ErrorCode::LlmFailure);
    assert!(
        err.suggestions
            .iter()
            .any(|s| s.contains("rollback_command restored")),
        "{:?}",
        err.suggestions
    );
    // The rollback ran outside the agent's shell tool: the session log records it.
    let (validations, rollback) = h
        .events()
        .into_iter()
        .fold((vec![], None), |(mut v, r), e| match e.kind {
            EventKind::PhaseValidation {
                passed,
                after_rollback,
                ..
            } => {
                v.push((passed, after_rollback));
                (v, r)
            }
            EventKind::RollbackCompleted { command, .. } => (v, Some(command)),
            _ => (v, r),
        });
    assert_eq!(validations, [(false, false), (true, true)]);
    assert_eq!(rollback.as_deref(), Some("git checkout -- foo.py"));
}

#[tokio::test]
async fn a_failing_rollback_saves_no_checkpoint() {
    let mut h = Harness::new(BREAK_THEN_FAIL);
    git_fixture(h.root());
    h.config.plan_exec.start_phase = "building".into();
    h.config.plan_exec.phases.building.validation_command = Some("grep -q good foo.py".into());
    h.config.plan_exec.phases.building.rollback_command = Some("exit 4".into());
    let out = h.run("t").await;
    assert_eq!(out.status, SessionStatus::Failed);
    assert_eq!(h.count("rollback_failed"), 1);
    assert_eq!(h.count("checkpoint"), 0);
    let reason = h
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::RollbackFailed { reason, .. } => Some(reason),
            _ => None,
        })
        .unwrap();
    assert!(reason.contains("exit code 4"), "{reason}");
    let err = out.error.unwrap();
    assert!(
        err.suggestions.iter().any(|s| s.contains("keel undo")),
        "{:?}",
        err.suggestions
    );
}

#[tokio::test]
async fn a_failure_without_rollback_commands_still_saves_the_checkpoint() {
    let mut h = Harness::new(BREAK_THEN_FAIL);
    h.config.plan_exec.start_phase = "building".into();
    std::fs::write(h.root().join("foo.py"), "print('good')\n").unwrap();
    let out = h.run("t").await;
    assert_eq!(out.status, SessionStatus::Failed);
    assert_eq!(h.count("phase_validation") + h.count("rollback_started"), 0);
    assert_eq!(h.count("checkpoint"), 1);
}
