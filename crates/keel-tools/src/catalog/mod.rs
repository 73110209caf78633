//! The tool catalog around the registry: lifecycle states, the alias and intent tables,
//! argument repair and `tool_search`.
//!
//! [`resolve_call`] is the one entry point the agent loop uses before it runs a call: it maps
//! whatever name and argument text the model sent onto a canonical tool and arguments that fit
//! its schema, and says what it repaired — or returns a message for the model that quotes the
//! schema. It never guesses: a repair that could change what the call means is an error.

mod alias;
mod coerce;
mod edit_blocks;
mod edits;
mod intent;
mod json;
mod resolve;
mod search;

pub use alias::{ALIASES, Alias};
pub use coerce::{example_for, fit_to_schema, schema_help};
pub use intent::{INTENTS, Intent, route_intent};
pub use json::{JsonRepairError, RepairedJson, repair_json};
pub(crate) use resolve::relative_to;
pub use resolve::{Repair, Resolved, resolve_call};
pub use search::{TOOL_SEARCH, ToolSearch, search_tools};

/// Where a registered tool stands in the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolState {
    /// In the first-turn catalog the model sees.
    Active,
    /// Registered and dispatchable, not advertised: found with `tool_search` (whose
    /// description names it), or called directly by its exact name.
    Deferred,
    /// Dispatchable, never listed or searchable: compatibility names for old transcripts.
    Hidden,
    /// Dispatchable and unlisted; each result's metadata names the replacement.
    Deprecated {
        /// The tool to use instead.
        replacement: String,
    },
    /// No longer dispatchable; a call is told what to use instead.
    Removed {
        /// The tool to use instead, if there is one.
        replacement: Option<String>,
    },
}

impl ToolState {
    /// The state's name as documented (`active`, `deferred`, …).
    pub fn as_str(&self) -> &'static str {
        match self {
            ToolState::Active => "active",
            ToolState::Deferred => "deferred",
            ToolState::Hidden => "hidden",
            ToolState::Deprecated { .. } => "deprecated",
            ToolState::Removed { .. } => "removed",
        }
    }

    /// Advertised in the first-turn catalog.
    pub fn listed(&self) -> bool {
        matches!(self, ToolState::Active)
    }

    /// Found by `tool_search`.
    pub fn searchable(&self) -> bool {
        matches!(self, ToolState::Active | ToolState::Deferred)
    }

    /// A call by exact name runs.
    pub fn dispatchable(&self) -> bool {
        !matches!(self, ToolState::Removed { .. })
    }
}

/// The built-in tools' states. The first-turn catalog is at most ten tools (the active ones
/// here); every tool not named here — MCP, subagent, skill tools — is deferred.
const BUILT_IN_STATES: &[(&str, Lifecycle)] = &[
    ("apply_patch", Lifecycle::Active),
    ("codebase_search", Lifecycle::Active),
    ("create_file", Lifecycle::Active),
    ("edit_file", Lifecycle::Active),
    ("grep", Lifecycle::Active),
    ("list_files", Lifecycle::Active),
    ("read_file", Lifecycle::Active),
    ("run_command", Lifecycle::Active),
    ("run_tests", Lifecycle::Active),
    (TOOL_SEARCH, Lifecycle::Active),
    // plan_exec's own tool: registered only in that mode, where it must be visible.
    ("advance_phase", Lifecycle::Active),
    ("ask_user", Lifecycle::Deferred),
    ("git_diff", Lifecycle::Deferred),
    ("git_status", Lifecycle::Deferred),
    ("update_plan", Lifecycle::Deferred),
];

#[derive(Debug, Clone, Copy)]
enum Lifecycle {
    Active,
    Deferred,
}

/// The state a tool gets when it is registered without one.
pub fn default_state(name: &str) -> ToolState {
    match BUILT_IN_STATES.iter().find(|(n, _)| *n == name) {
        Some((_, Lifecycle::Active)) => ToolState::Active,
        _ => ToolState::Deferred,
    }
}
