//! File access by capability: every path inside the workspace is resolved beneath an open
//! directory handle ([`DirHandle`]), never by joining strings and asking the kernel to walk
//! them again later.
//!
//! Resolution yields a [`ResolvedPath`]: the deepest existing directory on the way, *open*,
//! and the name (plus any directories still to create) below it. Every operation — read,
//! atomic write (temp file, then `renameat` in that same open directory), `mkdir -p`, delete —
//! works on that open directory with `O_NOFOLLOW`, so a component swapped for a symlink
//! between resolution and use makes the operation fail; it can never send it outside.
//!
//! Resolution itself has a fast path and a walk:
//! - `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` opens the parent
//!   directory in one call when no symlink is on the way (the common case: the canonical path
//!   is then the path as given).
//! - Otherwise (a symlink on the way, a missing directory, or a kernel without `openat2`) the
//!   path is walked one component at a time from the root with `O_NOFOLLOW | O_DIRECTORY`;
//!   symlinks are read with `readlinkat` and followed by hand, kept beneath the root (a
//!   relative `..` past it, or an absolute target elsewhere, is refused). This walk alone is
//!   enough for safety; `openat2` only makes the common case one system call.

mod fence;
mod ops;
mod shared;

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

pub use fence::{Fence, Fenced};
pub(crate) use ops::{Created, Staged};
pub use ops::{FileInfo, FileKind, WHOLE_READ_LIMIT, WriteMode};
pub use shared::Shared;

/// The most symlinks followed while resolving one path (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Set once `openat2` turned out to be missing (an old kernel, or a seccomp filter).
static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);
/// Tests and the benchmark: resolve by walking components even where `openat2` exists.
static FORCE_WALK: AtomicBool = AtomicBool::new(false);

/// Makes every resolution in this process walk components (the fallback for kernels without
/// `openat2`) instead of calling `openat2`. For tests and benchmarks of the fallback; both
/// ways are equally safe.
#[doc(hidden)]
pub fn force_component_walk(on: bool) {
    FORCE_WALK.store(on, Ordering::SeqCst);
}

/// Whether this process resolves with `openat2` (false: the component walk).
pub fn uses_openat2() -> bool {
    !FORCE_WALK.load(Ordering::Relaxed) && !OPENAT2_MISSING.load(Ordering::Relaxed)
}

/// An open directory that paths are resolved beneath. Cheap to clone (the descriptor is
/// shared).
#[derive(Debug, Clone)]
pub struct DirHandle {
    fd: Arc<OwnedFd>,
    /// The canonical path the directory had when it was opened (for messages, for absolute
    /// symlinks pointing back inside, and for commands, which still need a path).
    path: PathBuf,
    /// The protected stores beneath it (usually none): never resolved into, never listed.
    fence: Arc<Fence>,
    /// [`crate::stores::registered_count`] before the fence was built: the registered paths
    /// it holds for certain (a shared handle adds later ones, [`shared`]).
    registered: usize,
}

