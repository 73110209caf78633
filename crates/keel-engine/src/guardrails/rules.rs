//! Nested instruction files and glob rules as a hook: a successful call that touched paths
//! under a directory with its own `AGENTS.md` (or matching a rule's globs) brings those
//! instructions into its result, once per run (`keel_knowledge::rules::TailRules`).

use std::path::Path;
use std::sync::Mutex;

use futures::future::BoxFuture;
use keel_protocol::{Message, ToolCall};

use super::lock;
use crate::hooks::{Hook, HookAction, HookContext, ToolResultView};
use keel_knowledge::rules::{TailRules, injected_in};

pub(crate) struct RulesHook {
    tail: Mutex<TailRules>,
}

impl RulesHook {
    pub(crate) fn new(workspace: &Path) -> Self {
        Self {
            tail: Mutex::new(TailRules::new(workspace)),
        }
    }
}

impl Hook for RulesHook {
    fn name(&self) -> &str {
        "rules"
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
            HookAction::Replace(lock(&self.tail).annotate(call, result.content.clone()))
        };
        Box::pin(async move { action })
    }

    fn resumed(&self, messages: &[Message], _events: &[keel_protocol::Event]) {
        lock(&self.tail).mark_injected(injected_in(messages));
    }
}
