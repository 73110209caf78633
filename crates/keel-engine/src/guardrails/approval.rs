//! Approval as a hook: before a call runs, the session's [`ApprovalGate`] judges it from
//! `[approval]` and the command-safety class — allowed, allowed in the read-only lane (its
//! commands confined to the read-only sandbox), asked (the run waits for a person) or denied
//! (the model reads why). After a lane call that tried to write, its result says so (and the
//! same call asks next time). It comes last: a call another hook refuses is never put to a
//! person.

use std::sync::Arc;

use futures::future::BoxFuture;
use keel_phase::CommandAccess;
use keel_protocol::ToolCall;
use keel_tools::{ToolRegistry, Workspace};
use tokio_util::sync::CancellationToken;

use crate::hooks::{Hook, HookAction, HookContext, ToolResultView};
use keel_approval::ApprovalGate;

/// The session's approval gate, asked for one run's calls.
pub(crate) struct ApprovalHook {
    /// `None`: nobody asked to approve anything (every call the sandbox allows runs).
    gate: Option<Arc<ApprovalGate>>,
    tools: Arc<ToolRegistry>,
    workspace: Workspace,
    /// Cancelling the run stops a wait for an answer (the call is denied).
    cancel: CancellationToken,
}

impl ApprovalHook {
    pub(crate) fn new(
        gate: Option<Arc<ApprovalGate>>,
        tools: Arc<ToolRegistry>,
        workspace: Workspace,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            gate,
            tools,
            workspace,
            cancel,
        }
    }
}

/// The session's events as the gate emits them, noting whether it recorded a person's "yes".
struct Observed<'a> {
    inner: &'a crate::Emitter,
    approved: std::sync::atomic::AtomicBool,
}

impl keel_approval::Events for Observed<'_> {
    type Error = crate::EngineError;

    async fn emit(&self, kind: keel_protocol::EventKind) -> Result<(), crate::EngineError> {
        if matches!(
            kind,
            keel_protocol::EventKind::ApprovalResolved { approved: true, .. }
        ) {
            self.approved
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        keel_approval::Events::emit(self.inner, kind).await
    }
}

impl Hook for ApprovalHook {
    fn name(&self) -> &str {
        "approval"
    }

    fn before_tool<'a>(
        &'a self,
        cx: &'a HookContext,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, HookAction> {
        Box::pin(async move {
            let Some(gate) = &self.gate else {
                return HookAction::Continue;
            };
            let events = Observed {
                inner: &cx.events,
                approved: std::sync::atomic::AtomicBool::new(false),
            };
            let verdict = gate
                .check(call, &self.tools, &self.workspace, &events, &self.cancel)
                .await;
            // A person said yes to this very call: its command's installs into a workspace
            // virtual environment are approved effects (red-team pass 6, R6-2).
            if matches!(verdict, Ok(Ok(_)))
                && events.approved.load(std::sync::atomic::Ordering::Relaxed)
            {
                cx.person_approved();
            }
            match verdict {
                Ok(Ok(CommandAccess::Write)) => HookAction::Continue,
                Ok(Ok(CommandAccess::ReadOnly)) => HookAction::RunReadOnly,
                Ok(Err(refusal)) => HookAction::Deny(refusal),
                // The store could not record the request or the answer.
                Err(e) => {
                    cx.fail(e);
                    HookAction::Continue
                }
            }
        })
    }

    fn after_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
        result: &'a ToolResultView,
    ) -> BoxFuture<'a, HookAction> {
        let note = self
            .gate
            .as_ref()
            .and_then(|gate| gate.finished(&call.id, &result.content));
        Box::pin(async move {
            match note {
                Some(note) => HookAction::Replace(format!("{}\n{note}", result.content)),
                None => HookAction::Continue,
            }
        })
    }
}
