//! The registration of every guardrail, in order ([`standard`]), and the built-in guardrails
//! not yet moved to their own [`Hook`] in `crate::guardrails` (those still work on the run's
//! own state: the fix tracker, the phase machine, the working context; the plan_exec phase
//! policy's hook bodies live in `phase/enforce.rs`, compaction's in `compaction`,
//! verification's in `verify`).

use std::sync::Arc;

use keel_protocol::{ErrorCode, ToolCall, ToolDetails};
use keel_tools::{ToolEffect, ToolError, ToolOutput, ToolRegistry};

use super::Hook;
use crate::EngineError;
use crate::blockers::{
    BlockerDraft, BlockerSource, ambiguity_blocker, credentials_blocker, requested_question,
};
use crate::engine::Engine;
use crate::fallback::Failure;
use crate::guardrails::{constitution::ConstitutionHook, rules::RulesHook, skills::SkillsHook};
use crate::phase::{ADVANCE_PHASE, CommandAccess};
use crate::run::{Ending, Interrupt, Run};
use crate::tracker::call_target;

/// Why the loop stops after the current batch, and what calls not yet run are told.
pub(crate) type Stop = Option<(Ending, &'static str)>;

/// What happens to a tool call before it runs.
pub(crate) enum Dispatch {
    /// Run it; commands it starts get this access (the read-only sandbox in read-only phases).
    Run(CommandAccess),
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

/// The built-in guardrails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    /// The loop guard, the fix tracker and the progress meter (`tracker`).
    Tracker,
    /// Questions for the user (`ask_user`), ambiguous final answers (`blockers`) and answers
    /// that are none (`finish`).
    Blockers,
    /// A subagent's role scope: a call outside its role's tools, or a write in a read-only
    /// role (`agents`).
    Scope,
    /// The plan_exec phase policy (`phase/enforce.rs`).
    Phase,
    /// Compaction of the working context before a request (`compaction`).
    Compaction,
    /// Final verification and its self-correction rounds (`verify`).
    Verification,
    /// Asking a person before risky calls (`approval`).
    Approval,
}

/// One registered hook: a built-in guardrail still on the run's state, a guardrail [`Hook`]
/// made for each run (from the engine's parts), or a custom hook shared by every run.
#[derive(Clone)]
pub(crate) enum Slot {
    Builtin(Builtin),
    Guardrail(fn(&Engine) -> Arc<dyn Hook>),
    Custom(Arc<dyn Hook>),
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Slot::Builtin(b) => write!(f, "{b:?}"),
            Slot::Guardrail(_) => write!(f, "Guardrail"),
            Slot::Custom(h) => write!(f, "Custom({})", h.name()),
        }
    }
}

/// A run's hooks, in order: what [`Slot`]s become when a run starts.
#[derive(Clone)]
pub(crate) enum Active {
    Builtin(Builtin),
    Hook(Arc<dyn Hook>),
}

/// The run's hooks: each guardrail [`Hook`] made fresh (it owns this run's state).
pub(crate) fn for_run(engine: &Engine) -> Arc<[Active]> {
    engine
        .hooks
        .iter()
        .map(|slot| match slot {
            Slot::Builtin(b) => Active::Builtin(*b),
            Slot::Guardrail(make) => Active::Hook(make(engine)),
            Slot::Custom(h) => Active::Hook(h.clone()),
        })
        .collect()
}

/// The hooks of an engine: the built-in guardrails around the `custom` hooks (see the module
/// docs of [`crate::hooks`] for the order). `phases`: the plan_exec policy is on. Adding a
/// guardrail: its module in `crate::guardrails` and one line here.
pub(crate) fn standard(phases: bool, custom: &[Arc<dyn Hook>]) -> Vec<Slot> {
    let mut slots = vec![
        Slot::Builtin(Builtin::Tracker),
        Slot::Builtin(Builtin::Blockers),
        Slot::Guardrail(|e| Arc::new(RulesHook::new(e.workspace.root()))),
        Slot::Builtin(Builtin::Scope),
        Slot::Guardrail(|e| Arc::new(SkillsHook::new(e.skills.clone(), e.workspace.root()))),
        Slot::Guardrail(|e| Arc::new(ConstitutionHook::new(e.constitution.clone()))),
    ];
    if phases {
        slots.push(Slot::Builtin(Builtin::Phase));
    }
    slots.push(Slot::Builtin(Builtin::Compaction));
    slots.extend(custom.iter().cloned().map(Slot::Custom));
    slots.push(Slot::Builtin(Builtin::Verification));
    slots.push(Slot::Builtin(Builtin::Approval));
    slots
}

impl Builtin {
    pub(crate) async fn before_request(self, run: &mut Run<'_>) -> Result<(), Interrupt> {
        if self == Builtin::Compaction {
            run.maybe_compact().await?;
        }
        Ok(())
    }