/// Why a path could not be resolved beneath the handle.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// A symlink on the way leads outside the directory.
    #[error("it resolves through a symlink to `{target}`, outside")]
    Escape { target: String },
    /// A symlink on the way points at something that does not exist.
    #[error("it is a symlink whose target does not exist")]
    Dangling,
    /// A component that should be a directory is not one.
    #[error("`{0}` is not a directory")]
    NotADirectory(String),
    /// More than [`MAX_LINKS`] symlinks (a loop).
    #[error("too many levels of symlinks (a symlink loop?)")]
    TooManyLinks,
    /// It lies in one of the user's secret stores or Keel's own data ([`crate::stores`]).
    #[error("{0}")]
    Protected(Fenced),
    /// A symlink inside redirects a path that must be taken literally
    /// ([`DirHandle::resolve_literal`]).
    #[error(
        "it goes through a symlink (to `{target}`); Keel writes its own files only where their path says, never through a link"
    )]
    Redirected { target: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl DirHandle {
    /// Opens the directory at `path` (canonicalised first, so a directory reached through a
    /// symlink is fine).
    /// While a handle of the directory is shared ([`Self::share`]), that handle.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        // A path spelled as a shared handle's (canonical) one is that handle when the
        // directory there is still the one that was shared (`find` compares device and
        // inode): no need to canonicalise it first, one `readlink` per component.
        if path.is_absolute()
            && let Some(shared) = shared::find(path)
        {
            return Ok(shared);
        }
        let canonical = path.canonicalize()?;
        if canonical != path
            && let Some(shared) = shared::find(&canonical)
        {
            return Ok(shared);
        }
        let fd = open_dir_at(rustix::fs::CWD, canonical.as_os_str(), OFlags::empty())?;
        let registered = crate::stores::registered_count();
        let fence = Fence::for_root(&canonical, &fd);
        Ok(Self {
            fd: Arc::new(fd),
            path: canonical,
            fence: Arc::new(fence),
            registered,
        })
    }

    /// Shares this handle: while the guard lives, [`Self::open`] of the same directory in this
    /// process returns it (the same descriptor and protected-store fence) instead of opening
    /// and fencing again — for a front end's session, whose configuration, instructions,
    /// tools and index each open the workspace ([`shared`]). A path registered as Keel's own
    /// after the handle was opened ([`crate::stores::register_keel_path`]: the session's
    /// database) is added to the shared handle's fence before it is given out again.
    pub fn share(&self) -> Shared {
        shared::share(self)
    }

    /// The canonical path of the directory when it was opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open directory.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The protected stores beneath this directory ([`crate::stores`]).
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// `Err` when `found` lies in a protected store (see [`Fence`]).
    fn fenced(&self, found: ResolvedPath) -> Result<ResolvedPath, ResolveError> {
        if self.fence.is_empty() {
            return Ok(found);
        }
        let final_id = found.seen.map(|i| i.id());
        match self.fence.check(&found.rel, final_id, &found.base) {
            Some(f) => Err(ResolveError::Protected(f)),
            None => Ok(found),
        }
    }

    /// Resolves `rel` — relative, made only of normal components (callers refuse absolute
    /// paths and `..` with their own messages first) — beneath this directory. Symlinks that
    /// stay inside are followed, the final one included; the result names the file by its
    /// canonical relative path.
    pub fn resolve(&self, rel: &Path) -> Result<ResolvedPath, ResolveError> {
        let comps: Vec<OsString> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                _ => None,
            })
            .collect();
        if comps.is_empty() {
            return Ok(self.at_root());
        }
        if uses_openat2()
            && let Some(found) = self.resolve_fast(&comps)?
        {
            return self.fenced(found);
        }
        let found = self.walk(comps)?;
        self.fenced(found)
    }

    /// Like [`Self::resolve`], but no symlink may redirect the path, on the way or at its end:
    /// the file is the one its literal path names. For files Keel itself writes under
    /// `.keel/` (`keel init`'s, a flow's PR description): a link there is repository content,
    /// not a place to write through — `.keel/flows/hk -> ../../.husky` once turned a PR
    /// description into the user's pre-commit hook (red-team pass 6, R6-11).
    pub fn resolve_literal(&self, rel: &Path) -> Result<ResolvedPath, ResolveError> {
        let found = self.resolve(rel)?;
        let literal: PathBuf = rel
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        if found.rel != literal {
            return Err(ResolveError::Redirected {
                target: found.rel_string(),
            });
        }
        Ok(found)
    }

    /// Like [`Self::resolve`], but a final symlink is not followed: the result names the
    /// entry itself (to delete a link, say). Links on the way are followed as usual.
    pub fn resolve_entry(&self, rel: &Path) -> Result<ResolvedPath, ResolveError> {
        let (Some(name), Some(parent)) = (rel.file_name(), rel.parent()) else {
            return self.resolve(rel);
        };
        let dir = self.resolve(parent)?;
        let mut rel_out = dir.rel.clone();
        rel_out.push(name);
        if !dir.missing.is_empty() || dir.info().ok().flatten().is_none() {
            let mut missing = dir.missing.clone();
            missing.extend(dir.name.clone());
            return self.fenced(ResolvedPath {
                base: dir.base.clone(),
                missing,
                name: Some(name.to_os_string()),
                rel: rel_out,
                root: self.path.clone(),
                seen: None,
            });
        }
        let base = match &dir.name {
            None => dir.base.clone(),
            Some(_) => Arc::new(dir.open_dir()?),
        };
        let found = ResolvedPath {
            base,
            missing: Vec::new(),
            name: Some(name.to_os_string()),
            rel: rel_out,
            root: self.path.clone(),
            seen: None,
        };
        if !self.fence.is_empty() {
            let id = rustix::fs::statat(found.base.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|st| FileInfo::from_stat(&st).id());
            if let Some(f) = self.fence.check(&found.rel, id, &found.base) {
                return Err(ResolveError::Protected(f));
            }
        }
        Ok(found)
    }

    /// The directory `rel` beneath this one, opened as a handle of its own (what is resolved
    /// beneath it stays beneath it).
    pub fn subdir(&self, rel: &Path) -> Result<DirHandle, ResolveError> {
        let found = self.resolve(rel)?;
        let fd = found.open_dir()?;
        let fence = self.fence.below(found.rel(), &fd);
        Ok(DirHandle {
            fd: Arc::new(fd),
            path: found.abs(),
            fence: Arc::new(fence),
            registered: self.registered,
        })
    }

    fn at_root(&self) -> ResolvedPath {
        ResolvedPath {
            base: self.fd.clone(),
            missing: Vec::new(),
            name: None,
            rel: PathBuf::new(),
            root: self.path.clone(),
            seen: None,
        }
    }

    /// One `openat2` for the parent directory when no symlink is on the way; `None` sends the
    /// caller to the component walk (a symlink, a missing directory, no `openat2`).
    fn resolve_fast(&self, comps: &[OsString]) -> Result<Option<ResolvedPath>, ResolveError> {
        let (name, parents) = match comps.split_last() {
            Some(split) => split,
            None => return Ok(Some(self.at_root())),
        };
        let base = if parents.is_empty() {
            self.fd.clone()
        } else {
            let joined = join(parents);
            let how =
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
            match rustix::fs::openat2(
                self.fd.as_fd(),
                joined.as_os_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                Mode::empty(),
                how,
            ) {
                Ok(fd) => Arc::new(fd),
                Err(Errno::NOSYS | Errno::PERM) => {
                    OPENAT2_MISSING.store(true, Ordering::Relaxed);
                    return Ok(None);
                }
                // A symlink (ELOOP), missing directory, a file on the way, a concurrent rename
                // (EAGAIN), an unreadable directory: the walk sorts each out precisely.
                Err(_) => return Ok(None),
            }
        };
        let seen =
            match rustix::fs::statat(base.as_fd(), name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                    return Ok(None);
                }
                Ok(st) => Some(FileInfo::from_stat(&st)),
                Err(_) => None,
            };
        Ok(Some(ResolvedPath {
            base,
            missing: Vec::new(),
            name: Some(name.clone()),
            rel: PathBuf::from(join(comps)),
            root: self.path.clone(),
            seen,
        }))
    }

    /// Walks `comps` from the root one directory at a time with `O_NOFOLLOW`, following
    /// symlinks by hand and keeping them beneath the root.
    fn walk(&self, comps: Vec<OsString>) -> Result<ResolvedPath, ResolveError> {
        // The real directories entered so far below the root, each open.
        let mut stack: Vec<(Arc<OwnedFd>, OsString)> = Vec::new();
        // What is left to resolve; `true` marks components that came from a symlink's target.
        let mut queue: VecDeque<(OsString, bool)> = comps.into_iter().map(|c| (c, false)).collect();
        let mut links = 0usize;
        while let Some((name, from_link)) = queue.pop_front() {
            if name.is_empty() || name == "." {
                continue;
            }
            if name == ".." {
                if stack.pop().is_none() {
                    return Err(ResolveError::Escape {
                        target: self.path.join("..").display().to_string(),
                    });
                }
                continue;
            }
            let dir = stack
                .last()
                .map_or_else(|| self.fd.clone(), |(fd, _)| fd.clone());
            if queue.is_empty() {
                // The final component: follow it if it is a symlink, else this is the place.
                let seen = match rustix::fs::statat(
                    dir.as_fd(),
                    name.as_os_str(),
                    AtFlags::SYMLINK_NOFOLLOW,
                ) {
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                        self.splice(&dir, &name, &stack, &mut queue, &mut links)?;
                        continue;
                    }
                    Err(Errno::NOENT) if from_link => return Err(ResolveError::Dangling),
                    Ok(st) => Some(FileInfo::from_stat(&st)),
                    Err(_) => None,
                };
                let rel = rel_of(&stack, &[], Some(&name));
                return Ok(ResolvedPath {
                    base: dir,
                    missing: Vec::new(),
                    name: Some(name),
                    rel,
                    root: self.path.clone(),
                    seen,
                });
            }
            match open_dir_at(dir.as_fd(), name.as_os_str(), OFlags::NOFOLLOW) {
                Ok(fd) => stack.push((Arc::new(fd), name)),
                Err(e) if matches!(Errno::from_io_error(&e), Some(Errno::LOOP | Errno::NOTDIR)) => {
                    match rustix::fs::statat(
                        dir.as_fd(),
                        name.as_os_str(),
                        AtFlags::SYMLINK_NOFOLLOW,
                    ) {
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                            self.splice(&dir, &name, &stack, &mut queue, &mut links)?;
                        }
                        Ok(_) => {
                            let rel = rel_of(&stack, &[], Some(&name));
                            return Err(ResolveError::NotADirectory(rel.display().to_string()));
                        }
                        Err(e) => return Err(ResolveError::Io(e.into())),
                    }
                }
                Err(e) if Errno::from_io_error(&e) == Some(Errno::NOENT) => {
                    if from_link || queue.iter().any(|(_, l)| *l) {
                        return Err(ResolveError::Dangling);
                    }
                    // Everything from here on is still to be created.
                    let mut missing = vec![name];
                    let mut last = None;
                    while let Some((n, _)) = queue.pop_front() {
                        if queue.is_empty() {
                            last = Some(n);
                        } else if !n.is_empty() && n != "." {
                            missing.push(n);
                        }
                    }
                    let rel = rel_of(&stack, &missing, last.as_ref());
                    return Ok(ResolvedPath {
                        base: dir,
                        missing,
                        name: last,
                        rel,
                        root: self.path.clone(),
                        seen: None,
                    });
                }
                Err(e) => return Err(ResolveError::Io(e)),
            }
        }
        // The path ended on `.` or `..` (from a link's target): it names a directory on the
        // stack, or the root.
        let last = stack.pop();
        let rel = rel_of(&stack, &[], last.as_ref().map(|(_, n)| n));
        Ok(ResolvedPath {
            base: stack
                .last()
                .map_or_else(|| self.fd.clone(), |(fd, _)| fd.clone()),
            missing: Vec::new(),
            name: last.map(|(_, n)| n),
            rel,
            root: self.path.clone(),
            seen: None,
        })
    }

    /// Replaces the symlink `name` in `dir` by its target at the front of `queue`.
    fn splice(
        &self,
        dir: &Arc<OwnedFd>,
        name: &OsStr,
        stack: &[(Arc<OwnedFd>, OsString)],
        queue: &mut VecDeque<(OsString, bool)>,
        links: &mut usize,
    ) -> Result<(), ResolveError> {
        *links += 1;
        if *links > MAX_LINKS {
            return Err(ResolveError::TooManyLinks);
        }
        let target = rustix::fs::readlinkat(dir.as_fd(), name, Vec::new())
            .map_err(|e| ResolveError::Io(e.into()))?;
        let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
        let inner: Vec<OsString> = if target.is_absolute() {
            let Ok(inside) = target.strip_prefix(&self.path) else {
                return Err(ResolveError::Escape {
                    target: target.display().to_string(),
                });
            };
            // An absolute link back inside: start again from the root. Poisoning the stack
            // (rather than trusting it) keeps `..` in the rest relative to the real parent.
            let comps = link_components(inside);
            let mut out = Vec::with_capacity(stack.len() + comps.len());
            out.extend(std::iter::repeat_n(OsString::from(".."), stack.len()));
            out.extend(comps);
            out
        } else {
            let comps = link_components(&target);
            // Leading `..` climb from the link's real directory: past the root is out.
            let ups = comps.iter().take_while(|c| *c == "..").count();
            if ups > stack.len() {
                return Err(ResolveError::Escape {
                    target: lexical_join(&self.path, stack, &target)
                        .display()
                        .to_string(),
                });
            }
            comps
        };
        for c in inner.into_iter().rev() {
            queue.push_front((c, true));
        }
        Ok(())
    }
}

