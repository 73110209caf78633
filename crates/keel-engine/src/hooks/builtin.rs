//! The registration of every guardrail, in order ([`standard`]), and the shapes the loop's
//! hook points share. Every built-in guardrail — the loop guard and fix tracker, blockers and
//! finish checks, rules, a subagent's scope, skills, the constitution, the plan_exec phase
//! policy, compaction, final verification, approval and snapshots — is a [`Hook`] in
//! `crate::guardrails`, made for each run.

use std::sync::Arc;
use std::time::Duration;

use keel_protocol::ToolDetails;

use super::{Hook, Hooks};
use crate::ending::Ending;
use crate::engine::{Engine, RunOptions};
use crate::guardrails::{
    approval::ApprovalHook,
    blockers::BlockersHook,
    compaction::CompactionHook,
    constitution::ConstitutionHook,
    phase::{PhaseHook, PhaseParts},
    rules::RulesHook,
    scope::ScopeHook,
    skills::SkillsHook,
    snapshot::SnapshotHook,
    tracker::TrackerHook,
    verify::VerifyHook,
};
use crate::verify::GatePlan;
use keel_phase::CommandAccess;

/// Why the loop stops after the current batch, and what calls not yet run are told.
pub(crate) type Stop = Option<(Ending, &'static str)>;

/// What happens to a tool call before it runs.
pub(crate) enum Dispatch {
    /// Run it; commands it starts get this access (the read-only sandbox in read-only phases).
    /// `true`: a person approved this very call as it is ([`keel_tools::ToolContext::approved`]).
    Run(CommandAccess, bool),
    /// Do not run it; tell the model why (a policy refusal the loop survives).
    Refuse(String),
    /// Do not run it and end the attempt (`why` tells the calls after it); the model reads
    /// the message.
    Stop(Ending, &'static str, String),
}

/// A tool call's result on its way to the model, as the after-tool hooks see and shape it.
pub(crate) struct Outcome {
    pub(crate) content: String,
    pub(crate) is_error: bool,
    pub(crate) details: ToolDetails,
    pub(crate) metadata: Option<serde_json::Value>,
    /// The access it ran with; `None` when it did not run.
    pub(crate) ran_with: Option<CommandAccess>,
    /// A hook refused it (not a failed attempt).
    pub(crate) refused: bool,
    /// A fatal tool error (the loop stops; not the model's to fix).
    pub(crate) fatal: bool,
    /// Subagents the call waited for changed the workspace.
    pub(crate) agents_changed: bool,
}

/// A finish hook's decision.
pub(crate) enum Finish {
    /// No opinion: the next hook decides (after all of them, the answer stands).
    Undecided,
    /// A message went to the model: another step.
    Again,
    /// The attempt ends so.
    End(Ending),
}

/// One registered hook: a guardrail [`Hook`] made for each run (from the engine's parts), or
/// a custom hook shared by every run.
#[derive(Clone)]
pub(crate) enum Slot {
    Guardrail(fn(&Engine, &RunOptions) -> Arc<dyn Hook>),
    Custom(Arc<dyn Hook>),
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Slot::Guardrail(_) => write!(f, "Guardrail"),
            Slot::Custom(h) => write!(f, "Custom({})", h.name()),
        }
    }
}

/// The run's hooks: each guardrail [`Hook`] made fresh (it owns this run's state).
pub(crate) fn for_run(engine: &Engine, options: &RunOptions) -> Hooks {
    Hooks(
        standard(engine.phase_policy.is_some(), &engine.hooks)
            .iter()
            .map(|slot| match slot {
                Slot::Guardrail(make) => make(engine, options),
                Slot::Custom(h) => h.clone(),
            })
            .collect(),
    )
}

/// Stands in for the phase policy of an engine without one (never: the slot is registered
/// only in plan_exec).
struct NoPhases;

impl Hook for NoPhases {
    fn name(&self) -> &str {
        "phase"
    }
}

/// The hooks of an engine: the built-in guardrails around the `custom` hooks (see the module
/// docs of [`crate::hooks`] for the order). `phases`: the plan_exec policy is on. Adding a
/// guardrail: its module in `crate::guardrails` and one line here.
pub(crate) fn standard(phases: bool, custom: &[Arc<dyn Hook>]) -> Vec<Slot> {
    let mut slots = vec![
        Slot::Guardrail(|e, _| Arc::new(TrackerHook::new(e.tools.clone(), e.workspace.clone()))),
        Slot::Guardrail(|e, o| Arc::new(BlockersHook::new(e.tools.clone(), o.ask_user.clone()))),
        Slot::Guardrail(|e, _| Arc::new(RulesHook::new(e.workspace.root()))),
        // A subagent's role scope (a call outside it names the role), before the active
        // skill's tool restriction.
        Slot::Guardrail(|e, _| {
            Arc::new(ScopeHook::new(
                e.agent_scope.clone(),
                e.config.agents.max_depth,
                e.tools.clone(),
                e.judge.clone(),
            ))
        }),
        Slot::Guardrail(|e, _| Arc::new(SkillsHook::new(e.skills.clone(), e.workspace.root()))),
        Slot::Guardrail(|e, _| {
            Arc::new(ConstitutionHook::new(
                e.constitution.clone(),
                e.workspace.root(),
            ))
        }),
    ];
    if phases {
        slots.push(Slot::Guardrail(|e, o| match &e.phase_policy {
            Some(policy) => Arc::new(PhaseHook::new(
                policy.clone(),
                PhaseParts {
                    judge: e.judge.clone(),
                    tools: e.tools.clone(),
                    workspace: e.workspace.clone(),
                    snapshots: e.snapshots.clone(),
                    shell: e.config.shell.tool_settings(),
                    rollback_timeout: Duration::from_secs(e.config.rollback.timeout_secs),
                    cancel: o.cancel.clone(),
                },
            )),
            None => Arc::new(NoPhases),
        }));
    }
    slots.push(Slot::Guardrail(|e, o| {
        Arc::new(CompactionHook::new(
            e.provider.clone(),
            e.auxiliary.clone(),
            e.tools.clone(),
            o.cancel.clone(),
        ))
    }));
    slots.extend(custom.iter().cloned().map(Slot::Custom));
    slots.push(Slot::Guardrail(|e, o| {
        Arc::new(VerifyHook::new(
            GatePlan::new(
                &e.config,
                e.gate_detector.clone(),
                e.constitution.clone(),
                e.workspace.root(),
            ),
            &e.config,
            e.workspace.clone(),
            e.tools.clone(),
            o.approvals.clone(),
            o.cancel.clone(),
        ))
    }));
    slots.push(Slot::Guardrail(|e, o| {
        Arc::new(ApprovalHook::new(
            o.approvals.clone(),
            e.tools.clone(),
            e.workspace.clone(),
            o.cancel.clone(),
        ))
    }));
    // Only at `before_run`: after every hook allowed the call.
    slots.push(Slot::Guardrail(|e, _| {
        Arc::new(SnapshotHook::new(
            e.snapshots.clone(),
            e.tools.clone(),
            e.config.shell.sandbox,
        ))
    }));
    slots
}