    /// `None`: no objection. `Some(Dispatch::Run(access))` sets the access later hooks pass on.
    pub(crate) async fn before_tool(
        self,
        run: &mut Run<'_>,
        call: &ToolCall,
    ) -> Result<Option<Dispatch>, EngineError> {
        Ok(match self {
            Builtin::Tracker => loop_check(run, call),
            // A subagent's role scope (a call outside it names the role), before the active
            // skill's tool restriction.
            Builtin::Scope => crate::agents::scope_refusal(run.engine, call).map(Dispatch::Refuse),
            Builtin::Phase => Some(match run.phase_check(call).await? {
                Ok(access) => Dispatch::Run(access),
                Err(refusal) => Dispatch::Refuse(refusal),
            }),
            Builtin::Approval => match run.approvals.clone() {
                Some(gate) => gate
                    .check(
                        call,
                        &run.engine.tools,
                        &run.engine.workspace,
                        run.emitter,
                        &run.ctx.cancel,
                    )
                    .await?
                    .err()
                    .map(Dispatch::Refuse),
                None => None,
            },
            _ => None,
        })
    }

    /// Answers a call the run owns instead of a registered tool (`None`: not this hook's).
    pub(crate) async fn run_tool(
        self,
        run: &mut Run<'_>,
        call: &ToolCall,
    ) -> Result<Option<Result<ToolOutput, ToolError>>, EngineError> {
        Ok(match self {
            Builtin::Phase if call.name == ADVANCE_PHASE && run.phase.is_some() => {
                Some(run.advance_call(&call.arguments).await?)
            }
            // A repeated workspace read: its earlier result, with a note (`loop_check`).
            Builtin::Tracker => match run.repeat_answer.take() {
                Some((id, answer)) if id == call.id => Some(if answer.is_error {
                    Err(ToolError::Model(answer.content))
                } else {
                    Ok(ToolOutput::text(answer.content))
                }),
                _ => None,
            },
            _ => None,
        })
    }

    pub(crate) async fn after_tool(
        self,
        run: &mut Run<'_>,
        call: &ToolCall,
        out: &mut Outcome,
        stop: &mut Stop,
    ) {
        match self {
            Builtin::Tracker => track(run, call, out, stop),
            Builtin::Blockers if !out.is_error => {
                // What counts as a change for a change task's finish (`finish`).
                let effect = run.engine.tools.get(&call.name).map(|t| t.effect());
                run.finish_check.note_call(effect, call);
                ask_user(run, call, out, stop).await
            }
            Builtin::Phase => {
                if let Some(access) = out.ran_with {
                    run.phase_note_call(call, !out.is_error, access);
                }
            }
            Builtin::Verification if !out.is_error => run.note_change(call, &out.details),
            _ => {}
        }
    }

    /// After a reply's results, when the attempt goes on: notes for the model.
    pub(crate) async fn after_batch(
        self,
        run: &mut Run<'_>,
    ) -> Result<Option<String>, EngineError> {
        match self {
            Builtin::Phase => run.phase_step_done().await,
            _ => Ok(None),
        }
    }

    pub(crate) async fn on_finish(
        self,
        run: &mut Run<'_>,
        text: &str,
    ) -> Result<Finish, Interrupt> {
        Ok(match self {
            // A question back is a blocker; an answer that changed nothing for a task that
            // asked for a change is not a completion (`finish`).
            Builtin::Blockers => match ambiguity_blocker(text) {
                Some(draft) => Finish::End(Ending::Blocked(draft)),
                None => match run.finish_check.finish(&run.messages) {
                    crate::finish::Verdict::Accept => Finish::Undecided,
                    crate::finish::Verdict::Nudge(note) => {
                        run.push_message(keel_protocol::Message::user_text(note))
                            .await?;
                        Finish::Again
                    }
                    crate::finish::Verdict::Fail(failure) => Finish::End(Ending::Failed(failure)),
                },
            },
            Builtin::Phase => match run.phase_finish_nudge() {
                Some(nudge) => {
                    run.push_message(keel_protocol::Message::user_text(nudge))
                        .await?;
                    Finish::Again
                }
                None => Finish::Undecided,
            },
            Builtin::Verification => match run.finish(text).await? {
                Some(ending) => Finish::End(ending),
                None => Finish::Again,
            },
            _ => Finish::Undecided,
        })
    }

    /// Whether a failed attempt may be retried by the recovery tier (plan_exec runs roll back
    /// instead: the phase policy and recovery are mutually exclusive).
    pub(crate) fn allows_recovery(self, run: &Run<'_>) -> bool {
        !(self == Builtin::Phase && run.phase.is_some())
    }

    /// After the chain gave up on a failure: advice for the error (the phase's rollback).
    pub(crate) async fn on_failure(self, run: &mut Run<'_>) -> Result<Vec<String>, EngineError> {
        match self {
            Builtin::Phase => run.phase_failed().await,
            _ => Ok(Vec::new()),
        }
    }

    /// A recovery attempt starts.
    pub(crate) fn on_recovery(self, run: &mut Run<'_>) {
        if self == Builtin::Tracker {
            run.guard.reset();
        }
    }
}

