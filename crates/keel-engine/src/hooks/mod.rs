//! Hooks: the guardrails' way into the loop.
//!
//! The loop in `run.rs` only asks the session's hooks, in order, at its points: before each
//! model request, when a reply arrives, before each tool call, after each tool result (and
//! once after a reply's batch of results), when the model says it is done, when it runs out
//! of steps, and when an attempt fails. Everything that judges a run — the loop guard and fix
//! tracker, blockers and the finish checks, rules, a subagent's scope, skills, the
//! constitution, the plan_exec phase policy (including `advance_phase`), compaction, final
//! verification, approvals, snapshots — is a hook the engine builder registers ([`builtin::standard`]);
//! flows, subagents and tests add their own [`Hook`]s with [`crate::EngineBuilder::hook`] or
//! [`crate::runtime::SessionBuilder::hook`].
//!
//! Order: the built-in hooks that keep the run sane come first (loop guard, blockers, rules,
//! a subagent's role scope, skills, constitution, phase policy, compaction), then the custom
//! hooks in the order they were added, then final verification, approval and snapshots (the
//! expensive checks, and asking a person, come last: a call a hook denies is never put to a
//! person; the snapshot is taken only for a call every hook allowed, at `before_run`).
//! At the finish the run is checked for cancellation after each hook that let the answer
//! stand (a hook that saw its work cancelled — a gate killed — answers `Continue`).

pub(crate) mod builtin;

use std::sync::Arc;

use futures::future::BoxFuture;
use keel_phase::{CommandAccess, Phase};
use keel_protocol::{Event, Message, ToolCall, ToolDetails};
use keel_tools::{ToolError, ToolOutput};

use crate::blockers::BlockerDraft;
use crate::compaction::Facts;
use crate::ending::{Ending, Failure};

/// What a hook wants at its point.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HookAction {
    /// Nothing to add; the next hook decides.
    #[default]
    Continue,
    /// `before_tool`: do not run the call; the model reads this message as the call's (error)
    /// result. Elsewhere it acts as [`HookAction::Note`].
    Deny(String),
    /// Tell the model something: before a request, a user note appended to the context; after
    /// a tool, a line appended to its result; at the finish, a user message and another step
    /// (the answer does not end the run yet).
    Note(String),
    /// End the attempt: the session becomes `blocked` with this question for a person
    /// (source `hook`); resuming it continues.
    Stop(String),
    /// `after_tool`: the model reads this instead of the result (a guardrail that adds to it,
    /// such as the nested rules a read file brings in). Elsewhere it acts as
    /// [`HookAction::Note`].
    Replace(String),
    /// End the attempt as a built-in guardrail decides: a blocker with its own source and
    /// evidence, or a failure for the fallback chain ([`HookEnd`]). At `before_tool` the call
    /// does not run; after a result the reply's remaining calls do not run either.
    End(HookEnd),
    /// `before_tool`: let the call run, but every command it starts runs in the read-only
    /// sandbox (a hook may only narrow a call's access; no later hook widens it). Elsewhere
    /// it acts as [`HookAction::Continue`].
    RunReadOnly,
}

/// How a guardrail ends the attempt ([`HookAction::End`]). Built-in guardrails make these
/// (a loop, a repeated failure, a question for the user); a custom hook ends a run with
/// [`HookAction::Stop`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookEnd {
    pub(crate) ending: Ending,
    /// What the reply's calls not yet run are told (`not run: …`).
    pub(crate) why: &'static str,
    /// At `before_tool`: what the model reads as the stopped call's result.
    pub(crate) message: String,
}

impl HookEnd {
    /// A blocker for a person; the calls not yet run are told `why`.
    pub(crate) fn blocked(draft: BlockerDraft, why: &'static str) -> Self {
        Self {
            ending: Ending::Blocked(draft),
            why,
            message: format!("not run: {why}"),
        }
    }

