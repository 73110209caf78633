//! Programs for the user's git that a command creates (red-team pass 4, R4-3's gap): the
//! work-tree paths git's configuration and the installed hooks name
//! ([`crate::sandbox::git_config_paths`]) are mounted read-only for commands — but only those
//! that exist can be mounted. `core.hooksPath = .githooks` with no `.githooks` yet, a
//! `lefthook-local.yml` lefthook would read, an include target not there: a command could
//! create it, and the user's next `git commit` would run it unconfined.
//!
//! So the one command runner ([`super::exec::run`], through [`super::nested_git::Watch`])
//! notes which of them are missing before a command that may write, and after it renames each
//! one that appeared (or, where nothing confined the command, changed) to
//! `<name>.quarantined-by-keel`, reporting it in the command's result. One list feeds the
//! three guards — the file tools' refusal, the read-only mounts and this check — so a source
//! of such paths added to that list is guarded everywhere at once.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The suffix a quarantined program path gets (a number is added when taken).
pub(super) const SUFFIX: &str = ".quarantined-by-keel";
/// The most entries looked at below one path when checking for changes.
const MAX_LOOK: usize = 2_000;

/// The configured program paths before a command: which existed.
#[derive(Debug)]
pub(crate) struct Before {
    /// (path, key, is a tree of installed code, existed)
    paths: Vec<(PathBuf, String, bool, bool)>,
    /// For a writer nothing confines (a restore): what each existing path that is not a tree
    /// looked like ([`fingerprint`]), so that what changed is told by identity, not by times
    /// — a file the user had edited just before `keel undo` was taken for the restore's.
    prints: Vec<Option<u64>>,
}

/// One program path moved out of git's way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    moved_from: PathBuf,
    /// Workspace-relative.
    pub path: String,
    /// Where it went (workspace-relative).
    pub moved_to: String,
    /// What names it (`core.hookspath`, `lefthook, run by hook `pre-commit``).
    pub key: String,
}

impl Before {
    /// Notes the configured program paths of `workspace` and which exist; with `prints`
    /// (a writer nothing confines), what each existing one looks like.
    pub(crate) fn note(workspace: &Path, prints: bool) -> Self {
        let paths: Vec<(PathBuf, String, bool, bool)> = crate::sandbox::git_config_paths(workspace)
            .into_iter()
            .map(|p| {
                let exists = std::fs::symlink_metadata(workspace.join(&p.path)).is_ok();
                (p.path, p.key, p.tree, exists)
            })
            .collect();
        let prints = paths
            .iter()
            .map(|(p, _, tree, exists)| {
                (prints && *exists && !tree)
                    .then(|| fingerprint(&workspace.join(p)))
                    .flatten()
            })
            .collect();
        Self { paths, prints }
    }

    /// The program paths, absolute (beneath `workspace`): the links on the way to them are
    /// noted too ([`super::store_links`], R7-27).
    pub(crate) fn absolute(&self, workspace: &Path) -> Vec<PathBuf> {
        self.paths.iter().map(|(p, ..)| workspace.join(p)).collect()
    }

    /// The journal's form ([`super::pending`]): (path bytes, key, is a tree, existed).
    pub(crate) fn entries(&self) -> Vec<(Vec<u8>, String, bool, bool)> {
        self.paths
            .iter()
            .map(|(p, k, t, e)| (super::pending::path_bytes(p), k.clone(), *t, *e))
            .collect()
    }

    /// [`Self::entries`] read back, for `workspace`: only paths its git configuration names
    /// now (red-team pass 8, R8-15: a forged entry could have named any file to rename aside).
    pub(crate) fn from_entries(
        entries: Vec<(Vec<u8>, String, bool, bool)>,
        workspace: &Path,
    ) -> Self {
        let listed: Vec<PathBuf> = crate::sandbox::git_config_paths(workspace)
            .into_iter()
            .map(|p| p.path)
            .collect();
        let paths: Vec<_> = entries
            .into_iter()
            .map(|(p, k, t, e)| (super::pending::bytes_path(&p), k, t, e))
            .filter(|(p, ..)| listed.contains(p))
            .collect();
        let prints = vec![None; paths.len()];
        Self { paths, prints }
    }

