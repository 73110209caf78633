//! The head budget with the whole memory stack present: 20 model-decision skills, 50 memory
//! facts, promoted lessons and a constitution. The first request's head (system prompt +
//! tools) stays ≤ 2,500 tokens and byte-identical across directories and git states, while
//! the skills and memory ride in the first message.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use keel_engine::{Config, EngineBuilder, RunOptions};
use keel_llm::ChatRequest;
use keel_llm::scripted::ScriptedProvider;
use keel_llm::tokens::estimate_request;
use keel_store::{MemoryKind, SqliteStore};

fn populate(root: &Path) {
    std::fs::create_dir_all(root.join(".keel")).unwrap();
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
}

async fn first_request(root: &Path, git: bool) -> ChatRequest {
    populate(root);
    if git {
        std::fs::create_dir_all(root.join(".git/refs")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/other\n").unwrap();
    }
    let store = SqliteStore::open_in_memory().unwrap();
    for i in 0..50 {
        store
            .db()
            .add_memory(
                MemoryKind::Fact,
                &format!("fact number {i}: prefers option {i}"),
                "user",
            )
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
    let provider = ScriptedProvider::from_yaml("turns:\n  - text: done\n").unwrap();
    let engine = EngineBuilder::new(Config::default(), root)
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(store))
        .build()
        .unwrap();
    engine
        .run("fix the bug", RunOptions::default())
        .await
        .unwrap();
    provider.requests().remove(0)
}

#[tokio::test]
async fn the_head_stays_within_budget_and_byte_identical_with_the_memory_stack() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let ra = first_request(a.path(), false).await;
    let rb = first_request(b.path(), true).await;
    let head = estimate_request(&ra.system, &ra.tools, &[]);
    eprintln!(
        "head: about {head} tokens, {} tools; first message about {} tokens",
        ra.tools.len(),
        estimate_request("", &[], &ra.messages)
    );
    assert!(head <= 2_500, "the head is about {head} tokens");
    // The ten built-ins plus `skill`, which the skills list tells the model to call.
    assert!(ra.tools.len() <= 11);
    assert!(ra.tools.iter().any(|t| t.name == "skill"));
    assert_eq!(
        ra.system, rb.system,
        "byte-identical across directories and git states"
    );
    assert_eq!(
        serde_json::to_string(&ra.tools).unwrap(),
        serde_json::to_string(&rb.tools).unwrap()
    );
    assert!(ra.system.contains("No unwrap in library code."));
    let first = ra.messages[0].text();
    // The facts do not all fit in the memory budget: the ones about the task do ("fix the
    // bug" matches none), and the rest is a memory_search away.
    assert!(first.contains("- skill-19:") && first.contains("50 more saved facts"));
    assert!(!ra.system.contains("skill-19") && !ra.system.contains("fact number"));
}
