//! Keel's MCP client, on the official Rust SDK (`rmcp`): servers defined in `[mcp.servers]`,
//! a user-level `mcp.json` and a project's `.mcp.json` (Claude Code's format), reached over
//! stdio (a process started by Keel's one runner, `keel_tools::shell::exec::spawn`: a
//! project's server confined read-only with no network unless granted, the user's own
//! unconfined) or streamable HTTP (with headers such as a bearer token from the environment). Their tools become Keel tools named
//! `mcp__<server>__<tool>` with sanitised schemas, deferred unless the server is `active`.
//!
//! It does not decide policy: approval of calls, phases and the catalog are the engine's and
//! the registry's; this crate only says what a tool is ([`keel_tools::ToolEffect::Unknown`]
//! unless configured) and refuses to start a project's server the user has not approved as it
//! stands (its definition and the workspace files it names, [`approve`]).

pub mod approve;
pub mod config;
pub mod hub;
mod late;
mod place;
pub mod schema;
pub mod server;
pub mod tool;

pub use approve::{
    Approval, Approvals, NamedFile, PrivateCopy, approval_code, covered_files, definition_hash,
    named_files,
};
pub use config::{EffectConfig, McpConfig, Origin, ServerConfig, ServerDef, Transport};
pub use hub::{Hub, SHUTDOWN_WAIT, ServerEntry, StartOptions, Status};
pub use server::{CallError, Confinement, ListedTool, Recheck, Server};
pub use tool::{MCP_RESOURCES, McpResources, McpTool, map_result, tool_name};
