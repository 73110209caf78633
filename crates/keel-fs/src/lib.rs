//! File access by capability. Everything Keel reads or writes inside a workspace — the file
//! tools, the editor and patch applier, snapshots and undo, the index, rules, skills, config,
//! constitution, `.mcp.json`, flows' and evals' tree copies — goes through this crate:
//!
//! - [`beneath`]: an open directory handle ([`beneath::DirHandle`]) and paths resolved beneath
//!   it (`openat2(RESOLVE_BENEATH)`, or a component walk with `O_NOFOLLOW` on kernels without
//!   it) into a [`beneath::ResolvedPath`] whose reads, atomic writes, `mkdir -p` and deletes
//!   all work on the open parent directory. There is no check-a-path-then-open-it anywhere,
//!   so neither a symlink nor a race can lead an operation outside.
//! - [`project`]: the files a repository ships for Keel itself to read, through
//!   [`project::ProjectDir`] — beneath the workspace, regular files only, never blocking,
//!   size-bounded — with refusals that name the file and what to do.
//! - [`atomic`]: a set of file changes (a patch) written all or nothing.
//!
//! Linux only (it is built on `openat2`, `renameat2` and `O_PATH`). It does not decide *which*
//! paths an agent may write (protected paths, the sandbox): that is keel-tools' job.

pub mod atomic;
pub mod beneath;
pub mod project;
pub mod stores;
pub mod walk;

/// `a/./b/../c` → `a/c`: `.` dropped and `..` taken lexically, without touching the disk
/// (for deciding where a named path points before anything is opened).
pub fn lexical_normalize(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Human-readable byte size (`512 B`, `1.5 KB`, `3.2 MB`), for messages.
pub fn human_size(bytes: u64) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KB {
        format!("{bytes} B")
    } else if b < KB * KB {
        format!("{:.1} KB", b / KB)
    } else if b < KB * KB * KB {
        format!("{:.1} MB", b / KB / KB)
    } else {
        format!("{:.1} GB", b / KB / KB / KB)
    }
}
