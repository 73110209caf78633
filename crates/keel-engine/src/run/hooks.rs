//! How the loop asks its hooks (`crate::hooks`): each point walks the run's hooks in order.

use keel_protocol::{Message, ToolCall};
use keel_tools::{ToolError, ToolOutput};

use super::Run;
use crate::EngineError;
use crate::blockers::{BlockerDraft, BlockerSource};
use crate::compaction::{Carry, Compacted, Compaction, Window};
use crate::ending::{Ending, Interrupt};
use crate::hooks::builtin::{Dispatch, Finish, Outcome, Stop};
use crate::hooks::{Fault, Hook, HookAction, HookContext, HookEnd, ToolResultView};
use keel_phase::CommandAccess;

/// The blocker a hook's [`HookAction::Stop`] raises.
fn hook_stop(hook: &str, question: String) -> Ending {
    Ending::Blocked(BlockerDraft {
        question,
        source: BlockerSource::Hook,
        evidence: vec![format!("raised by the `{hook}` hook")],
    })
}

/// What calls after a hook's stop are told.
const HOOK_STOPPED: &str = "a hook stopped the run";

impl Run<'_> {
    fn hook_context(&self) -> HookContext {
        HookContext {
            session_id: self.emitter.session_id().to_string(),
            iteration: self.iterations,
            phase: self.phase().map(|p| p.as_str().to_string()),
            messages: self.messages.clone(),
            output_budget: self.output_budget(),
            events: self.emitter.clone(),
            window: Window::new(
                self.budget.clone(),
                self.system_prompt.clone(),
                self.tools.clone(),
            ),
            files: self.files.clone(),
            hooks: self.hooks.clone(),
            fault: Fault::default(),
        }
    }

    /// Takes what a hook reported back: the usage it spent counts for the run; a failure it
    /// reported ([`HookContext::fail`]) ends the run.
    fn settle(&mut self, cx: &HookContext) -> Result<(), Interrupt> {
        let (interrupt, spent) = cx.fault.take();
        self.usage.add(&spent);
        interrupt.map_or(Ok(()), Err)
    }

    /// [`Run::settle`] at a point that ends only with the engine's own failures (compaction,
    /// which may report a model's, runs only before a request).
    fn settled(&mut self, cx: &HookContext) -> Result<(), EngineError> {
        match self.settle(cx) {
            Ok(()) | Err(Interrupt::Cancelled) => Ok(()),
            Err(Interrupt::Engine(e)) => Err(e),
            Err(Interrupt::Llm(e)) => Err(EngineError::Provider(e.to_string())),
        }
    }

    /// The working context becomes a hook's compacted one.
    fn take_compaction(&mut self, compaction: Compaction) -> Compacted {
        self.messages = std::sync::Arc::new(compaction.messages);
        compaction.done
    }

    /// Before a model request (compaction first, if the context crossed its threshold).
    /// `Some`: a hook ended the attempt.
    pub(crate) async fn before_request(&mut self) -> Result<Option<Ending>, Interrupt> {
        let hooks = self.hooks.clone();
        for h in hooks.iter() {
            let cx = self.hook_context();
            let action = h.before_request(&cx).await;
            self.settle(&cx)?;
            // The context shares the working context: let go of it before changing it.
            drop(cx);
            match action {
                HookAction::Continue | HookAction::RunReadOnly => {}
                HookAction::Deny(note) | HookAction::Note(note) | HookAction::Replace(note) => {
                    self.push_message(Message::user_text(note)).await?;
                }
                HookAction::Compact(compaction) => {
                    let done = self.take_compaction(*compaction);
                    self.emitter.emit(done.event(None)).await?;
                }
                HookAction::Stop(q) => return Ok(Some(hook_stop(h.name(), q))),
                HookAction::End(end) => return Ok(Some(end.ending)),
            }
        }
        Ok(None)
    }

    /// Compacts the working context now (`force`: through every stage, whatever the
    /// threshold): what changed, `None` if nothing did. The caller records the event.
    pub(crate) async fn compact(&mut self, force: bool) -> Result<Option<Compacted>, Interrupt> {
        let hooks = self.hooks.clone();
        let mut done = None;
        for h in hooks.iter() {
            let cx = self.hook_context();
            let action = h.compact(&cx, force).await;
            self.settle(&cx)?;
            drop(cx);
            if let HookAction::Compact(compaction) = action {
                done = Some(self.take_compaction(*compaction));
            }
        }
        Ok(done)
    }

    /// What compaction carried so far (an on-demand compaction's checkpoint stores it).
    pub(crate) fn carried(&self) -> Carry {
        self.hook_list()
            .find_map(|h| h.carried())
            .unwrap_or_default()
    }

    /// Goes on from a compaction checkpoint's carried state.
    pub(crate) fn carry_on(&self, carry: &Carry) {
        for h in self.hook_list() {
            h.carry_on(carry);
        }
    }

    /// Before a tool call: the first hook that refuses or stops decides; otherwise it runs
    /// with the access the hooks granted.
    pub(crate) async fn before_tool(&mut self, call: &ToolCall) -> Result<Dispatch, EngineError> {
        let hooks = self.hooks.clone();
        let mut access = CommandAccess::Write;
        // A person's yes to this call travels with it to its run, and only there: no list of
        // approved call ids outlives a call that ends before it runs (a cancel, an error) for
        // a later call with the same model-chosen id to take (red-team pass 10, R10-23).
        let mut approved = false;
        for h in hooks.iter() {
            let cx = self.hook_context();
            let action = h.before_tool(&cx, call).await;
            approved |= cx.take_person_approved();
            self.settled(&cx)?;
            let verdict = match action {
                HookAction::Continue
                | HookAction::Note(_)
                | HookAction::Replace(_)
                | HookAction::Compact(_) => None,
                HookAction::RunReadOnly => Some(Dispatch::Run(CommandAccess::ReadOnly, false)),
                HookAction::Deny(msg) => Some(Dispatch::Refuse(msg)),
                HookAction::Stop(q) => Some(Dispatch::Stop(
                    hook_stop(h.name(), q.clone()),
                    HOOK_STOPPED,
                    format!("not run: {q}"),
                )),
                HookAction::End(end) => Some(Dispatch::Stop(end.ending, end.why, end.message)),
            };
            match verdict {
                None => {}
                // A hook may only narrow the access (the phase's, then approval's lane).
                Some(Dispatch::Run(CommandAccess::ReadOnly, _)) => {
                    access = CommandAccess::ReadOnly;
                }
                Some(Dispatch::Run(CommandAccess::Write, _)) => {}
                Some(other) => return Ok(other),
            }
        }
        Ok(Dispatch::Run(access, approved))
    }

    /// A call the run answers itself (`advance_phase`, the skill tool), if a hook owns it.
    pub(crate) async fn hook_tool(
        &mut self,
        call: &ToolCall,
    ) -> Result<Option<Result<ToolOutput, ToolError>>, EngineError> {
        let hooks = self.hooks.clone();
        for h in hooks.iter() {
            let cx = self.hook_context();
            let answer = h.run_tool(&cx, call).await;
            self.settled(&cx)?;
            if let Some(result) = answer {
                return Ok(Some(result));
            }
        }
        Ok(None)
    }

    /// After a call's result: the hooks record it and may reword it or stop the attempt.
    pub(crate) async fn after_tool(&mut self, call: &ToolCall, out: &mut Outcome, stop: &mut Stop) {
        let hooks = self.hooks.clone();
        for h in hooks.iter() {
            let cx = self.hook_context();
            let view = ToolResultView {
                content: out.content.clone(),
                is_error: out.is_error,
                details: out.details.clone(),
                ran: out.ran_with.is_some(),
                refused: out.refused,
                agents_changed: out.agents_changed,
                fatal: out.fatal,
                read_only: out.ran_with == Some(CommandAccess::ReadOnly),
            };
            match h.after_tool(&cx, call, &view).await {
                HookAction::Continue | HookAction::RunReadOnly | HookAction::Compact(_) => {}
                HookAction::Deny(note) | HookAction::Note(note) => {
                    out.content = format!("{}\n\n{note}", out.content);
                }
                HookAction::Replace(content) => out.content = content,
                HookAction::Stop(q) => {
                    if stop.is_none() {
                        *stop = Some((hook_stop(h.name(), q), HOOK_STOPPED));
                    }
                }
                HookAction::End(end) => {
                    if stop.is_none() {
                        *stop = Some((end.ending, end.why));
                    }
                }
            }
        }
    }

    /// An allowed call is about to run with `access`: the hooks' last look (the turn's
    /// snapshot before its first write).
    pub(crate) async fn before_run(
        &mut self,
        call: &ToolCall,
        access: CommandAccess,
    ) -> Result<(), EngineError> {
        let hooks = self.hooks.clone();
        for h in hooks.iter() {
            let cx = self.hook_context();
            h.before_run(&cx, call, access).await;
            self.settled(&cx)?;
        }
        Ok(())
    }

    /// After a reply's results when the attempt goes on: notes for the model.
    pub(crate) async fn after_batch(&mut self) -> Result<Vec<String>, EngineError> {
        let hooks = self.hooks.clone();
        let mut notes = Vec::new();
        for h in hooks.iter() {
            let cx = self.hook_context();
            let action = h.after_batch(&cx).await;
            self.settled(&cx)?;
            if let HookAction::Note(note) | HookAction::Deny(note) | HookAction::Replace(note) =
                action
            {
                notes.push(note);
            }
        }
        Ok(notes)
    }

    /// The model answered without tool calls. `Some`: the attempt ends so; `None`: a hook
    /// sent the model a message, take another step.
    pub(crate) async fn on_finish(&mut self, text: &str) -> Result<Option<Ending>, Interrupt> {
        let hooks = self.hooks.clone();
        for h in hooks.iter() {
            let cx = self.hook_context();
            let action = h.on_finish(&cx, text).await;
            self.settled(&cx)?;
            drop(cx);
            let decision = match action {
                HookAction::Continue | HookAction::RunReadOnly | HookAction::Compact(_)
                    if self.ctx.cancel.is_cancelled() =>
                {
                    return Err(Interrupt::Cancelled);
                }
                HookAction::Continue | HookAction::RunReadOnly | HookAction::Compact(_) => {
                    Finish::Undecided
                }
                HookAction::Deny(note) | HookAction::Note(note) | HookAction::Replace(note) => {
                    self.push_message(Message::user_text(note)).await?;
                    Finish::Again
                }
                HookAction::Stop(q) => Finish::End(hook_stop(h.name(), q)),
                HookAction::End(end) => Finish::End(end.ending),
            };
            match decision {
                Finish::Undecided => {}
                Finish::Again => return Ok(None),
                Finish::End(ending) => return Ok(Some(ending)),
            }
        }
        Ok(Some(Ending::Completed(text.to_string())))
    }

    /// Whether every hook lets the recovery tier retry a failed attempt.
    pub(crate) fn recovery_allowed(&self) -> bool {
        self.hook_list().all(|h| h.allows_recovery())
    }

    /// The chain gave up: the hooks' advice for the error (a phase's rollback outcome).
    pub(crate) async fn failure_hints(&mut self) -> Result<Vec<String>, EngineError> {
        let hooks = self.hooks.clone();
        let mut hints = Vec::new();
        for h in hooks.iter() {
            let cx = self.hook_context();
            hints.extend(h.failed(&cx).await);
            self.settled(&cx)?;
        }
        Ok(hints)
    }

    /// A recovery attempt starts.
    pub(crate) fn recovery_started(&mut self) {
        let cx = self.hook_context();
        for h in self.hook_list() {
            h.recovery(&cx);
        }
    }

    /// A failed model request as the hooks explain it (the correction round it interrupted),
    /// if one does.
    pub(crate) fn explained_failure(
        &self,
        failure: &crate::ending::Failure,
    ) -> Option<crate::ending::Failure> {
        let cx = self.hook_context();
        self.hook_list().find_map(|h| h.model_failed(&cx, failure))
    }

    /// A call that cannot run as sent: the first hook that ends the attempt decides (the
    /// loop guard counts such calls).
    pub(crate) fn unresolved_call(&self, call: &ToolCall) -> Option<HookEnd> {
        let cx = self.hook_context();
        self.hook_list()
            .find_map(|h| match h.unresolved_call(&cx, call) {
                HookAction::End(end) => Some(end),
                _ => None,
            })
    }

    /// Out of steps: the hooks' evidence that the run was still progressing.
    pub(crate) fn progress_evidence(&self) -> Vec<String> {
        let cx = self.hook_context();
        self.hook_list()
            .filter_map(|h| h.progressing(&cx))
            .collect()
    }

    /// A model reply arrived (`empty`: no answer). `Err`: a hook ended the attempt; `Ok`: what
    /// the model is told about an empty reply.
    pub(crate) fn reply_arrived(&self, empty: bool) -> Result<String, Ending> {
        let cx = self.hook_context();
        let mut notes = Vec::new();
        for h in self.hook_list() {
            match h.on_reply(&cx, empty) {
                HookAction::End(end) => return Err(end.ending),
                HookAction::Note(note) | HookAction::Deny(note) | HookAction::Replace(note)
                    if empty =>
                {
                    notes.push(note)
                }
                _ => {}
            }
        }
        Ok(notes.join("\n\n"))
    }

    /// Whether a hook says the run changed nothing its task asked to change.
    pub(crate) fn changed_nothing(&self) -> bool {
        self.hook_list().any(|h| h.changed_nothing())
    }

    /// A new session's first message: the hooks' blocks for its context, in order.
    pub(crate) fn first_message_blocks(&self, task: &str) -> Vec<String> {
        self.hook_list()
            .flat_map(|h| h.first_message(task))
            .collect()
    }

    /// A follow-up message: the hooks' blocks to append to it.
    pub(crate) fn user_message_blocks(&self, message: &str) -> Vec<String> {
        self.hook_list()
            .flat_map(|h| h.user_message(message))
            .collect()
    }

    /// A stored session resumes with the current working context.
    pub(crate) fn hooks_resumed(&self, events: &[keel_protocol::Event]) {
        for h in self.hook_list() {
            h.resumed(&self.messages, events);
        }
    }

    /// The plan_exec phase the run is in (`None` in react mode).
    pub(crate) fn phase(&self) -> Option<keel_phase::Phase> {
        self.hook_list().find_map(|h| h.phase())
    }

    fn hook_list(&self) -> impl Iterator<Item = &std::sync::Arc<dyn Hook>> {
        self.hooks.iter()
    }
}
