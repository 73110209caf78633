//! Ignored files out of the refs a push sends (red-team pass 6, R6-17): snapshots record the
//! small files a repository ignores (`.env`, a local config — often the user's only copy, so
//! an undo must bring them back: R4-9), and in the user's own repository the snapshot refs
//! (`refs/keel/…`) are sent by `git push --mirror` with every object they reach — the `.env`
//! went to the remote.
//!
//! So in the user's repository an ignored file's bytes never become a git object. They are
//! kept in Keel's own directory of the git directory, `<git-dir>/keel/ignored/` (0700; no push
//! or fetch sends anything there), one owner-only file per content, named by a keyed hash (a
//! random key of that directory, so the name says nothing about the content). The snapshot's
//! tree holds only a manifest at `.keel/ignored-files` — `<keyed hash> <mode> <path>` per
//! file — so a snapshot still differs from another when an ignored file changed (undo and
//! its history compare trees), and a restore writes each file of the target's manifest back
//! (content and mode) and removes the ignored files the target did not have. `.keel/` is left
//! out of every diff and of `git add`, so the manifest is never written into the work tree.
//! Keel's private repository (`.keel/snapshots`, never pushed) keeps recording them as
//! objects, as before.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use keel_tools::beneath::DirHandle;
use keel_tools::fs::WriteMode;

use super::Git;
use crate::error::SnapshotError;
use crate::report::RestoreReport;

/// The manifest's path in a snapshot tree (under `.keel/`, which no diff or `git add` of
/// Keel's looks at).
pub(crate) const MANIFEST: &str = ".keel/ignored-files";
/// The side store's directory in Keel's directory of the git directory.
const STORE: &str = "ignored";
/// The largest ignored file a snapshot records (the rule the overwrite checks share).
pub(crate) use keel_tools::recorded::IGNORED_MAX_BYTES;
/// The largest manifest read back.
const MAX_MANIFEST: u64 = 4 * 1024 * 1024;

/// One ignored file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    key: String,
    mode: u32,
}

/// A manifest: path → entry.
pub(crate) type Manifest = BTreeMap<String, Entry>;

fn io(action: &'static str, path: &Path, source: std::io::Error) -> SnapshotError {
    SnapshotError::Io {
        action,
        path: path.display().to_string(),
        source,
    }
}

fn parse(text: &str) -> Manifest {
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            let key = parts.next()?.to_string();
            let mode = u32::from_str_radix(parts.next()?, 8).ok()?;
            let path = parts.next()?.to_string();
            (key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit()))
                .then_some((path, Entry { key, mode }))
        })
        .collect()
}

impl Git {
    /// Whether ignored files go to the side store (the user's repository) rather than into
    /// the snapshot's objects.
    pub(crate) fn ignored_aside(&self) -> bool {
        matches!(self.kind, super::RepoKind::User { .. })
    }

