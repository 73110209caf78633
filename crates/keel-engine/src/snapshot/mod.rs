//! Automatic workspace snapshots and undo.
//!
//! Before the agent's first write of each turn the engine records the whole workspace as a git
//! commit under a shadow ref, `refs/keel/snapshots/<session>/<turn>`: snapshot `N` is the
//! workspace as it was at the end of turn `N` (so snapshot `0` is the state before the session
//! changed anything). [`Snapshots::undo`] restores any of them exactly — modified files get
//! their old content and mode back, files the agent created are removed, files it deleted come
//! back — and reports what changed.
//!
//! When the workspace is a git repository's root or a tracked part of it, the snapshots live in
//! that repository (objects and refs only), built with a separate index file
//! (`GIT_INDEX_FILE`), so the user's index, branch, HEAD and stash are never touched. Elsewhere
//! (no repository, or an ignored or untracked directory of another one) Keel keeps a private
//! repository in `.keel/snapshots` and writes nothing into the outer repository. Files the
//! repository ignores (`.gitignore`: build output, dependencies), untracked build and dependency
//! directories (`[snapshots] build_dirs`: `target/`, `node_modules/`, … — Keel's build output
//! is not the user's work even where `.gitignore` forgets it) and Keel's own `.keel/`
//! directory are neither recorded nor restored. Attribute-driven conversions (line endings,
//! filters) are switched off so a restore gives back the exact bytes (git 2.40 or newer).
//!
//! This module does not decide when to snapshot (the loop does: before the first call of a
//! turn that writes files or runs commands) and holds no session state.

mod git;
mod history;
mod layout;
mod prune;
mod turn;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

pub use git::git_available;
use git::{Git, RepoKind};
pub use history::{HistoryEntry, RedoReport};

/// The ref namespace of turn snapshots.
pub const SNAPSHOT_REFS: &str = "refs/keel/snapshots";
/// The ref namespace of phase checkpoints (plan_exec).
pub const CHECKPOINT_REFS: &str = "refs/keel/checkpoints";
/// The ref namespace of the states `keel undo` replaced (so an undo can itself be undone).
pub const UNDO_REFS: &str = "refs/keel/undo";