    /// A failure for the fallback chain; the calls not yet run are told `why`.
    pub(crate) fn failed(failure: Failure, why: &'static str) -> Self {
        Self {
            ending: Ending::Failed(failure),
            why,
            message: format!("not run: {why}"),
        }
    }

    /// At `before_tool`: the model reads `message` as the call's result.
    pub(crate) fn telling(mut self, message: String) -> Self {
        self.message = message;
        self
    }
}

/// What a hook can see of the run at every point.
#[derive(Debug, Clone)]
pub struct HookContext {
    pub session_id: String,
    /// Model requests so far in this session (the current one included).
    pub iteration: u32,
    /// The plan_exec phase (`None` in react mode).
    pub phase: Option<String>,
    /// The working context: what the next request sends (compaction may have shrunk it; the
    /// store keeps everything).
    pub messages: Arc<Vec<Message>>,
    /// Characters of a tool result (or a hook's note) the model reads at most, for the
    /// context window the run knows now.
    pub output_budget: usize,
    /// The run's event stream: a hook's own events (final verification's `verification`
    /// events, an approval it asks for) are stored and published like the loop's.
    pub events: crate::Emitter,
    /// Where a hook reports that the run cannot go on ([`HookContext::fail`]).
    pub(crate) fault: Fault,
}

/// A failure of the engine's own machinery a hook ran into (the store could not record its
/// event): the loop ends the run with it as soon as the hook returns.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fault(std::sync::Arc<std::sync::Mutex<Option<crate::EngineError>>>);

impl Fault {
    /// The failure reported since the last look, if any.
    pub(crate) fn take(&self) -> Option<crate::EngineError> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl HookContext {
    /// The run cannot go on: the hook could not do what it must (the store failed to record
    /// its event). The loop ends the run with `error` when the hook returns, as if the loop
    /// itself had failed (the first report wins).
    pub fn fail(&self, error: crate::EngineError) {
        let mut slot = self.fault.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(error);
        }
    }
}

/// A tool result as a hook sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultView {
    /// What the model will read (before notes of later hooks).
    pub content: String,
    pub is_error: bool,
    pub details: ToolDetails,
    /// The call ran (it was not refused, stopped or left unresolved).
    pub ran: bool,
    /// A hook refused it (a policy refusal, not a failed attempt).
    pub refused: bool,
    /// Subagents this call waited for changed the workspace on the run's behalf.
    pub agents_changed: bool,
    /// It ran with its commands confined to the read-only sandbox (a hook granted only that).
    pub read_only: bool,
    /// A fatal tool error: the loop stops; not the model's to fix.
    pub fatal: bool,
}

/// A custom guardrail. Every method has a default that does nothing, so a hook implements only
/// its points. Hooks run in order and must not block: a slow check should await, not spin.
pub trait Hook: Send + Sync {
    /// A short name for logs and errors.
    fn name(&self) -> &str;

    /// Before each model request (after compaction).
    fn before_request<'a>(&'a self, _cx: &'a HookContext) -> BoxFuture<'a, HookAction> {
        Box::pin(async { HookAction::Continue })
    }

