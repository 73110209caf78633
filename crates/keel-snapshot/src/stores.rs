//! The protected stores beneath the workspace stay out of every snapshot (red-team pass 3,
//! R3-2).
//!
//! A workspace may hold stores — the home directory as workspace holds `~/.ssh`, `~/.aws`,
//! `~/.git-credentials`, Keel's own configuration and session database. The sandbox covers
//! them for commands and the file tools refuse them, but Keel's own git runs unconfined: a
//! plain `git add --all` would copy them into the snapshot repository (`.keel/snapshots`, or
//! the workspace's own `.git`), whose objects any command can read. So the one list of stores
//! (`keel_fs::stores::beneath`, the list the workspace handle's fence is built from) becomes
//! pathspecs that every snapshot command carries:
//!
//! - staging (`git add`) excludes them, and whatever Keel's index still holds under them (an
//!   index seeded from the user's, or left by a snapshot taken before this rule) is dropped
//!   from it before the tree is written, so no snapshot tree names a store;
//! - the diffs behind undo, redo and restore exclude them too, so a restore never writes,
//!   recreates or removes anything in a store — even from a snapshot that holds one.
//!
//! Stores are matched by canonical path relative to the workspace and without regard to case
//! (as the fence matches them: `.SSH/…` is refused by the file tools, so it is left out too).

use std::path::Path;

use crate::error::SnapshotError;

/// `literal`: the path is never a glob; `icase`: as the fence compares names.
const MAGIC: &str = "literal,icase";

/// The stores beneath one workspace, relative to it (canonical where they exist), as the
/// pathspec text git takes. Empty in the usual case (no store beneath the workspace).
pub(super) struct StoresBeneath(Vec<String>);

impl StoresBeneath {
    /// Looks them up now (the list depends on the environment and on paths Keel registers as
    /// it runs, so it is read for each operation).
    pub(super) fn of(workspace: &Path) -> Result<Self, SnapshotError> {
        let root = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.to_path_buf());
        let mut out = Vec::new();
        for (rel, store) in keel_tools::stores::beneath(&root) {
            // A name git could be given only approximately would leave the store in: refuse.
            let Some(text) = rel.to_str() else {
                return Err(SnapshotError::Io {
                    action: "take snapshots of",
                    path: root.display().to_string(),
                    source: std::io::Error::other(format!(
                        "the protected store `{}` lies in the workspace under a name that is \
                         not UTF-8, so snapshots could not leave it out; rename the directory \
                         on its way, or set `[snapshots] enabled = false`",
                        store.path.display()
                    )),
                });
            };
            out.push(text.to_string());
        }
        Ok(Self(out))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Pathspecs leaving every store out (`:(exclude,…)`), to follow an operation's own.
    pub(super) fn excluding(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(|rel| format!(":(exclude,{MAGIC}){rel}"))
    }

    /// Pathspecs naming every store (to drop them from Keel's index).
    pub(super) fn selecting(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(|rel| format!(":({MAGIC}){rel}"))
    }
}