    /// The side store, opened beneath Keel's directory of the git directory (created 0700).
    fn store(&self) -> Result<DirHandle, SnapshotError> {
        let stage = DirHandle::open(&self.stage_dir).map_err(|e| io("open", &self.stage_dir, e))?;
        let path = self.stage_dir.join(STORE);
        let at = stage
            .resolve_literal(Path::new(STORE))
            .map_err(|e| io("open", &path, std::io::Error::other(e.to_string())))?;
        match at.info() {
            Ok(Some(info)) if info.kind == keel_tools::fs::FileKind::Dir => {}
            Ok(Some(_)) => {
                return Err(io("open", &path, std::io::Error::other("not a directory")));
            }
            _ => {
                at.create_dir_all().map_err(|e| io("create", &path, e))?;
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700));
            }
        }
        stage
            .subdir(Path::new(STORE))
            .map_err(|e| io("open", &path, std::io::Error::other(e.to_string())))
    }

    /// The store's key (32 random bytes, made once).
    #[allow(clippy::disallowed_methods)] // /dev/urandom is not a project file
    fn key(store: &DirHandle, path: &Path) -> Result<Vec<u8>, SnapshotError> {
        let at = store
            .resolve_literal(Path::new("key"))
            .map_err(|e| io("open", path, std::io::Error::other(e.to_string())))?;
        if let Ok(bytes) = at.read_bounded(64)
            && bytes.len() == 32
        {
            return Ok(bytes);
        }
        let mut key = vec![0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(|e| io("read", Path::new("/dev/urandom"), e))?;
        at.write_atomic(&key, WriteMode::Replace, Some(0o600))
            .map_err(|e| io("write", path, e))?;
        Ok(key)
    }

    /// Copies the ignored files `rels` (workspace-relative) into the side store and returns
    /// the manifest's text (empty: none).
    pub(crate) fn put_aside(&self, rels: &[Vec<u8>]) -> Result<Vec<u8>, SnapshotError> {
        if rels.is_empty() {
            return Ok(Vec::new());
        }
        let store = self.store()?;
        let store_path = self.stage_dir.join(STORE);
        let key = Self::key(&store, &store_path)?;
        let ws = keel_tools::Workspace::new(&self.workspace).map_err(|e| {
            io(
                "open",
                &self.workspace,
                std::io::Error::other(e.to_string()),
            )
        })?;
        let mut text = Vec::new();
        for rel in rels {
            let Ok(rel) = std::str::from_utf8(rel) else {
                continue;
            };
            if rel.contains('\n') {
                continue;
            }
            // A link or a file that vanished is not recorded (it stays as it is).
            let Ok(found) = ws.locate_entry(rel) else {
                continue;
            };
            let Ok((mut file, info)) = found.open_regular() else {
                continue;
            };
            let mut bytes = Vec::new();
            if (&mut file)
                .take(IGNORED_MAX_BYTES + 1)
                .read_to_end(&mut bytes)
                .is_err()
                || bytes.len() as u64 > IGNORED_MAX_BYTES
            {
                continue;
            }
            let mut keyed = key.clone();
            keyed.extend_from_slice(&bytes);
            let name = keel_tools::trust::sha256_hex(&keyed);
            let at = store
                .resolve_literal(Path::new(&format!("f-{name}")))
                .map_err(|e| io("open", &store_path, std::io::Error::other(e.to_string())))?;
            if matches!(at.info(), Ok(Some(_))) {
                // Its time stamp says a snapshot uses it now, which the sweep's grace keeps.
                let now = rustix::fs::Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_NOW,
                };
                let _ = rustix::fs::utimensat(
                    store.fd(),
                    format!("f-{name}").as_str(),
                    &rustix::fs::Timestamps {
                        last_access: now,
                        last_modification: now,
                    },
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                );
            } else {
                at.write_atomic(&bytes, WriteMode::Replace, Some(0o600))
                    .map_err(|e| io("write", &store_path, e))?;
            }
            text.extend_from_slice(format!("{name} {:04o} {rel}\n", info.mode & 0o7777).as_bytes());
        }
        Ok(text)
    }

    /// Records `text` as the manifest blob and keeps a copy in the side store (read back by
    /// restores); returns the blob id.
    pub(crate) fn write_manifest(&self, text: &[u8]) -> Result<String, SnapshotError> {
        let out = self.run(
            &["hash-object", "-w", "--stdin", "--no-filters"],
            Some(text),
        )?;
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let store = self.store()?;
        let path = self.stage_dir.join(STORE);
        let at = store
            .resolve_literal(Path::new(&format!("m-{id}")))
            .map_err(|e| io("open", &path, std::io::Error::other(e.to_string())))?;
        if !matches!(at.info(), Ok(Some(_))) {
            at.write_atomic(text, WriteMode::Replace, Some(0o600))
                .map_err(|e| io("write", &path, e))?;
        }
        Ok(id)
    }

    /// The manifest of the tree `tree` (`None`: it has none — a snapshot of Keel's private
    /// repository, or one taken before this store).
    pub(crate) fn manifest_of(&self, tree: &str) -> Option<Manifest> {
        let spec = format!("{tree}:{}{MANIFEST}", self.prefix);
        let id = self
            .stdout(&["rev-parse", "--verify", "--quiet", &spec])
            .ok()?;
        let store = self.store().ok()?;
        let text = store
            .resolve_literal(Path::new(&format!("m-{id}")))
            .ok()?
            .read_bounded(MAX_MANIFEST)
            .ok()?;
        Some(parse(&String::from_utf8_lossy(&text)))
    }

    /// Makes the workspace's ignored files match the manifest of `target` (from `current`'s):
    /// changed or missing ones written back with their mode, ones the target did not have
    /// removed. Nothing happens when the target has no manifest.
    pub(crate) fn restore_ignored(
        &self,
        current: &str,
        target: &str,
        report: &mut RestoreReport,
    ) -> Result<(), SnapshotError> {
        let Some(wanted) = self.manifest_of(target) else {
            return Ok(());
        };
        let have = self.manifest_of(current).unwrap_or_default();
        let store = self.store()?;
        let store_path = self.stage_dir.join(STORE);
        let ws = keel_tools::Workspace::new(&self.workspace).map_err(|e| {
            io(
                "open",
                &self.workspace,
                std::io::Error::other(e.to_string()),
            )
        })?;
        for (path, entry) in &wanted {
            if have.get(path) == Some(entry) {
                continue;
            }
            let bytes = store
                .resolve_literal(Path::new(&format!("f-{}", entry.key)))
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|at| at.read_bounded(IGNORED_MAX_BYTES))
                .map_err(|e| io("read", &store_path, e))?;
            let full = self.workspace.join(path);
            let target = ws
                .locate_entry(path)
                .map_err(|e| io("write", &full, std::io::Error::other(e.to_string())))?;
            target
                .write_atomic(&bytes, WriteMode::Replace, Some(entry.mode))
                .map_err(|e| io("write", &full, e))?;
            if have.contains_key(path) {
                report.modified.push(path.clone());
            } else {
                report.recreated.push(path.clone());
            }
        }
        for path in have.keys().filter(|p| !wanted.contains_key(*p)) {
            if let Ok(t) = ws.locate_entry(path)
                && matches!(t.info(), Ok(Some(i)) if i.kind != keel_tools::fs::FileKind::Dir)
                && t.remove_file().is_ok()
            {
                report.removed.push(path.clone());
            }
        }
        Ok(())
    }
}

