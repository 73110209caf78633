//! Shared harness for the engine's integration tests: a temp workspace, scripted providers
//! (main and auxiliary), an in-memory store and a collecting sink.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use keel_engine::compaction::SUMMARY_PROMPT;
use keel_engine::{CollectingSink, Config, Engine, EngineBuilder, RunOptions, RunOutcome};
use keel_llm::retry::RetryPolicy;
use keel_llm::scripted::ScriptedProvider;
use keel_llm::{ChatRequest, EventStream, LlmError, Provider, ProviderInfo};
use keel_protocol::{Event, EventKind};
use keel_store::SqliteStore;
use keel_tools::{Tool, ToolRegistry, builtin};

/// A provider that answers summary requests (the compaction summariser's system prompt)
/// from one script and everything else from another: the same "model" playing two roles.
#[derive(Clone)]
pub struct SplitProvider {
    pub main: ScriptedProvider,
    pub summaries: ScriptedProvider,
}

impl Provider for SplitProvider {
    fn info(&self) -> ProviderInfo {
        self.main.info()
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        if request.system == SUMMARY_PROMPT {
            self.summaries.stream(request)
        } else {
            self.main.stream(request)
        }
    }
}

pub fn scripted(yaml: &str) -> ScriptedProvider {
    ScriptedProvider::from_yaml(yaml).unwrap()
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    /// The main model's loop turns.
    pub provider: ScriptedProvider,
    /// The main model's answers to summary requests.
    pub main_summaries: ScriptedProvider,
    pub auxiliary: Option<Arc<dyn Provider>>,
    pub store: Arc<SqliteStore>,
    pub sink: Arc<CollectingSink>,
    pub config: Config,
    pub extra_tools: Vec<Arc<dyn Tool>>,
    pub max_retries: u32,
}

impl Harness {
    pub fn new(script: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(
            dir.path().join("src/lib.rs"),
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
        )
        .unwrap();
        Self {
            dir,
            provider: scripted(script),
            main_summaries: scripted("turns: []\n"),
            auxiliary: None,
            store: Arc::new(SqliteStore::open_in_memory().unwrap()),
            sink: CollectingSink::new(),
            config: Config::default(),
            extra_tools: Vec::new(),
            max_retries: 4,
        }
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn engine(&self) -> Engine {
        let mut tools = ToolRegistry::new();
        builtin::register_defaults(&mut tools);
        for t in &self.extra_tools {
            tools.register_arc(t.clone());
        }
        let main = SplitProvider {
            main: self.provider.clone(),
            summaries: self.main_summaries.clone(),
        };
        let mut b = EngineBuilder::new(self.config.clone(), self.dir.path())
            .provider(Arc::new(main))
            .store(self.store.clone())
            .tools(tools)
            .retry_policy(RetryPolicy {
                max_retries: self.max_retries,
                base_delay: Duration::from_millis(1),
                ..RetryPolicy::default()
            });
        if let Some(aux) = &self.auxiliary {
            b = b.auxiliary_provider(aux.clone());
        }
        b.build().unwrap()
    }

    pub async fn run(&self, task: &str) -> RunOutcome {
        self.run_with(task, RunOptions::default()).await
    }

    pub async fn run_with(&self, task: &str, mut options: RunOptions) -> RunOutcome {
        options.sinks.push(self.sink.clone());
        self.engine().run(task, options).await.unwrap()
    }

    pub async fn resume(&self, session: &str, message: &str) -> RunOutcome {
        let options = RunOptions {
            sinks: vec![self.sink.clone()],
            ..RunOptions::default()
        };
        self.engine()
            .continue_session(session, message, options)
            .await
            .unwrap()
    }

    pub fn events(&self) -> Vec<Event> {
        self.sink.events()
    }

    pub fn count(&self, type_name: &str) -> usize {
        self.sink
            .types()
            .iter()
            .filter(|t| **t == type_name)
            .count()
    }

    pub fn tool_results(&self) -> Vec<(String, bool, String)> {
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

    /// The text of every message of the main model's request number `n` (0-based).
    pub fn request_text(&self, n: usize) -> String {
        let req = &self.provider.requests()[n];
        serde_json::to_string(&req.messages).unwrap()
    }
}

/// Modules of the long session's workspace.
pub const LONG_SESSION_MODULES: usize = 20;
/// Model turns of the long session (the last one is the final answer).
pub const LONG_SESSION_TURNS: usize = 60;
/// The turn whose create_file fails (an error the session never resolves).
pub const LONG_SESSION_ERROR_TURN: usize = 10;

/// Writes the long session's source files (each about 2.5 KB of code with named functions)
/// and raises the iteration cap above the session's length.
pub fn long_session_workspace(h: &mut Harness) {
    h.config.agent.max_iterations = 100;
    for m in 0..LONG_SESSION_MODULES {
        let mut s = String::new();
        for f in 0..8 {
            s.push_str(&format!(
                "/// Handles case {f} of module {m}.\npub fn handle_{m}_{f}(input: &str) -> usize {{\n    let trimmed = input.trim();\n    trimmed.len() * {f} + {m}\n}}\n\n"
            ));
        }
        h.write(&format!("src/mod_{m}.rs"), &s);
    }
}

/// A 60-turn scripted session: reads every module, writes notes, lists directories, hits one
/// error it never fixes (turn 10 tries to create the existing `src/lib.rs`), then finishes.
/// `context_window` goes into the script's top level.
pub fn long_session_script(context_window: u64) -> String {
    let mut s = format!("context_window: {context_window}\nturns:\n");
    for i in 0..LONG_SESSION_TURNS - 1 {
        s.push_str(&format!(
            "  - text: \"Step {i}: continuing the survey.\"\n    tool_calls:\n"
        ));
        if i == LONG_SESSION_ERROR_TURN {
            s.push_str(
                "      - name: create_file\n        arguments: {path: \"src/lib.rs\", content: \"// replaced\"}\n",
            );
            continue;
        }
        match i % 3 {
            0 => s.push_str(&format!(
                "      - name: read_file\n        arguments: {{path: \"src/mod_{}.rs\"}}\n",
                (i / 3) % LONG_SESSION_MODULES
            )),
            1 => {
                let body = format!("Findings of step {i}: ").repeat(40);
                s.push_str(&format!(
                    "      - name: create_file\n        arguments: {{path: \"notes/step_{i}.md\", content: \"{body}\"}}\n"
                ));
            }
            _ => s.push_str(&format!(
                "      - name: list_files\n        arguments: {{path: \"src\", max_depth: {}}}\n",
                i + 1
            )),
        }
    }
    s.push_str("  - text: \"Done: surveyed every module and wrote the notes.\"\n");
    s
}

/// An auxiliary script answering `n` summary requests.
pub fn summaries_script(n: usize, prefix: &str) -> String {
    let mut s = String::from("turns:\n");
    for i in 1..=n {
        s.push_str(&format!(
            "  - text: \"{prefix} {i}: surveyed modules and wrote notes; no blockers.\"\n"
        ));
    }
    s
}

/// Whether the Python MCP SDK (the test server's) is installed; skips visibly outside CI,
/// fails under `CI=true` (`.ci/run` installs it).
#[allow(clippy::disallowed_methods)]
pub fn python_mcp() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "the Python MCP SDK is missing; .ci/run installs it"
        );
        eprintln!("SKIPPED: the Python MCP SDK is missing (pip install 'mcp>=2,<3')");
    }
    ok
}
