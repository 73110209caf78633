//! Undo as people expect it: `keel undo` steps back one snapshot at a time, `--to N` restores
//! snapshot `N` (the numbers `keel snapshots`, the `snapshot` events and the UI show), and
//! `--redo` brings back what the last undo replaced.
//!
//! Where the workspace "is" comes from its content: the newest snapshot whose tree equals the
//! workspace now. Stepping back restores the newest older snapshot with a different tree (so
//! snapshots taken before a step that changed nothing are skipped); when the workspace matches
//! no snapshot (the agent wrote after the last one), the last snapshot is the step back. Each
//! undo records the state it replaced under [`UNDO_REFS`] as a commit whose parent is the
//! snapshot it restored; a redo restores the newest such commit while the workspace still
//! equals that parent, and then drops it (so redos walk forward again).

use serde::{Deserialize, Serialize};

use super::{
    RestoreReport, SnapshotError, SnapshotInfo, Snapshots, UNDO_REFS, UndoReport, check_name,
    now_millis,
};

/// One line of `keel undo --list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    #[serde(flatten)]
    pub snapshot: SnapshotInfo,
    /// The workspace now has exactly this snapshot's content (the newest such snapshot).
    pub current: bool,
    /// What `keel undo` without `--to` would restore.
    pub next_undo: bool,
    /// Same content as the snapshot before it (nothing changed in between).
    pub unchanged: bool,
}

/// The result of [`Snapshots::redo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedoReport {
    pub session: String,
    /// The commit restored (the state the undo had replaced).
    pub commit: String,
    pub changes: RestoreReport,
}

impl Snapshots {
    /// Which snapshot `keel undo` restores now: one step back from where the workspace is
    /// (`current`: its tree).
    fn step_back(all: &[SnapshotInfo], current: &str) -> Option<usize> {
        let end = all
            .iter()
            .rposition(|s| s.tree == current)
            .unwrap_or(all.len());
        all[..end].iter().rposition(|s| s.tree != current)
    }

    /// The session's snapshots with where the workspace is and what `keel undo` would restore.
    pub fn history(&self, session: &str) -> Result<Vec<HistoryEntry>, SnapshotError> {
        let all = self.list(session)?;
        if all.is_empty() {
            return Ok(Vec::new());
        }
        let current = self.git.current_tree()?;
        let here = all.iter().rposition(|s| s.tree == current);
        let next = Self::step_back(&all, &current);
        Ok(all
            .iter()
            .enumerate()
            .map(|(i, s)| HistoryEntry {
                snapshot: s.clone(),
                current: here == Some(i),
                next_undo: next == Some(i),
                unchanged: i > 0 && all[i - 1].tree == s.tree,
            })
            .collect())
    }

    /// Restores the workspace to snapshot `turn` of `session` ([`Snapshots::resolve`]), or,
    /// when `None`, one step back from where it is (repeated calls walk back through the
    /// session's snapshots). The state replaced is kept under [`UNDO_REFS`] first, for
    /// [`Snapshots::redo`].
    pub fn undo(&self, session: &str, turn: Option<u32>) -> Result<UndoReport, SnapshotError> {
        let current = self.git.current_tree()?;
        let target = match turn {
            Some(_) => self.resolve(session, turn)?,
            None => {
                let all = self.list(session)?;
                let Some(last) = all.last() else {
                    return Err(SnapshotError::NoSnapshots(session.to_string()));
                };
                match Self::step_back(&all, &current) {
                    Some(i) => all[i].clone(),
                    None => {
                        let oldest = all.first().map_or(last.turn, |s| s.turn);
                        return Err(SnapshotError::AtOldest {
                            session: session.to_string(),
                            turn: oldest,
                        });
                    }
                }
            }
        };
        if target.tree == current {
            // Nothing to restore, nothing to redo later.
            return Ok(UndoReport {
                session: session.to_string(),
                turn: turn.unwrap_or(target.turn),
                commit: target.commit,
                changes: RestoreReport::default(),
                replaced: None,
            });
        }
        let reference = format!("{UNDO_REFS}/{session}/{}", now_millis());
        let message = format!(
            "keel undo: session {session}, state before restoring turn {}",
            target.turn
        );
        // The parent is the snapshot restored: a redo checks the workspace still has it.
        let replaced = self.git.snapshot(
            &reference,
            &message,
            Some((target.commit.as_str(), target.tree.as_str())),
        )?;
        let changes = self.git.restore(&target.commit, Some(&replaced.staged))?;
        Ok(UndoReport {
            session: session.to_string(),
            turn: turn.unwrap_or(target.turn),
            commit: target.commit,
            changes,
            replaced: Some(replaced.commit),
        })
    }

    /// Brings back the state the session's last undo replaced, if the workspace is still what
    /// that undo restored.
    pub fn redo(&self, session: &str) -> Result<RedoReport, SnapshotError> {
        check_name(session)?;
        let mut undos = self.git.refs(&format!("{UNDO_REFS}/{session}/"))?;
        undos.sort_by_key(|r| {
            r.name
                .rsplit('/')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        });
        let Some(last) = undos.pop() else {
            return Err(SnapshotError::NothingToRedo(session.to_string()));
        };
        let current = self.git.current()?;
        // Still what the undo restored — but for the files left alone for their size.
        let unchanged = match self.git.parent_tree(&last.commit) {
            Some(tree) if tree == current.tree => true,
            Some(tree) => !self.git.differs_outside_left_out(&tree, &current)?,
            None => false,
        };
        if !unchanged {
            return Err(SnapshotError::RedoStale {
                session: session.to_string(),
                commit: last.commit,
            });
        }
        let changes = self.git.restore(&last.commit, Some(&current))?;
        self.git.delete_ref(&last.name)?;
        Ok(RedoReport {
            session: session.to_string(),
            commit: last.commit,
            changes,
        })
    }
}