/// Copies in the side store younger than this are kept by [`Git::sweep_ignored`]: a snapshot
/// being taken writes its files before its ref exists.
const SWEEP_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

impl Git {
    /// Drops what the side store keeps for no snapshot any more (red-team pass 8, R8-19: after
    /// `keel sessions rm` every version of every small ignored file — a rotated `.env` too —
    /// stayed in the repository's directory): every manifest copy (`m-<id>`) that no ref of
    /// Keel's reaches, and every file copy (`f-<key>`) that no kept manifest names. Copies
    /// written in the last [`SWEEP_GRACE`] stay. Returns how many copies were removed.
    pub(crate) fn sweep_ignored(&self) -> Result<usize, SnapshotError> {
        if !self.ignored_aside() || !self.stage_dir.join(STORE).is_dir() {
            return Ok(0);
        }
        let out = self.run(&["rev-list", "--objects", "--glob=refs/keel/*"], None)?;
        let manifests: std::collections::BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .filter(|(_, path)| path.ends_with(MANIFEST))
            .map(|(id, _)| format!("m-{id}"))
            .collect();
        let store = self.store()?;
        let store_path = self.stage_dir.join(STORE);
        let mut keys = std::collections::BTreeSet::new();
        for m in &manifests {
            let Ok(text) = store
                .resolve_literal(Path::new(m))
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|at| at.read_bounded(MAX_MANIFEST))
            else {
                continue;
            };
            keys.extend(
                parse(&String::from_utf8_lossy(&text))
                    .into_values()
                    .map(|e| format!("f-{}", e.key)),
            );
        }
        let entries = std::fs::read_dir(&store_path).map_err(|e| io("list", &store_path, e))?;
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let dead = (name.starts_with("m-") && !manifests.contains(name))
                || (name.starts_with("f-") && !keys.contains(name));
            let young = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_none_or(|age| age < SWEEP_GRACE);
            if dead
                && !young
                && store
                    .resolve_literal(Path::new(name))
                    .is_ok_and(|at| at.remove_file().is_ok())
            {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back() {
        let key = "a".repeat(64);
        let m = parse(&format!("{key} 0600 .env\n{key} 0644 dir/a b\nbad line\n"));
        assert_eq!(m.len(), 2);
        assert_eq!(m[".env"].mode, 0o600);
        assert!(m.contains_key("dir/a b"));
    }
}