    /// After a command that started at `since`: moves every configured program path that
    /// appeared — or, when `confined` is false (nothing kept the existing ones read-only),
    /// that changed — out of git's way. The list is read again (an include target or a link
    /// the command created can name more).
    pub(crate) fn after(self, workspace: &Path, since: SystemTime, confined: bool) -> Vec<Moved> {
        let since = since.checked_sub(Duration::from_secs(1)).unwrap_or(since);
        // (path, key, tree, existed before: `None` when not known before — not protected
        // then, what it looked like)
        type Entry = (PathBuf, String, bool, Option<bool>, Option<u64>);
        let mut all: Vec<Entry> = self
            .paths
            .into_iter()
            .zip(self.prints.into_iter().chain(std::iter::repeat(None)))
            .map(|((p, k, t, e), print)| (p, k, t, Some(e), print))
            .collect();
        for p in crate::sandbox::git_config_paths(workspace) {
            if !all.iter().any(|(q, ..)| *q == p.path) {
                all.push((p.path, p.key, p.tree, None, None));
            }
        }
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<Moved> = Vec::new();
        for (rel, key, tree, existed, print) in all {
            if out.iter().any(|m| rel.starts_with(&m.moved_from)) {
                continue;
            }
            let abs = workspace.join(&rel);
            if std::fs::symlink_metadata(&abs).is_err() {
                continue;
            }
            let suspect = match existed {
                Some(false) => true,
                // A tree of installed code (`node_modules`) is too large to look through after
                // every command; it was read-only while it ran. Unconfined, nothing was.
                Some(true) if tree => false,
                // Mounted read-only while it ran, unless nothing confined it: then changed
                // by what it looks like, where that was noted.
                Some(true) => {
                    !confined
                        && match print {
                            Some(before) => fingerprint(&abs) != Some(before),
                            None => changed_below(&abs, since),
                        }
                }
                // A path that joined the list during the command was protected by nothing
                // while it ran, and its age says nothing: a directory the model filled in an
                // earlier command, moved or linked into place now (`mv x frontend`, with the
                // hook's `cd frontend`), keeps its old times (red-team pass 7, R7-27).
                None => true,
            };
            if !suspect {
                continue;
            }
            // A rename that failed is said as loudly as one that worked (R7-21).
            let moved_to =
                quarantine(workspace, &rel).map_or_else(String::new, |to| to.display().to_string());
            out.push(Moved {
                moved_from: rel.clone(),
                path: rel.display().to_string(),
                moved_to,
                key,
            });
        }
        out
    }
}

/// After a command that started at `since`: each of `candidates` (absolute entries the
/// runner's walk found whose names a hook tool reading its configuration in every directory
/// may take: [`crate::sandbox::may_be_discovered`]) that changed since then and that such a
/// tool would read (`sub/.lintstagedrc.json`, a `sub/package.json` holding `"lint-staged"`)
/// is moved out of git's way like a listed path — unless `moved` already holds it
/// (red-team pass 6, R6-9).
pub(crate) fn discovered_after(
    workspace: &Path,
    since: SystemTime,
    candidates: &[PathBuf],
    moved: &[Moved],
) -> Vec<Moved> {
    let since = since.checked_sub(Duration::from_secs(1)).unwrap_or(since);
    let mut out = Vec::new();
    for abs in candidates {
        let Ok(rel) = abs.strip_prefix(workspace) else {
            continue;
        };
        if moved.iter().any(|m| rel.starts_with(&m.moved_from))
            || !std::fs::symlink_metadata(abs).is_ok_and(|m| changed_since(&m, since))
        {
            continue;
        }
        let Some(named) = crate::sandbox::hook_tool_config_of(workspace, rel) else {
            continue;
        };
        // A rename that failed is said, not skipped (R7-21).
        let moved_to =
            quarantine(workspace, rel).map_or_else(String::new, |to| to.display().to_string());
        out.push(Moved {
            moved_from: rel.to_path_buf(),
            path: rel.display().to_string(),
            moved_to,
            key: named.key,
        });
    }
    out
}

