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

/// The stores beneath one workspace as the pathspecs git takes
/// ([`keel_tools::stores::Pathspecs`], the git tools' too). Empty in the usual case (no store
/// beneath the workspace).
pub(super) struct StoresBeneath(keel_tools::stores::Pathspecs);

impl StoresBeneath {
    /// Looks them up now (the list depends on the environment and on paths Keel registers as
    /// it runs, so it is read for each operation).
    pub(super) fn of(workspace: &Path) -> Result<Self, SnapshotError> {
        keel_tools::stores::Pathspecs::beneath(workspace)
            .map(Self)
            .map_err(|store| SnapshotError::Io {
                action: "take snapshots of",
                path: workspace.display().to_string(),
                // A name git could be given only approximately would leave the store in.
                source: std::io::Error::other(format!(
                    "the protected store `{}` lies in the workspace under a name that is not \
                     UTF-8, so snapshots could not leave it out; rename the directory on its \
                     way, or set `[snapshots] enabled = false`",
                    store.path.display()
                )),
            })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Pathspecs leaving every store out (`:(exclude,…)`), to follow an operation's own.
    pub(super) fn excluding(&self) -> impl Iterator<Item = String> + '_ {
        self.0.excluding()
    }

    /// Pathspecs naming every store (to drop them from Keel's index).
    pub(super) fn selecting(&self) -> impl Iterator<Item = String> + '_ {
        self.0.selecting()
    }
}
