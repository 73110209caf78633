//! Session working memory through a real session: a tool result over the engine's size limit
//! (`agent.max_output_chars`) is stored whole, the model sees its head, its tail and a handle,
//! and `read_result` pages through all of it — every character retrievable, nothing lost to
//! truncation, whether the tool is a plugin or `run_command`.

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

/// The tool results of one request, in order.
fn results(request: &keel_llm::ChatRequest) -> Vec<String> {
    let mut out = Vec::new();
    for m in &request.messages {
        for block in &m.content {
            if let keel_protocol::ContentBlock::ToolResult {
                content, is_error, ..
            } = block
            {
                assert!(!is_error, "{content}");
                out.push(content.clone());
            }
        }
    }
    out
}

#[tokio::test]
async fn an_oversized_tool_result_is_retrievable_in_full_through_its_handle() {
    let dir = tempfile::tempdir().unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(BigLog);
    let mut config = Config::default();
    config.verify.enabled = false;
    // A user who raised the budget: 20,000-character pages.
    config.agent.max_output_chars = 30_000;
    let mut script =
        String::from("turns:\n  - tool_calls:\n      - name: big_log\n        arguments: {}\n");
    for offset in [0, 20_000, 40_000, 60_000, 80_000, 100_000, 120_000] {
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
    let all = results(requests.last().unwrap());
    // The first, cut result names the handle and shows both ends within the budget.
    let preview = &all[0];
    assert!(preview.contains("stored whole as `r1`"), "{preview}");
    assert!(preview.chars().count() <= 30_000, "{}", preview.len());
    assert!(preview.contains("line 00000") && preview.contains("line 11999"));
    let mut rebuilt = String::new();
    for page in &all[1..] {
        let (note, text) = page.split_once('\n').unwrap();
        assert!(note.starts_with("[keel:"), "{note}");
        rebuilt.push_str(text);
    }
    let full = big_log();
    assert!(full.len() > 120_000);
    assert_eq!(rebuilt, full);
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

/// A command printing 200 KB with a unique marker in the middle: the tool returns it whole,
/// the engine shows the model a short preview naming the handle, and paging finds the marker
/// and reports the full size.
#[tokio::test]
async fn a_long_command_output_is_paged_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.verify.enabled = false;
    config.agent.max_output_chars = 4_000;
    config.agent.max_iterations = 80;
    // 1,000 lines of 100 bytes before and after the marker line.
    let command = "for i in $(seq 1 1000); do printf '%099d\\n' $i; done; echo MARKER-7f3a9; for i in $(seq 1 1000); do printf '%099d\\n' $i; done";
    let mut script = format!(
        "turns:\n  - tool_calls:\n      - name: run_command\n        arguments: {{command: \"{command}\"}}\n"
    );
    for offset in (0..200_100).step_by(3_600) {
        script.push_str(&format!(
            "  - tool_calls:\n      - name: read_result\n        arguments: {{handle: r1, offset: {offset}}}\n"
        ));
    }
    script.push_str("  - text: done\n");
    let provider = ScriptedProvider::from_yaml(&script).unwrap();
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    engine
        .run("print the big log", RunOptions::default())
        .await
        .unwrap();
    let all = results(provider.requests().last().unwrap());
    let preview = &all[0];
    assert!(preview.chars().count() <= 4_000, "{}", preview.len());
    assert!(preview.contains("stored whole as `r1`"), "{preview}");
    assert!(!preview.contains("MARKER-7f3a9"));
    let pages = &all[1..];
    assert!(
        pages.iter().any(|p| p.contains("MARKER-7f3a9")),
        "{preview}\n{}",
        pages.len()
    );
    // exit line + "stdout:" header + 2,000 lines of 100 bytes + the marker line.
    let total = "exit code: 0\nstdout:\n".len() + 2_000 * 100 + "MARKER-7f3a9\n".len() - 1;
    assert!(
        pages[0].contains(&format!("of {total} ({total} bytes)")),
        "{}",
        &pages[0][..200]
    );
    assert!(pages.last().unwrap().contains("That is the end."));
}

/// The first result of a default run shows at most the SPEC's 4,000 characters (head + tail
/// and the handle); a 2,048-token window brings it down to about a quarter of the window.
#[tokio::test]
async fn the_default_budget_is_4000_characters_and_a_small_window_lowers_it() {
    for (window, limit) in [(None, 4_000), (Some(2_048), 1_024)] {
        let dir = tempfile::tempdir().unwrap();
        let mut tools = ToolRegistry::new();
        tools.register(BigLog);
        let mut config = Config::default();
        config.verify.enabled = false;
        config.agent.context_window = window;
        let provider = ScriptedProvider::from_yaml(
            "turns:\n  - tool_calls:\n      - name: big_log\n        arguments: {}\n  - text: done\n",
        )
        .unwrap();
        let engine = EngineBuilder::new(config, dir.path())
            .provider(Arc::new(provider.clone()))
            .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
            .tools(tools)
            .build()
            .unwrap();
        let out = engine
            .run("show the log", RunOptions::default())
            .await
            .unwrap();
        assert_eq!(
            out.status,
            keel_protocol::SessionStatus::Completed,
            "{:?}",
            out.error
        );
        let all = results(provider.requests().last().unwrap());
        let shown = all[0].chars().count();
        assert!(
            shown <= limit && shown > limit / 2,
            "{window:?}: {shown} characters"
        );
        assert!(all[0].contains("stored whole as `r1`") && all[0].contains("line 11999"));
    }
}
