//! A subagent's role scope as a hook: a call outside its role's tools (an agent tool past
//! `agents.max_depth` says so), a write in a read-only role, or a command that is not
//! read-only there is refused, naming the role (`crate::agents`).

use std::sync::Arc;

use futures::future::BoxFuture;
use keel_protocol::ToolCall;
use keel_tools::{ToolEffect, ToolRegistry};

use crate::agents::{AgentScope, is_agent_tool};
use crate::hooks::{Hook, HookAction, HookContext};
use keel_phase::CommandJudge;

pub(crate) struct ScopeHook {
    /// `None`: not a subagent (nothing is refused).
    scope: Option<Arc<AgentScope>>,
    max_depth: u32,
    tools: Arc<ToolRegistry>,
    judge: Arc<dyn CommandJudge>,
}

impl ScopeHook {
    pub(crate) fn new(
        scope: Option<Arc<AgentScope>>,
        max_depth: u32,
        tools: Arc<ToolRegistry>,
        judge: Arc<dyn CommandJudge>,
    ) -> Self {
        Self {
            scope,
            max_depth,
            tools,
            judge,
        }
    }

    /// Why a child may not make `call`, if it may not: a tool outside its role (named), or a
    /// command that is not read-only in a read-only role.
    fn refusal(&self, call: &ToolCall) -> Option<String> {
        let scope = self.scope.as_ref()?;
        if !scope.tools.contains(&call.name) {
            if is_agent_tool(&call.name) {
                return Some(format!(
                    "refused: subagent {} (role `{}`) cannot open subagents of its own: agents.max_depth = {} allows {} level(s) below the session. Do the work yourself or report what is needed.",
                    scope.agent_id, scope.role, self.max_depth, self.max_depth
                ));
            }
            return Some(format!(
                "refused: the `{}` role of subagent {} has no `{}` tool; its tools are: {}. Report what should be done in your final answer instead.",
                scope.role,
                scope.agent_id,
                call.name,
                scope.tools.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        let effect = self.tools.get(&call.name).map(|t| t.effect());
        if scope.read_only {
            match effect {
                Some(ToolEffect::WritesFiles) => {
                    return Some(format!(
                        "refused: the `{}` role is read-only; `{}` writes files",
                        scope.role, call.name
                    ));
                }
                Some(ToolEffect::RunsCommands) => {
                    let command = call.arguments.get("command").and_then(|c| c.as_str());
                    let why = match command.map(|c| self.judge.read_only(c)) {
                        Some(Ok(())) => return None,
                        Some(Err(why)) => why,
                        None => format!("`{}` is not a read-only command", call.name),
                    };
                    return Some(format!(
                        "refused: the `{}` role runs only read-only commands, and this one is not ({why})",
                        scope.role
                    ));
                }
                _ => {}
            }
        }
        None
    }
}

impl Hook for ScopeHook {
    fn name(&self) -> &str {
        "scope"
    }

    fn before_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, HookAction> {
        let action = match self.refusal(call) {
            Some(why) => HookAction::Deny(why),
            None => HookAction::Continue,
        };
        Box::pin(async move { action })
    }
}