/// The components of a symlink's target as strings (`.` and `..` kept, the root dropped).
fn link_components(target: &Path) -> Vec<OsString> {
    target
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir => Some(OsString::from(".")),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// `root/<stack>/target`, with `..` applied lexically: where a relative link points, for the
/// message that refuses it.
fn lexical_join(root: &Path, stack: &[(Arc<OwnedFd>, OsString)], target: &Path) -> PathBuf {
    let mut parts: Vec<OsString> = root
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            _ => None,
        })
        .collect();
    parts.extend(stack.iter().map(|(_, n)| n.clone()));
    for c in link_components(target) {
        if c == ".." {
            parts.pop();
        } else if c != "." {
            parts.push(c);
        }
    }
    let mut out = PathBuf::from("/");
    out.extend(parts);
    out
}

fn join(comps: &[OsString]) -> OsString {
    let mut out = OsString::new();
    for (i, c) in comps.iter().enumerate() {
        if i > 0 {
            out.push("/");
        }
        out.push(c);
    }
    out
}

fn rel_of(
    stack: &[(Arc<OwnedFd>, OsString)],
    missing: &[OsString],
    name: Option<&OsString>,
) -> PathBuf {
    let mut out = PathBuf::new();
    for (_, n) in stack {
        out.push(n);
    }
    for n in missing {
        out.push(n);
    }
    if let Some(n) = name {
        out.push(n);
    }
    out
}

