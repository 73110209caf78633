//! MCP servers start in the background: building a session never waits for them, the first
//! request's head (system prompt + tool catalog) is the same bytes whether a server is up yet
//! or not (and the same as with no MCP server at all), a call to a tool of a server still
//! starting waits for it and runs, `tool_search` waits for servers still starting (bounded) and
//! finds their tools, an
//! `active` server is waited for before the first request (its schemas are in the head), and a
//! tool of a server that failed is an error naming the server and `keel mcp test NAME`.
//!
//! The servers are the Python SDK test server (`crates/keel-mcp/tests/servers/py_server.py`,
//! `--slow-start SECONDS` sleeps before answering `initialize`); `.ci/run` installs the SDK;
//! elsewhere the tests skip visibly, under `CI=true` they fail.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use common::python_mcp;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use keel_engine::{Config, EngineBuilder, RunOptions};
use keel_llm::scripted::ScriptedProvider;
use keel_llm::{ChatRequest, EventStream, LlmError, Provider, ProviderInfo};
use keel_store::SqliteStore;

const SLOW_SECS: u64 = 3;

/// The test server, sleeping `slow` seconds before its handshake).
fn server(slow: u64, active: bool) -> keel_mcp::ServerConfig {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../keel-mcp/tests/servers/py_server.py"
    );
    keel_mcp::ServerConfig {
        command: Some("python3".into()),
        args: vec![script.into(), format!("--slow-start={slow}")],
        active,
        ..keel_mcp::ServerConfig::default()
    }
}

fn config(servers: &[(&str, keel_mcp::ServerConfig)]) -> Config {
    let mut config = Config::default();
    config.verify.enabled = false;
    config.index.enabled = false;
    for (name, s) in servers {
        config.mcp.servers.insert(name.to_string(), s.clone());
    }
    config
}

/// The scripted provider, noting when each request arrived and, for the first, how the
/// session's MCP servers stood at that moment.
#[derive(Clone)]
struct Timed {
    inner: ScriptedProvider,
    at: Arc<Mutex<Vec<Instant>>>,
    hub: Arc<Mutex<Option<Arc<keel_mcp::Hub>>>>,
    /// (server, status) when the first request went out.
    at_first: Arc<Mutex<Vec<(String, keel_mcp::Status)>>>,
}

impl Timed {
    fn new(script: &str) -> Self {
        Self {
            inner: ScriptedProvider::from_yaml(script).unwrap(),
            at: Arc::default(),
            hub: Arc::default(),
            at_first: Arc::default(),
        }
    }

    /// The status of `server` when the first request went out.
    fn status_at_first(&self, server: &str) -> Option<keel_mcp::Status> {
        let at_first = self.at_first.lock().unwrap();
        let found = at_first.iter().find(|(name, _)| name == server);
        found.map(|(_, status)| status.clone())
    }

    fn first_at(&self) -> Instant {
        self.at.lock().unwrap()[0]
    }
}

impl Provider for Timed {
    fn info(&self) -> ProviderInfo {
        self.inner.info()
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        let mut at = self.at.lock().unwrap();
        if at.is_empty()
            && let Some(hub) = self.hub.lock().unwrap().as_ref()
        {
            *self.at_first.lock().unwrap() = hub
                .entries()
                .into_iter()
                .map(|e| (e.name, e.status))
                .collect();
        }
        at.push(Instant::now());
        drop(at);
        self.inner.stream(request)
    }
}

/// The cached head of a request: system prompt and tool catalog, as bytes.
fn head(request: &ChatRequest) -> String {
    serde_json::to_string(&(&request.system, &request.tools)).unwrap()
}

