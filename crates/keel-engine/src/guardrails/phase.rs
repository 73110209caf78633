//! The plan_exec phase policy as a hook: the run's place in the phase machine, the check
//! before each call (a disallowed call is not run: the model reads
//! `{"error":"phase_violation",…}` and a `phase_violation` event is emitted; commands in
//! read-only phases run in the read-only sandbox), what a call that ran means for the phase's
//! exit criteria, `advance_phase` (answered here, because the phase is this hook's state),
//! auto-advance after a reply's results, checkpoints, the notes that tell the model where it
//! is, and after a failure the phase's validation → rollback → validation (R19–R21). A
//! plan_exec run rolls back instead of taking the fallback chain's recovery tier.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use keel_phase::{
    ADVANCE_PHASE, CallFacts, CommandAccess, CommandJudge, Phase, PhasePolicy, Verdict,
    command_argument,
};
use keel_protocol::{Event, EventKind, Message, ToolCall};
use keel_snapshot::LazySnapshots;
use keel_tools::shell::ShellSettings;
use keel_tools::{ToolEffect, ToolError, ToolOutput, ToolRegistry, Workspace};
use tokio_util::sync::CancellationToken;

use super::lock;
use crate::EngineError;
use crate::hooks::{Hook, HookAction, HookContext, ToolResultView};
use crate::phase::rollback::{RollbackOutcome, RollbackPlan, after_phase_failure};

/// The test tool: running it is what lets verification end.
const RUN_TESTS: &str = "run_tests";
/// The plan tool: writing a plan with it is one way to leave planning.
const UPDATE_PLAN: &str = "update_plan";
/// Finding tools is not reading the code.
const TOOL_SEARCH: &str = "tool_search";
/// Planning steps since something was read after which a model that states no plan and never
/// asked to move on is offered one unasked.
const OFFER_AFTER_STEPS: u32 = 3;

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
fn planned_in_text(messages: &[Message]) -> bool {
    messages
        .iter()
        .filter(|m| m.role == keel_protocol::Role::Assistant)
        .any(|m| is_plan(&m.text()))
}

/// The phase a stored session is in: the last `phase_changed`, else the start phase recorded
/// in `session_started`.
pub(crate) fn stored_phase(events: &[Event]) -> Option<Phase> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::PhaseChanged { phase, .. } => Phase::parse(phase),
        EventKind::SessionStarted {
            phase: Some(phase), ..
        } => Phase::parse(phase),
        _ => None,
    })
}

/// A run's place in the phase machine.
struct State {
    phase: Phase,
    /// Steps (model replies whose tool calls were handled) in the current phase.
    steps: u32,
    /// The model was reminded in this phase that a plan_exec task ends in delivery.
    nudged: bool,
    /// A call in this phase changed the workspace (a successful write, or a command).
    changed: bool,
    /// The tests or a test command ran in this phase (whatever their outcome).
    checked: bool,
    /// The last test run of this phase passed.
    passed: bool,
    /// A call of this run changed the workspace, in any phase (delivery needs one).
    made_change: bool,
    /// Something was read in this phase (a successful look: a file, a search, a command).
    read: bool,
    /// A plan was written with `update_plan` in this phase.
    planned: bool,
    /// Planning only: Keel offered the model a plan stated from the task (a refusal gave it
    /// as a ready call); the model's next bare `advance_phase`, or its next attempt at a
    /// building tool, takes it.
    offered: bool,
    /// Steps of this phase that ended with something read.
    steps_read: u32,
}

impl State {
    /// `phase` just started; `made_change`: a call of this run changed the workspace before.
    fn new(phase: Phase, made_change: bool) -> Self {
        Self {
            phase,
            steps: 0,
            nudged: false,
            changed: false,
            checked: false,
            passed: false,
            made_change,
            read: false,
            planned: false,
            offered: false,
            steps_read: 0,
        }
    }

