//! The whole first request with everything a real workspace brings configured at once: 20
//! skills, 50 user-memory facts, a promoted lesson, an AGENTS.md, a constitution and an MCP
//! server (the Python SDK test server from `crates/keel-mcp/tests/servers`). The whole first
//! request (head and first message) stays ≤ 2,500 tokens by Keel's estimator, and the head
//! (system prompt + tool catalog) is byte-identical across turns and across runs in other
//! directories and git states. `.ci/run` installs the MCP SDK; elsewhere the test skips
//! visibly, under `CI=true` it fails.

// Tests start programs of their own (the MCP test server): allowed here, outside Keel's one
// spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use common::python_mcp;
use std::path::Path;
use std::sync::Arc;

use keel_engine::{Config, EngineBuilder, RunOptions};
use keel_llm::ChatRequest;
use keel_llm::scripted::ScriptedProvider;
use keel_llm::tokens::estimate_request;
use keel_store::{MemoryKind, SqliteStore};

const AGENTS_MD: &str = "# Working in this repository\n\n\
- Build with `cargo build`; test with `cargo test --workspace`.\n\
- Library code returns errors with `thiserror`; no `unwrap()` outside tests.\n\
- Keep functions short; name things for what they are.\n\
- Public items carry a doc comment.\n";

fn populate(root: &Path) {
    std::fs::create_dir_all(root.join(".keel")).unwrap();
    std::fs::write(root.join("AGENTS.md"), AGENTS_MD).unwrap();
    std::fs::write(
        root.join(".keel/constitution.json"),
        r#"{"protected_paths": ["migrations/", "LICENSE"], "forbidden_commands": ["git push"],
            "required_gates": ["cargo test --workspace"], "conventions": ["Errors name the file.", "No unwrap in library code."]}"#,
    )
    .unwrap();
    for i in 0..20 {
        let dir = root.join(format!(".keel/skills/skill-{i:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: skill-{i:02}\ndescription: Handles task family {i} with care and checks\n---\nBody {i}.\n"),
        )
        .unwrap();
    }
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/parser.rs"),
        "pub fn parse(s: &str) -> u32 { s.len() as u32 }\n",
    )
    .unwrap();
}

/// Fifty facts of the kind people save: preferences, team habits, tools — a few about the
/// parser the task names, most about other things.
fn facts() -> Vec<String> {
    let topics = [
        "prefers small commits with imperative subject lines",
        "works on the billing team; invoices live in the billing service",
        "uses fish as the login shell",
        "the staging database is refreshed every Monday",
        "likes tables in explanations",
        "the parser must stay allocation-free on the hot path",
        "reviews happen in the afternoon, Berlin time",
        "CI runs on self-hosted runners with 2 cores",
        "prefers `anyhow` only in binaries",
        "the docs site is built with mdBook",
    ];
    (0..50)
        .map(|i| format!("{} (note {i})", topics[i % topics.len()]))
        .collect()
}

fn config() -> Config {
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
            ..keel_mcp::ServerConfig::default()
        },
    );
    config
}

async fn requests(root: &Path, git: bool) -> Vec<ChatRequest> {
    populate(root);
    if git {
        std::fs::create_dir_all(root.join(".git/refs")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/other\n").unwrap();
    }
    let store = SqliteStore::open_in_memory().unwrap();
    for fact in facts() {
        store
            .db()
            .add_memory(MemoryKind::Fact, &fact, "user")
            .unwrap();
    }
    store
        .db()
        .add_memory(
            MemoryKind::Lesson,
            "Run the formatter before committing.",
            "session abc",
        )
        .unwrap();
    let provider = ScriptedProvider::from_yaml(
        "turns:\n  - tool_calls:\n      - name: read_file\n        arguments: {path: src/parser.rs}\n  - tool_calls:\n      - name: edit_file\n        arguments: {path: src/parser.rs, edits: [{search: 's.len() as u32', replace: '(s.len() as u32).saturating_sub(1)'}]}\n  - text: done\n",
    )
    .unwrap();
    let engine = EngineBuilder::new(config(), root)
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(store))
        .build()
        .unwrap();
    engine
        .run("fix the off-by-one in src/parser.rs", RunOptions::default())
        .await
        .unwrap();
    provider.requests()
}

fn head(r: &ChatRequest) -> String {
    serde_json::to_string(&(&r.system, &r.tools)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_request_with_everything_configured_fits_in_2500_tokens() {
    if !python_mcp() {
        return;
    }
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let ra = requests(a.path(), false).await;
    let rb = requests(b.path(), true).await;
    let first = &ra[0];
    let total = estimate_request(&first.system, &first.tools, &first.messages);
    let head_tokens = estimate_request(&first.system, &first.tools, &[]);
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    eprintln!(
        "first request: about {total} tokens (head {head_tokens}, {} tools: {names:?}; first message {})",
        first.tools.len(),
        total - head_tokens
    );
    assert!(total <= 2_500, "the first request is about {total} tokens");
    // Byte-identical head: across the turns of a run, and across runs in other directories
    // and git states.
    assert_eq!(ra.len(), 3);
    assert_eq!(head(&ra[0]), head(&ra[1]), "the head changed between turns");
    assert_eq!(head(&ra[0]), head(&ra[2]), "the head changed between turns");
    assert_eq!(head(&ra[0]), head(&rb[0]), "the head changed between runs");
    // Everything configured is there, in its place.
    assert!(first.system.contains("No unwrap in library code."));
    assert!(first.system.contains("Keep functions short"));
    let message = first.messages[0].text();
    assert!(message.contains("- skill-19:"), "{message}");
    assert!(message.contains("Run the formatter before committing."));
    assert!(
        message.contains("allocation-free"),
        "the fact about the parser the task names is injected: {message}"
    );
    // Relevant memory, not total: every parser fact, within the budget, the rest searchable.
    let memory = &message[message.find("<user-memory>").unwrap()..];
    let memory = &memory[..memory.find("</user-memory>").unwrap()];
    assert_eq!(memory.matches("allocation-free").count(), 5, "{memory}");
    assert!(keel_llm::tokens::estimate_text(memory) <= 300, "{memory}");
    assert!(memory.contains("memory_search"), "{memory}");
    // Beside it, in the same run: what injecting every fact (before) would have cost.
    let all: Vec<keel_store::MemoryEntry> = facts()
        .into_iter()
        .enumerate()
        .map(|(i, text)| keel_store::MemoryEntry {
            id: i as i64 + 1,
            kind: MemoryKind::Fact,
            text,
            source: "user".into(),
            created_at: 0,
            updated_at: 0,
        })
        .collect();
    let total_block = keel_engine::memory::user_memory_block(&all).unwrap();
    eprintln!(
        "user memory: about {} tokens for the relevant facts; all 50 facts: about {} tokens",
        keel_llm::tokens::estimate_text(memory),
        keel_llm::tokens::estimate_text(&total_block)
    );
    // Skills and memory ride in the first message, never in the head.
    assert!(!first.system.contains("skill-19") && !first.system.contains("allocation-free"));
    // The skills list says "load with the `skill` tool": the tool is there to call.
    assert!(names.contains(&"skill"), "{names:?}");
}
