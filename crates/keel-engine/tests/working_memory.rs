//! Session working memory through a real session: a tool result over the engine's size limit
//! is stored whole, the model sees its beginning and a handle, and `read_result` pages
//! through the rest — every character retrievable, nothing lost to truncation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_engine::{Config, EngineBuilder, RunOptions};
use keel_llm::scripted::ScriptedProvider;
use keel_store::SqliteStore;
use keel_tools::{ToolContext, ToolError, ToolOutput, ToolRegistry, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
struct NoArgs {}

/// A tool whose output is far over the limit (like a huge log).
struct BigLog;

fn big_log() -> String {
    (0..12_000).map(|i| format!("line {i:05}\n")).collect()
}

impl TypedTool for BigLog {
    type Args = NoArgs;
    const NAME: &'static str = "big_log";
    fn description(&self) -> &str {
        "Prints a long log."
    }
    fn effect(&self) -> keel_tools::ToolEffect {
        keel_tools::ToolEffect::ReadOnly
    }
    async fn run(&self, _: NoArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(big_log()))
    }
}

#[tokio::test]
async fn an_oversized_tool_result_is_retrievable_in_full_through_its_handle() {
    let dir = tempfile::tempdir().unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(BigLog);
    let mut config = Config::default();
    config.verify.enabled = false;
    let mut script =
        String::from("turns:\n  - tool_calls:\n      - name: big_log\n        arguments: {}\n");
    for offset in [20_000, 40_000, 60_000, 80_000, 100_000, 120_000] {
        script.push_str(&format!(
            "  - tool_calls:\n      - name: read_result\n        arguments: {{handle: r1, offset: {offset}}}\n"
        ));
    }
    script.push_str("  - text: done\n");
    script.push_str("  - tool_calls:\n      - name: read_result\n        arguments: {handle: r1, offset: 0}\n  - text: again\n");
    let provider = ScriptedProvider::from_yaml(&script).unwrap();
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .tools(tools)
        .build()
        .unwrap();
    let out = engine
        .run("read the log", RunOptions::default())
        .await
        .unwrap();
    let requests = provider.requests();
    let last = requests.last().unwrap();
    let mut rebuilt = String::new();
    for m in &last.messages {
        for block in &m.content {
            if let keel_protocol::ContentBlock::ToolResult {
                content, is_error, ..
            } = block
            {
                assert!(!is_error, "{content}");
                let (note, text) = content.split_once('\n').unwrap();
                assert!(note.starts_with("[keel:"), "{note}");
                rebuilt.push_str(text);
            }
        }
    }
    let full = big_log();
    assert!(full.len() > 120_000);
    assert_eq!(rebuilt, full);
    // The handle is named in the first, cut result.
    let first_result = serde_json::to_string(&requests[1].messages).unwrap();
    assert!(first_result.contains("stored whole as `r1`"));
    // The stored result outlives the run: a resumed session still reads it.
    engine
        .continue_session(
            &out.session_id,
            "once more from the top",
            RunOptions::default(),
        )
        .await
        .unwrap();
    let resumed = provider.requests();
    let tail = serde_json::to_string(&resumed.last().unwrap().messages.last()).unwrap();
    assert!(tail.contains("`r1` characters 0–20000 of"), "{tail}");
    assert!(tail.contains("line 00000"));
}
