//! `[plan_exec]` as written in the configuration (validated by [`crate::PhasePolicy::from_config`]).

use serde::{Deserialize, Serialize};

/// `[plan_exec]`: the phase machine (planning → building → verification → delivery) used when
/// `agent.mode = "plan_exec"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlanExecConfig {
    /// `false` makes `plan_exec` unavailable: selecting it is a configuration error.
    pub enabled: bool,
    /// The phase a new session starts in.
    pub start_phase: String,
    /// Move to the next phase automatically after this many steps in a phase (unset: only
    /// when the model calls `advance_phase`).
    pub auto_advance_after_steps: Option<u32>,
    pub phases: PhasesConfig,
}

impl Default for PlanExecConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            start_phase: "planning".into(),
            auto_advance_after_steps: None,
            phases: PhasesConfig::default(),
        }
    }
}

/// `[plan_exec.phases.<phase>]`, one table per phase; any other name is an error.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PhasesConfig {
    pub planning: PhaseConfig,
    pub building: PhaseConfig,
    pub verification: PhaseConfig,
    pub delivery: PhaseConfig,
}

impl PhasesConfig {
    /// The phases' settings with their names, in phase order.
    pub fn iter(&self) -> [(&'static str, &PhaseConfig); 4] {
        [
            ("planning", &self.planning),
            ("building", &self.building),
            ("verification", &self.verification),
            ("delivery", &self.delivery),
        ]
    }
}

/// One phase's settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PhaseConfig {
    /// Tools allowed in the phase, replacing the default (`["*"]`: all). Empty is an error.
    pub whitelist: Option<Vec<String>>,
    /// Tools a project's `.keel/config.toml` limits the phase to: its `whitelist` lands here
    /// and only narrows `whitelist` (or the default) — a tool must be in both.
    pub project_whitelist: Option<Vec<String>>,
    /// Regular expressions a shell command must not match in this phase (on top of the shell
    /// safety analysis).
    pub bash_deny: Vec<String>,
    /// Checks the workspace after the phase fails (exit 0: fine). Opt-in.
    pub validation_command: Option<String>,
    /// Repairs the workspace when validation fails after a phase failure (e.g.
    /// `git checkout -- src/`). Opt-in.
    pub rollback_command: Option<String>,
}
