//! Dependency trees: code the user's own tools run later, that no diff shows (red-team pass 7,
//! R7-10 and R7-1's rest). `node_modules` and virtual environments are git-ignored, so a
//! command that rewrote `node_modules/tinytest/bin/cli.js` or appended a line to
//! `.venv/lib/python3.11/site-packages/pip/__init__.py` left `git status` clean, and the
//! user's next `npm test` or `python -m pip` ran it unconfined. A check per file name (`.pth`,
//! `sitecustomize`) cannot close that: every module in such a tree is code somebody runs.
//!
//! So the kernel keeps them: for every command nobody approved
//! ([`super::exec::ExecRequest::approved`]), each dependency tree of the workspace is mounted
//! read-only for the command, with the chain of directories leading to it pinned (it cannot be
//! renamed or removed either) — the same mounts as `.git` and the protected paths get. A
//! command cannot change installed code; an install the user approved (asked and allowed, or
//! typed in `keel chat`'s `!`) writes as before. Trees a command creates where there were
//! none are new installs, judged as before ([`super::venv_startup`]'s startup files), and
//! read-only from the next command on.
//!
//! Trees: every outermost `node_modules`, every virtual environment (a directory holding
//! `pyvenv.cfg`, whatever its name), every Cargo profile directory (`target/debug`: red-team
//! pass 8, R8-4 — the user's `cargo test` runs the test binary there again while its
//! fingerprints look fresh; such a command's Cargo builds into
//! [`super::loaded_code::KEEL_TARGET`] instead), and at the top of the workspace `.tox`,
//! `.nox`, `.direnv` and Yarn's `.yarn`. Which exist is looked up cheaply before each command (the
//! top level: one directory listing) and remembered from the runner's post-command walk,
//! which sees the whole tree anyway (and need not enter a tree that was read-only). The first
//! command in a workspace walks it once to find nested trees (a monorepo's
//! `packages/*/node_modules`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The most trees mounted read-only per command (each is a mount). Past it the list is
/// incomplete, and a command nobody approved runs read-only (red-team pass 9, R9-1: 71 decoy
/// `pyvenv.cfg` directories pushed the real `node_modules` and `.venv` off a silent cut).
const MAX_TREES: usize = 128;
/// The most directories the first discovery walk reads (the runner's walk after a command
/// reads as many); past it the list is incomplete, as above (R9-1's 20,001 padding
/// directories hid `backend/.venv`).
const MAX_DIRS: usize = 100_000;
/// Tree names looked for at the top of the workspace (besides `node_modules` and virtual
/// environments): tox's and nox's environments, direnv's layouts, Yarn's cache and plug-ins.
const TOP_TREES: &[&str] = &["node_modules", ".tox", ".nox", ".direnv", ".yarn"];

/// The trees each workspace held at its last walk.
static KNOWN: Mutex<BTreeMap<PathBuf, Known>> = Mutex::new(BTreeMap::new());

/// The trees found, and whether that was all of them.
type Known = (Vec<PathBuf>, bool);

fn known() -> std::sync::MutexGuard<'static, BTreeMap<PathBuf, Known>> {
    KNOWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `path` is a tree Keel moved aside (`.venv.quarantined-by-keel`): no tool of the
/// user's loads it, and counting it would let a command's decoys fill the list (R9-1).
fn quarantined(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.contains(".quarantined-by-keel"))
}

/// Whether the directory `path` of `workspace`, whose entries `holds`, is the root of a
/// dependency tree (away from the workspace's top, where [`TOP_TREES`] also count).
pub(crate) fn is_tree(workspace: &Path, path: &Path, holds: impl Fn(&str) -> bool) -> bool {
    if quarantined(path) {
        return false;
    }
    path.file_name().is_some_and(|n| n == "node_modules")
        || holds("pyvenv.cfg")
        || is_cargo_profile(workspace, path, holds)
}

/// Whether the directory `path`, whose entries `holds`, is a Cargo profile directory
/// (`target/debug`: its `.fingerprint` and `deps`) the user's own `cargo` reuses — any but
/// those under [`super::loaded_code::KEEL_TARGET`] (red-team pass 8, R8-4: a rewritten
/// `target/debug/deps/<test binary>` ran at the user's next `cargo test`).
pub(crate) fn is_cargo_profile(
    workspace: &Path,
    path: &Path,
    holds: impl Fn(&str) -> bool,
) -> bool {
    holds(".fingerprint")
        && holds("deps")
        && !path.starts_with(workspace.join(super::loaded_code::KEEL_TARGET))
}

