//! Where MCP servers plug into a session: at build, every defined server (`[mcp.servers]`, the
//! user-level `mcp.json`, an approved project `.mcp.json`) is launched in the background — the
//! build returns at once — and its tools join the registry as late tools when it is ready
//! (deferred unless the server is `active`; see `keel_tools::late`). A call by exact name to a
//! tool of a server still starting waits for it (at most `[mcp] startup_timeout_secs`); a run
//! with an `active` server waits for that server before its first request, so its schemas are
//! in the catalog. See the `keel-mcp` crate.

use std::path::Path;
use std::sync::Arc;

use keel_mcp::{Approvals, Hub, ServerDef, StartOptions};
use keel_tools::ToolRegistry;

use crate::Config;

/// The session's MCP servers and what did not go well starting them.
#[derive(Debug, Clone)]
pub struct McpState {
    pub hub: Arc<Hub>,
    /// Unreadable `.mcp.json` files, servers not approved or wrongly defined (known at launch).
    pub warnings: Vec<String>,
}

/// Every server definition for `workspace` (with warnings for files that could not be read).
pub fn definitions(config: &Config, workspace: &Path) -> (Vec<ServerDef>, Vec<String>) {
    let env = |k: &str| std::env::var(k).ok();
    let source = keel_config::user_config_path(&env).unwrap_or_else(|| "config.toml".into());
    let user_dir = keel_knowledge::rules::user_config_dir();
    keel_mcp::config::collect(&config.mcp, &source, user_dir.as_deref(), workspace)
}

/// The approvals of project servers, from the user's data directory.
pub fn approvals() -> Approvals {
    let env = |k: &str| std::env::var(k).ok();
    Approvals::load(&keel_config::data_dir(&env))
}

/// Launches the servers in the background and makes their tools the registry's late tools;
/// `None` when none is defined. Returns without waiting for any server.
pub(crate) fn start(
    config: &Config,
    workspace: &Path,
    tools: &mut ToolRegistry,
) -> Option<McpState> {
    let (defs, mut warnings) = definitions(config, workspace);
    if defs.is_empty() {
        return None;
    }
    let env = |k: &str| std::env::var(k).ok();
    let options = StartOptions::from_config(&config.mcp, workspace);
    let hub = match Hub::launch(defs, &approvals(), &options, &env) {
        Ok(hub) => hub,
        Err(e) => {
            warnings.push(e);
            return None;
        }
    };
    warnings.extend(hub.register(tools));
    // Only what is known at launch: servers still starting report failures through their
    // tools' results (and `keel mcp test NAME`).
    for e in hub.entries() {
        match &e.status {
            keel_mcp::Status::Failed(why) => {
                warnings.push(format!("MCP server `{}` did not start: {why}", e.name));
            }
            keel_mcp::Status::NeedsApproval(why) => warnings.push(format!(
                "MCP server `{}` from {} is not started: {why}",
                e.name,
                e.origin.path().display(),
            )),
            _ => {}
        }
    }
    Some(McpState { hub, warnings })
}
