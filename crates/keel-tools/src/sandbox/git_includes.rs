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

/// A working-tree path git reads or runs because of the repository's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitConfigPath {
    /// Workspace-relative; a directory (a hooks directory) covers everything below it.
    pub path: PathBuf,
    /// The config key that names it (`include.path`, `core.hookspath`, `filter.x.clean`).
    pub key: String,
    /// A tree of installed code the hooks load as a whole (`node_modules`, a virtual
    /// environment: [`super::git_tool_trees`]): after a command only its appearance is
    /// checked, not every file below it.
    pub tree: bool,
}

/// The workspace-relative paths of [`git_config_paths`].
pub fn git_included_files(workspace: &Path) -> Vec<PathBuf> {
    git_config_paths(workspace)
        .into_iter()
        .map(|p| p.path)
        .collect()
}

/// The first of [`git_config_paths`] that `rel` (workspace-relative) is or lies below; else,
/// when the user's git runs a work-tree program, `rel` itself if a hook tool that looks for
/// its configuration in every directory would read it (lint-staged's `sub/.lintstagedrc.js`:
/// [`super::git_tool_trees`], red-team pass 6, R6-9). The file tools refuse such a path
/// before writing, and quarantine one a write made so; the command runner looks for them
/// after every command ([`crate::shell::nested_git`]).
pub fn git_config_path_of(workspace: &Path, rel: &Path) -> Option<GitConfigPath> {
    let (paths, runs_programs, _, reach) = cached_all(workspace);
    if let Some(p) = paths.into_iter().find(|p| rel.starts_with(&p.path)) {
        return Some(p);
    }
    // What a hook's inline code may load (R9-4).
    let ext = rel.extension().and_then(|e| e.to_str()).unwrap_or("");
    if let Some(r) = reach
        .iter()
        .find(|r| rel.starts_with(&r.dir) && r.extensions.contains(&ext))
    {
        return Some(GitConfigPath {
            path: rel.to_path_buf(),
            key: r.key.clone(),
            tree: false,
        });
    }
    if !runs_programs {
        return None;
    }
    super::git_tool_trees::discovered(workspace, rel)
}

/// `rel` when it is not on [`git_config_paths`] (those are guarded as listed) and a hook tool
/// that looks in every directory would read it, while the user's git runs a work-tree program
/// ([`git_config_path_of`]'s second half): what the runner's walk after a command checks.
pub(crate) fn hook_tool_config_of(workspace: &Path, rel: &Path) -> Option<GitConfigPath> {
    let (paths, runs_programs, _) = cached(workspace);
    if !runs_programs || paths.iter().any(|p| rel.starts_with(&p.path)) {
        return None;
    }
    super::git_tool_trees::discovered(workspace, rel)
}

/// A file's identity and state, to see that it did not change (`None`: missing).
type Stamp = Option<(u64, u64, u64, i64, i64, i64, i64)>;

/// A `.git` entry's device and inode (`None`: missing).
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

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

/// One workspace's answer and the files it was read from (absolute paths).
struct Cached {
    workspace: PathBuf,
    files: Vec<(PathBuf, Stamp)>,
    /// The `.git` entries looked for on the way up, by identity only (git writes inside a
    /// `.git` directory all the time; a `.git` appearing, going or replaced is what counts).
    gits: Vec<(PathBuf, Option<(u64, u64)>)>,
    paths: Vec<GitConfigPath>,
    /// The user's git runs a work-tree program here (a hook, a program its configuration
    /// names).
    runs_programs: bool,
    /// Read too soon after a change to be kept ([`recent`]).
    racy: bool,
    /// The search for repositories below the workspace stopped at a bound.
    cut: bool,
    reach: Vec<Reach>,
}

static CACHE: Mutex<Vec<Cached>> = Mutex::new(Vec::new());

