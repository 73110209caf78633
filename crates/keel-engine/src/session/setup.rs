//! What every run of a session needs before the loop starts, shared by starting, resuming
//! and compacting a session: the tool context, the context budget, the run lease (and the
//! workspace's), the check that a stored session is not running, the files it wrote.

use keel_protocol::SessionStatus;
use keel_store::{ExpiryWatch, RunLease, SessionRecord, lease_holder};
use keel_tools::ToolContext;

use crate::EngineError;
use crate::compaction::{ContextBudget, DEFAULT_CONTEXT_WINDOW};
use crate::engine::{Engine, RunOptions};

pub(crate) fn tool_context(engine: &Engine, options: &RunOptions) -> ToolContext {
    let mut ctx = ToolContext::new(engine.workspace.clone());
    ctx.cancel = options.cancel.clone();
    ctx.max_output_chars =
        keel_results::output_budget(engine.config.agent.max_output_chars, window(engine));
    if engine.agent_scope.as_ref().is_some_and(|s| s.read_only) {
        // A read-only subagent's commands run in the read-only sandbox.
        ctx.sandbox = keel_tools::sandbox::SandboxPolicy::ReadOnly;
    }
    ctx
}

/// The model's context window as configured or reported (else Keel's default).
fn window(engine: &Engine) -> u64 {
    engine
        .config
        .agent
        .context_window
        .or(engine.provider.info().context_window)
        .unwrap_or(DEFAULT_CONTEXT_WINDOW)
}

/// A run's context budget: the window and the compaction threshold.
pub(crate) fn budget(engine: &Engine) -> ContextBudget {
    ContextBudget::new(window(engine), engine.config.agent.compact_threshold)
}

/// How often a run waiting for its workspace looks again.
const WORKSPACE_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// Takes the run lease of `session_id` for this run (its heartbeat runs until released); a
/// live lease of another run means the session is busy. Then, unless the run shares its
/// workspace ([`RunOptions::shared_workspace`]), the workspace's lease: another session's live
/// run there means the workspace is busy. Losing either later cancels the run. A run that
/// waits for its workspace takes another run's expired lease there only once it stayed
/// unrenewed for a lease's time-to-live ([`ExpiryWatch`]: its holder may only have lost the
/// store for a while).
pub(crate) async fn take_lease(
    engine: &Engine,
    session_id: &str,
    options: &RunOptions,
) -> Result<RunLease, EngineError> {
    let run = options
        .run_id
        .clone()
        .unwrap_or_else(crate::time::new_run_id);
    let ttl_ms = engine.config.store.lease_ttl_secs.max(1) * 1000;
    let taken = RunLease::acquire(
        engine.store.clone(),
        session_id,
        lease_holder(&run),
        ttl_ms,
        options.cancel.clone(),
    )
    .await?;
    match taken {
        Some(lease) if options.shared_workspace => Ok(lease),
        Some(lease) => {
            let workspace = engine.workspace.root().display().to_string();
            let mut watch = ExpiryWatch::new(std::time::Duration::from_millis(ttl_ms));
            loop {
                let claimed = if options.wait_for_workspace {
                    lease.claim_workspace_watching(&workspace, &mut watch).await
                } else {
                    lease.claim_workspace(&workspace).await
                };
                match claimed {
                    Ok(Ok(())) => return Ok(lease),
                    Ok(Err(_)) if options.wait_for_workspace => {
                        tokio::select! {
                            () = tokio::time::sleep(WORKSPACE_POLL) => {}
                            () = options.cancel.cancelled() => {
                                give_back(lease).await;
                                return Err(EngineError::Busy(
                                    "cancelled while waiting for another session to finish in this workspace".into(),
                                ));
                            }
                        }
                    }
                    Ok(Err(other)) => {
                        give_back(lease).await;
                        return Err(EngineError::WorkspaceBusy(other));
                    }
                    Err(e) => {
                        give_back(lease).await;
                        return Err(e.into());
                    }
                }
            }
        }
        None => {
            let holder = engine
                .store
                .lease(session_id)
                .await
                .ok()
                .flatten()
                .map_or_else(|| "?".to_string(), |l| l.holder);
            Err(EngineError::Busy(format!(
                "session {session_id} is running in another run ({holder}); wait for it to finish or cancel it first"
            )))
        }
    }
}

/// Releases a run's lease at its end. A failure here only delays the next run: the lease
/// expires on its own.
pub(crate) async fn give_back(lease: RunLease) {
    let _ = lease.release().await;
}

/// The one check that a stored session is not running in some process (this one or another)
/// before it is continued or its workspace restored.
pub(crate) fn ensure_not_running(record: &SessionRecord) -> Result<(), EngineError> {
    if record.status == SessionStatus::Running && !record.is_interrupted() {
        return Err(EngineError::Busy(format!(
            "session {} is still running ({}); wait for it to finish or cancel it first",
            record.id,
            record
                .lease
                .as_ref()
                .map_or_else(|| "?".into(), |l| l.holder.clone())
        )));
    }
    Ok(())
}
