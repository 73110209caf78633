//! Snapshots inside the loop: before the first call of a turn that may write (a file tool, or
//! a command not confined to the read-only sandbox), the workspace is recorded as the previous
//! turn's end state.

use keel_protocol::{EventKind, ToolCall};
use keel_tools::ToolEffect;

use crate::EngineError;
use crate::run::Run;
use keel_phase::CommandAccess;

impl Run<'_> {
    /// Whether `call` may change the workspace.
    fn may_write(&self, call: &ToolCall, access: CommandAccess) -> bool {
        match self.engine.tools.get(&call.name).map(|t| t.effect()) {
            // An external tool may write anything (an MCP filesystem server does).
            Some(ToolEffect::WritesFiles | ToolEffect::Unknown) => true,
            Some(ToolEffect::RunsCommands) => {
                // A read-only command needs no snapshot only when the kernel really confines it.
                let confined =
                    self.engine.config.shell.sandbox && crate::phase::read_only_sandbox_enforced();
                access == CommandAccess::Write || !confined
            }
            _ => false,
        }
    }

    /// Takes the turn's snapshot before its first call that may write. A failure is reported
    /// once (`snapshot_failed`) and turns snapshots off for the rest of the run; it never
    /// stops the run.
    pub(crate) async fn snapshot_before_write(
        &mut self,
        call: &ToolCall,
        access: CommandAccess,
    ) -> Result<(), EngineError> {
        if self.snapshots_failed
            || self.snapshot_turn == Some(self.iterations)
            || !self.may_write(call, access)
        {
            return Ok(());
        }
        let Some(store) = self.engine.snapshots.clone() else {
            return Ok(());
        };
        self.snapshot_turn = Some(self.iterations);
        // Snapshot N holds the workspace at the end of turn N: before this turn's writes.
        let turn = self.iterations.saturating_sub(1);
        let session = self.emitter.session_id().to_string();
        let parent = self.last_snapshot.clone();
        let taken = tokio::task::spawn_blocking(move || {
            store
                .get()?
                .take(&session, turn, parent.as_ref())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(format!("the snapshot task failed: {e}")));
        match taken {
            Ok(mut info) => {
                let commit = info.commit.clone();
                let left_out = std::mem::take(&mut info.left_out);
                self.last_snapshot = Some(info);
                self.emitter
                    .emit(EventKind::Snapshot {
                        turn,
                        commit,
                        left_out,
                    })
                    .await?;
            }
            Err(message) => {
                self.snapshots_failed = true;
                self.emitter
                    .emit(EventKind::SnapshotFailed { turn, message })
                    .await?;
            }
        }
        Ok(())
    }
}