/// Every working-tree path inside `workspace` that the user's next git command in it reads as
/// configuration or runs as a program, sorted: what the configuration of the repository
/// holding it names (the nearest `.git` at or above the workspace: its `config`,
/// `config.worktree` and what they include), what the user's own and the system's git
/// configuration name (`~/.gitconfig`, `$XDG_CONFIG_HOME/git/config`, `/etc/gitconfig`, or
/// where `GIT_CONFIG_GLOBAL` / `GIT_CONFIG_SYSTEM` point; a global `core.hooksPath =
/// .githooks` is relative to each repository), and what the installed hooks run
/// ([`super::git_hooks`]: the files they name, the configuration of the hook managers they
/// start — pre-commit's `.pre-commit-config.yaml`, lefthook's `lefthook.yml` — and the
/// programs those name). Paths that do not exist yet are listed too: the file tools refuse
/// them, and the command runner quarantines one a command creates
/// ([`crate::shell::nested_git`]). The repositories below the workspace's top count the same
/// ([`super::git_repos`], R7-20).
pub fn git_config_paths(workspace: &Path) -> Vec<GitConfigPath> {
    cached(workspace).0
}

/// The git configuration files of the repositories `workspace` is in or holds (its own, a
/// linked worktree's common directory, nested repositories', submodules'): each `config` or
/// `config.worktree` read for [`git_config_paths`] that lies in a git directory.
pub(super) fn repository_config_files(workspace: &Path) -> Vec<PathBuf> {
    let _ = cached(workspace);
    let Ok(cache) = CACHE.lock() else {
        return Vec::new();
    };
    let Some(c) = cache.iter().find(|c| c.workspace == workspace) else {
        return Vec::new();
    };
    c.files
        .iter()
        .map(|(f, _)| f)
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| n == "config" || n == "config.worktree")
                && f.parent().is_some_and(|d| d.join("HEAD").is_file())
        })
        .cloned()
        .collect()
}

/// Why [`git_config_paths`] may not name everything the user's git runs in `workspace`: the
/// search for the repositories below it stopped at a bound (more directories or repositories
/// than Keel looks through; red-team pass 9, R9-3). `None`: the list is whole. The file tools
/// then refuse to write, and commands nobody approved run with the workspace read-only — a
/// cut search never means "no more repositories".
pub fn search_cut(workspace: &Path) -> Option<String> {
    cached(workspace).2.then(|| {
        format!(
            "this workspace holds more than {} directories or {} git repositories below its \
             top, or a directory Keel may not list, so Keel cannot look through them all for the hooks for the hooks and programs each repository's git \
             runs (a vendored clone's `core.hooksPath`); so the agent does not change files \
             here, and commands nobody approved run read-only. Ask the user to approve commands \
             that must write, or to open Keel on a smaller directory (or remove stray copies)",
            super::git_repos::MAX_NESTED_DIRS,
            super::git_repos::MAX_NESTED
        )
    })
}

/// [`git_config_paths`], whether the user's git runs a work-tree program, and whether the
/// search for repositories was cut.
fn cached(workspace: &Path) -> (Vec<GitConfigPath>, bool, bool) {
    let (paths, runs, cut, _) = cached_all(workspace);
    (paths, runs, cut)
}

/// [`cached`], and what hooks' inline code may load.
fn cached_all(workspace: &Path) -> (Vec<GitConfigPath>, bool, bool, Vec<Reach>) {
    if let Ok(cache) = CACHE.lock()
        && let Some(c) = cache.iter().find(|c| c.workspace == workspace)
        && !c.racy
        && c.files.iter().all(|(f, s)| stamp(f) == *s)
        && c.gits.iter().all(|(f, s)| identity(f) == *s)
    {
        return (c.paths.clone(), c.runs_programs, c.cut, c.reach.clone());
    }
    let (files, gits, paths, runs_programs, cut, reach) =
        read_paths(workspace, &user_config_files());
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
            gits,
            paths: paths.clone(),
            runs_programs,
            racy,
            cut,
            reach: reach.clone(),
        });
    }
    (paths, runs_programs, cut, reach)
}