    /// Before a tool call runs (after the built-in checks allowed it, before approval).
    fn before_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        _call: &'a ToolCall,
    ) -> BoxFuture<'a, HookAction> {
        Box::pin(async { HookAction::Continue })
    }

    /// After a tool call's result is known (also for calls that were refused or not run).
    fn after_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        _call: &'a ToolCall,
        _result: &'a ToolResultView,
    ) -> BoxFuture<'a, HookAction> {
        Box::pin(async { HookAction::Continue })
    }

    /// When the model answers without tool calls (before final verification).
    fn on_finish<'a>(&'a self, _cx: &'a HookContext, _text: &'a str) -> BoxFuture<'a, HookAction> {
        Box::pin(async { HookAction::Continue })
    }

    /// An allowed call is about to run with `access` (every hook let it through; calls a hook
    /// answers itself, `read_result` and the subagent tools do not come here): the last
    /// moment to record the workspace before it may change.
    fn before_run<'a>(
        &'a self,
        _cx: &'a HookContext,
        _call: &'a ToolCall,
        _access: CommandAccess,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// Answers a call the hook owns (a tool the model sees but no registry runs, such as
    /// `skill`), after the call was allowed; `None`: not this hook's call. The first hook that
    /// answers wins.
    fn run_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        _call: &'a ToolCall,
    ) -> BoxFuture<'a, Option<Result<ToolOutput, ToolError>>> {
        Box::pin(async { None })
    }

    /// After a reply's results, when the attempt goes on: a [`HookAction::Note`] is added to
    /// the context after the results (a phase step is done and auto-advance moved on).
    fn after_batch<'a>(&'a self, _cx: &'a HookContext) -> BoxFuture<'a, HookAction> {
        Box::pin(async { HookAction::Continue })
    }

    /// The plan_exec phase this hook keeps the run in, if it is the phase policy.
    fn phase(&self) -> Option<Phase> {
        None
    }

    /// Whether the fallback chain may retry a failed attempt with its recovery tier (the phase
    /// policy rolls back instead: the two exclude each other).
    fn allows_recovery(&self) -> bool {
        true
    }

    /// The fallback chain gave up on a failure: advice for the error, after the hook's own
    /// clean-up (the phase's validation and rollback).
    fn failed<'a>(&'a self, _cx: &'a HookContext) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async { Vec::new() })
    }

    /// A call that cannot run as sent (an unknown tool, arguments that do not fit): the model
    /// reads why. Only [`HookAction::End`] counts here (the loop guard counts such calls).
    fn unresolved_call(&self, _cx: &HookContext, _call: &ToolCall) -> HookAction {
        HookAction::Continue
    }

    /// A model reply arrived; `empty`: it holds nothing (no text, no tool call), which is no
    /// answer. For an empty reply a [`HookAction::Note`] is what the model is told, and
    /// [`HookAction::End`] ends the attempt; otherwise only `End` counts.
    fn on_reply(&self, _cx: &HookContext, _empty: bool) -> HookAction {
        HookAction::Continue
    }

    /// The run ends: its task asked for a change and nothing was changed (the finish is
    /// marked `unchanged`).
    fn changed_nothing(&self) -> bool {
        false
    }

    /// A recovery attempt starts (the fallback chain gave the model a fresh budget).
    fn recovery(&self, _cx: &HookContext) {}

    /// A model request failed while this hook had asked the model to redo something (a
    /// correction round after failing gates): the failure as it should read, that cause
    /// first. The first hook that answers wins; `None`: not this hook's.
    fn model_failed(&self, _cx: &HookContext, _failure: &Failure) -> Option<Failure> {
        None
    }

    /// The attempt used its iteration budget: evidence that the run was still making
    /// progress (it becomes a resumable blocker instead of a `max_steps` failure).
    fn progressing(&self, _cx: &HookContext) -> Option<String> {
        None
    }

    /// A compaction summarises earlier work: add what this guardrail knows that the summary
    /// must keep (the fix tracker's open errors).
    fn compaction_facts(&self, _facts: &mut Facts) {}

    /// A new session's first message: blocks to add to its context (after the project's
    /// layers), in hook order.
    fn first_message(&self, _task: &str) -> Vec<String> {
        Vec::new()
    }

    /// A person's follow-up message to a session: blocks to append to it.
    fn user_message(&self, _message: &str) -> Vec<String> {
        Vec::new()
    }

    /// A stored session is resumed with this working context and these stored events: a hook
    /// that keeps state about what the context already holds (injected rules, loaded skills)
    /// or where the session stands (its phase) restores it.
    fn resumed(&self, _messages: &[Message], _events: &[Event]) {}
}
