//! The subagent tools' names, arguments and descriptions. The loop answers them
//! ([`super::AgentPool`]); outside a session they only say so.

use schemars::JsonSchema;
use serde::Deserialize;

use keel_tools::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

pub const AGENT_OPEN: &str = "agent_open";
pub const AGENT_EVAL: &str = "agent_eval";
pub const AGENT_CLOSE: &str = "agent_close";

/// Arguments of `agent_open`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentOpenArgs {
    /// `explorer` (read-only research), `worker` (may edit), `reviewer` (read-only verdict
    /// with findings), or a configured role.
    pub role: String,
    /// The job, self-contained: the child sees nothing of this conversation.
    pub task: String,
    /// A model (alias or name) instead of the `child` model role's.
    #[serde(default)]
    pub model: Option<String>,
    /// Narrow the role's tools further to these.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
}

/// Arguments of `agent_eval`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentEvalArgs {
    /// The id `agent_open` returned (like `a1`).
    pub agent_id: String,
    /// A follow-up message for a child whose last turn has ended.
    #[serde(default)]
    pub input: Option<String>,
    /// Wait for the child's result (default true); false returns its progress at once.
    #[serde(default)]
    pub wait: Option<bool>,
}

/// Arguments of `agent_close`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentCloseArgs {
    /// The id `agent_open` returned.
    pub agent_id: String,
}

fn outside() -> ToolError {
    ToolError::model("subagent tools only work inside a session")
}

/// `agent_open`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentOpen;

impl TypedTool for AgentOpen {
    type Args = AgentOpenArgs;
    const NAME: &'static str = AGENT_OPEN;

    fn description(&self) -> &str {
        "Start a subagent on a self-contained job with its own context; it runs in the background (open several to work in parallel). Returns its agent_id; get its final answer with agent_eval."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(&self, _: AgentOpenArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Err(outside())
    }
}

/// `agent_eval`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentEval;

impl TypedTool for AgentEval {
    type Args = AgentEvalArgs;
    const NAME: &'static str = AGENT_EVAL;

    fn description(&self) -> &str {
        "Wait for a subagent's final answer (or, with wait=false, see its progress); with input, send a finished subagent a follow-up."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(&self, _: AgentEvalArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Err(outside())
    }
}

/// `agent_close`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentClose;

impl TypedTool for AgentClose {
    type Args = AgentCloseArgs;
    const NAME: &'static str = AGENT_CLOSE;

    fn description(&self) -> &str {
        "End a subagent (cancelling it if it still runs) and free its slot."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(&self, _: AgentCloseArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Err(outside())
    }
}