    /// Why the current phase cannot be left yet, if it cannot: planning needs something read
    /// and a plan stated (`update_plan`, a plan in the model's text, or a `summary` that is
    /// one), building needs a change, verification a change in this run and a passing check
    /// run in it — delivery is never reached without both. A task that needs no change
    /// finishes where it is, with an answer and no tool call.
    fn exit_refusal(&self, summary: Option<&str>, messages: &[Message]) -> Option<String> {
        match self.phase {
            Phase::Planning if !self.read => Some(
                "not advanced: nothing has been read yet. Planning comes first: look at the code the task is about (list_files, grep, codebase_search, read_file), then state your plan (update_plan, or the numbered steps in your reply), then call advance_phase.".to_string(),
            ),
            Phase::Planning
                if !self.planned
                    && !summary.is_some_and(is_plan)
                    && !planned_in_text(messages) =>
            {
                Some(
                    "not advanced: no plan has been stated yet. Write the plan first — update_plan with the steps, or the numbered steps in your reply (or in advance_phase's `summary`): which files change and how — then call advance_phase.".to_string(),
                )
            }
            Phase::Building if !self.changed => Some(
                "not advanced: nothing changed in the building phase yet. Make the change first (edit_file, create_file, apply_patch), then advance_phase. If the task needs no change, do not advance: reply with your answer and no tool call.".to_string(),
            ),
            Phase::Verification if !self.made_change => Some(
                "not advanced: nothing was changed in this run, and delivery needs a change with a passing check. If the task needs no change, reply with your answer and no tool call.".to_string(),
            ),
            Phase::Verification if !self.checked => Some(
                "not advanced: the tests have not run in the verification phase. Call run_tests (or a test command with run_command) first, then advance_phase.".to_string(),
            ),
            Phase::Verification if !self.passed => Some(
                "not advanced: the last test run failed, and delivery needs a passing check. Read the failure; if a new run passes, advance_phase; otherwise reply with what fails and why, and no tool call.".to_string(),
            ),
            _ => None,
        }
    }
}

/// The phase policy of one plan_exec run.
pub(crate) struct PhaseHook {
    policy: Arc<PhasePolicy>,
    judge: Arc<dyn CommandJudge>,
    tools: Arc<ToolRegistry>,
    workspace: Workspace,
    /// Where checkpoints go (`None`: snapshots are off; the `checkpoint` event still says so).
    snapshots: Option<LazySnapshots>,
    /// The `[shell]` settings the phase's validation and rollback commands run under.
    shell: ShellSettings,
    /// `rollback.timeout_secs`.
    rollback_timeout: Duration,
    cancel: CancellationToken,
    state: Mutex<State>,
    /// The task (the first message's, or a person's latest): the files it names and the plan
    /// Keel offers a model that states none.
    task: Mutex<Option<String>>,
}

/// What a [`PhaseHook`] is made of besides the policy.
pub(crate) struct PhaseParts {
    pub(crate) judge: Arc<dyn CommandJudge>,
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) workspace: Workspace,
    pub(crate) snapshots: Option<LazySnapshots>,
    pub(crate) shell: ShellSettings,
    pub(crate) rollback_timeout: Duration,
    pub(crate) cancel: CancellationToken,
}

impl PhaseHook {
    pub(crate) fn new(policy: Arc<PhasePolicy>, parts: PhaseParts) -> Self {
        Self {
            state: Mutex::new(State::new(policy.start, false)),
            policy,
            judge: parts.judge,
            tools: parts.tools,
            workspace: parts.workspace,
            snapshots: parts.snapshots,
            shell: parts.shell,
            rollback_timeout: parts.rollback_timeout,
            cancel: parts.cancel,
            task: Mutex::new(None),
        }
    }

    fn phase_now(&self) -> Phase {
        lock(&self.state).phase
    }

    /// The tools of this engine that `phase` allows, and its shell rule, in one line.
    fn allowance(&self, phase: Phase) -> String {
        let tools = self.policy.allowed_names(
            phase,
            self.tools
                .tools()
                .map(|t| (t.name(), t.effect()))
                .filter(|(n, _)| *n != ADVANCE_PHASE),
        );
        let shell = if self
            .tools
            .tools()
            .any(|t| t.effect() == ToolEffect::RunsCommands && tools.contains(&t.name()))
        {
            format!("; {}", self.policy.shell_note(phase))
        } else {
            String::new()
        };
        format!("Allowed now: {}{shell}.", tools.join(", "))
    }

