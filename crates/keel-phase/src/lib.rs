//! PLAN_EXEC's phases: the four-phase state machine (planning → building → verification →
//! delivery) that the engine's one loop enforces when `agent.mode = "plan_exec"` (R24–R34),
//! as a policy on the ReAct loop, not a second engine. This crate holds what the policy *is*;
//! the loop's side (the run's phase state, the check before each call, rollback) is
//! keel-engine's phase hook (`guardrails/phase.rs`).
//!
//! - [`Phase`] and [`ExecutionMode`]: the vocabulary config, events and the loop share.
//! - [`PlanExecConfig`]: `[plan_exec]` as written, beside the code that resolves it.
//! - [`PhasePolicy`] (from `[plan_exec]`) says which tools each phase allows, which shell
//!   commands (read-only ones in planning; read-only or test commands in verification; never
//!   a `bash_deny` match; a [`CommandJudge`] decides what is read-only), when to advance
//!   automatically, and each phase's optional validation and rollback commands.
//! - [`AdvancePhase`]: the `advance_phase` tool, the model's way to end a phase.
//!
//! Phases never change the prompt head: the system prompt and the tool catalog stay
//! byte-identical; what the model needs to know about phases travels in messages and tool
//! results.

mod advance;
mod config;
mod policy;

pub use advance::{ADVANCE_PHASE, AdvancePhase};
pub use config::{PhaseConfig, PhasesConfig, PlanExecConfig};
pub use policy::{
    CallFacts, CommandAccess, CommandJudge, PhasePolicy, PhaseRules, Verdict, Violation, Whitelist,
    command_argument,
};

use serde::{Deserialize, Serialize};

/// How a session runs: the plain loop, or the loop under the phase policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    #[default]
    React,
    PlanExec,
}

impl ExecutionMode {
    /// `react` or `plan_exec`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionMode::React => "react",
            ExecutionMode::PlanExec => "plan_exec",
        }
    }

    /// Parses a mode name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "react" => Some(ExecutionMode::React),
            "plan_exec" => Some(ExecutionMode::PlanExec),
            _ => None,
        }
    }
}

impl std::fmt::Display for ExecutionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A phase of a plan_exec session, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Planning,
    Building,
    Verification,
    Delivery,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 4] = [
        Phase::Planning,
        Phase::Building,
        Phase::Verification,
        Phase::Delivery,
    ];

    /// The name used in config, events and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Planning => "planning",
            Phase::Building => "building",
            Phase::Verification => "verification",
            Phase::Delivery => "delivery",
        }
    }

    /// Parses a phase name.
    pub fn parse(s: &str) -> Option<Self> {
        Phase::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// The phase after this one (`None` at delivery).
    pub fn next(self) -> Option<Phase> {
        Phase::ALL.get(self.index() + 1).copied()
    }

    /// 0 for planning … 3 for delivery.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Phases whose shell commands may only read (and run in the read-only sandbox).
    pub fn is_read_only(self) -> bool {
        matches!(self, Phase::Planning | Phase::Verification)
    }

    /// What the phase is for, in one line for the model.
    pub fn purpose(self) -> &'static str {
        match self {
            Phase::Planning => {
                "explore the code and plan the change (read, search, run read-only commands; no file changes yet), then state the plan as numbered steps"
            }
            Phase::Building => "make the change (edit, create and delete files, run any command)",
            Phase::Verification => {
                "check the change (run the tests and read-only commands; no file changes)"
            }
            Phase::Delivery => "wrap up (any tool) and finish with a short summary of what changed",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_ordered_and_named() {
        assert_eq!(Phase::Planning.next(), Some(Phase::Building));
        assert_eq!(Phase::Verification.next(), Some(Phase::Delivery));
        assert_eq!(Phase::Delivery.next(), None);
        for p in Phase::ALL {
            assert_eq!(Phase::parse(p.as_str()), Some(p));
        }
        assert_eq!(Phase::parse("plan"), None);
        assert!(Phase::Planning.is_read_only() && Phase::Verification.is_read_only());
        assert!(!Phase::Building.is_read_only() && !Phase::Delivery.is_read_only());
        assert_eq!(
            ExecutionMode::parse("plan_exec"),
            Some(ExecutionMode::PlanExec)
        );
        assert_eq!(ExecutionMode::parse("solo"), None);
    }
}
