//! What the snapshot store reports: a stored snapshot, what a restore changed, an undo.

use serde::{Deserialize, Serialize};

/// One stored snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    pub session: String,
    /// The workspace as it was at the end of this turn (0: before the session's first turn).
    pub turn: u32,
    /// The snapshot commit.
    pub commit: String,
    /// The commit's tree (equal trees: equal workspaces).
    pub tree: String,
    /// The full ref name.
    pub reference: String,
    /// Unix seconds when it was taken.
    pub created: u64,
    /// Files over the size limit (`[snapshots] max_file_mb`) this snapshot did not record
    /// (known when it is taken; empty in listings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// What a restore changed in the workspace (workspace-relative paths, sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreReport {
    /// Files whose content or mode was put back.
    pub modified: Vec<String>,
    /// Files that had been deleted and were written again.
    pub recreated: Vec<String>,
    /// Files that did not exist in the snapshot and were removed.
    pub removed: Vec<String>,
    /// Files over the size limit (`[snapshots] max_file_mb`), left as they are: their
    /// content is in no snapshot, so nothing replaced or removed them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_alone: Vec<String>,
    /// What the post-command checks moved aside of what the restore wrote (red-team pass 8,
    /// R8-3: bytecode, a planted repository the checks had removed once): their report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<String>,
}

impl RestoreReport {
    /// No file changed.
    pub fn is_empty(&self) -> bool {
        self.modified.is_empty() && self.recreated.is_empty() && self.removed.is_empty()
    }

    /// Number of files changed.
    pub fn len(&self) -> usize {
        self.modified.len() + self.recreated.len() + self.removed.len()
    }
}

/// The result of [`Snapshots::undo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoReport {
    pub session: String,
    /// The turn whose end state the workspace now has.
    pub turn: u32,
    /// The snapshot restored.
    pub commit: String,
    pub changes: RestoreReport,
    /// A commit of the state the undo replaced (under [`UNDO_REFS`](crate::UNDO_REFS)), to get it back.
    pub replaced: Option<String>,
}