/// The loop guard: a workspace read made again with nothing changed since is let through to
/// be answered with its earlier result ([`Builtin::run_tool`]) — unless too many repeats in a
/// row were answered so; any other call made 3 times in a row ends the attempt.
pub(crate) fn loop_check(run: &mut Run<'_>, call: &ToolCall) -> Option<Dispatch> {
    let looping = if run.guard.is_repeat(call) {
        match run.guard.answer_repeat(call)? {
            Ok(answer) => {
                run.repeat_answer = Some((call.id.clone(), answer));
                return None;
            }
            Err(looping) => looping,
        }
    } else {
        run.guard.check(call)?
    };
    Some(Dispatch::Stop(
        Ending::Failed(Failure::new(ErrorCode::LoopDetected, looping.clone())),
        "a loop was detected",
        format!("not run: {looping}; a loop is not progress"),
    ))
}

/// The fix tracker, the progress meter and the loop guard's reset after a result.
fn track(run: &mut Run<'_>, call: &ToolCall, out: &Outcome, stop: &mut Stop) {
    if out.ran_with.is_some() {
        let effect = run.engine.tools.get(&call.name).map(|t| t.effect());
        if crate::tracker::REPEATABLE_TOOLS.contains(&call.name.as_str()) {
            if !out.content.starts_with("[keel: not run again:") {
                run.guard
                    .remember(call, run.iterations, &out.content, out.is_error);
            }
        } else if effect != Some(ToolEffect::Control) {
            // A write, a command, an external tool: the workspace may have changed.
            run.guard.invalidate();
        }
    }
    if out.is_error {
        if !out.refused && !out.fatal {
            after_error(run, call, &out.content, stop);
        }
        return;
    }
    if let Some(code) = failed_exit_code(&run.engine.tools, call, &out.details) {
        // A command that ran but failed is a failed attempt, whatever the tool's result
        // type says.
        after_error(
            run,
            call,
            &format!("exit code {code}\n{}", out.content),
            stop,
        );
    } else {
        let target = call_target(call);
        run.tracker.record_success(&call.name, target.as_deref());
        run.progress.record_success(call, run.iterations);
    }
    if changes_state(&run.engine.tools, call) {
        // A call that changed something is progress, not a loop, however alike the calls
        // around it are.
        run.guard.reset();
    }
}

/// A question for the user (`ask_user`'s blocker request) is answered interactively or
/// becomes a blocker.
async fn ask_user(run: &mut Run<'_>, call: &ToolCall, out: &mut Outcome, stop: &mut Stop) {
    let is_control = run
        .engine
        .tools
        .get(&call.name)
        .is_some_and(|t| t.effect() == ToolEffect::Control);
    let Some((question, context)) = requested_question(&out.details).filter(|_| is_control) else {
        return;
    };
    if let Some(prompt) = run.ask_user.clone()
        && let Some(answer) = prompt.ask(&question, context.as_deref()).await
    {
        out.content = format!("The user answered: {answer}");
        return;
    }
    if stop.is_none() {
        *stop = Some((
            Ending::Blocked(BlockerDraft {
                question,
                source: BlockerSource::Model,
                evidence: context.into_iter().collect(),
            }),
            "the run paused for the user's answer",
        ));
    }
}

/// Records a failed call with the fix tracker and checks it for blocker patterns.
fn after_error(run: &mut Run<'_>, call: &ToolCall, message: &str, stop: &mut Stop) {
    if message.starts_with("not run:") {
        return;
    }
    let effect = run.engine.tools.get(&call.name).map(|t| t.effect());
    let fix_attempt = matches!(
        effect,
        Some(ToolEffect::WritesFiles | ToolEffect::RunsCommands)
    );
    let target = call_target(call);
    let escalation = run
        .tracker
        .record_error(&call.name, target.as_deref(), message, fix_attempt);
    if stop.is_some() {
        return;
    }
    if effect == Some(ToolEffect::RunsCommands)
        && let Some(draft) = credentials_blocker(&call.name, message)
    {
        *stop = Some((
            Ending::Blocked(draft),
            "the run paused: credentials are missing",
        ));
        return;
    }
    if let Some(esc) = escalation {
        *stop = Some((
            Ending::Blocked(BlockerDraft {
                question: esc.question,
                source: BlockerSource::FixTracker,
                evidence: esc.evidence,
            }),
            "the run paused for a human to look at the repeated failures",
        ));
    }
}

/// The non-zero exit code a command-running tool reported, if any.
fn failed_exit_code(tools: &ToolRegistry, call: &ToolCall, details: &ToolDetails) -> Option<i32> {
    let runs_commands = tools
        .get(&call.name)
        .is_some_and(|t| t.effect() == ToolEffect::RunsCommands);
    let code = details.exit_code?;
    (runs_commands && code != 0).then_some(code)
}

/// Whether a successful `call` changed the workspace or the run's state (a write, a phase
/// change).
fn changes_state(tools: &ToolRegistry, call: &ToolCall) -> bool {
    tools
        .get(&call.name)
        .is_some_and(|t| matches!(t.effect(), ToolEffect::WritesFiles | ToolEffect::Control))
}
