//! A model with a 2,048-token window (SmolLM2 behind a local server): Keel's full head alone
//! takes most of it, so such a run gets the compact head — a short base prompt, six tools, no
//! codemap — and can work; a window too small even for that fails with a message naming the
//! request's size, the window and the head's share.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_engine::{Config, EngineBuilder, RunOptions, RunOutcome};
use keel_llm::ChatRequest;
use keel_llm::scripted::ScriptedProvider;
use keel_llm::tokens::estimate_request;
use keel_protocol::{ErrorCode, SessionStatus};
use keel_store::SqliteStore;

async fn run(window: u64, agents_md: &str, script: &str) -> (RunOutcome, Vec<ChatRequest>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "pub fn answer() -> u32 { 41 }\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), agents_md).unwrap();
    let mut config = Config::default();
    config.verify.enabled = false;
    config.agent.context_window = Some(window);
    let provider = ScriptedProvider::from_yaml(script).unwrap();
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    let out = engine
        .run(
            "fix answer in src/lib.rs to return 42",
            RunOptions::default(),
        )
        .await
        .unwrap();
    (out, provider.requests())
}

const FIX: &str = r#"
turns:
  - tool_calls: [{name: read_file, arguments: {path: src/lib.rs}}]
  - tool_calls: [{name: edit_file, arguments: {path: src/lib.rs, edits: [{search: "41", replace: "42"}]}}]
  - text: "answer() returns 42 now."
"#;

#[tokio::test]
async fn a_2048_token_window_gets_the_compact_head_and_the_task_done() {
    let (out, requests) = run(2_048, "Use tabs.\n", FIX).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let first = &requests[0];
    let head = estimate_request(&first.system, &first.tools, &[]);
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    eprintln!("compact head: about {head} tokens, tools {names:?}");
    assert!(head <= 1_024, "the head takes about {head} of 2,048 tokens");
    assert!(names.contains(&"edit_file") && names.contains(&"read_file"));
    assert!(!names.contains(&"codebase_search") && !names.contains(&"tool_search"));
    assert!(
        first.system.contains("Use tabs."),
        "the project's instructions stay"
    );
    assert!(!first.messages[0].text().contains("<codemap"));
    for r in &requests[1..] {
        assert_eq!(
            (&r.system, &r.tools),
            (&first.system, &first.tools),
            "byte-stable"
        );
    }
    // A large window keeps the full head.
    let (_, large) = run(128_000, "Use tabs.\n", FIX).await;
    let full = estimate_request(&large[0].system, &large[0].tools, &[]);
    assert!(full > head * 3 / 2, "full head {full}, compact {head}");
    assert!(large[0].tools.iter().any(|t| t.name == "codebase_search"));
}

#[tokio::test]
async fn a_window_too_small_for_any_head_fails_naming_both_sizes() {
    let agents_md = "Follow the house style in every file you touch. ".repeat(60);
    let (out, requests) = run(1_000, &agents_md, FIX).await;
    assert!(requests.is_empty(), "nothing was sent");
    assert_eq!(out.status, SessionStatus::Failed);
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::ContextOverflow);
    assert!(e.message.contains("1000-token window"), "{}", e.message);
    assert!(e.message.contains("the compact head"), "{}", e.message);
    assert!(
        e.suggestions
            .iter()
            .any(|s| s.contains("larger context window")),
        "{:?}",
        e.suggestions
    );
}
