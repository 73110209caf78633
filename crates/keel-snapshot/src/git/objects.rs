//! Keel's staging directory in the snapshot repository's git directory, and the way new
//! objects get from the staging git into the repository.
//!
//! The staging git (`git add` inside the sandbox) reads the live work tree, so anything git
//! may be led into running there (a filter an include defines after Keel's probe: red-team
//! pass 5, R5-1) runs with that git's rights. It may write only [`STAGE_DIR`](super::STAGE_DIR):
//! Keel's index, and a fresh object directory per staging ([`StagingObjects`]). Nothing of the
//! user's git directory — config, hooks, `commondir`, refs, `objects/` — and nothing of the
//! work tree.
//!
//! What the staging git wrote is then untrusted: a loose object there may hold other content
//! than its name says (a program could write `objects/ab/cd…` with the bytes of a planted
//! hook, named after a blob the user's next `git checkout` writes). So Keel never moves those
//! files: [`Git::absorb`] packs them (`git pack-objects`, reading only the staging directory)
//! and `git unpack-objects` writes each object into the repository under the name its
//! content hashes to. An object whose name lied ends up under its true name, the one the
//! index names is then missing, and `write-tree` fails the snapshot instead of recording it.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{Git, RepoKind};
use crate::error::SnapshotError;
use crate::layout::{WORK_DEADLINE, pipe_within};
use keel_tools::safe_git::{config_env_supported, hardened_git};

/// How old a staging object directory must be before a later snapshot removes it as left
/// behind by a Keel that was killed (twice the staging deadline).
const STALE: Duration = Duration::from_secs(2 * WORK_DEADLINE.as_secs());

/// One staging's object directory (`keel/objects-<pid>-<n>`), removed when dropped.
pub(super) struct StagingObjects {
    path: PathBuf,
}

impl StagingObjects {
    /// A fresh, empty object directory (0700) in `stage_dir`.
    pub(super) fn create(stage_dir: &Path) -> io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = stage_dir.join(format!("objects-{}-{n}", std::process::id()));
        if path.symlink_metadata().is_ok() {
            remove_any(&path)?;
        }
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Self { path })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The objects in the directory: loose ones by their file names, packed ones (a file
    /// over `core.bigFileThreshold` is streamed into a pack) by `packed` listing them.
    fn ids(
        &self,
        packed: impl FnOnce() -> Result<Vec<String>, SnapshotError>,
    ) -> Result<Vec<String>, SnapshotError> {
        let mut ids = Vec::new();
        let mut has_pack = false;
        let Ok(entries) = std::fs::read_dir(&self.path) else {
            return Ok(ids);
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if name == "pack" && is_dir {
                has_pack = std::fs::read_dir(entry.path()).is_ok_and(|mut d| {
                    d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".pack")))
                });
                continue;
            }
            if !(is_dir && name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit())) {
                continue;
            }
            let Ok(files) = std::fs::read_dir(entry.path()) else {
                continue;
            };
            for file in files.flatten() {
                let rest = file.file_name();
                let rest = rest.to_string_lossy();
                if matches!(rest.len(), 38 | 62)
                    && rest.bytes().all(|b| b.is_ascii_hexdigit())
                    && file.file_type().is_ok_and(|t| t.is_file())
                {
                    ids.push(format!("{name}{rest}").to_ascii_lowercase());
                }
            }
        }
        if has_pack {
            ids.extend(packed()?);
        }
        ids.sort();
        ids.dedup();
        Ok(ids)
    }
}

impl Drop for StagingObjects {
    fn drop(&mut self) {
        let _ = remove_any(&self.path);
    }
}

