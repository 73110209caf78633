//! The loop guard, the fix tracker and the progress meter as a hook (`keel_tracker` holds
//! their data structures): a workspace read made again with nothing changed since is answered
//! with its earlier result and the step to take next — and once [`IGNORED_ANSWER_LIMIT`] such
//! answers went unused, the run stops with a blocker that says so; any other call made
//! [`IDENTICAL_CALL_LIMIT`] times in a row ends the attempt (`loop_detected`); failed attempts are counted by error signature and file and
//! escalate to a blocker; a command that fails for missing credentials is a blocker at once;
//! new successful calls are progress (a run out of steps while progressing is blocked, not
//! failed).
//!
//! [`IDENTICAL_CALL_LIMIT`]: keel_tracker::IDENTICAL_CALL_LIMIT
//! [`IGNORED_ANSWER_LIMIT`]: keel_tracker::IGNORED_ANSWER_LIMIT

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_protocol::{ErrorCode, ToolCall};
use keel_tools::{ToolEffect, ToolError, ToolOutput, ToolRegistry, Workspace};

use super::lock;
use crate::blockers::{BlockerDraft, BlockerSource, credentials_blocker};
use crate::compaction::Facts;
use crate::ending::Failure;
use crate::hooks::{Hook, HookAction, HookContext, HookEnd, ToolResultView};
use keel_tracker::{
    FixTracker, LoopGuard, PROGRESS_WINDOW, Progress, REPEATABLE_TOOLS, RepeatAnswer, call_target,
};

#[derive(Default)]
struct State {
    tracker: FixTracker,
    guard: LoopGuard,
    progress: Progress,
    /// The earlier result that answers the call being dispatched (a repeated read).
    repeat_answer: Option<(String, RepeatAnswer)>,
    /// The files the task names (that exist), and the ones a `read_file` read since.
    task_files: Vec<String>,
    read: Vec<String>,
}

pub(crate) struct TrackerHook {
    tools: Arc<ToolRegistry>,
    workspace: Workspace,
    state: Mutex<State>,
}

impl TrackerHook {
    pub(crate) fn new(tools: Arc<ToolRegistry>, workspace: Workspace) -> Self {
        Self {
            tools,
            workspace,
            state: Mutex::new(State::default()),
        }
    }

    /// A task arrived (the first message, or a person's follow-up): the files it names.
    fn task(&self, task: &str) -> Vec<String> {
        lock(&self.state).task_files = super::files_named(task, &self.workspace);
        Vec::new()
    }

    /// The step a repeated read's answer points to: the file the task names, when it was
    /// not read yet, as the exact call (SmolLM2 listed the files again and again and never
    /// read `calc.py`, the file its task named); else the phase's way on.
    fn next_step(state: &State, phase: Option<&str>) -> String {
        match state.task_files.iter().find(|f| !state.read.contains(f)) {
            Some(file) => format!(
                "read {file} (the file the task names, not read yet; your next call: {})",
                super::read_call(file)
            ),
            None => crate::tracker::next_step(phase).to_string(),
        }
    }

    fn effect(&self, call: &ToolCall) -> Option<ToolEffect> {
        self.tools.get(&call.name).map(|t| t.effect())
    }

    /// The loop guard: a repeated workspace read is let through to be answered with its
    /// earlier result ([`Hook::run_tool`]) — unless the answers so far went unused: then a
    /// blocker names the loop (a model that does not take the step each answer named will
    /// not take it on the next request either; a person, or a stronger model, decides). Any
    /// other call made 3 times in a row ends the attempt.
    fn loop_check(&self, cx: &HookContext, call: &ToolCall) -> HookAction {
        let mut state = lock(&self.state);
        let looping = if state.guard.is_repeat(call) {
            let next = Self::next_step(&state, cx.phase.as_deref());
            match state.guard.answer_repeat(call, &next) {
                None => return HookAction::Continue,
                Some(Ok(answer)) => {
                    state.repeat_answer = Some((call.id.clone(), answer));
                    return HookAction::Continue;
                }
                Some(Err(ignored)) => {
                    return HookAction::End(HookEnd::blocked(
                        BlockerDraft {
                            question: format!(
                                "I am stuck in a loop: {ignored}. How should I proceed? (Guidance, or a stronger model: this one may not read tool results.)"
                            ),
                            source: BlockerSource::FixTracker,
                            evidence: vec![format!("not run: {ignored}")],
                        },
                        "the run paused: the model repeats calls whose answers it does not use",
                    ));
                }
            }
        } else {
            match state.guard.check(call) {
                None => return HookAction::Continue,
                Some(looping) => looping,
            }
        };
        HookAction::End(
            HookEnd::failed(
                Failure::new(ErrorCode::LoopDetected, looping.clone()),
                "a loop was detected",
            )
            .telling(format!("not run: {looping}; a loop is not progress")),
        )
    }

