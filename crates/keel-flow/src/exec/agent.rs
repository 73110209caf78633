//! Agent leaves: the [`AgentRunner`] seam, and the runner that starts a keel-engine session
//! through the runtime's [`SessionBuilder`] (the same configuration, provider router, tools
//! and guardrails as `keel run`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use keel_config::ApprovalPolicy;
use keel_engine::RunOptions;
use keel_engine::approval::ApprovalGate;
use keel_engine::runtime::{SessionBuilder, SessionOverrides};
use keel_protocol::{SessionStatus, Usage};
use tokio_util::sync::CancellationToken;

use crate::ir::AgentSpec;

/// Events of an agent session kept in the trace (model requests, responses, tool calls).
const TRACE_EVENTS: usize = 400;

/// One agent leaf to run.
#[derive(Debug, Clone)]
pub struct AgentRequest {
    pub node: String,
    pub spec: AgentSpec,
    /// The rendered task (with a reviewer's feedback appended when looping back).
    pub task: String,
    pub workspace: PathBuf,
    pub max_steps: Option<u32>,
    pub timeout: Duration,
    pub cancel: CancellationToken,
}

/// What an agent leaf produced.
#[derive(Debug, Clone, Default)]
pub struct AgentResult {
    pub completed: bool,
    pub text: String,
    pub error: Option<String>,
    pub session_id: Option<String>,
    pub usage: Usage,
    pub events: Vec<serde_json::Value>,
}

/// Runs agent leaves. The executor calls it for `agent` and `review` nodes.
pub trait AgentRunner: Send + Sync {
    fn run(&self, req: AgentRequest) -> BoxFuture<'_, AgentResult>;
}

/// Runs each leaf as a keel-engine session.
#[derive(Debug, Clone)]
pub struct EngineAgents {
    pub builder: SessionBuilder,
    /// Overrides under every node's own (the CLI's provider flags).
    pub defaults: SessionOverrides,
    /// The approval policy of every node's session (`--approval`); `None`: `[approval] policy`
    /// when the configuration sets it, else `never` — exactly as `keel run`. Nobody answers a
    /// flow's sessions, so a call the policy would ask about is denied (the model is told).
    pub approval: Option<ApprovalPolicy>,
}

impl EngineAgents {
    /// The approval policy a node's session of `config` runs under.
    pub fn policy(&self, config: &keel_engine::Config) -> ApprovalPolicy {
        match (self.approval, config.approval_policy_set) {
            (Some(p), _) => p,
            (None, true) => config.approval.policy,
            (None, false) => ApprovalPolicy::Never,
        }
    }
}

impl AgentRunner for EngineAgents {
    fn run(&self, req: AgentRequest) -> BoxFuture<'_, AgentResult> {
        Box::pin(async move {
            let mut overrides = self.defaults.clone();
            if req.spec.provider.is_some() {
                overrides.provider.clone_from(&req.spec.provider);
                overrides.script = None;
            }
            if req.spec.model.is_some() {
                overrides.model.clone_from(&req.spec.model);
            }
            if req.spec.script.is_some() {
                overrides.script.clone_from(&req.spec.script);
                if req.spec.provider.is_none() {
                    overrides.provider = None;
                }
            }
            if req.max_steps.is_some() {
                overrides.max_iterations = req.max_steps;
            }
            let mut gate = None;
            let engine = match self
                .builder
                .config(&req.workspace, &overrides)
                .and_then(|mut c| {
                    // The flow's own test and verify nodes are its gates; the session's final
                    // verification (say `cargo test` of the whole repository in a branch's copy)
                    // runs only when the node asks for it.
                    if !req.spec.verify {
                        c.verify.enabled = false;
                    }
                    gate = Some(Arc::new(ApprovalGate::from_config(
                        &c,
                        Some(self.policy(&c)),
                        false,
                    )));
                    self.builder.engine_with(c, &req.workspace)
                }) {
                Ok(e) => e,
                Err(e) => {
                    return AgentResult {
                        error: Some(format!("cannot start the agent: {e}")),
                        ..AgentResult::default()
                    };
                }
            };
            let task = match &req.spec.role {
                Some(role) => format!("You are acting as the {role}.\n\n{}", req.task),
                None => req.task.clone(),
            };
            let options = RunOptions {
                cancel: req.cancel.clone(),
                approvals: gate,
                // The flow runs its nodes (some at once) in its workspace and its branches'
                // copies: the executor orders them, not the workspace lease.
                shared_workspace: true,
                ..RunOptions::default()
            };
            let outcome = match engine.run(&task, options).await {
                Ok(o) => o,
                Err(e) => {
                    return AgentResult {
                        error: Some(format!("the agent session failed: {e}")),
                        ..AgentResult::default()
                    };
                }
            };
            let events = match engine.store().events(&outcome.session_id, 0).await {
                Ok(ev) => ev
                    .iter()
                    .filter(|e| {
                        let t = e.kind.type_name();
                        t.starts_with("model_") || t.starts_with("tool_") || t == "llm_request"
                    })
                    .take(TRACE_EVENTS)
                    .filter_map(|e| serde_json::to_value(e).ok())
                    .collect(),
                Err(_) => Vec::new(),
            };
            let completed = outcome.status == SessionStatus::Completed;
            AgentResult {
                completed,
                error: (!completed).then(|| {
                    outcome
                        .error
                        .as_ref()
                        .map(|e| e.message.clone())
                        .unwrap_or_else(|| format!("the agent session ended {:?}", outcome.status))
                }),
                text: outcome.final_text,
                session_id: Some(outcome.session_id),
                usage: outcome.usage,
                events,
            }
        })
    }
}