/// Builds an engine in `dir` and runs `task`; the provider and the time from the start of the
/// build (launch) to the first request.
async fn run(
    config: Config,
    dir: &Path,
    script: &str,
    ready_first: bool,
) -> (Timed, Duration, keel_engine::RunOutcome) {
    let provider = Timed::new(script);
    let launch = Instant::now();
    let engine = EngineBuilder::new(config, dir)
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    *provider.hub.lock().unwrap() = engine.mcp().map(|m| m.hub.clone());
    if ready_first && let Some(mcp) = engine.mcp() {
        for e in mcp.hub.entries() {
            mcp.hub.wait_for_server(&e.name).await;
        }
        let statuses: Vec<String> = mcp
            .hub
            .entries()
            .iter()
            .map(|e| e.status.to_string())
            .collect();
        assert!(
            statuses.iter().all(|s| s.starts_with("ready")),
            "{statuses:?}"
        );
    }
    let out = engine.run("go", RunOptions::default()).await.unwrap();
    let first = provider.first_at() - launch;
    (provider, first, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_delays_nothing_and_its_tool_works_once_it_is_up() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = "turns:
  - tool_calls:
      - name: tool_search
        arguments: {query: echo}
  - tool_calls:
      - name: mcp__slow__echo
        arguments: {text: hello from the late server}
  - tool_calls:
      - name: tool_search
        arguments: {query: echo}
  - text: done
";
    let cfg = config(&[("slow", server(SLOW_SECS, false))]);
    let (provider, first, out) = run(cfg, dir.path(), script, false).await;
    eprintln!("launch -> first request with a {SLOW_SECS} s MCP server: {first:?}");
    assert!(
        first < Duration::from_secs(1),
        "the first request waited for the server: {first:?}"
    );
    assert_eq!(out.final_text, "done");
    let requests = provider.inner.requests();
    let text = |i: usize| serde_json::to_string(&requests[i].messages).unwrap();
    // The first search waits for the server still starting and finds its tool; the call
    // runs.
    let first_search = text(1);
    assert!(
        first_search.contains("mcp__slow__echo"),
        "the first tool_search found no MCP tool: {first_search}"
    );
    assert!(
        text(2).contains("hello from the late server"),
        "{}",
        text(2)
    );
    let last = text(3);
    let found = last.rsplit("tool_search").next().unwrap_or_default();
    assert!(found.contains("mcp__slow__echo"), "{last}");
    // The head never changed within the session.
    assert!(requests.iter().all(|r| head(r) == head(&requests[0])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_request_is_the_same_bytes_whether_the_server_is_up_or_not() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = "turns:\n  - text: ok\n";
    let (none, _, _) = run(config(&[]), dir.path(), script, false).await;
    let slow = config(&[("srv", server(SLOW_SECS, false))]);
    let (starting, first, _) = run(slow, dir.path(), script, false).await;
    let fast = config(&[("srv", server(0, false))]);
    let (ready, _, _) = run(fast, dir.path(), script, true).await;
    assert!(first < Duration::from_secs(1), "{first:?}");
    let [none, starting, ready] = [none, starting, ready].map(|p| head(&p.inner.requests()[0]));
    assert_eq!(starting, ready, "the head depends on the server's timing");
    assert_eq!(starting, none, "a deferred MCP server changed the head");
    assert!(!starting.contains("mcp__"), "{starting}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_server_is_waited_for_and_its_schemas_are_in_the_head() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = "turns:\n  - text: ok\n";
    let cfg = config(&[("act", server(1, true)), ("other", server(20, false))]);
    let (provider, first, _) = run(cfg, dir.path(), script, false).await;
    // Waits for the active server (its 1 s sleep and its start), and only for it: the
    // deferred one (a 20 s sleep) was still starting when the request went out. Not a bound
    // on the time: each server's start is a Python interpreter importing the MCP SDK, ~1 s
    // of CPU that took 17 s on a loaded 2-core machine (CI, load ~15).
    assert!(first >= Duration::from_secs(1), "{first:?}");
    assert!(
        matches!(
            provider.status_at_first("act"),
            Some(keel_mcp::Status::Ready { .. })
        ),
        "{:?}",
        provider.status_at_first("act")
    );
    assert_eq!(
        provider.status_at_first("other"),
        Some(keel_mcp::Status::Starting),
        "the first request waited for the deferred server ({first:?})"
    );
    let names: Vec<String> = provider.inner.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"mcp__act__echo".to_string()), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__other")),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_of_a_server_that_failed_names_the_server_and_the_test_command() {
    let dir = tempfile::tempdir().unwrap();
    let broken = keel_mcp::ServerConfig {
        command: Some("keel-no-such-mcp-server".into()),
        ..keel_mcp::ServerConfig::default()
    };
    let script = "turns:
  - tool_calls:
      - name: mcp__broken__echo
        arguments: {text: hi}
  - text: done
";
    let (provider, first, _) = run(config(&[("broken", broken)]), dir.path(), script, false).await;
    assert!(first < Duration::from_secs(1), "{first:?}");
    let second = serde_json::to_string(&provider.inner.requests()[1].messages).unwrap();
    assert!(
        second.contains("MCP server `broken` did not start")
            && second.contains("keel mcp test broken"),
        "{second}"
    );
}

/// The child is opened while the server is still starting: `agent_open` waits for it, so the
/// worker's scope has the server's tools, and the child calls the parent's server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_calls_its_parents_server() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let parent = ScriptedProvider::from_yaml(
        "turns:
  - tool_calls:
      - name: agent_open
        arguments: {role: worker, task: echo something}
  - tool_calls:
      - name: agent_eval
        arguments: {agent_id: a1}
  - text: done
",
    )
    .unwrap();
    let child = ScriptedProvider::from_yaml(
        "turns:
  - tool_calls:
      - name: mcp__srv__echo
        arguments: {text: from the child}
  - text: child done
",
    )
    .unwrap();
    let given = Arc::new(Mutex::new(Some(child.clone())));
    let factory: keel_engine::agents::ChildProviders = Arc::new(move |_model: Option<&str>| {
        given
            .lock()
            .unwrap()
            .take()
            .map(|p| Arc::new(p) as Arc<dyn Provider>)
            .ok_or_else(|| "one child only".to_string())
    });
    let mut cfg = config(&[("srv", server(1, false))]);
    cfg.snapshots.enabled = false;
    let engine = EngineBuilder::new(cfg, dir.path())
        .provider(Arc::new(parent.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .child_providers(factory)
        .build()
        .unwrap();
    let out = engine.run("go", RunOptions::default()).await.unwrap();
    assert_eq!(out.final_text, "done");
    let child_saw = serde_json::to_string(&child.requests()[1].messages).unwrap();
    assert!(
        child_saw.contains("from the child") && !child_saw.contains("refused"),
        "{child_saw}"
    );
    // One server for both: started once, never restarted.
    let hub = &engine.mcp().unwrap().hub;
    assert_eq!(hub.server("srv").unwrap().restarts(), 0);
}
