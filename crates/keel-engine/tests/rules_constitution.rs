//! Rules and the constitution through a real session: a nested AGENTS.md reaches the model
//! once, right after the first read under its directory and never before; the constitution
//! is stated in the byte-stable head, its protected paths cannot be written by edit_file,
//! apply_patch or run_command, and an invalid one stops the engine at start-up.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_engine::{Config, EngineBuilder, RunOptions};
use keel_llm::ChatRequest;
use keel_llm::scripted::ScriptedProvider;
use keel_store::SqliteStore;

fn all_text(r: &ChatRequest) -> String {
    serde_json::to_string(&r.messages).unwrap()
}

async fn run(dir: &std::path::Path, script: &str) -> Vec<ChatRequest> {
    let mut config = Config::default();
    config.verify.enabled = false;
    let provider = ScriptedProvider::from_yaml(script).unwrap();
    let engine = EngineBuilder::new(config, dir)
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    engine
        .run("work on web", RunOptions::default())
        .await
        .unwrap();
    provider.requests()
}

#[tokio::test]
async fn a_nested_agents_md_appears_once_after_the_first_read_under_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "Root rule.\n").unwrap();
    std::fs::create_dir_all(dir.path().join("web/src")).unwrap();
    std::fs::write(dir.path().join("web/AGENTS.md"), "WEB-RULE: use pnpm.\n").unwrap();
    std::fs::write(dir.path().join("web/src/a.ts"), "export const a = 1;\n").unwrap();
    std::fs::write(dir.path().join("web/src/b.ts"), "export const b = 2;\n").unwrap();
    std::fs::write(dir.path().join("top.txt"), "top\n").unwrap();
    let requests = run(
        dir.path(),
        "turns:\n  - tool_calls:\n      - name: read_file\n        arguments: {path: top.txt}\n  - tool_calls:\n      - name: read_file\n        arguments: {path: web/src/a.ts}\n  - tool_calls:\n      - name: read_file\n        arguments: {path: web/src/b.ts}\n  - text: done\n",
    )
    .await;
    assert_eq!(requests.len(), 4);
    let count = |r: &ChatRequest| all_text(r).matches("WEB-RULE").count();
    assert_eq!(count(&requests[0]), 0, "not before any read");
    assert_eq!(count(&requests[1]), 0, "not after a read elsewhere");
    assert_eq!(count(&requests[2]), 1, "after the first read under web/");
    assert_eq!(count(&requests[3]), 1, "exactly once");
    // In the tail, never in the head; the head is identical on every request.
    assert!(requests.iter().all(|r| !r.system.contains("WEB-RULE")));
    assert!(requests[0].system.contains("Root rule."));
    assert!(requests.iter().all(|r| r.system == requests[0].system));
}

#[tokio::test]
async fn protected_paths_cannot_be_written_by_any_tool() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".keel")).unwrap();
    std::fs::create_dir_all(dir.path().join("migrations")).unwrap();
    std::fs::write(
        dir.path().join(".keel/constitution.json"),
        r#"{"protected_paths": ["migrations/"], "conventions": ["Never squash migrations."]}"#,
    )
    .unwrap();
    let original = "CREATE TABLE t (id INT);\n";
    std::fs::write(dir.path().join("migrations/001.sql"), original).unwrap();
    let patch = "*** Begin Patch\\n*** Update File: migrations/001.sql\\n@@\\n-CREATE TABLE t (id INT);\\n+DROP TABLE t;\\n*** End Patch\\n";
    let script = format!(
        "turns:\n  - tool_calls:\n      - name: read_file\n        arguments: {{path: migrations/001.sql}}\n  - tool_calls:\n      - name: edit_file\n        arguments: {{path: migrations/001.sql, edits: [{{search: INT, replace: TEXT}}]}}\n      - name: apply_patch\n        arguments: {{patch: \"{patch}\"}}\n      - name: run_command\n        arguments: {{command: \"sed -i s/INT/TEXT/ migrations/001.sql\"}}\n      - name: run_command\n        arguments: {{command: \"echo gone > migrations/001.sql\"}}\n  - text: done\n"
    );
    let requests = run(dir.path(), &script).await;
    assert_eq!(
        std::fs::read_to_string(dir.path().join("migrations/001.sql")).unwrap(),
        original
    );
    let last = all_text(requests.last().unwrap());
    assert_eq!(
        last.matches("is protected by the repository constitution")
            .count(),
        4,
        "{last}"
    );
    // The constitution is stated in the head.
    assert!(requests[0].system.contains("Never squash migrations."));
    assert!(requests[0].system.contains("the request wins"));
}

#[test]
fn an_invalid_constitution_is_a_clear_error_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".keel")).unwrap();
    std::fs::write(
        dir.path().join(".keel/constitution.json"),
        r#"{"protected_paths": "migrations/"}"#,
    )
    .unwrap();
    let err = EngineBuilder::new(Config::default(), dir.path())
        .provider(Arc::new(
            ScriptedProvider::from_yaml("turns: []\n").unwrap(),
        ))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(".keel/constitution.json") && err.contains("`protected_paths` must be a list"),
        "{err}"
    );
}
