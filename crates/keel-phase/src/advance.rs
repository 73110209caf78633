//! `advance_phase`: the model's way to say a phase's work is done.
//!
//! The tool is registered only in plan_exec engines, so the catalog (and the cached head) of a
//! react engine is unchanged. The engine's loop answers calls to it itself (its phase state),
//! because the current phase belongs to the run, not to the tool; executed on its own (outside
//! a plan_exec run) it explains that.

use schemars::JsonSchema;
use serde::Deserialize;

use keel_tools::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// The tool's name.
pub const ADVANCE_PHASE: &str = "advance_phase";

/// Arguments of `advance_phase`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdvancePhaseArgs {
    /// One line on what this phase achieved (kept in the session log).
    pub summary: Option<String>,
}

/// Moves a plan_exec session to its next phase.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdvancePhase;

impl TypedTool for AdvancePhase {
    type Args = AdvancePhaseArgs;
    const NAME: &'static str = ADVANCE_PHASE;

    fn description(&self) -> &str {
        "Finish the current phase and move to the next (planning → building → verification → delivery). Call it when this phase's work is done; the result lists what the new phase allows."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Control
    }

    async fn run(
        &self,
        _args: AdvancePhaseArgs,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::model(
            "advance_phase only works inside a plan_exec session; this session has no phases",
        ))
    }
}