    /// Checks `call` against the phase policy before it runs. `Ok(Err(json))`: refused (the
    /// `phase_violation` event is emitted); `Ok(Ok(access))`: run it with that command access.
    async fn check(
        &self,
        cx: &HookContext,
        call: &ToolCall,
    ) -> Result<Result<CommandAccess, String>, EngineError> {
        let Some(tool) = self.tools.get(&call.name) else {
            // An unknown tool takes the registry's error path, not a phase violation.
            return Ok(Ok(CommandAccess::Write));
        };
        let effect = tool.effect();
        let command = command_argument(effect, &call.arguments);
        let planned = command
            .is_none()
            .then(|| tool.planned_command(&call.arguments, &self.workspace))
            .flatten();
        let facts = CallFacts {
            name: &call.name,
            effect,
            command,
            planned: planned.as_ref(),
        };
        let phase = self.phase_now();
        match self.policy.check(phase, &facts, self.judge.as_ref()) {
            Verdict::Allow(access) => Ok(Ok(access)),
            Verdict::Deny(mut v) => {
                if phase == Phase::Planning {
                    let way_on = self.planning_way_on(&mut lock(&self.state));
                    match way_on {
                        WayOn::Refuse(next) => v.hint = format!("{} {next}", v.hint),
                        WayOn::TakeOffer(plan) => {
                            // The model wants to build and was offered a plan: planning ends
                            // with it; this call is still refused (it was made in planning).
                            if self.advance(cx).await?.is_some() {
                                v.hint = format!("{} Make this call again now.", took_offer(&plan));
                            }
                        }
                    }
                }
                cx.events
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

    /// The files the task names that exist in the workspace (at most three).
    fn files_in_task(&self) -> Vec<String> {
        let task = lock(&self.task).clone().unwrap_or_default();
        super::files_named(&task, &self.workspace)
    }

    /// The plan Keel offers a model that read something but states none: the task's own
    /// words as steps.
    fn offered_plan(&self) -> String {
        let task = lock(&self.task).clone().unwrap_or_default();
        let task: String = task.split_whitespace().collect::<Vec<_>>().join(" ");
        let task: String = task.chars().take(200).collect();
        let files = self.files_in_task();
        let what = if files.is_empty() {
            "the code the task is about".to_string()
        } else {
            files.join(", ")
        };
        format!(
            "1. Change {what} as the task asks: {}. 2. Run the tests (run_tests) and make them pass.",
            task.trim_end_matches('.')
        )
    }

    /// What a model that cannot leave planning yet is told to do next, as one exact call —
    /// or, when it was offered a plan and asks to move on again (a bare `advance_phase`, a
    /// building tool), the offer taken. A weak model refused with a rule and no call never
    /// found the way on (SmolLM2: `advance_phase` first, refused, then never again).
    fn planning_way_on(&self, state: &mut State) -> WayOn {
        if !state.read {
            let next = match self.files_in_task().first() {
                Some(file) => format!(
                    "Your next call: {} (the file the task names).",
                    super::read_call(file)
                ),
                None => {
                    "Your next call: list_files {}, then read_file on the file the task is about."
                        .to_string()
                }
            };
            return WayOn::Refuse(next);
        }
        let plan = self.offered_plan();
        if state.offered {
            state.planned = true;
            return WayOn::TakeOffer(plan);
        }
        state.offered = true;
        let call = serde_json::json!({ "summary": plan });
        WayOn::Refuse(format!(
            "Your next call: advance_phase {call} — or your own numbered steps. Calling advance_phase again without a plan takes this one."
        ))
    }

    /// Notes a call that ran in the current phase with `access` (not one the policy
    /// refused), for the phases' exit criteria.
    fn note_call(&self, call: &ToolCall, succeeded: bool, access: CommandAccess) {
        let effect = self.tools.get(&call.name).map(|t| t.effect());
        let mut state = lock(&self.state);
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

    /// Answers an `advance_phase` call.
    async fn advance_call(
        &self,
        cx: &HookContext,
        arguments: &serde_json::Value,
    ) -> Result<Result<ToolOutput, ToolError>, EngineError> {
        let mut taken = None;
        {
            let mut state = lock(&self.state);
            if state.phase.next().is_none() {
                return Ok(Err(ToolError::model(
                    "already at final phase (delivery): every tool is allowed; finish with a short summary of what changed",
                )));
            }
            let summary = arguments.get("summary").and_then(|s| s.as_str());
            if let Some(refusal) = state.exit_refusal(summary, &cx.messages) {
                if state.phase != Phase::Planning {
                    return Ok(Err(ToolError::model(refusal)));
                }
                match self.planning_way_on(&mut state) {
                    WayOn::Refuse(next) => {
                        return Ok(Err(ToolError::model(format!("{refusal} {next}"))));
                    }
                    WayOn::TakeOffer(plan) => taken = Some(plan),
                }
            }
        }
        let Some((previous, phase)) = self.advance(cx).await? else {
            return Ok(Err(ToolError::model("already at final phase (delivery)")));
        };
        let mut text = self.advance_note(previous, phase, false);
        if let Some(plan) = taken {
            text = format!("{} {text}", took_offer(&plan));
        }
        Ok(Ok(ToolOutput::text(text).with_metadata(
            serde_json::json!({
                "phase": phase.as_str(),
                "previous": previous.as_str(),
            }),
        )))
    }

    fn advance_note(&self, previous: Phase, phase: Phase, automatic: bool) -> String {
        let how = if automatic {
            format!(
                "Moved automatically from {previous} to {phase} after {} steps",
                self.policy.auto_advance_after_steps.unwrap_or_default()
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
            self.allowance(phase)
        )
    }

    /// Moves to the next phase: the finished phase's checkpoint, `phase_changed`, the new
    /// sandbox. `None` at the final phase.
    async fn advance(&self, cx: &HookContext) -> Result<Option<(Phase, Phase)>, EngineError> {
        let (previous, next) = {
            let mut state = lock(&self.state);
            let previous = state.phase;
            let Some(next) = previous.next() else {
                return Ok(None);
            };
            *state = State::new(next, state.made_change);
            (previous, next)
        };
        self.save_checkpoint(cx, previous, "phase completed")
            .await?;
        cx.events
            .emit(EventKind::PhaseChanged {
                phase: next.as_str().to_string(),
                previous: previous.as_str().to_string(),
            })
            .await?;
        Ok(Some((previous, next)))
    }

    /// Counts a step of the current phase and advances automatically when
    /// `auto_advance_after_steps` is reached. Returns what to tell the model.
    async fn step_done(&self, cx: &HookContext) -> Result<Option<String>, EngineError> {
        let due = {
            let mut state = lock(&self.state);
            state.steps += 1;
            if state.read {
                state.steps_read += 1;
            }
            if let Some(offer) = self.offer_unasked(&mut state, &cx.messages) {
                return Ok(Some(offer));
            }
            let due = self
                .policy
                .auto_advance_after_steps
                .is_some_and(|n| state.steps >= n);
            // Not even automatically into delivery without a change and a passing check.
            let held = state.phase == Phase::Verification
                && state.exit_refusal(None, &cx.messages).is_some();
            due && !held
        };
        if !due {
            return Ok(None);
        }
        Ok(self.advance(cx).await?.map(|(previous, phase)| {
            format!("[plan_exec] {}", self.advance_note(previous, phase, true))
        }))
    }

    /// A model still planning [`OFFER_AFTER_STEPS`] steps after it read something, with no
    /// plan stated, that never asked to move on (SmolLM2 read with invented paths until the
    /// iteration cap): Keel offers the plan unasked, once, as the exact call.
    fn offer_unasked(&self, state: &mut State, messages: &[Message]) -> Option<String> {
        let stuck = state.phase == Phase::Planning
            && state.read
            && !state.offered
            && state.steps_read >= OFFER_AFTER_STEPS
            && state.exit_refusal(None, messages).is_some();
        if !stuck {
            return None;
        }
        match self.planning_way_on(state) {
            WayOn::Refuse(next) => Some(format!(
                "[plan_exec] Still planning {} steps after reading, and no plan stated. {next}",
                state.steps_read
            )),
            WayOn::TakeOffer(_) => None,
        }
    }

    /// The model answered without tool calls before delivery: remind it once per phase that
    /// a plan_exec task ends in delivery. `None`: let the answer stand.
    fn finish_nudge(&self) -> Option<String> {
        let mut state = lock(&self.state);
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
    async fn rollback(&self, cx: &HookContext) -> Result<Vec<String>, EngineError> {
        let phase = self.phase_now();
        let rules = self.policy.rules(phase).clone();
        let plan = RollbackPlan {
            phase,
            validation_command: rules.validation_command.as_deref(),
            rollback_command: rules.rollback_command.as_deref(),
            cwd: self.workspace.root(),
            timeout: self.rollback_timeout,
            shell: &self.shell,
        };
        let outcome = after_phase_failure(&plan, &cx.events, &self.cancel).await?;
        let session = &cx.session_id;
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
            self.save_checkpoint(cx, phase, &format!("the {phase} phase failed: {reason}"))
                .await?;
        }
        Ok(hints)
    }

    /// Saves a checkpoint of `phase`: a workspace snapshot under
    /// `refs/keel/checkpoints/<session>/<phase>` (when snapshots are on) and a `checkpoint`
    /// event.
    async fn save_checkpoint(
        &self,
        cx: &HookContext,
        phase: Phase,
        reason: &str,
    ) -> Result<(), EngineError> {
        let commit = match self.snapshots.clone() {
            Some(lazy) => {
                let session = cx.session_id.clone();
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
        cx.events
            .emit(EventKind::Checkpoint {
                phase: phase.as_str().to_string(),
                commit,
                reason: reason.to_string(),
            })
            .await?;
        Ok(())
    }
}

/// How a model that cannot leave planning yet goes on.
enum WayOn {
    /// Refused; the text names the next call.
    Refuse(String),
    /// Planning ends with the plan Keel offered.
    TakeOffer(String),
}

/// What the model reads when planning ended with the plan Keel offered.
fn took_offer(plan: &str) -> String {
    format!("Planning ended with the plan Keel offered (you stated none): {plan}")
}

/// A note the model reads, or `Continue`; a failure of the store is reported to the loop.
fn noted(cx: &HookContext, note: Result<Option<String>, EngineError>) -> HookAction {
    match note {
        Ok(Some(note)) => HookAction::Note(note),
        Ok(None) => HookAction::Continue,
        Err(e) => {
            cx.fail(e);
            HookAction::Continue
        }
    }
}

impl Hook for PhaseHook {
    fn name(&self) -> &str {
        "phase"
    }

    fn phase(&self) -> Option<Phase> {
        Some(self.phase_now())
    }

    fn before_tool<'a>(
        &'a self,
        cx: &'a HookContext,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, HookAction> {
        Box::pin(async move {
            match self.check(cx, call).await {
                Ok(Ok(CommandAccess::Write)) => HookAction::Continue,
                Ok(Ok(CommandAccess::ReadOnly)) => HookAction::RunReadOnly,
                Ok(Err(violation)) => HookAction::Deny(violation),
                Err(e) => {
                    cx.fail(e);
                    HookAction::Continue
                }
            }
        })
    }

    fn run_tool<'a>(
        &'a self,
        cx: &'a HookContext,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Option<Result<ToolOutput, ToolError>>> {
        Box::pin(async move {
            if call.name != ADVANCE_PHASE {
                return None;
            }
            match self.advance_call(cx, &call.arguments).await {
                Ok(result) => Some(result),
                Err(e) => {
                    cx.fail(e);
                    Some(Err(ToolError::model(
                        "the phase change could not be recorded",
                    )))
                }
            }
        })
    }

    fn after_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
        result: &'a ToolResultView,
    ) -> BoxFuture<'a, HookAction> {
        if result.ran {
            let access = if result.read_only {
                CommandAccess::ReadOnly
            } else {
                CommandAccess::Write
            };
            self.note_call(call, !result.is_error, access);
        }
        Box::pin(async { HookAction::Continue })
    }

    fn after_batch<'a>(&'a self, cx: &'a HookContext) -> BoxFuture<'a, HookAction> {
        Box::pin(async move {
            let note = self.step_done(cx).await;
            noted(cx, note)
        })
    }

    fn on_finish<'a>(&'a self, _cx: &'a HookContext, _text: &'a str) -> BoxFuture<'a, HookAction> {
        let nudge = self.finish_nudge();
        Box::pin(async move {
            match nudge {
                Some(nudge) => HookAction::Note(nudge),
                None => HookAction::Continue,
            }
        })
    }

    fn allows_recovery(&self) -> bool {
        // A plan_exec run rolls back instead: the phase policy and recovery exclude each other.
        false
    }

    fn failed<'a>(&'a self, cx: &'a HookContext) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            match self.rollback(cx).await {
                Ok(hints) => hints,
                Err(e) => {
                    cx.fail(e);
                    Vec::new()
                }
            }
        })
    }

    fn first_message(&self, task: &str) -> Vec<String> {
        *lock(&self.task) = Some(task.to_string());
        let p = self.phase_now();
        vec![format!(
            "This session runs in plan_exec mode: planning → building → verification → delivery. Each phase allows only some tools; call advance_phase when a phase's work is done. Current phase: {p}: {}. {}",
            p.purpose(),
            self.allowance(p)
        )]
    }

    fn user_message(&self, message: &str) -> Vec<String> {
        *lock(&self.task) = Some(message.to_string());
        let p = self.phase_now();
        vec![format!(
            "(plan_exec: the session is in the {p} phase: {}. {})",
            p.purpose(),
            self.allowance(p)
        )]
    }

    fn resumed(&self, _messages: &[Message], events: &[Event]) {
        if let Some(phase) = stored_phase(events) {
            let mut state = lock(&self.state);
            state.phase = phase;
            // Delivery needs a change in the session: an earlier turn's counts.
            state.made_change = !keel_protocol::files_written(events).is_empty();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
