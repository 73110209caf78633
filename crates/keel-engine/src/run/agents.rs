//! The run's side of its subagents: a subagent call goes to the run's pool
//! (`crate::agents::AgentPool`) with what the run lends it; what the children did comes back
//! into the run's usage and files.

use keel_protocol::ToolCall;
use keel_tools::{ToolEffect, ToolError, ToolOutput};

use super::Run;
use crate::agents::Parent;

impl Run<'_> {
    /// Answers `agent_open`, `agent_eval` and `agent_close`, and rolls the usage of child
    /// turns that ended up into the run's; `true` with it when a child changed the workspace.
    pub(crate) async fn agent_call(
        &mut self,
        call: &ToolCall,
    ) -> (Result<ToolOutput, ToolError>, bool) {
        let mut parent = Parent {
            engine: self.engine,
            emitter: self.emitter,
            cancel: &self.ctx.cancel,
            read_only: self.read_only_parent(),
            results: &mut self.stored_results,
        };
        let (out, work) = self.agents.call(call, &mut parent).await;
        self.usage.add(&work.usage);
        if !work.files.is_empty() {
            std::sync::Arc::make_mut(&mut self.files).extend(work.files);
        }
        (out, work.changed)
    }

    /// Whether a child must be read-only: its parent is, or the parent's plan_exec phase
    /// does not allow writing files.
    fn read_only_parent(&self) -> bool {
        let scoped = self
            .engine
            .agent_scope
            .as_ref()
            .is_some_and(|s| s.read_only);
        let phase = match (&self.engine.phase_policy, self.phase()) {
            (Some(policy), Some(phase)) => {
                !policy.allows_tool(phase, "edit_file", ToolEffect::WritesFiles)
            }
            _ => false,
        };
        scoped || phase
    }
}
