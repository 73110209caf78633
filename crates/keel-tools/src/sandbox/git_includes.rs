//! Working-tree paths the workspace repository's git configuration points git at — files it
//! reads as configuration, and programs it runs:
//!
//! - files included (`[include] path = ../.gitconfig`, `[includeIf "…"] path = …`, includes
//!   of includes — the usual way to share diff and merge drivers in a repository; pass 2, R14);
//! - the hooks directory `core.hooksPath` names (`.husky`, `.githooks`; husky 9's `.husky/_`
//!   runs the scripts in `.husky`, so that directory counts too — pass 4, R4-3);
//! - every path-like word in the value of any other key off the harmless allowlist
//!   ([`crate::git_config::harmless`]): `core.fsmonitor = ./tools/fsmonitor`,
//!   `filter.x.clean = ./scripts/clean.sh`, `diff.x.textconv = python3 tools/conv.py`,
//!   `core.sshCommand`, `alias.x = !scripts/x.sh`.
//!
//! The user's own git runs those programs unconfined at the next `git commit` or `git status`,
//! so they are protected like `.git`: read-only to the file tools (with a message naming the
//! key) and mounted read-only in the command sandbox; `keel doctor` lists them.
//!
//! Keel does not parse git configuration itself: each file is read beneath the workspace
//! handle (no links out, regular files, bounded) and given to git
//! ([`crate::git_config::entries`]). The answer is cached per workspace until one of the files
//! read (or looked for) changes, so a command's start costs a few `stat`s. Only paths inside
//! the workspace matter: the rest of the disk is read-only to commands already.

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use keel_fs::project::ProjectDir;

/// How deep includes are followed (git itself stops at 10).
const MAX_DEPTH: usize = 10;
/// The most config files read per workspace.
const MAX_FILES: usize = 32;

/// A working-tree path git reads or runs because of the repository's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitConfigPath {
    /// Workspace-relative; a directory (a hooks directory) covers everything below it.
    pub path: PathBuf,
    /// The config key that names it (`include.path`, `core.hookspath`, `filter.x.clean`).
    pub key: String,
}

/// The workspace-relative paths of [`git_config_paths`].
pub fn git_included_files(workspace: &Path) -> Vec<PathBuf> {
    git_config_paths(workspace)
        .into_iter()
        .map(|p| p.path)
        .collect()
}

/// The first of [`git_config_paths`] that `rel` (workspace-relative) is or lies below.
pub fn git_config_path_of(workspace: &Path, rel: &Path) -> Option<GitConfigPath> {
    git_config_paths(workspace)
        .into_iter()
        .find(|p| rel.starts_with(&p.path))
}

/// A file's identity and state, to see that it did not change (`None`: missing).
type Stamp = Option<(u64, u64, u64, i64, i64, i64, i64)>;

fn stamp(path: &Path) -> Stamp {
    std::fs::symlink_metadata(path).ok().map(|m| {
        (
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
    })
}

/// One workspace's answer and the files it was read from.
struct Cached {
    workspace: PathBuf,
    files: Vec<(PathBuf, Stamp)>,
    paths: Vec<GitConfigPath>,
    /// Read too soon after a change to be kept ([`recent`]).
    racy: bool,
}

static CACHE: Mutex<Vec<Cached>> = Mutex::new(Vec::new());

/// Every working-tree path inside `workspace` that its repository's git configuration
/// (`.git/config`, `.git/config.worktree` and what they include) names as configuration to
/// read or a program to run, sorted. Empty without a `.git` directory.
pub fn git_config_paths(workspace: &Path) -> Vec<GitConfigPath> {
    if let Ok(cache) = CACHE.lock()
        && let Some(c) = cache.iter().find(|c| c.workspace == workspace)
        && !c.racy
        && c.files.iter().all(|(f, s)| stamp(&workspace.join(f)) == *s)
    {
        return c.paths.clone();
    }
    let (files, paths) = read_paths(workspace);
    // A file changed within the last seconds may change again within the same timestamp
    // tick, unseen (git's "racily clean" entries): such an answer is not kept.
    let racy = files.iter().any(|(_, s)| s.is_some_and(recent));
    if let Ok(mut cache) = CACHE.lock() {
        cache.retain(|c| c.workspace != workspace);
        if cache.len() >= 16 {
            cache.remove(0);
        }
        cache.push(Cached {
            workspace: workspace.to_path_buf(),
            files,
            paths: paths.clone(),
            racy,
        });
    }
    paths
}

/// Whether a stamp's mtime or ctime lies within [`RACY`] seconds of now (or in the future).
fn recent(s: (u64, u64, u64, i64, i64, i64, i64)) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let (_, _, _, mtime, _, ctime, _) = s;
    mtime.max(ctime) >= now.saturating_sub(RACY)
}

/// Seconds within which a file's change makes the answer unfit to keep.
const RACY: i64 = 2;

