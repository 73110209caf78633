//! How the loop asks its hooks: each point walks the engine's hooks in order.

use keel_protocol::{Message, ToolCall};
use keel_tools::{ToolError, ToolOutput};

use super::builtin::{Dispatch, Finish, Outcome, Stop};
use super::{HookAction, HookContext, Slot, ToolResultView};
use crate::EngineError;
use crate::blockers::{BlockerDraft, BlockerSource};
use crate::phase::CommandAccess;
use crate::run::{Ending, Interrupt, Run};

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
            phase: self.phase.as_ref().map(|s| s.phase.as_str().to_string()),
        }
    }

    /// Before a model request. `Some`: a hook ended the attempt.
    pub(crate) async fn before_request(&mut self) -> Result<Option<Ending>, Interrupt> {
        let engine = self.engine;
        for slot in &engine.hooks {
            match slot {
                Slot::Builtin(b) => b.before_request(self).await?,
                Slot::Custom(h) => {
                    let cx = self.hook_context();
                    match h.before_request(&cx).await {
                        HookAction::Continue => {}
                        HookAction::Deny(note) | HookAction::Note(note) => {
                            self.push_message(Message::user_text(note)).await?;
                        }
                        HookAction::Stop(q) => return Ok(Some(hook_stop(h.name(), q))),
                    }
                }
            }
        }
        Ok(None)
    }

    /// Before a tool call: the first hook that refuses or stops decides; otherwise it runs
    /// with the access the hooks granted.
    pub(crate) async fn before_tool(&mut self, call: &ToolCall) -> Result<Dispatch, EngineError> {
        let engine = self.engine;
        let mut access = CommandAccess::Write;
        for slot in &engine.hooks {
            let verdict = match slot {
                Slot::Builtin(b) => b.before_tool(self, call).await?,
                Slot::Custom(h) => {
                    let cx = self.hook_context();
                    match h.before_tool(&cx, call).await {
                        HookAction::Continue | HookAction::Note(_) => None,
                        HookAction::Deny(msg) => Some(Dispatch::Refuse(msg)),
                        HookAction::Stop(q) => Some(Dispatch::Stop(
                            hook_stop(h.name(), q.clone()),
                            HOOK_STOPPED,
                            format!("not run: {q}"),
                        )),
                    }
                }
            };
            match verdict {
                None => {}
                Some(Dispatch::Run(granted)) => access = granted,
                Some(other) => return Ok(other),
            }
        }
        Ok(Dispatch::Run(access))
    }

    /// A call the run answers itself (`advance_phase`, the skill tool), if a hook owns it.
    pub(crate) async fn hook_tool(
        &mut self,
        call: &ToolCall,
    ) -> Result<Option<Result<ToolOutput, ToolError>>, EngineError> {
        let engine = self.engine;
        for slot in &engine.hooks {
            if let Slot::Builtin(b) = slot
                && let Some(result) = b.run_tool(self, call).await?
            {
                return Ok(Some(result));
            }
        }
        Ok(None)
    }

    /// After a call's result: the hooks record it and may reword it or stop the attempt.
    pub(crate) async fn after_tool(&mut self, call: &ToolCall, out: &mut Outcome, stop: &mut Stop) {
        let engine = self.engine;
        for slot in &engine.hooks {
            match slot {
                Slot::Builtin(b) => b.after_tool(self, call, out, stop).await,
                Slot::Custom(h) => {
                    let cx = self.hook_context();
                    let view = ToolResultView {
                        content: out.content.clone(),
                        is_error: out.is_error,
                        details: out.details.clone(),
                    };
                    match h.after_tool(&cx, call, &view).await {
                        HookAction::Continue => {}
                        HookAction::Deny(note) | HookAction::Note(note) => {
                            out.content = format!("{}\n\n{note}", out.content);
                        }
                        HookAction::Stop(q) => {
                            if stop.is_none() {
                                *stop = Some((hook_stop(h.name(), q), HOOK_STOPPED));
                            }
                        }
                    }
                }
            }
        }
    }

    /// After a reply's results when the attempt goes on: notes for the model.
    pub(crate) async fn after_batch(&mut self) -> Result<Vec<String>, EngineError> {
        let engine = self.engine;
        let mut notes = Vec::new();
        for slot in &engine.hooks {
            if let Slot::Builtin(b) = slot
                && let Some(note) = b.after_batch(self).await?
            {
                notes.push(note);
            }
        }
        Ok(notes)
    }

    /// The model answered without tool calls. `Some`: the attempt ends so; `None`: a hook
    /// sent the model a message, take another step.
    pub(crate) async fn on_finish(&mut self, text: &str) -> Result<Option<Ending>, Interrupt> {
        let engine = self.engine;
        for slot in &engine.hooks {
            let decision = match slot {
                Slot::Builtin(b) => b.on_finish(self, text).await?,
                Slot::Custom(h) => {
                    let cx = self.hook_context();
                    match h.on_finish(&cx, text).await {
                        HookAction::Continue => Finish::Undecided,
                        HookAction::Deny(note) | HookAction::Note(note) => {
                            self.push_message(Message::user_text(note)).await?;
                            Finish::Again
                        }
                        HookAction::Stop(q) => Finish::End(hook_stop(h.name(), q)),
                    }
                }
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
        self.engine.hooks.iter().all(|slot| match slot {
            Slot::Builtin(b) => b.allows_recovery(self),
            Slot::Custom(_) => true,
        })
    }

    /// The chain gave up: the hooks' advice for the error (a phase's rollback outcome).
    pub(crate) async fn failure_hints(&mut self) -> Result<Vec<String>, EngineError> {
        let engine = self.engine;
        let mut hints = Vec::new();
        for slot in &engine.hooks {
            if let Slot::Builtin(b) = slot {
                hints.extend(b.on_failure(self).await?);
            }
        }
        Ok(hints)
    }

    /// A recovery attempt starts.
    pub(crate) fn recovery_started(&mut self) {
        let engine = self.engine;
        for slot in &engine.hooks {
            if let Slot::Builtin(b) = slot {
                b.on_recovery(self);
            }
        }
    }
}