/// Opens the directory `name` in `dir` (`extra` adds e.g. `O_NOFOLLOW`): readable when it can
/// be (so it can be fsynced and listed), else as `O_PATH`, which is enough to resolve beneath.
pub(crate) fn open_dir_at(dir: impl AsFd, name: &OsStr, extra: OFlags) -> std::io::Result<OwnedFd> {
    let flags = OFlags::DIRECTORY | OFlags::CLOEXEC | extra;
    match rustix::fs::openat(dir.as_fd(), name, OFlags::RDONLY | flags, Mode::empty()) {
        Err(Errno::ACCESS) => {
            rustix::fs::openat(dir.as_fd(), name, OFlags::PATH | flags, Mode::empty())
                .map_err(Into::into)
        }
        other => other.map_err(Into::into),
    }
}

/// A path resolved beneath a [`DirHandle`]: the deepest existing directory on the way (open),
/// the directories still missing below it and the final name. Operations live in `ops`.
#[derive(Debug, Clone)]
pub struct ResolvedPath {
    /// The deepest existing directory on the way (the parent itself when nothing is missing).
    base: Arc<OwnedFd>,
    /// Directories to create below `base`, outermost first (empty when the parent exists).
    missing: Vec<OsString>,
    /// The final component; `None` for the root directory itself.
    name: Option<OsString>,
    /// The canonical workspace-relative path (empty for the root).
    rel: PathBuf,
    root: PathBuf,
    /// What `stat` said about the final component during resolution: the file an open must
    /// find (same device and inode), so a swap in between is caught.
    seen: Option<FileInfo>,
}

impl ResolvedPath {
    /// The canonical path relative to the handle's directory (empty for the directory itself).
    pub fn rel(&self) -> &Path {
        &self.rel
    }

    /// The relative path with `/` separators, `.` for the directory itself.
    pub fn rel_string(&self) -> String {
        if self.rel.as_os_str().is_empty() {
            return ".".to_string();
        }
        let bytes = self.rel.as_os_str().as_bytes();
        String::from_utf8_lossy(bytes).into_owned()
    }

    /// The absolute path (the handle's path joined with [`Self::rel`]): for naming the file —
    /// in messages, read tracking, commands — never for opening it again.
    pub fn abs(&self) -> PathBuf {
        if self.rel.as_os_str().is_empty() {
            self.root.clone()
        } else {
            self.root.join(&self.rel)
        }
    }

    /// True for the handle's directory itself.
    pub fn is_root(&self) -> bool {
        self.name.is_none()
    }

    /// The final component (`None` for the handle's directory itself).
    pub fn name(&self) -> Option<&OsStr> {
        self.name.as_deref()
    }
}

#[cfg(test)]
mod tests;
