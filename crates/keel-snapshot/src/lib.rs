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
//! repository in `.keel/snapshots` and writes nothing into the outer repository. Directories the
//! repository ignores (`.gitignore`: build output, dependencies), untracked build and dependency
//! directories (`[snapshots] build_dirs`: `target/`, `node_modules/`, … — Keel's build output
//! is not the user's work even where `.gitignore` forgets it), files over `[snapshots]
//! max_file_mb`, untracked nested repositories and Keel's own `.keel/` directory are neither
//! recorded nor restored; small files the repository ignores one by one (`.env`, a local
//! config: often the user's only copy) are recorded. Attribute-driven conversions (line endings,
//! filters) are switched off so a restore gives back the exact bytes (git 2.40 or newer).
//!
//! This crate does not decide when to snapshot (the loop does: before the first call of a
//! turn that writes files or runs commands) and holds no session state.

mod error;
mod git;
mod history;
mod layout;
mod prune;
mod report;
mod stores;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

pub use error::SnapshotError;
use git::{Git, RepoKind};
pub use git::{git_available, private_repository};
pub use history::{HistoryEntry, RedoReport};
pub use layout::checked_repository;
pub use report::{RestoreReport, SnapshotInfo, UndoReport};

/// The ref namespace of turn snapshots.
pub const SNAPSHOT_REFS: &str = "refs/keel/snapshots";
/// The ref namespace of phase checkpoints (plan_exec).
pub const CHECKPOINT_REFS: &str = "refs/keel/checkpoints";
/// The ref namespace of the states `keel undo` replaced (so an undo can itself be undone).
pub const UNDO_REFS: &str = "refs/keel/undo";

/// The snapshot store of one workspace.
#[derive(Debug, Clone)]
pub struct Snapshots {
    git: Git,
}

impl Snapshots {
    /// The snapshot store for `workspace`: its git repository if it is that repository's root
    /// or a tracked part of it, else the private repository in `.keel/snapshots` (created on
    /// the first snapshot). Runs
    /// `git rev-parse` once; fails only when git itself cannot run — or when copies of
    /// protected stores that snapshots taken before they were left out kept cannot be
    /// purged (a workspace holding a store: see `git/purge.rs`).
    pub fn open(workspace: &Path) -> Result<Self, SnapshotError> {
        let git = Git::detect(workspace)?;
        // Snapshots taken before stores were left out may hold copies of them (R3-2).
        git.purge_stores()?;
        Ok(Self { git })
    }

    /// [`Snapshots::open`], leaving `build_dirs` out of the snapshots it takes when git tracks
    /// no file in them (`[snapshots] build_dirs`). Without it, a store leaves out what its last
    /// snapshot left out (the defaults at first).
    pub fn open_with(
        workspace: &Path,
        build_dirs: keel_tools::build_dirs::BuildDirs,
    ) -> Result<Self, SnapshotError> {
        let mut git = Git::detect(workspace)?;
        git.purge_stores()?;
        git.set_build_dirs(build_dirs);
        Ok(Self { git })
    }

    /// Leaves files larger than `mb` MiB out of the snapshots taken from now on, and alone in
    /// restores (`[snapshots] max_file_mb`; 0: no limit). Without it, a store follows the
    /// limit its last snapshot had (100 MiB at first).
    pub fn with_max_file_mb(mut self, mb: u64) -> Self {
        self.git.set_max_file_mb(mb);
        self
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
            tree: recorded.staged.tree,
            reference,
            created: now_secs(),
            left_out: recorded.staged.left_out,
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
                    left_out: Vec::new(),
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
    /// changed. Ignored directories, files over the size limit and `.keel/` are left alone.
    pub fn restore(&self, commit: &str) -> Result<RestoreReport, SnapshotError> {
        self.git.restore(commit, None)
    }
}

/// An engine's snapshot store, opened on first use: git runs when the first snapshot is
/// taken, not when the engine starts.
#[derive(Debug, Clone)]
pub struct LazySnapshots {
    workspace: PathBuf,
    build_dirs: keel_tools::build_dirs::BuildDirs,
    max_file_mb: Option<u64>,
    cell: Arc<OnceLock<Result<Arc<Snapshots>, String>>>,
}

impl LazySnapshots {
    pub fn new(workspace: &Path, build_dirs: keel_tools::build_dirs::BuildDirs) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            build_dirs,
            max_file_mb: None,
            cell: Arc::new(OnceLock::new()),
        }
    }

    /// [`Snapshots::with_max_file_mb`] for the store when it opens.
    pub fn with_max_file_mb(mut self, mb: u64) -> Self {
        self.max_file_mb = Some(mb);
        self
    }

    /// The store, opening it on the first call (blocking: runs git). The error says why
    /// snapshots are unavailable.
    pub fn get(&self) -> Result<Arc<Snapshots>, String> {
        self.cell
            .get_or_init(|| {
                Snapshots::open_with(&self.workspace, self.build_dirs.clone())
                    .map(|s| match self.max_file_mb {
                        Some(mb) => s.with_max_file_mb(mb),
                        None => s,
                    })
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

/// Unix time in milliseconds (0 if the clock is before 1970).
fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn now_secs() -> u64 {
    now_millis() / 1000
}

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod ignored_tests;
#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod modes_tests;
#[cfg(test)]
mod race_tests;
#[cfg(test)]
mod restore_checks_tests;
#[cfg(test)]
mod size_tests;
#[cfg(test)]
mod staging_tests;
#[cfg(test)]
mod stores_tests;
#[cfg(test)]
mod tests;