/// What a file tool's write made into a path the user's git reads or runs (a `package.json`
/// given a `"lint-staged"` section, a `sub/.lintstagedrc.js` where none was listed): each
/// such written path (workspace-relative, as the tool reports it) is moved out of git's way,
/// and the note for the tool's result says so. The file tools refuse listed paths before
/// writing; this catches what only the written content makes one (red-team pass 6, R6-9).
pub fn after_file_write(workspace: &Path, written: &[String]) -> Option<String> {
    let mut out = Vec::new();
    for rel in written {
        let rel = Path::new(rel.trim_start_matches("./"));
        if rel.as_os_str().is_empty() || std::fs::symlink_metadata(workspace.join(rel)).is_err() {
            continue;
        }
        let Some(named) = crate::sandbox::git_config_path_of(workspace, rel) else {
            continue;
        };
        if let Some(to) = quarantine(workspace, rel) {
            out.push(Moved {
                moved_from: rel.to_path_buf(),
                path: rel.display().to_string(),
                moved_to: to.display().to_string(),
                key: named.key,
            });
        }
    }
    report(&out)
}

/// Whether the inode changed at or after `since`.
fn changed_since(meta: &std::fs::Metadata, since: SystemTime) -> bool {
    let ctime = SystemTime::UNIX_EPOCH
        + Duration::new(
            u64::try_from(meta.ctime()).unwrap_or(0),
            u32::try_from(meta.ctime_nsec()).unwrap_or(0),
        );
    ctime >= since
}

/// Whether anything at or below `abs` (two directory levels, bounded) changed since `since`.
/// What `abs` and the entries below it (two levels, at most [`MAX_LOOK`]) look like: a hash
/// of each one's name, inode, size, mode and times. `None` when there are more.
fn fingerprint(abs: &Path) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut stack = vec![(abs.to_path_buf(), 0usize)];
    let mut looked = 0usize;
    while let Some((p, depth)) = stack.pop() {
        looked += 1;
        if looked > MAX_LOOK {
            return None;
        }
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        p.hash(&mut h);
        (
            meta.ino(),
            meta.size(),
            meta.mode(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
        )
            .hash(&mut h);
        if meta.is_dir()
            && depth < 2
            && let Ok(entries) = std::fs::read_dir(&p)
        {
            let mut below: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            below.sort();
            stack.extend(below.into_iter().rev().map(|e| (e, depth + 1)));
        }
    }
    Some(h.finish())
}

fn changed_below(abs: &Path, since: SystemTime) -> bool {
    let mut stack = vec![(abs.to_path_buf(), 0usize)];
    let mut looked = 0usize;
    while let Some((p, depth)) = stack.pop() {
        looked += 1;
        if looked > MAX_LOOK {
            return true;
        }
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if changed_since(&meta, since) {
            return true;
        }
        if meta.is_dir()
            && depth < 2
            && let Ok(entries) = std::fs::read_dir(&p)
        {
            stack.extend(entries.flatten().map(|e| (e.path(), depth + 1)));
        }
    }
    false
}

/// Renames `rel` to a free `<name>.quarantined-by-keel` beside it, within its open parent
/// (beneath the workspace handle). The new workspace-relative path, or `None`.
pub(super) fn quarantine(workspace: &Path, rel: &Path) -> Option<PathBuf> {
    let ws = keel_fs::beneath::DirHandle::open(workspace).ok()?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    let name = rel.file_name()?;
    let mut base = name.to_os_string();
    base.push(SUFFIX);
    match ws.subdir(parent) {
        Ok(dir) => rename_aside(dir.fd(), name, &base),
        // Beneath a store the handle refuses to enter (a home workspace's `~/.aws`, absent
        // when the command started: R9-6): the directory reached with no link followed.
        Err(keel_fs::beneath::ResolveError::Protected(_)) => {
            let dir = open_literal(ws.fd(), parent)?;
            rename_aside(std::os::fd::AsFd::as_fd(&dir), name, &base)
        }
        Err(_) => None,
    }
    .map(|to| parent.join(to))
}

