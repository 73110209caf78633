//! The phase policy inside the loop: the run's phase state, the check before each call,
//! `advance_phase`, auto-advance, checkpoints and the notes that tell the model where it is.

use std::sync::Arc;
use std::time::Duration;

use keel_protocol::{EventKind, ToolCall};
use keel_tools::sandbox::SandboxPolicy;
use keel_tools::{ToolEffect, ToolError, ToolOutput};

use super::rollback::{RollbackOutcome, RollbackPlan, after_phase_failure};
use crate::EngineError;
use crate::run::Run;
use keel_phase::{
    ADVANCE_PHASE, CallFacts, CommandAccess, CommandJudge, Phase, PhasePolicy, Verdict,
    command_argument,
};

/// The test tool: running it is what lets verification end.
const RUN_TESTS: &str = "run_tests";
/// The plan tool: writing a plan with it is one way to leave planning.
const UPDATE_PLAN: &str = "update_plan";
/// Finding tools is not reading the code.
const TOOL_SEARCH: &str = "tool_search";

/// Whether `text` states a plan: two or more numbered or bulleted steps, at least twelve
/// words, or a sentence of five words or more that names the plan ("The plan: …").
fn is_plan(text: &str) -> bool {
    let words = text.split_whitespace().count();
    if words >= 5 && text.to_lowercase().contains("plan") {
        return true;
    }
    let steps = text
        .lines()
        .map(str::trim_start)
        .filter(|l| {
            l.starts_with(['-', '*', '•'])
                || l.split_once(['.', ')'])
                    .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        })
        .count();
    steps >= 2 || words >= 12
}

/// Whether the model wrote a plan in the text of one of its replies (planning is the first
/// phase, so the whole working context is its).
fn planned_in_text(messages: &[keel_protocol::Message]) -> bool {
    messages
        .iter()
        .filter(|m| m.role == keel_protocol::Role::Assistant)
        .any(|m| is_plan(&m.text()))
}

/// A run's place in the phase machine.
pub(crate) struct PhaseState {
    pub(crate) policy: Arc<PhasePolicy>,
    pub(crate) phase: Phase,
    /// Steps (model replies whose tool calls were handled) in the current phase.
    pub(crate) steps: u32,
    /// The model was reminded in this phase that a plan_exec task ends in delivery.
    pub(crate) nudged: bool,
    /// A call in this phase changed the workspace (a successful write, or a command).
    pub(crate) changed: bool,
    /// The tests or a test command ran in this phase (whatever their outcome).
    pub(crate) checked: bool,
    /// The last test run of this phase passed.
    pub(crate) passed: bool,
    /// A call of this run changed the workspace, in any phase (delivery needs one).
    pub(crate) made_change: bool,
    /// Something was read in this phase (a successful look: a file, a search, a command).
    pub(crate) read: bool,
    /// A plan was written with `update_plan` in this phase.
    pub(crate) planned: bool,
    pub(crate) judge: Arc<dyn CommandJudge>,
}

impl PhaseState {
    pub(crate) fn new(policy: Arc<PhasePolicy>, judge: Arc<dyn CommandJudge>) -> Self {
        Self {
            phase: policy.start,
            policy,
            steps: 0,
            nudged: false,
            changed: false,
            checked: false,
            passed: false,
            made_change: false,
            read: false,
            planned: false,
            judge,
        }
    }
}

/// The phase a stored session is in: the last `phase_changed`, else the start phase recorded
/// in `session_started`.
pub(crate) fn stored_phase(events: &[keel_protocol::Event]) -> Option<Phase> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::PhaseChanged { phase, .. } => Phase::parse(phase),
        EventKind::SessionStarted {
            phase: Some(phase), ..
        } => Phase::parse(phase),
        _ => None,
    })
}

