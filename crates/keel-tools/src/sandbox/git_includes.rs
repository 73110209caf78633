//! Working-tree files the workspace repository's git configuration includes
//! (`[include] path = ../.gitconfig`, `[includeIf "…"] path = …` — the usual way to share diff
//! and merge drivers in a repository). They are configuration the user's own git reads, so a
//! program named in them (`core.fsmonitor`, a textconv driver) runs unconfined at the user's
//! next `git status`: they are protected like `.git` — read-only to the file tools and in the
//! command sandbox (red-team pass 2, R14).
//!
//! Read beneath the workspace handle (no links out, regular files, bounded), following
//! includes of includes a few levels deep. Only files inside the workspace matter: the rest of
//! the disk is read-only to commands already.

use std::path::{Component, Path, PathBuf};

use keel_fs::project::ProjectDir;

/// The most of a config file read.
const MAX_CONFIG: u64 = 256 * 1024;
/// How deep includes are followed (git itself stops at 10).
const MAX_DEPTH: usize = 10;

/// The workspace-relative paths of the files inside `workspace` that its repository's
/// `.git/config` includes, directly or through other included files. Empty without a `.git`
/// directory.
///
/// Asked before every command: the answer is kept per workspace while every file it read (or
/// looked for) has the same device, inode, size, mtime and ctime — a rewrite, a replacement or
/// a new file at a looked-for name reads again, through the workspace handle — and none had
/// changed within two seconds of being read (a change in the same timestamp tick is unseen).
pub fn git_included_files(workspace: &Path) -> Vec<PathBuf> {
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = cache.iter().find(|c| c.workspace == workspace)
        && !c.racy
        && c.read.iter().all(|(p, s)| stamp(&workspace.join(p)) == *s)
    {
        return c.found.clone();
    }
    let (found, read) = read_includes(workspace);
    cache.retain(|c| c.workspace != workspace);
    if cache.len() >= MAX_CACHED {
        cache.clear();
    }
    // A file changed within the last seconds may change again within the same timestamp
    // tick, unseen (git's "racily clean" entries): such an answer is not kept.
    let racy = read.iter().any(|(_, s)| s.is_some_and(recent));
    cache.push(Cached {
        workspace: workspace.to_path_buf(),
        read,
        found: found.clone(),
        racy,
    });
    found
}

/// Device, inode, size, mtime and ctime (seconds, nanoseconds) of a path, not followed.
type Stamp = (u64, u64, u64, i64, i64, i64, i64);

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// Whether a stamp's mtime or ctime lies within [`RACY`] of now (or in the future).
fn recent(s: Stamp) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let (_, _, _, mtime, _, ctime, _) = s;
    mtime.max(ctime) >= now.saturating_sub(RACY)
}

/// Seconds within which a file's change makes the answer unfit to keep.
const RACY: i64 = 2;

/// One workspace's answer and the files behind it, each stamped just before it was read (a
/// change after that makes the next call read again).
struct Cached {
    workspace: PathBuf,
    read: Vec<(PathBuf, Option<Stamp>)>,
    found: Vec<PathBuf>,
    /// Read too soon after a change to be kept ([`recent`]).
    racy: bool,
}

static CACHE: std::sync::Mutex<Vec<Cached>> = std::sync::Mutex::new(Vec::new());

/// The most workspaces kept.
const MAX_CACHED: usize = 64;

/// The included files, and every file looked at (read, refused or missing) with its stamp
/// from just before, workspace-relative.
#[allow(clippy::type_complexity)]
fn read_includes(workspace: &Path) -> (Vec<PathBuf>, Vec<(PathBuf, Option<Stamp>)>) {
    let config = PathBuf::from(".git/config");
    let mut looked = vec![(config.clone(), stamp(&workspace.join(&config)))];
    let Ok(dir) = ProjectDir::open(workspace) else {
        return (Vec::new(), looked);
    };
    let mut found: Vec<PathBuf> = Vec::new();
    let mut queue = vec![(config, 0usize)];
    while let Some((file, depth)) = queue.pop() {
        if depth > 0 {
            looked.push((file.clone(), stamp(&workspace.join(&file))));
        }
        let Some(rel) = file.to_str() else { continue };
        let Ok(Some(text)) = dir.read(rel, MAX_CONFIG) else {
            continue;
        };
        let base = file.parent().unwrap_or(Path::new(""));
        for value in include_paths(&text) {
            let Some(target) = inside(base, &value) else {
                continue;
            };
            if target.starts_with(".git") || found.contains(&target) {
                continue;
            }
            found.push(target.clone());
            if depth + 1 < MAX_DEPTH {
                queue.push((target, depth + 1));
            }
        }
    }
    found.sort();
    (found, looked)
}