    /// The fix tracker, the progress meter and the loop guard's reset after a result.
    fn track(&self, cx: &HookContext, call: &ToolCall, out: &ToolResultView) -> HookAction {
        let effect = self.effect(call);
        let mut state = lock(&self.state);
        if out.ran {
            if REPEATABLE_TOOLS.contains(&call.name.as_str()) {
                if !out.content.starts_with("[keel: not run again:") {
                    state
                        .guard
                        .remember(call, cx.iteration, &out.content, out.is_error);
                }
            } else if effect != Some(ToolEffect::Control)
                && !(effect == Some(ToolEffect::WritesFiles) && out.is_error)
            {
                // A write, a command, an external tool: the workspace may have changed. A file
                // tool that failed changed nothing (each writes all or nothing): SmolLM2's
                // failed `edit_file` between two `list_files` made the second run again
                // instead of being answered with the first.
                state.guard.invalidate();
            }
        }
        if out.is_error {
            if out.refused || out.fatal {
                return HookAction::Continue;
            }
            return after_error(&mut state, effect, call, &out.content);
        }
        let failed_exit = out
            .details
            .exit_code
            .filter(|&code| code != 0 && effect == Some(ToolEffect::RunsCommands));
        let action = match failed_exit {
            // A command that ran but failed is a failed attempt, whatever the tool's result
            // type says.
            Some(code) => after_error(
                &mut state,
                effect,
                call,
                &format!("exit code {code}\n{}", out.content),
            ),
            None => {
                if call.name == "read_file"
                    && let Some(path) = call.arguments.get("path").and_then(|p| p.as_str())
                {
                    state.read.push(path.trim_start_matches("./").to_string());
                }
                let target = call_target(call);
                state.tracker.record_success(&call.name, target.as_deref());
                if state.progress.record_success(call, cx.iteration) {
                    state.guard.progressed();
                }
                HookAction::Continue
            }
        };
        if matches!(effect, Some(ToolEffect::WritesFiles | ToolEffect::Control)) {
            // A call that changed something is progress, not a loop, however alike the calls
            // around it are.
            state.guard.reset();
        }
        action
    }
}

/// Records a failed call with the fix tracker and checks it for blocker patterns (missing
/// credentials, the same failure again and again).
fn after_error(
    state: &mut State,
    effect: Option<ToolEffect>,
    call: &ToolCall,
    message: &str,
) -> HookAction {
    if message.starts_with("not run:") {
        return HookAction::Continue;
    }
    let fix_attempt = matches!(
        effect,
        Some(ToolEffect::WritesFiles | ToolEffect::RunsCommands)
    );
    let target = call_target(call);
    let escalation =
        state
            .tracker
            .record_error(&call.name, target.as_deref(), message, fix_attempt);
    if effect == Some(ToolEffect::RunsCommands)
        && let Some(draft) = credentials_blocker(&call.name, message)
    {
        return HookAction::End(HookEnd::blocked(
            draft,
            "the run paused: credentials are missing",
        ));
    }
    match escalation {
        Some(esc) => HookAction::End(HookEnd::blocked(
            BlockerDraft {
                question: esc.question,
                source: BlockerSource::FixTracker,
                evidence: esc.evidence,
            },
            "the run paused for a human to look at the repeated failures",
        )),
        None => HookAction::Continue,
    }
}

impl Hook for TrackerHook {
    fn name(&self) -> &str {
        "tracker"
    }

    fn before_tool<'a>(
        &'a self,
        cx: &'a HookContext,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, HookAction> {
        let action = self.loop_check(cx, call);
        Box::pin(async move { action })
    }

    fn unresolved_call(&self, cx: &HookContext, call: &ToolCall) -> HookAction {
        self.loop_check(cx, call)
    }

    /// A repeated workspace read: its earlier result, with a note.
    fn run_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Option<Result<ToolOutput, ToolError>>> {
        let answer = match lock(&self.state).repeat_answer.take() {
            Some((id, answer)) if id == call.id => Some(if answer.is_error {
                Err(ToolError::Model(answer.content))
            } else {
                Ok(ToolOutput::text(answer.content))
            }),
            _ => None,
        };
        Box::pin(async move { answer })
    }

    fn after_tool<'a>(
        &'a self,
        cx: &'a HookContext,
        call: &'a ToolCall,
        result: &'a ToolResultView,
    ) -> BoxFuture<'a, HookAction> {
        let action = self.track(cx, call, result);
        Box::pin(async move { action })
    }

    fn first_message(&self, task: &str) -> Vec<String> {
        self.task(task)
    }

    fn user_message(&self, message: &str) -> Vec<String> {
        self.task(message)
    }

    fn recovery(&self, _cx: &HookContext) {
        lock(&self.state).guard.reset();
    }

    fn progressing(&self, cx: &HookContext) -> Option<String> {
        lock(&self.state)
            .progress
            .recent(cx.iteration, PROGRESS_WINDOW)
            .then(|| {
                format!(
                    "a new successful step happened within the last {PROGRESS_WINDOW} iterations"
                )
            })
    }

    fn compaction_facts(&self, facts: &mut Facts) {
        facts
            .open_errors
            .extend_from_slice(lock(&self.state).tracker.open_errors());
    }
}
