//! An MCP server's tools in a real (scripted) session: the Python SDK server from
//! `crates/keel-mcp/tests/servers` is launched at engine build, its tools are deferred (found
//! by `tool_search`, absent from the first-turn list) unless `active = true`, and a
//! call by the model reaches the server and comes back as the tool result. `.ci/run`
//! installs the SDK; elsewhere the test skips visibly, under `CI=true` it fails.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use common::python_mcp;
use std::sync::Arc;

use keel_engine::{Config, EngineBuilder, RunOptions};
use keel_llm::scripted::ScriptedProvider;
use keel_store::SqliteStore;

fn config(active: bool) -> Config {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../keel-mcp/tests/servers/py_server.py"
    );
    let mut config = Config::default();
    config.verify.enabled = false;
    config.mcp.servers.insert(
        "py".into(),
        keel_mcp::ServerConfig {
            command: Some("python3".into()),
            args: vec![script.into()],
            active,
            ..keel_mcp::ServerConfig::default()
        },
    );
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_session_calls_a_deferred_mcp_tool() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let provider = ScriptedProvider::from_yaml(
        "turns:\n  - tool_calls:\n      - name: mcp__py__echo\n        arguments: {text: ping from the model}\n      - name: mcp__py__fail\n        arguments: {reason: scripted}\n  - text: done\n",
    )
    .unwrap();
    let engine = EngineBuilder::new(config(false), dir.path())
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    let mcp = engine.mcp().expect("the server is defined");
    assert!(mcp.warnings.is_empty(), "{:?}", mcp.warnings);
    let out = engine
        .run("use the echo tool", RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.final_text, "done");
    let requests = provider.requests();
    let first_tools: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        !first_tools.contains(&"mcp__py__echo"),
        "deferred: {first_tools:?}"
    );
    // Not even named in tool_search's description: the head does not depend on whether the
    // server was up yet (see mcp_background.rs); the model finds it by searching.
    let search = requests[0]
        .tools
        .iter()
        .find(|t| t.name == "tool_search")
        .expect("tool_search is listed");
    assert!(
        !search.description.contains("mcp__py__echo"),
        "{}",
        search.description
    );
    let second = serde_json::to_string(&requests[1].messages).unwrap();
    assert!(second.contains("ping from the model"), "{second}");
    assert!(second.contains("failed on purpose: scripted"), "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_server_puts_its_tools_in_the_head() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let provider = ScriptedProvider::from_yaml("turns:\n  - text: ok\n").unwrap();
    let engine = EngineBuilder::new(config(true), dir.path())
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    engine.run("hi", RunOptions::default()).await.unwrap();
    let names: Vec<String> = provider.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"mcp__py__echo".to_string()), "{names:?}");
}