/// The `path` values of `[include]` and `[includeIf "…"]` sections (any case).
fn include_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_include = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .split([']', ' ', '"', '\t'])
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            in_include = name == "include" || name == "includeif";
            // `[include] path = x` on one line.
            let Some((_, after)) = rest.split_once(']') else {
                continue;
            };
            if in_include && let Some(v) = path_value(after.trim()) {
                out.push(v);
            }
            continue;
        }
        if in_include && let Some(v) = path_value(line) {
            out.push(v);
        }
    }
    out
}

/// `path = value` (value unquoted, comments dropped).
fn path_value(line: &str) -> Option<String> {
    let (key, value) = line.split_once('=')?;
    if !key.trim().eq_ignore_ascii_case("path") {
        return None;
    }
    let value = value.trim();
    let value = match value.strip_prefix('"') {
        Some(q) => q.split('"').next().unwrap_or(""),
        None => value.split([';', '#']).next().unwrap_or("").trim(),
    };
    (!value.is_empty()).then(|| value.to_string())
}

/// `value` relative to the directory `base` (workspace-relative) when it stays inside the
/// workspace; `None` for absolute, `~` and paths leaving it.
fn inside(base: &Path, value: &str) -> Option<PathBuf> {
    if value.starts_with('~') || Path::new(value).is_absolute() {
        return None;
    }
    let mut out = PathBuf::new();
    for c in base.join(value).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn included_files_inside_the_workspace_are_found_through_includes_of_includes() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".git")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(ws.join("config")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            ws.join(".git/config"),
            "[core]\n\tbare = false\n[include]\n\tpath = ../.gitconfig\n[includeIf \"onbranch:main\"]\n\tpath = \"../config/git.inc\" ; comment\n[include]\n\tpath = ~/x\n\tpath = /etc/gitconfig\n\tpath = ../../outside\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            ws.join(".gitconfig"),
            "[diff \"lockb\"]\n\ttextconv = cat\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("config/git.inc"), "[Include]\n\tPath = more.inc\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            git_included_files(ws),
            vec![
                PathBuf::from(".gitconfig"),
                PathBuf::from("config/git.inc"),
                PathBuf::from("config/more.inc")
            ]
        );
        assert!(git_included_files(&ws.join("config")).is_empty(), "no .git");
    }

    #[test]
    fn the_kept_answer_follows_every_change_to_the_files_it_read() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        let write = |rel: &str, text: &str| {
            std::fs::write(ws.join(rel), text).unwrap_or_else(|e| panic!("{e}"));
        };
        std::fs::create_dir_all(ws.join(".git")).unwrap_or_else(|e| panic!("{e}"));
        write(".git/config", "[include]\n\tpath = ../a.inc\n");
        assert_eq!(git_included_files(ws), vec![PathBuf::from("a.inc")]);
        // A looked-for file that appears, with an include of its own.
        write("a.inc", "[include]\n\tpath = b.inc\n");
        assert_eq!(
            git_included_files(ws),
            vec![PathBuf::from("a.inc"), PathBuf::from("b.inc")]
        );
        // The config rewritten (same length, so only mtime/ctime/inode tell).
        write(".git/config", "[include]\n\tpath = ../c.inc\n");
        assert_eq!(git_included_files(ws), vec![PathBuf::from("c.inc")]);
        // Replaced by another file (a rename over it).
        write("new-config", "[core]\n");
        std::fs::rename(ws.join("new-config"), ws.join(".git/config"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(git_included_files(ws).is_empty());
        std::fs::remove_file(ws.join(".git/config")).unwrap_or_else(|e| panic!("{e}"));
        assert!(git_included_files(ws).is_empty());
        write(".git/config", "[include]\n\tpath = ../a.inc\n");
        assert_eq!(
            git_included_files(ws),
            vec![PathBuf::from("a.inc"), PathBuf::from("b.inc")]
        );
    }
}