/// Reads the configuration files (stamped before reading, so a change during the read is
/// seen next time) and collects the paths they name.
fn read_paths(workspace: &Path) -> (Vec<(PathBuf, Stamp)>, Vec<GitConfigPath>) {
    let mut files: Vec<(PathBuf, Stamp)> = Vec::new();
    let mut found: Vec<GitConfigPath> = Vec::new();
    let top = [".git/config", ".git/config.worktree"];
    for f in top {
        files.push((PathBuf::from(f), stamp(&workspace.join(f))));
    }
    if !workspace.join(".git").is_dir() {
        return (files, found);
    }
    let Ok(dir) = ProjectDir::open(workspace) else {
        return (files, found);
    };
    let add = |found: &mut Vec<GitConfigPath>, path: PathBuf, key: &str| {
        if !path.starts_with(".git") && !found.iter().any(|p| p.path == path) {
            found.push(GitConfigPath {
                path,
                key: key.to_string(),
            });
        }
    };
    let mut queue: Vec<(PathBuf, usize)> = top.iter().map(|f| (PathBuf::from(f), 0)).collect();
    let mut read = 0usize;
    while let Some((file, depth)) = queue.pop() {
        read += 1;
        if read > MAX_FILES {
            break;
        }
        if !files.iter().any(|(f, _)| *f == file) {
            files.push((file.clone(), stamp(&workspace.join(&file))));
        }
        let Some(rel) = file.to_str() else { continue };
        let Ok(Some(text)) = dir.read(rel, crate::git_config::MAX_CONFIG) else {
            continue;
        };
        let Ok(entries) = crate::git_config::entries(text.as_bytes()) else {
            continue;
        };
        let base = file.parent().unwrap_or(Path::new(""));
        for (key, value) in entries {
            let key = key.to_ascii_lowercase();
            let is_include =
                key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path"));
            if is_include {
                let Some(target) = inside(workspace, base, &value) else {
                    continue;
                };
                if !target.starts_with(".git") && !found.iter().any(|p| p.path == target) {
                    add(&mut found, target.clone(), &key);
                    if depth + 1 < MAX_DEPTH {
                        queue.push((target, depth + 1));
                    }
                }
            } else if key == "core.hookspath" {
                // Relative to the top of the work tree, where hooks run.
                if let Some(hooks) = inside(workspace, Path::new(""), &value) {
                    // husky 9: `.husky/_` holds stubs that run the scripts in `.husky`.
                    let dir = if hooks.file_name().is_some_and(|n| n == "_") {
                        hooks.parent().map(Path::to_path_buf).unwrap_or(hooks)
                    } else {
                        hooks
                    };
                    if !dir.as_os_str().is_empty() {
                        add(&mut found, dir, &key);
                    }
                }
            } else if !crate::git_config::harmless(&key, &value) {
                for word in path_words(&value) {
                    if let Some(p) = inside(workspace, Path::new(""), word) {
                        add(&mut found, p, &key);
                    }
                }
            }
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    (files, found)
}

/// The words of a program-naming value that are paths (hold a `/`): `python3
/// tools/conv.py` → `tools/conv.py`; `!./x.sh` → `./x.sh`; `--opt=./y` → `./y`.
fn path_words(value: &str) -> Vec<&str> {
    value
        .split(|c: char| c.is_whitespace() || c == ';' || c == '|' || c == '&')
        .map(|w| w.trim_matches(|c| c == '"' || c == '\'' || c == '!' || c == '(' || c == ')'))
        .map(|w| w.rsplit_once('=').map_or(w, |(_, v)| v))
        .filter(|w| w.contains('/') && !w.contains("://"))
        .collect()
}

/// `value` (relative to the directory `base`, workspace-relative; or absolute, or `~/…`) as a
/// workspace-relative path when it lies inside the workspace; `None` otherwise.
fn inside(workspace: &Path, base: &Path, value: &str) -> Option<PathBuf> {
    let joined = if let Some(rest) = value.strip_prefix("~/") {
        let home = PathBuf::from(std::env::var_os("HOME")?);
        home.join(rest).strip_prefix(workspace).ok()?.to_path_buf()
    } else if value.starts_with('~') {
        return None;
    } else if Path::new(value).is_absolute() {
        Path::new(value).strip_prefix(workspace).ok()?.to_path_buf()
    } else {
        base.join(value)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
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
        if !crate::fixtures::have_git() {
            return;
        }
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
    fn hooks_directories_and_programs_in_the_work_tree_are_found_and_the_answer_follows_changes() {
        // Red-team pass 4, R4-3: `core.hooksPath = .husky` made `.husky/pre-commit` a program
        // the user's `git commit` runs, yet it was writable.
        if !crate::fixtures::have_git() {
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".git")).unwrap_or_else(|e| panic!("{e}"));
        let write = |text: &str| {
            std::fs::write(ws.join(".git/config"), text).unwrap_or_else(|e| panic!("{e}"));
        };
        write(
            "\u{feff}[core]\n\thooksPath = .husky/_\n\tfsmonitor = \"./tools/fsmon --x\"\n\tsshCommand = ssh -i keys/id\n[filter \"x\"]\n\tclean = python3 scripts/clean.py %f\n[diff \"t\"]\n\ttextconv = /usr/bin/cat\n[alias]\n\tb = !sh ../outside.sh\n[remote \"origin\"]\n\turl = ./mirror/repo.git\n",
        );
        let got: Vec<(String, String)> = git_config_paths(ws)
            .into_iter()
            .map(|p| (p.path.display().to_string(), p.key))
            .collect();
        let want: Vec<(String, String)> = [
            (".husky", "core.hookspath"),
            ("keys/id", "core.sshcommand"),
            ("scripts/clean.py", "filter.x.clean"),
            ("tools/fsmon", "core.fsmonitor"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
        assert_eq!(
            git_config_path_of(ws, Path::new(".husky/pre-commit")).map(|p| p.key),
            Some("core.hookspath".to_string())
        );
        assert!(git_config_path_of(ws, Path::new(".huskyx")).is_none());
        // Changed config: a new answer, not the cached one.
        write("[core]\n\thooksPath = .githooks\n");
        assert_eq!(git_included_files(ws), vec![PathBuf::from(".githooks")]);
    }

    #[test]
    fn the_kept_answer_follows_every_change_to_the_files_it_read() {
        if !crate::fixtures::have_git() {
            return;
        }
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