/// The trees to keep read-only for a command in `workspace` (absolute, existing real
/// directories, outermost only, at most [`MAX_TREES`]), and whether they are all of them
/// (`false`: a bound cut the search or the list — never silent: the caller fails closed).
pub(crate) fn read_only_trees(workspace: &Path) -> (Vec<PathBuf>, bool) {
    let remembered = known().get(workspace).cloned();
    let (mut out, complete) = match remembered {
        Some(k) => k,
        None => {
            let found = discover(workspace);
            known().insert(workspace.to_path_buf(), found.clone());
            found
        }
    };
    // Trees made since the last walk (the user's `npm install` in another terminal).
    out.extend(top_level(workspace));
    let (out, all) = outermost(out);
    (out, complete && all)
}

/// The trees noted for `workspace` by the last walk or search (`None`: none yet).
pub(crate) fn remembered(workspace: &Path) -> Option<Vec<PathBuf>> {
    known().get(workspace).map(|(trees, _)| trees.clone())
}

/// Notes the trees the runner's walk found in `workspace` (and those it did not enter).
pub(crate) fn remember(workspace: &Path, trees: Vec<PathBuf>) {
    let (trees, all) = outermost(trees);
    known().insert(workspace.to_path_buf(), (trees, all));
}

/// The root of the environment whose site directory is `dir` (`<root>/lib/python3.11/
/// site-packages`, `<root>/Lib/site-packages`), by names alone: an environment whose
/// `pyvenv.cfg` is not there yet is one too (red-team pass 9, R9-2: a `.pth` planted in
/// `.venv/lib/python3.11/site-packages` before any environment existed was kept by the
/// user's `python3 -m venv .venv`).
pub(crate) fn site_root(dir: &Path) -> Option<PathBuf> {
    let mut up = dir.ancestors().skip(1);
    if dir.file_name()? != "site-packages" {
        return None;
    }
    let parent = up.next()?;
    let name = parent.file_name()?.to_str()?;
    if name == "Lib" {
        return up.next().map(Path::to_path_buf);
    }
    let lib = up.next()?.file_name()?.to_str()?;
    (name.starts_with("python") && ["lib", "lib64", "Lib"].contains(&lib))
        .then(|| up.next().map(Path::to_path_buf))
        .flatten()
}

/// Existing real directories only, no tree inside another, sorted, at most [`MAX_TREES`]
/// (`false`: more were left out).
fn outermost(mut trees: Vec<PathBuf>) -> (Vec<PathBuf>, bool) {
    trees.retain(|t| t.symlink_metadata().is_ok_and(|m| m.is_dir()));
    trees.sort();
    trees.dedup();
    let mut out: Vec<PathBuf> = Vec::new();
    for t in trees {
        if !out.iter().any(|o| t.starts_with(o)) {
            out.push(t);
        }
    }
    let all = out.len() <= MAX_TREES;
    // Shallowest first when some must be left out.
    out.sort_by_key(|p| p.components().count());
    out.truncate(MAX_TREES);
    out.sort();
    (out, all)
}

/// The trees at the top of `workspace`: [`TOP_TREES`] and the directories holding
/// `pyvenv.cfg`.
fn top_level(workspace: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(workspace) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = e.file_name();
        if quarantined(&e.path()) {
            continue;
        }
        if TOP_TREES.iter().any(|t| name == *t)
            || (name != ".git" && e.path().join("pyvenv.cfg").symlink_metadata().is_ok())
        {
            out.push(e.path());
        }
    }
    // Cargo's profile directories (`target/debug`, `target/release`, …).
    if let Ok(entries) = std::fs::read_dir(workspace.join("target")) {
        for e in entries.flatten() {
            let path = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir())
                && is_cargo_profile(workspace, &path, |n| {
                    path.join(n).symlink_metadata().is_ok()
                })
            {
                out.push(path);
            }
        }
    }
    out
}

/// The trees anywhere in `workspace` (bounded; `.git` and `.keel` not entered), and whether
/// the search was whole.
fn discover(workspace: &Path) -> (Vec<PathBuf>, bool) {
    let mut out = top_level(workspace);
    let mut stack: Vec<PathBuf> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(workspace) {
        for e in entries.flatten() {
            let name = e.file_name();
            if e.file_type().is_ok_and(|t| t.is_dir())
                && name != ".git"
                && name != ".keel"
                && !out.contains(&e.path())
            {
                stack.push(e.path());
            }
        }
    }
    let mut dirs = 0usize;
    while let Some(dir) = stack.pop() {
        dirs += 1;
        if dirs > MAX_DIRS {
            return (out, false);
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = e.file_name();
            if name.eq_ignore_ascii_case(".git") {
                continue;
            }
            let path = e.path();
            if is_tree(workspace, &path, |n| {
                path.join(n).symlink_metadata().is_ok()
            }) {
                out.push(path);
            } else if let Some(root) = site_root(&path).filter(|r| r != workspace) {
                out.push(root);
            } else {
                stack.push(path);
            }
        }
    }
    (out, true)
}

