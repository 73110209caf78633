//! Listing directories beneath an open handle: the walk behind `list_files`, the index, flow
//! snapshots and chat's file completion.
//!
//! A walk by path (`read_dir(root.join(rel))`) asks the kernel to resolve the whole path
//! again for every directory: a directory swapped for a symlink to `/etc` between two reads
//! lists `/etc`. Here every directory is read through its own open descriptor (`getdents`
//! on the fd), every child directory is opened from its open parent with
//! `O_DIRECTORY | O_NOFOLLOW` (a symlink swapped in fails to open, it is never followed), and
//! every entry is looked at with `fstatat(parent, name, AT_SYMLINK_NOFOLLOW)`. Symlinks are
//! reported as symlinks, never followed; nothing a walk reports lies outside the directory it
//! started in.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use rustix::fs::{AtFlags, Mode, OFlags};

use crate::beneath::{DirHandle, Fence, FileKind, ResolveError};

/// One entry a walk found.
#[derive(Debug, Clone)]
pub struct WalkEntry {
    /// Relative to the handle the walk started from (not to the start directory), so a walk of
    /// `src` beneath the workspace yields `src/main.rs`.
    pub rel: PathBuf,
    /// What it is (a symlink is a symlink: walks never follow one).
    pub kind: FileKind,
    /// Its size in bytes (`lstat`), 0 for directories.
    pub len: u64,
    /// Modification time, nanoseconds since the Unix epoch (0 when unknown).
    pub mtime_ns: i64,
    /// 1 for the start directory's own entries.
    pub depth: usize,
}

impl WalkEntry {
    /// The final component.
    pub fn name(&self) -> &OsStr {
        self.rel.file_name().unwrap_or_default()
    }

    /// The relative path as a `/`-separated string; `None` for a non-UTF-8 name.
    pub fn rel_str(&self) -> Option<&str> {
        self.rel.to_str()
    }

    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }

    pub fn is_file(&self) -> bool {
        self.kind == FileKind::File
    }
}

/// What the visitor wants done after seeing an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// Go on (and, for a directory, descend into it).
    Continue,
    /// Do not descend into this directory (ignored for other entries).
    Skip,
    /// End the walk.
    Stop,
}

/// How to walk.
#[derive(Debug, Clone, Copy, Default)]
pub struct WalkOptions {
    /// Deepest entries reported (1: the start directory's own entries); `None`: no limit.
    pub max_depth: Option<usize>,
}

impl DirHandle {
    /// Walks the directory `start` (relative to this handle; empty for the handle itself)
    /// depth first, each directory's entries in name order, calling `visit` for every entry
    /// before descending into it. Directories that cannot be opened or read (permissions, a
    /// directory swapped for a symlink or removed mid-walk) are passed over. Fails only when
    /// `start` itself cannot be resolved beneath this handle or opened.
    pub fn walk_sorted(
        &self,
        start: &Path,
        options: WalkOptions,
        mut visit: impl FnMut(&WalkEntry) -> Visit,
    ) -> Result<(), ResolveError> {
        let (fd, rel) = self.open_start(start)?;
        walk_subtree(fd, &rel, 0, options, self.fence(), &mut visit);
        Ok(())
    }

    /// Walks the directory `start` like [`Self::walk_sorted`] but on `threads` threads (0: one
    /// per core), in no particular order: for building an index of a large tree. `visit` is
    /// called from several threads at once.
    pub fn walk_parallel(
        &self,
        start: &Path,
        options: WalkOptions,
        threads: usize,
        visit: impl Fn(&WalkEntry) -> Visit + Sync,
    ) -> Result<(), ResolveError> {
        let (fd, rel) = self.open_start(start)?;
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let queue = Queue {
            state: Mutex::new(QueueState {
                jobs: vec![(fd, rel, 0)],
                busy: 0,
                stop: false,
            }),
            ready: Condvar::new(),
        };
        let fence = self.fence();
        std::thread::scope(|s| {
            for _ in 0..threads.max(1) {
                s.spawn(|| queue.work(options, fence, &visit));
            }
        });
        Ok(())
    }

    /// The start directory, open, and its path relative to this handle.
    fn open_start(&self, start: &Path) -> Result<(OwnedFd, PathBuf), ResolveError> {
        let found = self.resolve(start)?;
        let fd = found.open_dir()?;
        // `open_dir` may fall back to `O_PATH` (no read permission): such a directory cannot
        // be listed, so say so here rather than list nothing.
        let fd = reopen_readable(fd)?;
        Ok((fd, found.rel().to_path_buf()))
    }
}