/// The user's and the system's git configuration files, as the user's git finds them.
pub(super) fn user_config_files() -> Vec<PathBuf> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut out = Vec::new();
    if let Some(global) = env("GIT_CONFIG_GLOBAL") {
        out.push(PathBuf::from(global));
    } else {
        let home = env("HOME").map(PathBuf::from);
        let xdg = env("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".config")));
        if let Some(x) = xdg {
            out.push(x.join("git/config"));
        }
        if let Some(h) = home {
            out.push(h.join(".gitconfig"));
        }
    }
    if env("GIT_CONFIG_NOSYSTEM").is_none() {
        out.push(
            env("GIT_CONFIG_SYSTEM").map_or_else(|| PathBuf::from("/etc/gitconfig"), PathBuf::from),
        );
    }
    out.retain(|p| p.is_absolute() && p != Path::new("/dev/null"));
    out
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

/// Where the paths are gathered: the canonical workspace, the work tree's top (relative
/// program paths and `core.hooksPath` are taken from there), the workspace's project files.
pub(super) struct Reader {
    /// The canonical workspace.
    pub(super) ws: PathBuf,
    /// The canonical top of the work tree holding the workspace.
    pub(super) top: PathBuf,
    dir: Option<ProjectDir>,
    /// Every file read or looked for, stamped before it was read.
    pub(super) files: Vec<(PathBuf, Stamp)>,
    pub(super) found: Vec<GitConfigPath>,
    /// Existing directories a hook's text names (`cd frontend && npx lint-staged`).
    pub(super) named_dirs: Vec<PathBuf>,
    /// What inline code a hook runs may load ([`Reach`]).
    pub(super) reach: Vec<Reach>,
}

/// Files a hook's inline code (`python3 -c '…'`, `node -e '…'`) may load: every file with
/// one of `extensions` below `dir` (workspace-relative; empty: the top). The reader does not
/// resolve what such code imports, so it counts them all (red-team pass 9, R9-4). Refused to
/// the file tools; not on the mounted list (that would be every source file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reach {
    dir: PathBuf,
    extensions: &'static [&'static str],
    key: String,
}

impl Reader {
    /// Reads the file at `abs` (at most `limit` bytes): beneath the workspace handle when it
    /// lies in the workspace (no link out, regular files only), else as the user's own file
    /// (regular only, bounded). Stamped first, so a change during the read is seen next time.
    pub(super) fn read(&mut self, abs: &Path, limit: u64) -> Option<String> {
        if !self.files.iter().any(|(f, _)| f == abs) {
            self.files.push((abs.to_path_buf(), stamp(abs)));
        }
        match abs.strip_prefix(&self.ws) {
            Ok(rel) => {
                let rel = rel.to_str()?;
                self.dir.as_ref()?.read(rel, limit).ok().flatten()
            }
            Err(_) => keel_fs::project::read_user_file(abs, limit).ok().flatten(),
        }
    }

    /// Records that inline code a hook runs may load any file with one of `extensions` below
    /// `abs` ([`Reach`]).
    pub(super) fn add_reach(&mut self, abs: &Path, extensions: &'static [&'static str], key: &str) {
        let dir = match abs.strip_prefix(&self.ws) {
            Ok(rel) => rel.to_path_buf(),
            // The hook's top lies above the workspace: all of the workspace.
            Err(_) if self.ws.starts_with(abs) => PathBuf::new(),
            Err(_) => return,
        };
        let reach = Reach {
            dir,
            extensions,
            key: key.to_string(),
        };
        if !self.reach.contains(&reach) {
            self.reach.push(reach);
        }
    }

    /// Stamps `abs` without reading it (a directory whose listing counts).
    pub(super) fn look(&mut self, abs: &Path) {
        if !self.files.iter().any(|(f, _)| f == abs) {
            self.files.push((abs.to_path_buf(), stamp(abs)));
        }
    }

    /// Records `abs` (lexically normal) under `key` when it lies in the workspace outside a
    /// `.git`; also its canonical form when a symlink in the workspace leads elsewhere in it
    /// (`tools → scripts` makes `scripts/fsmon` the program `tools/fsmon` names).
    pub(super) fn add(&mut self, abs: &Path, key: &str) {
        self.add_as(abs, key, false);
    }

    /// Like [`Self::add`], for a tree of installed code ([`GitConfigPath::tree`]).
    pub(super) fn add_tree(&mut self, abs: &Path, key: &str) {
        self.add_as(abs, key, true);
    }

    fn add_as(&mut self, abs: &Path, key: &str, tree: bool) {
        let push = |found: &mut Vec<GitConfigPath>, rel: PathBuf| {
            let under_git = rel
                .components()
                .next()
                .is_some_and(|c| c.as_os_str().eq_ignore_ascii_case(".git"));
            if !rel.as_os_str().is_empty() && !under_git && !found.iter().any(|p| p.path == rel) {
                found.push(GitConfigPath {
                    path: rel,
                    key: key.to_string(),
                    tree,
                });
            }
        };
        if let Ok(rel) = abs.strip_prefix(&self.ws) {
            push(&mut self.found, rel.to_path_buf());
        }
        if let Some(real) = canonical_prefix(abs)
            && real != abs
            && let Ok(rel) = real.strip_prefix(&self.ws)
        {
            push(&mut self.found, rel.to_path_buf());
        }
    }

    /// `value` as an absolute, lexically normal path: relative to `base`; `~/…` in the home.
    pub(super) fn resolve(base: &Path, value: &str) -> Option<PathBuf> {
        let joined = if let Some(rest) = value.strip_prefix("~/") {
            PathBuf::from(std::env::var_os("HOME")?).join(rest)
        } else if value.starts_with('~') || value.is_empty() {
            return None;
        } else {
            base.join(value)
        };
        normal(&joined)
    }
}

