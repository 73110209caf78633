//! The whole first model request — system prompt, every default tool's schema and the task —
//! must stay within 4,000 tokens, so even a small-context model starts with room to work.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_engine::{Config, EngineBuilder, RunOptions};
use keel_llm::scripted::ScriptedProvider;
use keel_llm::tokens::estimate_request;
use keel_store::SqliteStore;

#[tokio::test]
async fn the_first_request_fits_in_4000_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let provider = ScriptedProvider::from_yaml("turns:\n  - text: done\n").unwrap();
    let engine = EngineBuilder::new(Config::default(), dir.path())
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    engine
        .run("fix the failing test in src/lib.rs", RunOptions::default())
        .await
        .unwrap();
    let first = &provider.requests()[0];
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    for tool in ["read_file", "edit_file", "apply_patch", "create_file"] {
        assert!(
            names.contains(&tool),
            "{tool} is in the default catalog: {names:?}"
        );
    }
    let tokens = estimate_request(&first.system, &first.tools, &first.messages);
    assert!(tokens <= 4_000, "first request is about {tokens} tokens");
    // The cached head (system prompt + the active catalog): at most ten tools, ≤ 2,500 tokens.
    assert!(first.tools.len() <= 10, "{names:?}");
    let head = estimate_request(&first.system, &first.tools, &[]);
    eprintln!("head: about {head} tokens for {} tools", first.tools.len());
    assert!(head <= 2_500, "the head is about {head} tokens");
}

/// With a repository to map, the codemap rides in the first user message (never in the
/// cached system prompt) and the whole first request still fits.
#[tokio::test]
async fn the_codemap_goes_in_the_first_message_and_still_fits() {
    let dir = tempfile::tempdir().unwrap();
    for pkg in 0..8 {
        for m in 0..12 {
            let path = dir.path().join(format!("src/pkg{pkg}/module_{m}.py"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let mut text = format!("from src.pkg{} import module_{}\n\n", (pkg + 1) % 8, m);
            for f in 0..6 {
                text.push_str(&format!("def handle_request_{m}_{f}(x):\n    return x\n\n"));
            }
            text.push_str(&format!("class Service{pkg}x{m}:\n    pass\n"));
            std::fs::write(path, text).unwrap();
        }
    }
    let mut config = Config::default();
    // Deterministic in a slow debug build: wait for the first index build.
    config.index.codemap_wait_ms = 60_000;
    let provider = ScriptedProvider::from_yaml("turns:\n  - text: done\n").unwrap();
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    engine
        .run("add a health check", RunOptions::default())
        .await
        .unwrap();
    let first = &provider.requests()[0];
    let task = first.messages[0].text();
    assert!(
        task.contains("<codemap>") && task.contains("Codemap: 96 files"),
        "{task}"
    );
    assert!(task.contains("src/pkg"), "{task}");
    assert!(
        !first.system.contains("Codemap"),
        "the codemap must not enter the system prompt"
    );
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(
        first.system,
        keel_engine::prompt::system_prompt(empty.path())
    );
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"codebase_search") && names.contains(&"grep"),
        "{names:?}"
    );
    let tokens = estimate_request(&first.system, &first.tools, &first.messages);
    eprintln!("first request with the codemap: about {tokens} tokens");
    assert!(
        tokens <= 4_000,
        "first request with the codemap is about {tokens} tokens"
    );
    // The index it built is kept for the tools (and the next run).
    assert!(dir.path().join(".keel/index.db").is_file());
}
