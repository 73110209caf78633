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

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_phase::{CommandAccess, Phase};
use keel_protocol::{Event, Message, ToolCall, ToolDetails, Usage};
use keel_tools::{ToolError, ToolOutput};

use crate::blockers::BlockerDraft;
use crate::compaction::{Carry, Compaction, Facts, Window};
use crate::ending::{Ending, Failure, Interrupt};

/// What a hook wants at its point.
#[derive(Debug, Clone, PartialEq, Default)]
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
    /// `before_request` and [`Hook::compact`]: the working context becomes this compacted one
    /// (the store keeps everything; the loop records the `compaction` event). Elsewhere it
    /// acts as [`HookAction::Continue`]. Made by the compaction guardrail.
    Compact(Box<Compaction>),
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
    /// The context window as the loop knows it now, and the head every request sends.
    pub(crate) window: Window,
    /// Files the session created or modified so far.
    pub(crate) files: Arc<BTreeSet<String>>,
    /// The run's hooks, in order (what they add to a compaction's facts).
    pub(crate) hooks: Hooks,
    /// Where a hook reports back to the loop ([`HookContext::fail`]).
    pub(crate) fault: Fault,
}

/// A run's hooks, in order: each guardrail [`Hook`] made for this run (it owns this run's
/// state), the custom hooks shared by every run between them.
#[derive(Clone)]
pub(crate) struct Hooks(pub(crate) Arc<[Arc<dyn Hook>]>);

impl Hooks {
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<dyn Hook>> {
        self.0.iter()
    }
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|h| h.name()))
            .finish()
    }
}

/// What a hook reports back to the loop: a failure of the engine's own machinery it ran into
/// (the store could not record its event; a compaction's summary request failed or was
/// cancelled), which ends the run as soon as the hook returns, and model usage it spent on
/// the run's behalf (a compaction's summary requests).
#[derive(Clone, Default)]
pub(crate) struct Fault(Arc<Mutex<Reported>>);

#[derive(Default)]
struct Reported {
    interrupt: Option<Interrupt>,
    spent: Usage,
    /// At `before_tool`: a person approved this very call (the approval hook saw the
    /// answer). Carried to the call's own run and nowhere else (red-team pass 10, R10-23).
    person_approved: bool,
}

impl std::fmt::Debug for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fault")
    }
}

impl Fault {
    fn reported(&self) -> std::sync::MutexGuard<'_, Reported> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The failure reported since the last look, if any, and the usage spent since then.
    pub(crate) fn take(&self) -> (Option<Interrupt>, Usage) {
        let mut reported = self.reported();
        (
            reported.interrupt.take(),
            std::mem::take(&mut reported.spent),
        )
    }
}

impl HookContext {
    /// The run cannot go on: the hook could not do what it must (the store failed to record
    /// its event). The loop ends the run with `error` when the hook returns, as if the loop
    /// itself had failed (the first report wins).
    pub fn fail(&self, error: crate::EngineError) {
        self.interrupt(Interrupt::Engine(error));
    }

    /// Like [`HookContext::fail`], with any way a step stops early (a compaction's summary
    /// request that failed or was cancelled).
    pub(crate) fn interrupt(&self, interrupt: Interrupt) {
        let mut reported = self.fault.reported();
        if reported.interrupt.is_none() {
            reported.interrupt = Some(interrupt);
        }
    }

    /// At `before_tool`: a person approved the call being judged. Only the engine's own
    /// approval hook says so; the call then runs with what such an approval lifts
    /// ([`keel_tools::ToolContext::approved`]), and the word goes with that call alone.
    pub(crate) fn person_approved(&self) {
        self.fault.reported().person_approved = true;
    }

    /// Whether the hook said [`HookContext::person_approved`] (the word is taken).
    pub(crate) fn take_person_approved(&self) -> bool {
        std::mem::take(&mut self.fault.reported().person_approved)
    }

    /// Model usage the hook spent on the run's behalf (it counts for the session).
    pub(crate) fn spend(&self, usage: &Usage) {
        self.fault.reported().spent.add(usage);
    }

    /// What a compaction's summary must keep: the files changed so far and what the hooks
    /// add ([`Hook::compaction_facts`]: the fix tracker's open errors).
    pub(crate) fn facts(&self) -> Facts {
        let mut facts = Facts {
            files: self.files.iter().cloned().collect(),
            open_errors: Vec::new(),
        };
        for h in self.hooks.iter() {
            h.compaction_facts(&mut facts);
        }
        facts
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

    /// Before each model request (compaction is one: a hook may answer
    /// [`HookAction::Compact`]).
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

    /// The loop needs the working context compacted now: the `compact` operation, or a
    /// request the server refused as too large (`force`: through every stage that applies,
    /// whatever the threshold). A hook that compacts answers [`HookAction::Compact`].
    fn compact<'a>(&'a self, _cx: &'a HookContext, _force: bool) -> BoxFuture<'a, HookAction> {
        Box::pin(async { HookAction::Continue })
    }

    /// What this hook carries from one compaction to the next (an on-demand compaction's
    /// checkpoint stores it); `None`: not a compacting hook.
    fn carried(&self) -> Option<Carry> {
        None
    }

    /// A stored session goes on from a compaction checkpoint: what compaction carried then.
    fn carry_on(&self, _carry: &Carry) {}

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
