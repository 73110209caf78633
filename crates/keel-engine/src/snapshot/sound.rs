//! Whether a git directory is safe for Keel to write snapshots into. Keel's git runs outside
//! the sandbox, and git follows symlinks inside its git directory: a repository that ships
//! `.git/refs/keel -> /elsewhere` or `.git/objects -> /elsewhere` would have Keel create
//! files wherever those point, and a `.git` *file* naming another repository's git directory
//! (`gitdir: /path/to/other.git`) would have Keel write refs and objects into that one. So a
//! repository is used only when:
//!
//! - the workspace's `.git` is a real directory (not a symlink) and is the git directory, or
//!   a regular file naming a linked worktree's git directory whose `gitdir` file points back
//!   at that very `.git` file (what `git worktree add` makes);
//! - in the git directory and its common directory, nothing Keel or git writes for a snapshot
//!   (`refs`, `refs/keel`, `refs/keel/snapshots`, `objects` and its subdirectories, `logs`,
//!   Keel's index and exclude files) is a symlink or of the wrong kind.
//!
//! Otherwise snapshots go to Keel's private repository in `.keel/snapshots`, which gets the
//! same check.

use std::path::{Path, PathBuf};

use keel_tools::fs::FileKind;

/// Largest `gitdir` / `commondir` file read (each holds one path).
const MAX_LINK_FILE: u64 = 16 * 1024;

/// What a directory entry is, without following a symlink (`None`: nothing there).
fn kind(path: &Path) -> Option<FileKind> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let t = meta.file_type();
    Some(if t.is_symlink() {
        FileKind::Symlink
    } else if t.is_dir() {
        FileKind::Dir
    } else if t.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    })
}

/// The first line of a small regular file (never a link, FIFO or device).
fn read_line(path: &Path) -> Option<String> {
    if kind(path) != Some(FileKind::File) {
        return None;
    }
    let text = keel_tools::project::read_in_dir(path, MAX_LINK_FILE).ok()??;
    Some(text.lines().next()?.trim().to_string())
}

/// `Ok` when `git_dir` (as git reported it for a workspace whose repository top level is
/// `work_tree`) is safe to write snapshots into; the reason otherwise.
pub(super) fn check_user_repository(git_dir: &Path, work_tree: &Path) -> Result<(), String> {
    let dot_git = work_tree.join(".git");
    let common = match kind(&dot_git) {
        Some(FileKind::Dir) => {
            if !same_dir(&dot_git, git_dir) {
                return Err(format!(
                    "git uses `{}`, not the workspace's own `.git` directory",
                    git_dir.display()
                ));
            }
            None
        }
        Some(FileKind::File) => {
            // A linked worktree: its git directory must name this `.git` file as its own.
            let back = read_line(&git_dir.join("gitdir")).ok_or_else(|| {
                format!(
                    "`.git` is a file naming `{}`, which is not a linked worktree of this \
                     directory (no `gitdir` file pointing back)",
                    git_dir.display()
                )
            })?;
            if !same_file(Path::new(&back), &dot_git) {
                return Err(format!(
                    "`.git` names `{}`, whose worktree is `{back}`, not this directory",
                    git_dir.display()
                ));
            }
            read_line(&git_dir.join("commondir")).map(|c| {
                let p = PathBuf::from(c);
                if p.is_absolute() { p } else { git_dir.join(p) }
            })
        }
        Some(FileKind::Symlink) => {
            return Err("`.git` is a symlink".to_string());
        }
        _ => {
            return Err(format!(
                "git uses `{}`, but the workspace has no `.git` of its own",
                git_dir.display()
            ));
        }
    };
    check_git_dir(git_dir)?;
    if let Some(common) = common {
        check_git_dir(&common)?;
    }
    Ok(())
}

/// `Ok` when nothing under `git_dir` that a snapshot writes is a symlink or of the wrong kind.
pub(super) fn check_git_dir(git_dir: &Path) -> Result<(), String> {
    if kind(git_dir) != Some(FileKind::Dir) {
        return Err(format!("`{}` is not a directory", git_dir.display()));
    }
    let expect = |rel: &str, want: FileKind| -> Result<(), String> {
        match kind(&git_dir.join(rel)) {
            None => Ok(()),
            Some(k) if k == want => Ok(()),
            Some(k) => Err(format!(
                "`{}` is {} (Keel writes its snapshots only through real {} inside the git \
                 directory)",
                git_dir.join(rel).display(),
                k.describe(),
                if want == FileKind::Dir {
                    "directories"
                } else {
                    "files"
                }
            )),
        }
    };
    for dir in [
        "refs",
        "refs/keel",
        "refs/keel/snapshots",
        "objects",
        "objects/pack",
        "objects/info",
        "logs",
        "logs/refs",
        "logs/refs/keel",
        "info",
    ] {
        expect(dir, FileKind::Dir)?;
    }
    for file in [
        "keel-snapshot.index",
        "keel-snapshot.index.lock",
        "keel-build-dirs",
        "packed-refs",
        "description",
        "info/exclude",
        "HEAD",
        "config",
    ] {
        expect(file, FileKind::File)?;
    }
    // Loose objects go into `objects/xx/`: every such directory must be real.
    if let Ok(entries) = std::fs::read_dir(git_dir.join("objects")) {
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                expect(&format!("objects/{name}"), FileKind::Dir)?;
            }
        }
    }
    // Every existing directory under `refs/keel` too (a session's directory as a link out).
    let keel_refs = git_dir.join("refs/keel");
    if kind(&keel_refs) == Some(FileKind::Dir) {
        let mut stack = vec![keel_refs];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                match kind(&e.path()) {
                    Some(FileKind::Dir) => stack.push(e.path()),
                    Some(FileKind::File) | None => {}
                    Some(k) => {
                        return Err(format!("`{}` is {}", e.path().display(), k.describe()));
                    }
                }
            }
        }
    }
    Ok(())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// The same file: equal canonical parents and names (the file itself is never followed).
fn same_file(a: &Path, b: &Path) -> bool {
    let split = |p: &Path| Some((p.parent()?.canonicalize().ok()?, p.file_name()?.to_owned()));
    matches!((split(a), split(b)), (Some(x), Some(y)) if x == y)
}
