//! `keel context [--json]`: every layer of what the model is told here — source, size,
//! head or tail, how to view or clear it. [`dashboard`] returns the data (for `/context`).

use std::io::Write;

use clap::Args;
use keel_config::Layer as ConfigLayer;
use keel_engine::context::{Dashboard, Placement};

use crate::args::CommonArgs;
use crate::{exit, setup};

#[derive(Debug, Args)]
pub struct ContextArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Size the user memory as a session with this task sends it (the relevant facts within
    /// agent.memory_tokens); without it, the budget is the most any session sends.
    #[arg(long, value_name = "TEXT")]
    pub task: Option<String>,
}

/// The dashboard for a workspace, as a new session there would see it. An invalid
/// constitution is an error, as at the start of a run.
pub fn dashboard(workspace: &std::path::Path) -> anyhow::Result<Dashboard> {
    dashboard_for(workspace, None)
}

/// [`dashboard`] with the user memory sized for `task` (see `keel_engine::context::memory_layer`).
pub fn dashboard_for(workspace: &std::path::Path, task: Option<&str>) -> anyhow::Result<Dashboard> {
    let config = setup::load_config(workspace, ConfigLayer::from_overrides(&[]))?;
    let store = setup::open_store(&config)?;
    let constitution = keel_engine::constitution::Constitution::load(workspace)
        .map_err(|e| setup::UsageError(e.to_string()))?;
    let config_dir = keel_engine::rules::user_config_dir();
    let skills = keel_engine::skills::discover(workspace, config_dir.as_deref());
    let entries = store.db().memory_entries()?;
    let codemap = keel_engine::context::codemap_layer(workspace, &config.index);
    let tools =
        keel_engine::first_request_tools(&config, workspace).map_err(setup::engine_usage_error)?;
    let mut d = keel_engine::context::dashboard(
        workspace,
        config_dir.as_deref(),
        &constitution,
        &skills,
        &entries,
        &codemap,
        task,
        config.agent.memory_tokens,
    );
    // The catalog sits in the head right after the system prompt; the environment block ends
    // the first message.
    d.layers
        .insert(1, keel_engine::context::tools_layer(&tools));
    d.layers
        .push(keel_engine::context::environment_layer(workspace));
    Ok(d)
}

pub fn execute(args: ContextArgs) -> anyhow::Result<u8> {
    let ws = setup::workspace_dir(args.common.workspace.as_deref())?;
    let d = dashboard_for(&ws, args.task.as_deref())?;
    let mut out = crate::out::stdout();
    if args.json {
        writeln!(out, "{}", crate::out::json_pretty(&d)?)?;
        return Ok(exit::COMPLETED);
    }
    writeln!(
        out,
        "Context for {}: system prompt {} bytes, about {} tokens (cached head).\n",
        d.workspace, d.system_prompt_bytes, d.system_prompt_tokens
    )?;
    writeln!(
        out,
        "{:<28} {:<14} {:>7} {:>6}  source",
        "layer", "where", "tokens", "items"
    )?;
    for l in &d.layers {
        let place = match l.placement {
            Placement::Head => "head",
            Placement::FirstMessage => "first message",
            Placement::OnDemand => "on demand",
        };
        writeln!(
            out,
            "{:<28} {:<14} {:>7} {:>6}  {}",
            l.name, place, l.tokens, l.items, l.source
        )?;
        writeln!(out, "{:<28} view: {}; clear: {}", "", l.view, l.clear)?;
    }
    for s in &d.skipped {
        writeln!(out, "\nnot read: {s}")?;
    }
    Ok(exit::COMPLETED)
}