/// Removes `path` whatever it is (a directory with all it holds; a link itself, never what
/// it points to).
fn remove_any(path: &Path) -> io::Result<()> {
    match path.symlink_metadata() {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

impl Git {
    /// Makes Keel's staging directory (0700) when it is missing, moves an older Keel's index
    /// into it, and removes object directories a killed Keel left there.
    pub(super) fn prepare_stage_dir(&self) -> Result<(), SnapshotError> {
        let io = |source: io::Error| SnapshotError::Io {
            action: "prepare Keel's staging directory",
            path: self.stage_dir.display().to_string(),
            source,
        };
        match self.stage_dir.symlink_metadata() {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(io(io::Error::other(
                    "it is not a directory (Keel keeps its snapshot index there); remove it",
                )));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&self.stage_dir)
                {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(io(e)),
                }
            }
            Err(e) => return Err(io(e)),
        }
        if self.index.symlink_metadata().is_err() {
            // Where an older Keel kept its index (its stat data spares a rehash of the tree).
            let old = match &self.kind {
                RepoKind::User { git_dir } => git_dir.join("keel-snapshot.index"),
                RepoKind::Private { git_dir } => git_dir.join("index"),
            };
            if old.symlink_metadata().is_ok_and(|m| m.is_file()) {
                let _ = std::fs::rename(&old, &self.index);
            }
        }
        if let Ok(entries) = std::fs::read_dir(&self.stage_dir) {
            for entry in entries.flatten() {
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE));
                if stale && entry.file_name().to_string_lossy().starts_with("objects-") {
                    let _ = remove_any(&entry.path());
                }
            }
        }
        Ok(())
    }

    /// Moves the objects the staging git wrote into the repository, each under the name its
    /// content hashes to (see the module documentation). Nothing to do when it wrote none.
    pub(super) fn absorb(&self, staged: &StagingObjects) -> Result<Vec<String>, SnapshotError> {
        // An `info/alternates` there would have git look elsewhere for what it cannot find.
        let _ = remove_any(&staged.path().join("info"));
        let ids = staged.ids(|| self.packed_ids(staged))?;
        if ids.is_empty() {
            return Ok(ids);
        }
        let overrides = self.driver_overrides()?;
        let args = [
            "pack-objects",
            "--stdout",
            "-q",
            "--window=0",
            "--depth=0",
            "--no-reuse-delta",
        ];
        let mut pack = self.plain(&overrides, &["pack.compression=0"], &args)?;
        pack.env("GIT_OBJECT_DIRECTORY", staged.path());
        let mut unpack = self.plain(&overrides, &[], &["unpack-objects", "-q"])?;
        unpack.env("GIT_OBJECT_DIRECTORY", self.common_dir.join("objects"));
        let mut list = ids.join("\n");
        list.push('\n');
        let (packed, unpacked) = pipe_within(pack, list.as_bytes(), unpack, WORK_DEADLINE)
            .map_err(|e| self.fail(&args, e.to_string()))?;
        for (out, what) in [(&packed, "pack-objects"), (&unpacked, "unpack-objects")] {
            if !out.status.success() {
                return Err(self.fail(
                    &[what],
                    format!(
                        "could not move the staged objects into the repository: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ),
                ));
            }
        }
        Ok(ids)
    }

    /// Makes the loose objects `ids` in the repository owner-only (0400) where they are
    /// readable by others: the blobs of files the user keeps private, written under a
    /// repository that sets its own `core.sharedRepository` (red-team pass 7, R7-17: a shipped
    /// `world` left a 0600 file's content in a 0444 object). Only regular files this user
    /// owns, reached without following a link; best effort (a failure leaves the object as
    /// git made it).
    pub(super) fn owner_only(&self, ids: &[String]) {
        use rustix::fs::{Mode, OFlags, fchmod, fstat, openat};
        let objects = self.common_dir.join("objects");
        let me = rustix::process::geteuid();
        for id in ids {
            let (Some(dir), Some(name)) = (id.get(..2), id.get(2..)) else {
                continue;
            };
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let Ok(parent) =
                rustix::fs::open(objects.join(dir), flags | OFlags::DIRECTORY, Mode::empty())
            else {
                continue;
            };
            let Ok(fd) = openat(&parent, name, flags | OFlags::NONBLOCK, Mode::empty()) else {
                continue;
            };
            let Ok(st) = fstat(&fd) else {
                continue;
            };
            let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
            if kind == rustix::fs::FileType::RegularFile
                && st.st_uid == me.as_raw()
                && st.st_mode & 0o077 != 0
            {
                let _ = fchmod(&fd, Mode::from_raw_mode(0o400));
            }
        }
    }

    /// The ids of the objects in the staging directory's packs.
    fn packed_ids(&self, staged: &StagingObjects) -> Result<Vec<String>, SnapshotError> {
        let args = [
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname)",
        ];
        let overrides = self.driver_overrides()?;
        let mut c = self.plain(&overrides, &[], &args)?;
        c.env("GIT_OBJECT_DIRECTORY", staged.path());
        let out = crate::layout::output_within(c, None, WORK_DEADLINE)
            .map_err(|e| self.fail(&args, e.to_string()))?;
        let out = self.finish(&args, Ok(out))?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect())
    }

    /// A hardened git against the repository that opens nothing of the work tree (no
    /// excludes file, no index of Keel's needed), with `overrides` and `settings`.
    fn plain(
        &self,
        overrides: &[(String, String)],
        settings: &[&str],
        args: &[&str],
    ) -> Result<std::process::Command, SnapshotError> {
        let mut c =
            hardened_git(overrides, config_env_supported()).map_err(|m| self.fail(args, m))?;
        c.env("GIT_DIR", self.git_dir());
        for setting in settings {
            c.args(["-c", setting]);
        }
        c.args(args).current_dir(self.git_dir());
        Ok(c)
    }
}

/// `dir` as one entry of `GIT_ALTERNATE_OBJECT_DIRECTORIES` (git splits the list at `:` and
/// reads an entry starting with `"` as a C-quoted string).
pub(super) fn alternate_entry(dir: &Path) -> std::ffi::OsString {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let bytes = dir.as_os_str().as_bytes();
    if !bytes.iter().any(|b| matches!(b, b':' | b'"' | b'\\')) {
        return dir.as_os_str().to_os_string();
    }
    let mut out = vec![b'"'];
    for b in bytes {
        if matches!(b, b'"' | b'\\') {
            out.push(b'\\');
        }
        out.push(*b);
    }
    out.push(b'"');
    std::ffi::OsString::from_vec(out)
}