/// `p` (absolute) with `.` and `..` taken lexically.
fn normal(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::RootDir => out.push("/"),
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Prefix(_) => return None,
        }
    }
    out.is_absolute().then_some(out)
}

/// `p` with its longest existing prefix canonicalised (the rest appended as it is).
pub(crate) fn canonical_prefix(p: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut cur = p;
    loop {
        if let Ok(real) = cur.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return Some(out);
        }
        rest.push(cur.file_name()?.to_os_string());
        cur = cur.parent()?;
    }
}

/// Gathers the paths for `workspace`, the user's configuration being `user_configs`.
#[allow(clippy::type_complexity)]
fn read_paths(
    workspace: &Path,
    user_configs: &[PathBuf],
) -> (
    Vec<(PathBuf, Stamp)>,
    Vec<(PathBuf, Option<(u64, u64)>)>,
    Vec<GitConfigPath>,
    bool,
    bool,
    Vec<Reach>,
) {
    let mut gits = Vec::new();
    let Ok(ws) = workspace.canonicalize() else {
        return (Vec::new(), gits, Vec::new(), false, false, Vec::new());
    };
    // The repository holding the workspace: every `.git` looked for is stamped, so one
    // appearing (or going) is seen.
    let mut repo = None;
    let mut cur = Some(ws.as_path());
    while let Some(d) = cur {
        let dot = d.join(".git");
        let s = identity(&dot);
        gits.push((dot, s));
        if s.is_some() {
            repo = crate::safe_git::pinned_repository(d).ok().flatten();
            break;
        }
        cur = d.parent();
    }
    let mut r = Reader {
        dir: ProjectDir::open(&ws).ok(),
        top: repo.as_ref().map_or_else(|| ws.clone(), |p| p.top.clone()),
        ws: ws.clone(),
        files: Vec::new(),
        found: Vec::new(),
        named_dirs: Vec::new(),
        reach: Vec::new(),
    };
    // The user's own git and tool configuration, when the workspace holds it (a home
    // workspace): git reads it in every repository of the user's (R8-5).
    super::git_repos::user_files(&mut r, user_configs);
    let mut runs_programs = false;
    if let Some(repo) = &repo {
        runs_programs |= super::git_repos::read_repository(&mut r, repo, user_configs);
    }
    // The repositories below it, each with its own hooks and configuration (R7-20).
    let mut nested_gits = Vec::new();
    let (nested, cut) = super::git_repos::nested_repositories(&ws, &mut nested_gits);
    gits.extend(nested_gits.into_iter().map(|g| {
        let s = identity(&g);
        (g, s)
    }));
    for n in &nested {
        runs_programs |= super::git_repos::read_repository(&mut r, n, user_configs);
    }
    let mut found = r.found;
    found.sort_by(|a, b| a.path.cmp(&b.path));
    (r.files, gits, found, runs_programs, cut, r.reach)
}

