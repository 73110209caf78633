//! `[agents]`: subagents opened with `agent_open` — their limits and custom roles.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `[agents]`: how many subagents run at once, how deep they nest, how long and how many steps
/// each may take, and the roles besides the built-in `explorer`, `worker` and `reviewer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentsConfig {
    /// Whether the `agent_open`, `agent_eval` and `agent_close` tools are offered (deferred).
    pub enabled: bool,
    /// Levels of subagents below the top session: 1 lets it open children that cannot open
    /// their own.
    pub max_depth: u32,
    /// Children of one session running at the same time (more wait for a slot).
    pub max_concurrent: usize,
    /// Model requests one child turn may make.
    pub max_steps: u32,
    /// Seconds one child turn may run before it is cancelled (its result says so).
    pub timeout_secs: u64,
    /// Custom roles by name (`[agents.roles.NAME]`); a name of a built-in role replaces it.
    pub roles: BTreeMap<String, AgentRoleConfig>,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_depth: 1,
            max_concurrent: 4,
            max_steps: 30,
            timeout_secs: 600,
            roles: BTreeMap::new(),
        }
    }
}

/// `[agents.roles.NAME]`: a custom subagent role.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentRoleConfig {
    /// The tools the role may call (always within its parent's).
    pub tools: Vec<String>,
    /// Instructions added to the child's system prompt.
    pub prompt: String,
    /// The model (an alias or a model name) instead of the `child` role's.
    pub model: Option<String>,
    /// Read-only: no file writes, and only read-only shell commands in a read-only sandbox.
    pub read_only: bool,
}