impl Run<'_> {
    /// The tools of this engine that `phase` allows, and its shell rule, in one line.
    fn phase_allowance(&self, state: &PhaseState, phase: Phase) -> String {
        let tools = state.policy.allowed_names(
            phase,
            self.engine
                .tools
                .tools()
                .map(|t| (t.name(), t.effect()))
                .filter(|(n, _)| *n != ADVANCE_PHASE),
        );
        let shell = if self
            .engine
            .tools
            .tools()
            .any(|t| t.effect() == ToolEffect::RunsCommands && tools.contains(&t.name()))
        {
            format!("; {}", state.policy.shell_note(phase))
        } else {
            String::new()
        };
        format!("Allowed now: {}{shell}.", tools.join(", "))
    }

    /// What the model is told about the phase machine in the task message.
    pub(crate) fn phase_intro(&self) -> Option<String> {
        let state = self.phase.as_ref()?;
        let p = state.phase;
        Some(format!(
            "This session runs in plan_exec mode: planning → building → verification → delivery. Each phase allows only some tools; call advance_phase when a phase's work is done. Current phase: {p}: {}. {}",
            p.purpose(),
            self.phase_allowance(state, p)
        ))
    }

    /// A reminder of the current phase for a continued session.
    pub(crate) fn phase_reminder(&self) -> Option<String> {
        let state = self.phase.as_ref()?;
        Some(format!(
            "(plan_exec: the session is in the {} phase: {}. {})",
            state.phase,
            state.phase.purpose(),
            self.phase_allowance(state, state.phase)
        ))
    }

    /// The tool context a call runs with: the read-only sandbox when the hooks granted only
    /// read access (a read-only phase, or approval's read-only lane); in plan_exec, the
    /// workspace-write sandbox when the phase policy granted write access.
    pub(crate) fn context_for(&self, access: CommandAccess) -> keel_tools::ToolContext {
        let mut ctx = self.ctx.clone();
        match access {
            CommandAccess::ReadOnly => ctx.sandbox = SandboxPolicy::ReadOnly,
            CommandAccess::Write if self.phase.is_some() => {
                ctx.sandbox = SandboxPolicy::WorkspaceWrite;
            }
            CommandAccess::Write => {}
        }
        ctx
    }

    /// Checks `call` against the phase policy before it runs. `Ok(Err(json))`: refused (the
    /// `phase_violation` event is emitted); `Ok(Ok(access))`: run it with that command access.
    pub(crate) async fn phase_check(
        &mut self,
        call: &ToolCall,
    ) -> Result<Result<CommandAccess, String>, EngineError> {
        let Some(state) = &self.phase else {
            return Ok(Ok(CommandAccess::Write));
        };
        let Some(tool) = self.engine.tools.get(&call.name) else {
            // An unknown tool takes the registry's error path, not a phase violation.
            return Ok(Ok(CommandAccess::Write));
        };
        let effect = tool.effect();
        let command = command_argument(effect, &call.arguments);
        let planned = command
            .is_none()
            .then(|| tool.planned_command(&call.arguments, &self.engine.workspace))
            .flatten();
        let facts = CallFacts {
            name: &call.name,
            effect,
            command,
            planned: planned.as_ref(),
        };
        match state
            .policy
            .check(state.phase, &facts, state.judge.as_ref())
        {
            Verdict::Allow(access) => Ok(Ok(access)),
            Verdict::Deny(v) => {
                self.emitter
                    .emit(EventKind::PhaseViolation {
                        tool: v.tool.clone(),
                        phase: v.phase.as_str().to_string(),
                        hint: v.hint.clone(),
                    })
                    .await?;
                Ok(Err(v.to_model_json()))
            }
        }
    }

    /// Notes a call that ran in the current phase with `access` (not one the policy
    /// refused), for the phases' exit criteria.
    pub(crate) fn phase_note_call(
        &mut self,
        call: &ToolCall,
        succeeded: bool,
        access: CommandAccess,
    ) {
        let effect = self.engine.tools.get(&call.name).map(|t| t.effect());
        let Some(state) = &mut self.phase else {
            return;
        };
        if succeeded && !matches!(call.name.as_str(), ADVANCE_PHASE | TOOL_SEARCH) {
            match effect {
                Some(ToolEffect::ReadOnly | ToolEffect::RunsCommands) => state.read = true,
                Some(ToolEffect::Control) if call.name == UPDATE_PLAN => state.planned = true,
                _ => {}
            }
        }
        match effect {
            Some(ToolEffect::WritesFiles) if succeeded => state.changed = true,
            Some(ToolEffect::RunsCommands) => {
                // A test run: run_tests, or in verification a command the policy recognised
                // as the project's tests (the only commands it lets write); the last one's
                // outcome is the check's. A command in building may write.
                let test_command =
                    state.phase == Phase::Verification && access == CommandAccess::Write;
                if call.name == RUN_TESTS || test_command {
                    state.checked = true;
                    state.passed = succeeded;
                }
                if succeeded && state.phase == Phase::Building {
                    state.changed = true;
                }
            }
            _ => {}
        }
        state.made_change |= state.changed;
    }

    /// Why the current phase cannot be left yet, if it cannot: planning needs something read
    /// and a plan stated (`update_plan`, a plan in the model's text, or a `summary` that is
    /// one), building needs a change, verification a change in this run and a passing check
    /// run in it — delivery is never reached without both. A task that needs no change
    /// finishes where it is, with an answer and no tool call.
    fn exit_refusal(
        state: &PhaseState,
        summary: Option<&str>,
        messages: &[keel_protocol::Message],
    ) -> Option<String> {
        match state.phase {
            Phase::Planning if !state.read => Some(
                "not advanced: nothing has been read yet. Planning comes first: look at the code the task is about (list_files, grep, codebase_search, read_file), then state your plan (update_plan, or the numbered steps in your reply), then call advance_phase.".to_string(),
            ),
            Phase::Planning
                if !state.planned
                    && !summary.is_some_and(is_plan)
                    && !planned_in_text(messages) =>
            {
                Some(
                    "not advanced: no plan has been stated yet. Write the plan first — update_plan with the steps, or the numbered steps in your reply (or in advance_phase's `summary`): which files change and how — then call advance_phase.".to_string(),
                )
            }
            Phase::Building if !state.changed => Some(
                "not advanced: nothing changed in the building phase yet. Make the change first (edit_file, create_file, apply_patch), then advance_phase. If the task needs no change, do not advance: reply with your answer and no tool call.".to_string(),
            ),
            Phase::Verification if !state.made_change => Some(
                "not advanced: nothing was changed in this run, and delivery needs a change with a passing check. If the task needs no change, reply with your answer and no tool call.".to_string(),
            ),
            Phase::Verification if !state.checked => Some(
                "not advanced: the tests have not run in the verification phase. Call run_tests (or a test command with run_command) first, then advance_phase.".to_string(),
            ),
            Phase::Verification if !state.passed => Some(
                "not advanced: the last test run failed, and delivery needs a passing check. Read the failure; if a new run passes, advance_phase; otherwise reply with what fails and why, and no tool call.".to_string(),
            ),
            _ => None,
        }
    }

    /// Answers an `advance_phase` call.
    pub(crate) async fn advance_call(
        &mut self,
        arguments: &serde_json::Value,
    ) -> Result<Result<ToolOutput, ToolError>, EngineError> {
        let Some(state) = &self.phase else {
            return Ok(Err(ToolError::model(
                "advance_phase only works inside a plan_exec session; this session has no phases",
            )));
        };
        if state.phase.next().is_none() {
            return Ok(Err(ToolError::model(
                "already at final phase (delivery): every tool is allowed; finish with a short summary of what changed",
            )));
        }
        let summary = arguments.get("summary").and_then(|s| s.as_str());
        if let Some(refusal) = Self::exit_refusal(state, summary, &self.messages) {
            return Ok(Err(ToolError::model(refusal)));
        }
        let Some((previous, phase)) = self.advance().await? else {
            return Ok(Err(ToolError::model("already at final phase (delivery)")));
        };
        let text = self.advance_note(previous, phase, false);
        Ok(Ok(ToolOutput::text(text).with_metadata(
            serde_json::json!({
                "phase": phase.as_str(),
                "previous": previous.as_str(),
            }),
        )))
    }

    fn advance_note(&self, previous: Phase, phase: Phase, automatic: bool) -> String {
        let Some(state) = &self.phase else {
            return String::new();
        };
        let how = if automatic {
            format!(
                "Moved automatically from {previous} to {phase} after {} steps",
                state.policy.auto_advance_after_steps.unwrap_or_default()
            )
        } else {
            format!("Moved from {previous} to {phase}")
        };
        let next = match phase.next() {
            Some(n) => {
                format!(" Call advance_phase to move on to {n} when this phase's work is done.")
            }
            None => " When everything is done, reply with a short summary and no tool call.".into(),
        };
        format!(
            "{how}. Now {}. {}{next}",
            phase.purpose(),
            self.phase_allowance(state, phase)
        )
    }

    /// Moves to the next phase: the finished phase's checkpoint, `phase_changed`, the new
    /// sandbox. `None` at the final phase.
    async fn advance(&mut self) -> Result<Option<(Phase, Phase)>, EngineError> {
        let Some(state) = &mut self.phase else {
            return Ok(None);
        };
        let previous = state.phase;
        let Some(next) = previous.next() else {
            return Ok(None);
        };
        state.phase = next;
        state.steps = 0;
        state.nudged = false;
        state.changed = false;
        state.checked = false;
        state.passed = false;
        state.read = false;
        state.planned = false;
        self.save_checkpoint(previous, "phase completed").await?;
        self.emitter
            .emit(EventKind::PhaseChanged {
                phase: next.as_str().to_string(),
                previous: previous.as_str().to_string(),
            })
            .await?;
        Ok(Some((previous, next)))
    }

    /// Counts a step of the current phase and advances automatically when
    /// `auto_advance_after_steps` is reached. Returns what to tell the model.
    pub(crate) async fn phase_step_done(&mut self) -> Result<Option<String>, EngineError> {
        let Some(state) = &mut self.phase else {
            return Ok(None);
        };
        state.steps += 1;
        let due = state
            .policy
            .auto_advance_after_steps
            .is_some_and(|n| state.steps >= n);
        // Not even automatically into delivery without a change and a passing check.
        let held = state.phase == Phase::Verification
            && Self::exit_refusal(state, None, &self.messages).is_some();
        if !due || held {
            return Ok(None);
        }
        Ok(self.advance().await?.map(|(previous, phase)| {
            format!("[plan_exec] {}", self.advance_note(previous, phase, true))
        }))
    }

    /// The model answered without tool calls before delivery: remind it once per phase that
    /// a plan_exec task ends in delivery. `None`: let the answer stand.
    pub(crate) fn phase_finish_nudge(&mut self) -> Option<String> {
        let state = self.phase.as_mut()?;
        if state.phase == Phase::Delivery || state.nudged {
            return None;
        }
        state.nudged = true;
        Some(format!(
            "[plan_exec] You are still in the {} phase; the task finishes in delivery. If this phase's work is done, call advance_phase; if the task needs nothing more, reply once more to finish.",
            state.phase
        ))
    }

    /// After a plan_exec run failed: the current phase's validation → rollback → validation
    /// (R19–R21), then its checkpoint if that allows it. Returns advice for the error.
    pub(crate) async fn phase_failed(&mut self) -> Result<Vec<String>, EngineError> {
        let Some(state) = &self.phase else {
            return Ok(Vec::new());
        };
        let phase = state.phase;
        let rules = state.policy.rules(phase).clone();
        let shell = self.engine.config.shell.tool_settings();
        let plan = RollbackPlan {
            phase,
            validation_command: rules.validation_command.as_deref(),
            rollback_command: rules.rollback_command.as_deref(),
            cwd: self.engine.workspace.root(),
            timeout: Duration::from_secs(self.engine.config.rollback.timeout_secs),
            shell: &shell,
        };
        let outcome = after_phase_failure(&plan, self.emitter, &self.ctx.cancel).await?;
        let session = self.emitter.session_id().to_string();
        let undo = format!(
            "restore an earlier state with `keel undo --session {session}` (`keel snapshots` lists them)"
        );
        let (hints, reason) = match &outcome {
            RollbackOutcome::NotConfigured => (Vec::new(), "no validation_command configured"),
            RollbackOutcome::ValidationPassed => (Vec::new(), "the workspace passes validation"),
            RollbackOutcome::NoRollback => (
                vec![format!(
                    "the workspace fails the {phase} phase's validation_command and no rollback_command is configured: {undo}"
                )],
                "validation fails and no rollback is configured",
            ),
            RollbackOutcome::RolledBack => (
                vec![format!(
                    "the {phase} phase's rollback_command restored a workspace that passes validation"
                )],
                "rolled back; validation passes",
            ),
            RollbackOutcome::RollbackFailed(why) => (
                vec![format!(
                    "the {phase} phase's rollback failed ({why}), so no checkpoint was saved and the workspace may be broken: {undo}"
                )],
                "",
            ),
        };
        if outcome.saves_checkpoint() {
            self.save_checkpoint(phase, &format!("the {phase} phase failed: {reason}"))
                .await?;
        }
        Ok(hints)
    }

    /// Saves a checkpoint of `phase`: a workspace snapshot under
    /// `refs/keel/checkpoints/<session>/<phase>` (when snapshots are on) and a `checkpoint`
    /// event.
    pub(crate) async fn save_checkpoint(
        &mut self,
        phase: Phase,
        reason: &str,
    ) -> Result<(), EngineError> {
        let commit = match self.engine.snapshots.clone() {
            Some(lazy) => {
                let session = self.emitter.session_id().to_string();
                tokio::task::spawn_blocking(move || {
                    lazy.get()
                        .ok()
                        .and_then(|s| s.checkpoint(&session, phase.as_str()).ok())
                })
                .await
                .ok()
                .flatten()
            }
            None => None,
        };
        self.emitter
            .emit(EventKind::Checkpoint {
                phase: phase.as_str().to_string(),
                commit,
                reason: reason.to_string(),
            })
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::Event;

    fn ev(kind: EventKind) -> Event {
        Event {
            session_id: "s".into(),
            seq: 1,
            ts: 0,
            run_id: String::new(),
            parent_run_id: None,
            kind,
        }
    }

    #[test]
    fn the_stored_phase_is_the_last_change_or_the_start() {
        let started = ev(EventKind::SessionStarted {
            task: "t".into(),
            workspace: "/w".into(),
            provider: "p".into(),
            model: "m".into(),
            mode: "plan_exec".into(),
            max_iterations: 5,
            phase: Some("building".into()),
        });
        assert_eq!(
            stored_phase(std::slice::from_ref(&started)),
            Some(Phase::Building)
        );
        let changed = ev(EventKind::PhaseChanged {
            phase: "verification".into(),
            previous: "building".into(),
        });
        assert_eq!(stored_phase(&[started, changed]), Some(Phase::Verification));
        assert_eq!(stored_phase(&[]), None);
    }
}