/// The words of a program-naming value that are paths (hold a `/`): `python3
/// tools/conv.py` → `tools/conv.py`; `!./x.sh` → `./x.sh`; `--opt=./y` → `./y`.
pub(super) fn path_words(value: &str) -> Vec<&str> {
    value
        .split(|c: char| c.is_whitespace() || c == ';' || c == '|' || c == '&')
        .map(|w| w.trim_matches(|c| c == '"' || c == '\'' || c == '!' || c == '(' || c == ')'))
        .map(|w| w.rsplit_once('=').map_or(w, |(_, v)| v))
        .filter(|w| w.contains('/') && !w.contains("://"))
        .collect()
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
        // A workspace below the repository's top: what the repository names inside it.
        assert_eq!(
            git_included_files(&ws.join("config")),
            vec![PathBuf::from("git.inc"), PathBuf::from("more.inc")]
        );
        let bare = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(git_included_files(bare.path()).is_empty(), "no repository");
    }

    fn found(ws: &Path, user: &[PathBuf]) -> Vec<(String, String)> {
        read_paths(ws, user)
            .2
            .into_iter()
            .map(|p| (p.path.display().to_string(), p.key))
            .collect()
    }

    /// Red-team pass 8, R8-5: in a home workspace the user's `~/.gitconfig` and XDG git
    /// directory are workspace files; git reads them in every repository of the user's, so
    /// they are listed (present or not), with or without a repository holding the home.
    #[test]
    fn the_users_git_configuration_in_the_workspace_is_listed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let user = [home.join(".config/git/config"), home.join(".gitconfig")];
        for with_repo in [false, true] {
            if with_repo {
                std::fs::create_dir_all(home.join(".git")).unwrap_or_else(|e| panic!("{e}"));
            }
            let got = found(&home, &user);
            for path in [".gitconfig", ".config/git", ".config/git/config"] {
                assert!(
                    got.iter()
                        .any(|(p, k)| p == path && k.contains("the user's own")),
                    "{path} (repository: {with_repo}): {got:?}"
                );
            }
        }
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn the_users_own_config_and_an_enclosing_repository_name_paths_in_the_workspace() {
        // R4-3's gaps: a `core.hooksPath` from the user's `~/.gitconfig` (relative: taken in
        // each repository), a program path an include of it names, and a repository whose top
        // lies above the workspace — missing paths listed too.
        if !crate::fixtures::have_git() {
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let top = dir.path().join("repo");
        let ws = top.join("pkg");
        let w = |p: &Path, text: &str| {
            std::fs::create_dir_all(p.parent().unwrap_or(Path::new("/")))
                .unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
        };
        std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
        w(
            &top.join(".git/config"),
            "[core]\n\tbare = false\n[diff \"x\"]\n\ttextconv = python3 pkg/tools/conv.py\n",
        );
        let global = dir.path().join("home/.gitconfig");
        let inc = dir.path().join("home/more.inc");
        w(
            &global,
            "[core]\n\thooksPath = pkg/.githooks\n[include]\n\tpath = more.inc\n[user]\n\tname = u\n",
        );
        w(
            &inc,
            &format!("[core]\n\tfsmonitor = {}/tools/fsmon\n", ws.display()),
        );
        let user = [dir.path().join("home/.config/git/config"), global];
        assert_eq!(
            found(&ws, &user),
            pairs(&[
                (".githooks", "core.hookspath"),
                ("tools/conv.py", "diff.x.textconv"),
                ("tools/fsmon", "core.fsmonitor"),
            ])
        );
    }

    #[test]
    fn installed_hooks_name_what_they_run_and_their_managers_configuration() {
        // R4-3's gaps: hooks whose manager reads its configuration from the work tree
        // (pre-commit's `.pre-commit-config.yaml`, lefthook's `lefthook.yml`), the programs
        // those name, a hook linked to a work-tree script, a script a hook's text names.
        if !crate::fixtures::have_git() {
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        let w = |rel: &str, text: &str| {
            let p = ws.join(rel);
            std::fs::create_dir_all(p.parent().unwrap_or(Path::new("/")))
                .unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
        };
        w(".git/config", "[core]\n\tbare = false\n");
        w(
            ".git/hooks/pre-commit",
            "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\nINSTALL_PYTHON=/usr/bin/python3\nARGS=(hook-impl --config=ci/pre-commit.yaml --hook-type=pre-commit)\nexec \"$INSTALL_PYTHON\" -mpre_commit \"${ARGS[@]}\"\n",
        );
        w(
            "ci/pre-commit.yaml",
            "repos:\n- repo: local\n  hooks:\n  - id: check\n    name: check\n    entry: ./scripts/check.sh --strict\n    language: script\n    files: ^src/.*\\.py$\n  - id: t\n    entry: run.sh\n    language: script\n",
        );
        w("run.sh", "true\n");
        w(
            ".git/hooks/pre-push",
            "#!/bin/sh\ncall_lefthook()\n{\n  dir=\"$(git rev-parse --show-toplevel)\"\n  if test -f \"$dir/node_modules/lefthook/bin/index.js\"\n  then \"$dir/node_modules/lefthook/bin/index.js\" \"$@\"\n  fi\n}\ncall_lefthook run \"pre-push\" \"$@\"\n",
        );
        w(
            "lefthook.yml",
            "pre-push:\n  commands:\n    lint:\n      glob: \"src/*.js\"\n      run: ./scripts/lint.sh {push_files}\n",
        );
        w(
            ".git/hooks/commit-msg",
            "#!/bin/sh\ncd frontend/ && exec tools/msg-check.sh \"$1\"\n",
        );
        std::fs::create_dir_all(ws.join("frontend")).unwrap_or_else(|e| panic!("{e}"));
        w(".git/hooks/post-commit.sample", "exec samples/x.sh\n");
        std::os::unix::fs::symlink(
            "../../scripts/post-merge.sh",
            ws.join(".git/hooks/post-merge"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // husky's default hook (R5-16): `npx lint-staged` runs the work tree's package.
        w(
            ".git/hooks/prepare-commit-msg",
            "#!/bin/sh\nnpx lint-staged\n",
        );
        w("node_modules/lint-staged/bin/lint-staged.js", "// ok\n");
        std::fs::create_dir_all(ws.join("node_modules/.bin")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(
            "../lint-staged/bin/lint-staged.js",
            ws.join("node_modules/.bin/lint-staged"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let got = found(ws, &[]);
        let has = |path: &str, key: &str| got.iter().any(|(p, k)| p == path && k.contains(key));
        for (path, key) in [
            ("ci/pre-commit.yaml", "pre-commit"),
            ("scripts/check.sh", "pre-commit"),
            ("run.sh", "pre-commit"),
            ("lefthook.yml", "lefthook"),
            ("lefthook-local.yml", "lefthook"),
            (".lefthook", "lefthook"),
            ("scripts/lint.sh", "lefthook"),
            ("node_modules/lefthook/bin/index.js", "hook `pre-push`"),
            ("tools/msg-check.sh", "hook `commit-msg`"),
            ("scripts/post-merge.sh", "hook `post-merge`"),
            ("node_modules/.bin/lint-staged", "hook `prepare-commit-msg`"),
            (
                "node_modules/lint-staged/bin/lint-staged.js",
                "hook `prepare-commit-msg`",
            ),
            ("node_modules/lint-staged", "hook `prepare-commit-msg`"),
        ] {
            assert!(has(path, key), "{path} ({key}) missing from {got:?}");
        }
        for path in [
            "frontend",
            "src/*.js",
            "samples/x.sh",
            ".pre-commit-config.yaml",
        ] {
            assert!(
                !got.iter().any(|(p, _)| p == path),
                "{path} listed: {got:?}"
            );
        }
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
        let all = git_config_paths(ws);
        // The programs run JavaScript tooling: its trees and configuration count (R5-16).
        assert!(
            all.iter()
                .any(|p| p.path == Path::new("node_modules") && p.tree)
        );
        let got: Vec<(String, String)> = all
            .into_iter()
            .filter(|p| p.key != super::super::git_tool_trees::KEY)
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
