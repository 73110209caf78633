//! The protected stores beneath a handle's root ([`crate::stores`]): the user's secret stores
//! and Keel's own data when the workspace holds them (a workspace that is the home directory).
//! Nothing resolved beneath the handle may lie in one, and walks pass them over.
//!
//! A store is recognised two ways, so neither a name trick nor a swap gets past:
//! - by its canonical path relative to the root, compared component by component without
//!   regard to case (the resolved path has no symlink and no `..` left in it) — this also
//!   covers a store that does not exist yet (`create_file .ssh/authorized_keys` with no
//!   `~/.ssh`);
//! - by device and inode of the stores that exist, checked on what resolution actually
//!   opened: the final entry, and the open parent directory and each directory above it up to
//!   the root (`..` from the descriptor, not from a name), so a directory swapped for a link
//!   into `~/.ssh` after the path was looked at, or a hard link to `~/.netrc`, is still caught.
//!
//! The common case — no store beneath the workspace — costs nothing per resolution.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::stores::{self, StoreKind};

/// One store beneath the root.
#[derive(Debug, Clone)]
struct Entry {
    /// Canonical path relative to the root (`None`: not beneath this root, recognised by
    /// identity only — a hard link to it may still be).
    rel: Option<PathBuf>,
    /// The store as listed (for messages).
    store: PathBuf,
    kind: StoreKind,
    /// Device and inode, when it existed as the handle was opened.
    id: Option<(u64, u64)>,
}

/// The stores beneath one handle's root (usually none).
#[derive(Debug, Clone, Default)]
pub struct Fence {
    entries: Vec<Entry>,
    /// Device and inode of the root (where the walk up from a directory stops).
    root: Option<(u64, u64)>,
}

/// A path that lies in a protected store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fenced {
    /// The store as the user knows it (`/home/u/.ssh`).
    pub store: PathBuf,
    pub kind: StoreKind,
}

impl std::fmt::Display for Fenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            StoreKind::Secret => "one of the user's secret stores",
            StoreKind::Keel => "Keel's own data or configuration",
        };
        write!(
            f,
            "it lies in `{}`, {what}, which Keel never opens for the agent",
            self.store.display()
        )
    }
}

