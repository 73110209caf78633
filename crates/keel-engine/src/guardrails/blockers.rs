//! Blockers and the finish checks as a hook: the model's questions for the user (`ask_user`'s
//! blocker request, answered interactively when the run has a [`UserPrompt`], else a
//! blocker), a final answer that asks back (`crate::blockers::ambiguity_blocker`), and
//! answers that are none (`crate::finish`: empty replies, a change task that changed nothing).
//!
//! [`UserPrompt`]: crate::blockers::UserPrompt

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_protocol::{ContentBlock, Message, ToolCall};
use keel_tools::{ToolEffect, ToolRegistry};

use super::lock;
use crate::blockers::{
    BlockerDraft, BlockerSource, SharedUserPrompt, ambiguity_blocker, requested_question,
};
use crate::finish::{FinishCheck, Verdict};
use crate::hooks::{Hook, HookAction, HookContext, HookEnd, ToolResultView};

/// What calls after a question for the user are told.
const PAUSED: &str = "the run paused for the user's answer";

#[derive(Default)]
struct State {
    finish: FinishCheck,
    /// The working context holds a tool call (this run's or an earlier one's).
    called: bool,
}

pub(crate) struct BlockersHook {
    tools: Arc<ToolRegistry>,
    /// Answers `ask_user` interactively when set.
    prompt: Option<SharedUserPrompt>,
    state: Mutex<State>,
}

impl BlockersHook {
    pub(crate) fn new(tools: Arc<ToolRegistry>, prompt: Option<SharedUserPrompt>) -> Self {
        Self {
            tools,
            prompt,
            state: Mutex::new(State::default()),
        }
    }

    fn verdict(verdict: Verdict) -> HookAction {
        match verdict {
            Verdict::Accept => HookAction::Continue,
            Verdict::Nudge(note) => HookAction::Note(note),
            Verdict::Fail(failure) => HookAction::End(HookEnd::failed(failure, "")),
        }
    }

    /// A question for the user (`ask_user`'s blocker request) is answered interactively or
    /// becomes a blocker.
    async fn ask_user(&self, call: &ToolCall, result: &ToolResultView) -> HookAction {
        let is_control = self
            .tools
            .get(&call.name)
            .is_some_and(|t| t.effect() == ToolEffect::Control);
        let Some((question, context)) = requested_question(&result.details).filter(|_| is_control)
        else {
            return HookAction::Continue;
        };
        if let Some(prompt) = &self.prompt
            && let Some(answer) = prompt.ask(&question, context.as_deref()).await
        {
            return HookAction::Replace(format!("The user answered: {answer}"));
        }
        HookAction::End(HookEnd::blocked(
            BlockerDraft {
                question,
                source: BlockerSource::Model,
                evidence: context.into_iter().collect(),
            },
            PAUSED,
        ))
    }
}

impl Hook for BlockersHook {
    fn name(&self) -> &str {
        "blockers"
    }

    fn on_reply(&self, _cx: &HookContext, empty: bool) -> HookAction {
        let mut state = lock(&self.state);
        if empty {
            Self::verdict(state.finish.empty_reply())
        } else {
            state.finish.reply();
            HookAction::Continue
        }
    }

    fn after_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
        result: &'a ToolResultView,
    ) -> BoxFuture<'a, HookAction> {
        {
            let mut state = lock(&self.state);
            state.called = true;
            if result.agents_changed {
                // A subagent's write or command is the run's change.
                state.finish.note_change();
            }
            if !result.is_error {
                // What counts as a change for a change task's finish (`finish`).
                let effect = self.tools.get(&call.name).map(|t| t.effect());
                state.finish.note_call(effect, call);
            }
        }
        Box::pin(async move {
            if result.is_error {
                HookAction::Continue
            } else {
                self.ask_user(call, result).await
            }
        })
    }

    /// A question back is a blocker; an answer that changed nothing for a task that asked
    /// for a change is not a completion (`finish`).
    fn on_finish<'a>(&'a self, _cx: &'a HookContext, text: &'a str) -> BoxFuture<'a, HookAction> {
        let action = match ambiguity_blocker(text) {
            Some(draft) => HookAction::End(HookEnd::blocked(draft, PAUSED)),
            None => {
                let mut state = lock(&self.state);
                let called = state.called;
                Self::verdict(state.finish.finish(called))
            }
        };
        Box::pin(async move { action })
    }

    fn first_message(&self, task: &str) -> Vec<String> {
        lock(&self.state).finish = FinishCheck::for_task(task);
        Vec::new()
    }

    fn user_message(&self, message: &str) -> Vec<String> {
        lock(&self.state).finish = FinishCheck::for_task(message);
        Vec::new()
    }

    fn resumed(&self, messages: &[Message], _events: &[keel_protocol::Event]) {
        lock(&self.state).called = messages.iter().any(|m| {
            m.content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolUse { .. }))
        });
    }

    fn changed_nothing(&self) -> bool {
        lock(&self.state).finish.changed_nothing()
    }
}