/// The directory `rel` beneath `root`, each component opened from its parent with
/// `O_NOFOLLOW` (no symlink on the way, so nothing outside `root`).
fn open_literal(root: std::os::fd::BorrowedFd<'_>, rel: &Path) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = rustix::fs::openat(root, ".", flags, Mode::empty()).ok()?;
    for c in rel.components() {
        let std::path::Component::Normal(n) = c else {
            return None;
        };
        dir = rustix::fs::openat(&dir, n, flags, Mode::empty()).ok()?;
    }
    Some(dir)
}

/// Renames `from` in the open directory `dir` to the first free name of `base`, `base-1`, …
/// (at most 100 tried); the name it got, or `None`.
///
/// A command cannot pre-empt it (red-team pass 7, R7-21: it pre-created all 100 names, or made
/// the parent unwritable with `chmod 555`, and the quarantine gave up silently): past the
/// numbered names a random one is tried, and a parent the owner cannot write to gets its
/// owner's write bit back (it is the user's own workspace) before a second try. A `None` is
/// reported by the caller as a failure, never skipped.
pub(super) fn rename_aside(
    dir: std::os::fd::BorrowedFd<'_>,
    from: &std::ffi::OsStr,
    base: &std::ffi::OsStr,
) -> Option<std::ffi::OsString> {
    let free = |to: &std::ffi::OsStr| {
        rustix::fs::statat(dir, to, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_err()
    };
    let mut names = (0..100).map(|n| {
        let mut to = base.to_os_string();
        if n > 0 {
            to.push(format!("-{n}"));
        }
        to
    });
    let to = names
        .find(|to| free(to))
        .or_else(|| (0..8).map(|_| random_name(base)).find(|to| free(to)))?;
    match rustix::fs::renameat(dir, from, dir, to.as_os_str()) {
        Ok(()) => Some(to),
        Err(rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) => {
            let mode = rustix::fs::fstat(dir).ok()?.st_mode;
            let wanted = rustix::fs::Mode::from_raw_mode(mode | 0o700);
            // An `O_PATH` descriptor (a directory left unreadable too) takes no `fchmod`: its
            // `/proc/self/fd` link names the same directory.
            if rustix::fs::fchmod(dir, wanted).is_err() {
                use std::os::fd::AsRawFd;
                let link = format!("/proc/self/fd/{}", dir.as_raw_fd());
                rustix::fs::chmod(link.as_str(), wanted).ok()?;
            }
            rustix::fs::renameat(dir, from, dir, to.as_os_str())
                .ok()
                .map(|()| to)
        }
        Err(_) => None,
    }
}

/// `base` with 16 random hex digits added.
#[allow(clippy::disallowed_methods)] // not a project file: the kernel's random source
fn random_name(base: &std::ffi::OsStr) -> std::ffi::OsString {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    let _ = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    let mut to = base.to_os_string();
    to.push("-");
    for b in bytes {
        to.push(format!("{b:02x}"));
    }
    to
}

/// The report of what was moved, for the command's result.
pub fn report(moved: &[Moved]) -> Option<String> {
    if moved.is_empty() {
        return None;
    }
    let mut text = String::from(
        "keel: the command created files that the user's own git or tools would run outside the sandbox (hooks, hook-manager configuration, programs git's configuration names, tools' own configuration); Keel moved them out of the way:",
    );
    for m in moved {
        if m.moved_to.is_empty() {
            text.push_str(&format!(
                "\n- `{}` ({}) COULD NOT be moved: the user must remove it before running git or that tool here",
                m.path, m.key
            ));
            continue;
        }
        text.push_str(&format!(
            "\n- `{}` ({}) moved to `{}`",
            m.path, m.key, m.moved_to
        ));
    }
    text.push_str("\nDo not create or change these; tell the user what should change and why.");
    Some(text)
}