/// The dependency tree `rel` (workspace-relative) lies in, if any (workspace-relative): a
/// `node_modules` on the way, a directory on the way holding `pyvenv.cfg`, or one of
/// [`TOP_TREES`] at the top. For the file tools, which refuse to write there.
pub(crate) fn tree_of(workspace: &Path, rel: &Path) -> Option<PathBuf> {
    let mut at = PathBuf::new();
    for (i, c) in rel.components().enumerate() {
        let std::path::Component::Normal(name) = c else {
            return None;
        };
        at.push(name);
        if (i == 0 && TOP_TREES.iter().any(|t| name == *t)) || name == "node_modules" {
            return Some(at);
        }
        // A site directory's shape makes an environment before its `pyvenv.cfg` exists
        // (R9-2).
        if at.as_path() != rel
            && let Some(root) = site_root(&at)
            && !root.as_os_str().is_empty()
        {
            return Some(root);
        }
        // Only directories on the way (not the file itself) can be an environment or a
        // Cargo profile directory.
        let dir = workspace.join(&at);
        let holds = |n: &str| dir.join(n).symlink_metadata().is_ok();
        if at.as_path() != rel && (holds("pyvenv.cfg") || is_cargo_profile(workspace, &dir, holds))
        {
            return Some(at);
        }
    }
    None
}

/// The note for a command run read-only because the workspace holds more dependency trees
/// (or directories) than Keel keeps read-only per command.
pub(crate) fn incomplete_note() -> String {
    format!(
        "keel: this workspace holds more installed-dependency trees (node_modules, virtual environments, Cargo build output) than the {MAX_TREES} Keel keeps read-only per command, or more than {MAX_DIRS} directories to look through for them; so commands nobody approved run with the workspace read-only here. Ask the user to approve commands that must write, or to remove stray copies (directories holding a pyvenv.cfg, node_modules)."
    )
}

/// The note for a command that failed writing into a read-only tree, for the user and the
/// model.
pub(crate) fn note(workspace: &Path, trees: &[PathBuf], output: &str) -> Option<String> {
    if trees.is_empty()
        || !(output.contains("Read-only file system")
            || output.contains("EROFS")
            || output.contains("read-only file system"))
    {
        return None;
    }
    let names: Vec<String> = trees
        .iter()
        .take(5)
        .map(|t| {
            t.strip_prefix(workspace)
                .map_or_else(|_| t.display().to_string(), |r| r.display().to_string())
        })
        .collect();
    Some(format!(
        "keel: installed dependencies and build output ({}) are read-only to commands nobody approved: code there runs later through the user's own tools (npm test, python, pip, cargo test) without showing in any diff (such a command's Cargo builds into `target/keel`). Ask the user to approve the install command (or to run it), or work without writing there.",
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_are_found_at_the_top_and_nested_outermost_only() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        for d in [
            "node_modules/a/node_modules/b",
            "packages/p/node_modules/x",
            "env1/lib",
            "src/deep/venv2/lib",
            ".git/node_modules",
        ] {
            std::fs::create_dir_all(ws.join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(ws.join("env1/pyvenv.cfg"), "").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("src/deep/venv2/pyvenv.cfg"), "").unwrap_or_else(|e| panic!("{e}"));
        let (got, complete) = read_only_trees(ws);
        assert!(complete);
        let want: Vec<PathBuf> = [
            "env1",
            "node_modules",
            "packages/p/node_modules",
            "src/deep/venv2",
        ]
        .iter()
        .map(|p| ws.join(p))
        .collect();
        assert_eq!(got, want);
        assert_eq!(
            tree_of(ws, Path::new("env1/lib/python3.11/site-packages/zz.pth")),
            Some(PathBuf::from("env1"))
        );
        assert_eq!(
            tree_of(ws, Path::new("packages/p/node_modules/x/index.js")),
            Some(PathBuf::from("packages/p/node_modules"))
        );
        assert_eq!(tree_of(ws, Path::new("src/app.py")), None);
        assert_eq!(tree_of(ws, Path::new("env1")), None);
        // Remembered: a tree found later at the top joins without another walk.
        std::fs::create_dir_all(ws.join(".tox/py311")).unwrap_or_else(|e| panic!("{e}"));
        assert!(read_only_trees(ws).0.contains(&ws.join(".tox")));
        // Before its `pyvenv.cfg` exists, an environment's site directory is one (R9-2).
        assert_eq!(
            tree_of(ws, Path::new(".venv9/lib/python3.11/site-packages/zz.pth")),
            Some(PathBuf::from(".venv9"))
        );
        assert_eq!(
            tree_of(ws, Path::new("w/Lib/site-packages/zz.pth")),
            Some(PathBuf::from("w"))
        );
    }
}
