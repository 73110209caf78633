//! Skills as a hook: the `skill` tool (loads a skill's instructions), the loaded skill's tool
//! restriction, skills a glob activates for the paths a call touched, the first message's
//! `always` skills and listing, and skills a message names with `$name` (`keel_knowledge::skills`).

use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_protocol::{Message, ToolCall};
use keel_tools::{ToolError, ToolOutput};

use super::lock;
use crate::hooks::{Hook, HookAction, HookContext, ToolResultView};
use keel_knowledge::skills::{SKILL_TOOL, SkillSet, SkillState, annotate};

pub(crate) struct SkillsHook {
    state: Mutex<SkillState>,
}

impl SkillsHook {
    pub(crate) fn new(skills: Arc<SkillSet>, workspace: &Path) -> Self {
        Self {
            state: Mutex::new(SkillState::new(skills, workspace)),
        }
    }
}

impl Hook for SkillsHook {
    fn name(&self) -> &str {
        "skills"
    }

    fn before_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, HookAction> {
        let verdict = match lock(&self.state).check(&call.name) {
            Some(why) => HookAction::Deny(why),
            None => HookAction::Continue,
        };
        Box::pin(async move { verdict })
    }

    fn run_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Option<Result<ToolOutput, ToolError>>> {
        let answer = (call.name == SKILL_TOOL).then(|| lock(&self.state).call(&call.arguments));
        Box::pin(async move { answer })
    }

    fn after_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
        result: &'a ToolResultView,
    ) -> BoxFuture<'a, HookAction> {
        let action = if result.is_error {
            HookAction::Continue
        } else {
            HookAction::Replace(annotate(
                &mut lock(&self.state),
                call,
                result.content.clone(),
            ))
        };
        Box::pin(async move { action })
    }

    fn first_message(&self, task: &str) -> Vec<String> {
        lock(&self.state).first_message(task)
    }

    fn user_message(&self, message: &str) -> Vec<String> {
        lock(&self.state).mentioned(message)
    }

    fn resumed(&self, messages: &[Message], _events: &[keel_protocol::Event]) {
        lock(&self.state).mark_loaded(messages);
    }
}
