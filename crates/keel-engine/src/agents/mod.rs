//! Subagents: `agent_open {role, task, model?, tools?}` starts a child agent with its own
//! context on a bounded job, `agent_eval {agent_id, input?, wait?}` returns its final result
//! (or its progress), `agent_close {agent_id}` ends it. The parent's model sees only the
//! child's final answer (long answers are kept whole for `read_result`).
//!
//! Authority only narrows: a child's engine is built from its parent's — the same
//! configuration, sandbox, writable roots and approval gate (its approvals go to the parent's
//! front end, its events carrying its own `run_id`) — with the tools of its role, a subset of
//! the parent's ([`roles`]); a read-only child runs commands only when they are read-only,
//! in the read-only sandbox. Children run in the background as soon as they are opened, so
//! several opened in one reply work in parallel, at most `agents.max_concurrent` at once
//! ([`pool`]); a child never waits on its parent, and cancelling the parent cancels it.

mod pool;
mod roles;
mod store;
mod tools;

use std::collections::BTreeSet;

pub(crate) use pool::{AgentPool, Parent};
pub use roles::{AgentRole, BUILT_IN_ROLES};
pub use tools::{AGENT_CLOSE, AGENT_EVAL, AGENT_OPEN, AgentClose, AgentEval, AgentOpen};

/// Builds the provider of a child: given the model the child asked for (`None`: the `child`
/// model role), its bare provider (the engine adds retries).
pub type ChildProviders = std::sync::Arc<
    dyn Fn(Option<&str>) -> Result<std::sync::Arc<dyn keel_llm::Provider>, String> + Send + Sync,
>;

/// Whether a stored session record is a subagent's own (its workspace is marked
/// `<root>#subagent-<id>-of-<parent>`): its events live in the parent's session, so lists of
/// sessions leave it out.
pub fn is_subagent_session(workspace: &str) -> bool {
    workspace.contains("#subagent-")
}

/// Whether `name` is one of the subagent tools (the loop answers them).
pub fn is_agent_tool(name: &str) -> bool {
    matches!(name, AGENT_OPEN | AGENT_EVAL | AGENT_CLOSE)
}

/// What a child engine may do: its role's tools and whether it is read-only.
#[derive(Debug, Clone)]
pub struct AgentScope {
    pub agent_id: String,
    pub role: String,
    pub tools: BTreeSet<String>,
    pub read_only: bool,
}