fn id_of(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

impl Fence {
    /// The stores beneath `root` (canonical), identified by the open `root_fd`.
    pub(crate) fn for_root(root: &Path, root_fd: &OwnedFd) -> Self {
        Self::default().with(root, root_fd, stores::beneath(root))
    }

    /// This fence and the stores among `more` that lie beneath `root` (the same root and
    /// `root_fd` it was built for): a shared handle's fence after a path was registered as
    /// Keel's own ([`stores::register_keel_path`]), without looking at every other store again.
    pub(crate) fn and_stores(
        &self,
        root: &Path,
        root_fd: &OwnedFd,
        more: Vec<stores::Store>,
    ) -> Self {
        if more.is_empty() {
            return self.clone();
        }
        self.clone()
            .with(root, root_fd, stores::beneath_among(root, more))
    }

    fn with(
        mut self,
        root: &Path,
        root_fd: &OwnedFd,
        found: Vec<(PathBuf, stores::Store)>,
    ) -> Self {
        let mut added = false;
        for (rel, store) in found {
            if self.entries.iter().any(|e| e.rel.as_ref() == Some(&rel)) {
                continue;
            }
            let id = rustix::fs::stat(root.join(&rel)).ok().map(|st| id_of(&st));
            self.entries.push(Entry {
                kind: store.kind,
                rel: Some(rel),
                store: store.path,
                id,
            });
            added = true;
        }
        if added && self.root.is_none() {
            self.root = rustix::fs::fstat(root_fd).ok().map(|st| id_of(&st));
        }
        self
    }

    /// The same stores seen from `sub` (a directory beneath the root, relative to it, opened
    /// as `fd`).
    pub(crate) fn below(&self, sub: &Path, fd: &OwnedFd) -> Self {
        if self.entries.is_empty() {
            return Self::default();
        }
        let entries = self
            .entries
            .iter()
            .filter_map(|e| {
                let rel = e
                    .rel
                    .as_ref()
                    .and_then(|r| strip_prefix_ci(r, sub))
                    .filter(|r| !r.as_os_str().is_empty());
                (rel.is_some() || e.id.is_some()).then(|| Entry { rel, ..e.clone() })
            })
            .collect::<Vec<_>>();
        if entries.is_empty() {
            return Self::default();
        }
        Self {
            entries,
            root: rustix::fs::fstat(fd).ok().map(|st| id_of(&st)),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn by_id(&self, id: (u64, u64)) -> Option<Fenced> {
        self.entries
            .iter()
            .find(|e| e.id == Some(id))
            .map(|e| e.fenced())
    }

    /// The store `rel` (canonical, relative to the root) lies in, by name.
    pub(crate) fn by_name(&self, rel: &Path) -> Option<Fenced> {
        self.entries
            .iter()
            .find(|e| {
                e.rel
                    .as_ref()
                    .is_some_and(|r| strip_prefix_ci(rel, r).is_some())
            })
            .map(|e| e.fenced())
    }

    /// For a walk: whether the entry `rel` (relative to the root) with device and inode `id`
    /// is a store.
    pub(crate) fn hides(&self, rel: &Path, id: (u64, u64)) -> bool {
        !self.entries.is_empty() && (self.by_id(id).is_some() || self.by_name(rel).is_some())
    }

    /// The store a resolved path lies in: `rel` by name, `final_id` (the entry resolution
    /// looked at) and the open directory `dir` with every directory above it up to the root
    /// by identity.
    pub(crate) fn check(
        &self,
        rel: &Path,
        final_id: Option<(u64, u64)>,
        dir: &OwnedFd,
    ) -> Option<Fenced> {
        if self.entries.is_empty() {
            return None;
        }
        if let Some(f) = self.by_name(rel) {
            return Some(f);
        }
        if !self.entries.iter().any(|e| e.id.is_some()) {
            return None;
        }
        if let Some(f) = final_id.and_then(|id| self.by_id(id)) {
            return Some(f);
        }
        self.up_from(dir)
    }

    /// Walks from `dir` up through `..` (the real parents, whatever names led here) to the
    /// root, looking for a store.
    fn up_from(&self, dir: &OwnedFd) -> Option<Fenced> {
        let mut st = rustix::fs::fstat(dir).ok()?;
        let mut cur: Option<OwnedFd> = None;
        // Deep enough for any real tree; a directory moved out from under the root ends at `/`.
        for _ in 0..4096 {
            let id = id_of(&st);
            if Some(id) == self.root {
                return None;
            }
            if let Some(f) = self.by_id(id) {
                return Some(f);
            }
            let from = cur.as_ref().map_or(dir.as_fd(), |c| c.as_fd());
            let parent = rustix::fs::openat(
                from,
                OsStr::new(".."),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok()?;
            let next = rustix::fs::fstat(&parent).ok()?;
            if id_of(&next) == id {
                // `/`: the root was never met (the directory is not beneath it any more).
                return None;
            }
            st = next;
            cur = Some(parent);
        }
        None
    }
}

impl Entry {
    fn fenced(&self) -> Fenced {
        Fenced {
            store: self.store.clone(),
            kind: self.kind,
        }
    }
}

/// `path` without the leading components `prefix`, compared without regard to ASCII case
/// (a case-insensitive file system names `.SSH` what the list calls `.ssh`).
fn strip_prefix_ci(path: &Path, prefix: &Path) -> Option<PathBuf> {
    let mut rest = path.components();
    for p in prefix.components() {
        match (rest.next(), p) {
            (Some(Component::Normal(a)), Component::Normal(b)) if a.eq_ignore_ascii_case(b) => {}
            _ => return None,
        }
    }
    Some(rest.as_path().to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_whole_components_in_any_case() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(strip_prefix_ci(&p(".ssh/id"), &p(".ssh")), Some(p("id")));
        assert_eq!(strip_prefix_ci(&p(".SSH/id"), &p(".ssh")), Some(p("id")));
        assert_eq!(strip_prefix_ci(&p(".ssh"), &p(".ssh")), Some(p("")));
        assert_eq!(strip_prefix_ci(&p(".sshx/id"), &p(".ssh")), None);
        assert_eq!(strip_prefix_ci(&p("a"), &p("a/b")), None);
    }
}