/// Walks the open directory `dir` (named `rel`, at `depth`) depth first.
fn walk_subtree(
    dir: OwnedFd,
    rel: &Path,
    depth: usize,
    options: WalkOptions,
    fence: &Fence,
    visit: &mut impl FnMut(&WalkEntry) -> Visit,
) -> Visit {
    let mut entries = read_entries(&dir, rel, depth + 1, fence);
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    for e in &entries {
        match visit(e) {
            Visit::Stop => return Visit::Stop,
            Visit::Skip => continue,
            Visit::Continue => {}
        }
        if e.is_dir()
            && options.max_depth.is_none_or(|m| e.depth < m)
            && let Some(child) = open_child(&dir, e.name())
            && walk_subtree(child, &e.rel, e.depth, options, fence, visit) == Visit::Stop
        {
            return Visit::Stop;
        }
    }
    Visit::Continue
}

struct QueueState {
    jobs: Vec<(OwnedFd, PathBuf, usize)>,
    /// Threads holding a job (the walk ends when none do and no job is left).
    busy: usize,
    stop: bool,
}

struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

impl Queue {
    fn work(
        &self,
        options: WalkOptions,
        fence: &Fence,
        visit: &(impl Fn(&WalkEntry) -> Visit + Sync),
    ) {
        loop {
            let job = {
                let Ok(mut st) = self.state.lock() else {
                    return;
                };
                loop {
                    if st.stop {
                        return;
                    }
                    if let Some(job) = st.jobs.pop() {
                        st.busy += 1;
                        break job;
                    }
                    if st.busy == 0 {
                        self.ready.notify_all();
                        return;
                    }
                    st = match self.ready.wait(st) {
                        Ok(st) => st,
                        Err(_) => return,
                    };
                }
            };
            let (fd, rel, depth) = job;
            let mut found = Vec::new();
            let mut stop = false;
            for e in read_entries(&fd, &rel, depth + 1, fence) {
                match visit(&e) {
                    Visit::Stop => {
                        stop = true;
                        break;
                    }
                    Visit::Skip => continue,
                    Visit::Continue => {}
                }
                if e.is_dir()
                    && options.max_depth.is_none_or(|m| e.depth < m)
                    && let Some(child) = open_child(&fd, e.name())
                {
                    found.push((child, e.rel, e.depth));
                }
            }
            let Ok(mut st) = self.state.lock() else {
                return;
            };
            st.busy -= 1;
            st.stop |= stop;
            st.jobs.extend(found);
            self.ready.notify_all();
        }
    }
}

/// Opens the directory `name` in `dir` for listing: `O_NOFOLLOW`, so a directory swapped for
/// a symlink since it was listed is not entered (`None`, like any directory that cannot be
/// opened).
fn open_child(dir: &OwnedFd, name: &OsStr) -> Option<OwnedFd> {
    rustix::fs::openat(
        dir.as_fd(),
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// `fd` again as a readable descriptor (an `O_PATH` one cannot be listed).
fn reopen_readable(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    let flags = rustix::fs::fcntl_getfl(&fd)?;
    if !flags.contains(OFlags::PATH) {
        return Ok(fd);
    }
    rustix::fs::openat(
        &fd,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(Into::into)
}

/// The entries of the open directory `fd` (named `rel`), each looked at with
/// `fstatat(AT_SYMLINK_NOFOLLOW)` in that directory. Entries that vanish meanwhile are left
/// out, and so are protected stores (`fence`: by name and by device and inode, so a hard
/// link to `~/.netrc` is left out too); an unreadable directory has none.
fn read_entries(fd: &OwnedFd, rel: &Path, depth: usize, fence: &Fence) -> Vec<WalkEntry> {
    // `Dir` reads through its own duplicate of the descriptor, positioned at the start.
    let Ok(dup) = rustix::fs::openat(
        fd,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return Vec::new();
    };
    let Ok(mut dir) = rustix::fs::Dir::new(dup) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    while let Some(Ok(entry)) = dir.read() {
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsString::from(OsStr::from_bytes(name));
        let Ok(st) = rustix::fs::statat(fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let info = crate::beneath::FileInfo::from_stat(&st);
        let rel = rel.join(&name);
        if fence.hides(&rel, info.id()) {
            continue;
        }
        let kind = info.kind;
        let mtime_ns = info.mtime_ns;
        out.push(WalkEntry {
            rel,
            kind,
            len: if kind == FileKind::Dir {
                0
            } else {
                u64::try_from(st.st_size).unwrap_or(0)
            },
            mtime_ns,
            depth,
        });
    }
    out
}

#[cfg(test)]
mod tests;
