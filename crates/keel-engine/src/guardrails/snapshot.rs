//! Snapshots as a hook: before the first call of a turn that may write (a file tool, an
//! external tool, or a command not confined to the read-only sandbox), the workspace is
//! recorded as the previous turn's end state (`keel undo` restores it). A failure is reported
//! once (`snapshot_failed`) and turns snapshots off for the rest of the run; it never stops
//! the run. The snapshot store itself is the `keel-snapshot` crate.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_phase::CommandAccess;
use keel_protocol::{EventKind, ToolCall};
use keel_snapshot::{LazySnapshots, SnapshotInfo};
use keel_tools::{ToolEffect, ToolRegistry};

use super::lock;
use crate::hooks::{Hook, HookContext};

#[derive(Default)]
struct State {
    /// The iteration whose first write was already preceded by a snapshot.
    turn: Option<u32>,
    /// The session's latest snapshot in this run (the next one's parent).
    last: Option<SnapshotInfo>,
    /// A snapshot failed: no more attempts in this run.
    failed: bool,
}

/// The turn's snapshot before its first write, for one run.
pub(crate) struct SnapshotHook {
    /// `None`: `[snapshots] enabled = false`.
    store: Option<LazySnapshots>,
    tools: Arc<ToolRegistry>,
    /// `[shell] sandbox`: read-only commands are really confined (when the kernel can).
    sandbox: bool,
    state: Mutex<State>,
}

impl SnapshotHook {
    pub(crate) fn new(
        store: Option<LazySnapshots>,
        tools: Arc<ToolRegistry>,
        sandbox: bool,
    ) -> Self {
        Self {
            store,
            tools,
            sandbox,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether `call` may change the workspace.
    fn may_write(&self, call: &ToolCall, access: CommandAccess) -> bool {
        match self.tools.get(&call.name).map(|t| t.effect()) {
            // An external tool may write anything (an MCP filesystem server does).
            Some(ToolEffect::WritesFiles | ToolEffect::Unknown) => true,
            Some(ToolEffect::RunsCommands) => {
                // A read-only command needs no snapshot only when the kernel really confines it.
                let confined = self.sandbox && crate::phase::read_only_sandbox_enforced();
                access == CommandAccess::Write || !confined
            }
            _ => false,
        }
    }

    async fn take(&self, cx: &HookContext, store: LazySnapshots) {
        // Snapshot N holds the workspace at the end of turn N: before this turn's writes.
        let turn = cx.iteration.saturating_sub(1);
        let session = cx.session_id.clone();
        let parent = lock(&self.state).last.clone();
        let taken = tokio::task::spawn_blocking(move || {
            store
                .get()?
                .take(&session, turn, parent.as_ref())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(format!("the snapshot task failed: {e}")));
        let event = match taken {
            Ok(mut info) => {
                let commit = info.commit.clone();
                let left_out = std::mem::take(&mut info.left_out);
                lock(&self.state).last = Some(info);
                EventKind::Snapshot {
                    turn,
                    commit,
                    left_out,
                }
            }
            Err(message) => {
                lock(&self.state).failed = true;
                EventKind::SnapshotFailed { turn, message }
            }
        };
        if let Err(e) = cx.events.emit(event).await {
            cx.fail(e);
        }
    }
}

impl Hook for SnapshotHook {
    fn name(&self) -> &str {
        "snapshots"
    }

    fn before_run<'a>(
        &'a self,
        cx: &'a HookContext,
        call: &'a ToolCall,
        access: CommandAccess,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(store) = self.store.clone() else {
                return;
            };
            {
                let mut state = lock(&self.state);
                if state.failed || state.turn == Some(cx.iteration) || !self.may_write(call, access)
                {
                    return;
                }
                state.turn = Some(cx.iteration);
            }
            self.take(cx, store).await;
        })
    }
}