/// A snapshot failure. The message says what failed and what to do.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(
        "git is not installed (or not on PATH); snapshots and undo need it: install git (e.g. `apt-get install git`), or set `[snapshots] enabled = false`"
    )]
    GitMissing,
    #[error("`git {command}` failed in {dir}: {message}")]
    Git {
        command: String,
        dir: String,
        message: String,
    },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{0}` cannot name a snapshot: use letters, digits, `-` and `_` only")]
    BadName(String),
    #[error(
        "session {0} has no snapshots in this workspace (it changed no files, or ran with snapshots off); `keel snapshots` lists them"
    )]
    NoSnapshots(String),
    #[error(
        "session {session} changed no files after turn {turn} (its last snapshot is turn {last}); nothing to undo"
    )]
    NothingAfter {
        session: String,
        turn: u32,
        last: u32,
    },
    #[error(
        "the workspace is already at session {session}'s first snapshot (turn {turn}, before it changed anything); there is nothing older to restore (`keel undo --redo` brings back what the last undo replaced)"
    )]
    AtOldest { session: String, turn: u32 },
    #[error("session {0} has no undo to redo")]
    NothingToRedo(String),
    #[error(
        "the workspace changed since session {session}'s last undo, so redoing it would overwrite those changes; the state that undo replaced is kept as commit {commit} (`git checkout {commit} -- .` restores it by hand)"
    )]
    RedoStale { session: String, commit: String },
    #[error("the restore of {commit} did not give the snapshot back exactly: {detail}")]
    Mismatch { commit: String, detail: String },
}

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
    /// A commit of the state the undo replaced (under [`UNDO_REFS`]), to get it back.
    pub replaced: Option<String>,
}

/// The snapshot store of one workspace.
#[derive(Debug, Clone)]
pub struct Snapshots {
    git: Git,
}

impl Snapshots {
    /// The snapshot store for `workspace`: its git repository if it is that repository's root
    /// or a tracked part of it, else the private repository in `.keel/snapshots` (created on
    /// the first snapshot). Runs
    /// `git rev-parse` once; fails only when git itself cannot run.
    pub fn open(workspace: &Path) -> Result<Self, SnapshotError> {
        Ok(Self {
            git: Git::detect(workspace)?,
        })
    }

    /// [`Snapshots::open`], leaving `build_dirs` out of the snapshots it takes when git tracks
    /// no file in them (`[snapshots] build_dirs`). Without it, a store leaves out what its last
    /// snapshot left out (the defaults at first).
    pub fn open_with(
        workspace: &Path,
        build_dirs: keel_tools::build_dirs::BuildDirs,
    ) -> Result<Self, SnapshotError> {
        let mut git = Git::detect(workspace)?;
        git.set_build_dirs(build_dirs);
        Ok(Self { git })
    }

    /// The workspace root.
    pub fn workspace(&self) -> &Path {
        &self.git.workspace
    }

    /// Whether snapshots live in the workspace's own git repository (`true`) or in Keel's
    /// private one under `.keel/snapshots` (`false`).
    pub fn in_user_repository(&self) -> bool {
        matches!(self.git.kind, RepoKind::User { .. })
    }

    /// The git directory holding the snapshots.
    pub fn git_dir(&self) -> &Path {
        self.git.git_dir()
    }

    /// Records the workspace now as snapshot `turn` of `session` (replacing an earlier one of
    /// the same turn). `parent` chains it to the session's previous snapshot; when the tree is
    /// unchanged since then, the parent commit is reused.
    pub fn take(
        &self,
        session: &str,
        turn: u32,
        parent: Option<&SnapshotInfo>,
    ) -> Result<SnapshotInfo, SnapshotError> {
        check_name(session)?;
        let reference = format!("{SNAPSHOT_REFS}/{session}/{turn}");
        let message = format!("keel snapshot: session {session}, end of turn {turn}");
        let recorded = self.git.snapshot(
            &reference,
            &message,
            parent.map(|p| (p.commit.as_str(), p.tree.as_str())),
        )?;
        Ok(SnapshotInfo {
            session: session.to_string(),
            turn,
            commit: recorded.commit,
            tree: recorded.tree,
            reference,
            created: now_secs(),
        })
    }

    /// Records the workspace now as the checkpoint of `phase` in `session`; returns the commit.
    pub fn checkpoint(&self, session: &str, phase: &str) -> Result<String, SnapshotError> {
        check_name(session)?;
        check_name(phase)?;
        let reference = format!("{CHECKPOINT_REFS}/{session}/{phase}");
        let message = format!("keel checkpoint: session {session}, phase {phase}");
        Ok(self.git.snapshot(&reference, &message, None)?.commit)
    }

    /// The snapshots of `session`, by turn.
    pub fn list(&self, session: &str) -> Result<Vec<SnapshotInfo>, SnapshotError> {
        check_name(session)?;
        let mut out: Vec<SnapshotInfo> = self
            .git
            .refs(&format!("{SNAPSHOT_REFS}/{session}/"))?
            .into_iter()
            .filter_map(|r| {
                let turn = r.name.rsplit('/').next()?.parse().ok()?;
                Some(SnapshotInfo {
                    session: session.to_string(),
                    turn,
                    commit: r.commit,
                    tree: r.tree,
                    reference: r.name,
                    created: r.created,
                })
            })
            .collect();
        out.sort_by_key(|s| s.turn);
        Ok(out)
    }

    /// Every session with snapshots here, most recent snapshot first.
    pub fn sessions(&self) -> Result<Vec<String>, SnapshotError> {
        let mut latest: Vec<(String, u64)> = Vec::new();
        for r in self.git.refs(&format!("{SNAPSHOT_REFS}/"))? {
            let created = r.created;
            let mut parts = r
                .name
                .strip_prefix(SNAPSHOT_REFS)
                .unwrap_or("")
                .trim_start_matches('/')
                .split('/');
            let Some(session) = parts.next() else {
                continue;
            };
            match latest.iter_mut().find(|(s, _)| s == session) {
                Some((_, t)) => *t = (*t).max(created),
                None => latest.push((session.to_string(), created)),
            }
        }
        latest.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        Ok(latest.into_iter().map(|(s, _)| s).collect())
    }

    /// Which snapshot `--to turn` means: the workspace at the end of `turn` is the first
    /// snapshot taken at or after it (no file changed between the two). `None`: the last one.
    pub fn resolve(&self, session: &str, turn: Option<u32>) -> Result<SnapshotInfo, SnapshotError> {
        let all = self.list(session)?;
        let last = all
            .last()
            .cloned()
            .ok_or_else(|| SnapshotError::NoSnapshots(session.to_string()))?;
        match turn {
            None => Ok(last),
            Some(t) => all
                .into_iter()
                .find(|s| s.turn >= t)
                .ok_or(SnapshotError::NothingAfter {
                    session: session.to_string(),
                    turn: t,
                    last: last.turn,
                }),
        }
    }

    /// What `session` changed in the workspace: a unified diff from its first snapshot (the
    /// workspace before its first change) to the workspace now, paths relative to the
    /// workspace. `Ok(None)` when the session has no snapshot here (it changed nothing, or
    /// ran with snapshots off). Changes made by others since then are part of the diff too:
    /// it compares states, as `keel undo` restores them.
    pub fn session_diff(&self, session: &str) -> Result<Option<String>, SnapshotError> {
        let Some(first) = self.list(session)?.into_iter().next() else {
            return Ok(None);
        };
        let now = self.git.current_tree()?;
        self.git.patch(&first.commit, &now).map(Some)
    }

    /// Restores the workspace to `commit` (any snapshot or checkpoint) and reports what
    /// changed. Ignored files and `.keel/` are left alone.
    pub fn restore(&self, commit: &str) -> Result<RestoreReport, SnapshotError> {
        self.git.restore(commit, None)
    }
}

/// An engine's snapshot store, opened on first use: git runs when the first snapshot is
/// taken, not when the engine starts.
#[derive(Debug, Clone)]
pub(crate) struct LazySnapshots {
    workspace: PathBuf,
    build_dirs: keel_tools::build_dirs::BuildDirs,
    cell: Arc<OnceLock<Result<Arc<Snapshots>, String>>>,
}

impl LazySnapshots {
    pub(crate) fn new(workspace: &Path, build_dirs: keel_tools::build_dirs::BuildDirs) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            build_dirs,
            cell: Arc::new(OnceLock::new()),
        }
    }

    /// The store, opening it on the first call (blocking: runs git). The error says why
    /// snapshots are unavailable.
    pub(crate) fn get(&self) -> Result<Arc<Snapshots>, String> {
        self.cell
            .get_or_init(|| {
                Snapshots::open_with(&self.workspace, self.build_dirs.clone())
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
    }
}

/// Ref path components Keel builds from ids: nothing git could misread.
fn check_name(name: &str) -> Result<(), SnapshotError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(SnapshotError::BadName(name.to_string()))
    }
}

fn now_millis() -> u64 {
    crate::time::now_ms()
}

fn now_secs() -> u64 {
    crate::time::now_ms() / 1000
}

/// Where the private snapshot repository of a non-git workspace lives.
pub fn private_repository(workspace: &Path) -> PathBuf {
    workspace.join(".keel").join("snapshots")
}

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod tests;
