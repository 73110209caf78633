//! Undo, once: restore a session's workspace from its automatic snapshots and record an `undo`
//! event in its log (store, then sinks). Used by the session handle (`Op::Undo`, the server)
//! and by `keel undo`.

use std::path::PathBuf;
use std::sync::Arc;

use keel_protocol::EventKind;
use keel_store::{SessionRecord, Store};

use crate::session::ensure_not_running;
use crate::{Emitter, EngineError, EventSink};
use keel_snapshot::{SnapshotError, Snapshots, UndoReport};

/// Why an undo did not happen.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// No snapshot to go back to (none taken, or nothing after the requested turn).
    #[error("{0}")]
    NothingToUndo(String),
    /// The session is running a turn.
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Snapshot(SnapshotError),
    #[error(transparent)]
    Engine(EngineError),
}

/// Restores `record`'s workspace to the end of `turn` (its last turn that changed files when
/// `None`) and records the `undo` event, published to `sinks` once stored. Refused while the
/// session runs in any process.
pub async fn undo_session(
    store: &Arc<dyn Store>,
    record: &SessionRecord,
    turn: Option<u32>,
    sinks: Vec<Arc<dyn EventSink>>,
) -> Result<UndoReport, UndoError> {
    ensure_not_running(record).map_err(|e| UndoError::Busy(e.to_string()))?;
    let (workspace, id) = (PathBuf::from(&record.workspace), record.id.clone());
    let report = tokio::task::spawn_blocking(move || {
        Snapshots::open(&workspace).and_then(|s| s.undo(&id, turn))
    })
    .await
    .map_err(|e| UndoError::Engine(EngineError::Internal(format!("the undo task failed: {e}"))))?
    .map_err(|e| match e {
        SnapshotError::NoSnapshots(_)
        | SnapshotError::NothingAfter { .. }
        | SnapshotError::AtOldest { .. } => UndoError::NothingToUndo(e.to_string()),
        other => UndoError::Snapshot(other),
    })?;
    let stored = match store.get_session(&record.id).await {
        Ok(_) => true,
        // Snapshots can outlive a deleted session: there is no log to record the undo in.
        Err(keel_store::StoreError::NotFound(_)) => false,
        Err(e) => return Err(UndoError::Engine(e.into())),
    };
    if !stored {
        return Ok(report);
    }
    let emitter = Emitter::new(record.id.clone(), store.clone(), sinks);
    emitter
        .emit(EventKind::Undo {
            turn: report.turn,
            commit: report.commit.clone(),
            modified: report.changes.modified.clone(),
            recreated: report.changes.recreated.clone(),
            removed: report.changes.removed.clone(),
        })
        .await
        .map_err(UndoError::Engine)?;
    Ok(report)
}
