//! Subagent roles: the built-in `explorer`, `worker` and `reviewer`, and custom ones from
//! `[agents.roles.NAME]`. A role names the tools a child may call; what it gets is always the
//! intersection with its parent's tools.

use std::collections::BTreeSet;

use keel_tools::{ToolEffect, ToolRegistry};

use keel_config::AgentsConfig;

/// The built-in roles' names.
pub const BUILT_IN_ROLES: [&str; 3] = ["explorer", "worker", "reviewer"];

/// Tools every child keeps (when its parent has them): finding deferred tools and reading a
/// long result's rest.
const ALWAYS: [&str; 2] = [keel_tools::catalog::TOOL_SEARCH, keel_results::READ_RESULT];

/// The read-only roles' tools.
const READ_TOOLS: [&str; 7] = [
    "read_file",
    "grep",
    "list_files",
    "codebase_search",
    "run_command",
    "git_status",
    "git_diff",
];

/// Tools no child gets: it cannot ask the user (its parent's front end is busy with the
/// parent), and subagent tools only below the depth limit.
const NEVER: [&str; 1] = ["ask_user"];

/// A resolved role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRole {
    pub name: String,
    /// The tools it may call, before intersecting with the parent's.
    pub tools: Option<BTreeSet<String>>,
    pub read_only: bool,
    /// Instructions added to the child's system prompt.
    pub prompt: String,
    /// The model it uses instead of the `child` role's.
    pub model: Option<String>,
}

impl AgentRole {
    /// The role `name`: a configured one first (it may replace a built-in), else a built-in.
    pub fn resolve(name: &str, config: &AgentsConfig) -> Result<Self, String> {
        let name = name.trim();
        if let Some(custom) = config.roles.get(name) {
            return Ok(Self {
                name: name.to_string(),
                tools: Some(custom.tools.iter().cloned().collect()),
                read_only: custom.read_only,
                prompt: custom.prompt.clone(),
                model: custom.model.clone(),
            });
        }
        let read = || Some(READ_TOOLS.iter().map(|s| s.to_string()).collect());
        let (tools, read_only, prompt) = match name {
            "explorer" => (
                read(),
                true,
                "You are an explorer: find things out by reading, searching and listing (and read-only shell commands). Do not change anything. End with a concise report of what you found, with file paths and line numbers.",
            ),
            "reviewer" => (
                read(),
                true,
                "You are a reviewer: examine the code or change you are given, read-only. End with a line `VERDICT: approve` or `VERDICT: request_changes`, then your findings as a list, each with a file path and line and why it matters.",
            ),
            "worker" => (
                None,
                false,
                "You are a worker: make the change you are asked for, keeping it small and within the workspace. End with the files you changed and how you checked them.",
            ),
            other => {
                let mut known: Vec<String> = BUILT_IN_ROLES.iter().map(|s| s.to_string()).collect();
                known.extend(config.roles.keys().cloned());
                known.sort();
                known.dedup();
                return Err(format!(
                    "unknown role `{other}`; use one of: {} (custom roles go in [agents.roles.NAME])",
                    known.join(", ")
                ));
            }
        };
        Ok(Self {
            name: name.to_string(),
            tools,
            read_only,
            prompt: prompt.to_string(),
            model: None,
        })
    }

    /// The tools a child of this role gets under a parent with `parent` tools: the role's (all
    /// of the parent's for a role without a list), minus writers when read-only, minus the
    /// subagent tools unless `may_nest`, narrowed further to `requested` when given (a name
    /// outside the role is an error).
    pub fn tools_under(
        &self,
        parent: &ToolRegistry,
        may_nest: bool,
        requested: Option<&[String]>,
    ) -> Result<BTreeSet<String>, String> {
        let mut allowed: BTreeSet<String> = parent
            .listed_names()
            .into_iter()
            .chain(parent.searchable_names())
            .filter(|n| match &self.tools {
                Some(list) => list.contains(n) || ALWAYS.contains(&n.as_str()),
                None => true,
            })
            .filter(|n| !NEVER.contains(&n.as_str()))
            .filter(|n| may_nest || !super::is_agent_tool(n))
            .filter(|n| {
                !self.read_only
                    || parent
                        .get(n)
                        .is_some_and(|t| t.effect() != ToolEffect::WritesFiles)
            })
            .collect();
        if let Some(requested) = requested {
            if let Some(bad) = requested.iter().find(|r| !allowed.contains(r.as_str())) {
                return Err(format!(
                    "the `{}` role has no tool `{bad}` here; it may use: {}",
                    self.name,
                    allowed.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            allowed.retain(|n| requested.contains(n) || ALWAYS.contains(&n.as_str()));
        }
        Ok(allowed)
    }
}
