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
pub fn git_included_files(workspace: &Path) -> Vec<PathBuf> {
    let Ok(dir) = ProjectDir::open(workspace) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = Vec::new();
    let mut queue = vec![(PathBuf::from(".git/config"), 0usize)];
    while let Some((file, depth)) = queue.pop() {
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
    found
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
}
