//! Every repository the user's git runs in inside the workspace (red-team pass 7, R7-20): not
//! only the one holding the workspace, but each repository below it — a vendored clone with
//! its own `.git` and `core.hooksPath`, husky in a sub-project, or the repositories of a
//! workspace that holds several and is none itself (`-w ~/code` with `a/.git`, `b/.git`).
//! The user's next commit there runs that repository's hooks and configured programs
//! unconfined, so they join the one list ([`super::git_config_paths`]) like the top
//! repository's. A repository a command creates is [`crate::shell::nested_git`]'s: it is
//! quarantined when its configuration or hooks would run a program.

use std::path::{Path, PathBuf};

use super::git_includes::{Reader, path_words};

/// How deep includes are followed (git itself stops at 10).
const MAX_DEPTH: usize = 10;
/// The most config files read per repository.
const MAX_FILES: usize = 32;
/// The most directories looked through for repositories below the workspace's top (as many
/// as the dependency-tree discovery reads). Past it, or past [`MAX_NESTED`], the list is not
/// whole, and that is never silent (red-team pass 9, R9-3: 20,001 padding directories or 64
/// decoy repositories hid a vendored clone's `core.hooksPath`):
/// [`super::git_includes::search_cut`] makes the file tools refuse and commands nobody
/// approved run read-only.
pub(super) const MAX_NESTED_DIRS: usize = 100_000;
/// The most repositories below the top read.
pub(super) const MAX_NESTED: usize = 128;
/// Directories not looked into for repositories: git's own, and installed dependency trees
/// and build output (a hook of theirs is not the user's repository).
const NOT_SEARCHED: &[&str] = &[".git", ".keel", "node_modules", "target", ".venv", "venv"];

/// The repositories below `ws` (not the one holding it): each directory holding a `.git`
/// that is a work tree's own; the `.git` entries looked at are pushed to `gits` (their
/// identity tells the cache when one goes or is replaced). The second value: the search
/// stopped at [`MAX_NESTED_DIRS`] or [`MAX_NESTED`] before the end.
pub(super) fn nested_repositories(
    ws: &Path,
    gits: &mut Vec<PathBuf>,
) -> (Vec<crate::safe_git::Pinned>, bool) {
    let mut out = Vec::new();
    let mut queue = vec![ws.to_path_buf()];
    let mut dirs = 0usize;
    while let Some(dir) = queue.pop() {
        dirs += 1;
        if dirs > MAX_NESTED_DIRS || out.len() >= MAX_NESTED {
            return (out, true);
        }
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // A directory of ours the search may not list (`chmod 311 vendor`, a command
            // nobody approved can do it) may still be entered by the user, whose `git commit`
            // in `vendor/lib` runs that repository's hooks: not known, so cut (R9-3). One of
            // another user's we cannot list, we cannot write below either.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && ours(&dir) => {
                return (out, true);
            }
            Err(_) => continue,
        };
        let mut subdirs = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name();
            if name == ".git" {
                if dir != ws {
                    gits.push(e.path());
                    if let Ok(Some(p)) = crate::safe_git::pinned_repository(&dir)
                        && p.top == dir
                    {
                        out.push(p);
                    }
                }
                continue;
            }
            if NOT_SEARCHED.iter().any(|n| name == *n)
                || name.to_string_lossy().contains(".quarantined-by-keel")
            {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                subdirs.push(e.path());
            }
        }
        subdirs.sort();
        queue.extend(subdirs.into_iter().rev());
    }
    (out, false)
}

/// Whether the directory `dir` belongs to the user Keel runs as.
fn ours(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.uid() == rustix::process::geteuid().as_raw())
}

/// Reads the repository `repo`'s configuration (and `user_configs`, relative to it) and
/// hooks into `r`, whose top becomes the repository's; whether its git runs a work-tree
/// program.
pub(super) fn read_repository(
    r: &mut Reader,
    repo: &crate::safe_git::Pinned,
    user_configs: &[PathBuf],
) -> bool {
    r.top = repo.top.clone();
    let found_before = r.found.len();
    let mut queue: Vec<(PathBuf, usize)> = Vec::new();
    let mut git_dirs = vec![repo.git_dir.clone()];
    // A linked worktree's repository keeps `config` and `hooks` in its common directory.
    if let Some(common) = r
        .read(&repo.git_dir.join("commondir"), 4096)
        .and_then(|c| Reader::resolve(&repo.git_dir, c.trim()))
    {
        git_dirs.push(common);
    }
    for g in &git_dirs {
        queue.push((g.join("config"), 0));
        queue.push((g.join("config.worktree"), 0));
    }
    queue.extend(user_configs.iter().map(|f| (f.clone(), 0)));
    let mut hooks_dirs: Vec<(PathBuf, String)> = Vec::new();
    let mut read = 0usize;
    while let Some((file, depth)) = queue.pop() {
        read += 1;
        if read > MAX_FILES {
            break;
        }
        let Some(text) = r.read(&file, crate::git_config::MAX_CONFIG) else {
            continue;
        };
        let Ok(entries) = crate::git_config::entries(text.as_bytes()) else {
            continue;
        };
        let base = file.parent().unwrap_or(Path::new("/")).to_path_buf();
        let top = r.top.clone();
        for (key, value) in entries {
            let key = key.to_ascii_lowercase();
            let is_include =
                key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path"));
            if is_include {
                let Some(target) = Reader::resolve(&base, &value) else {
                    continue;
                };
                r.add(&target, &key);
                if depth + 1 < MAX_DEPTH && !queue.iter().any(|(f, _)| *f == target) {
                    queue.push((target, depth + 1));
                }
            } else if key == "core.hookspath" {
                // Relative to the top of the work tree, where hooks run.
                if let Some(hooks) = Reader::resolve(&top, &value) {
                    // husky 9: `.husky/_` holds stubs that run the scripts in `.husky`.
                    let dir = if hooks.file_name().is_some_and(|n| n == "_") {
                        hooks
                            .parent()
                            .map(Path::to_path_buf)
                            .unwrap_or(hooks.clone())
                    } else {
                        hooks.clone()
                    };
                    r.add(&dir, &key);
                    hooks_dirs.push((hooks, key.clone()));
                }
            } else if !crate::git_config::harmless(&key, &value) {
                for word in path_words(&value) {
                    if let Some(p) = Reader::resolve(&top, word) {
                        r.add(&p, &key);
                    }
                }
            }
        }
    }
    // `.git/hooks` too when `core.hooksPath` is set: the user may unset it, and a hook
    // manager installed there still names its configuration.
    for g in git_dirs.iter().rev() {
        hooks_dirs.push((g.join("hooks"), "hook".to_string()));
    }
    let mut hooks = 0;
    for (dir, _) in &hooks_dirs {
        hooks += super::git_hooks::read_hooks(r, dir);
    }
    // What those programs load as a whole: `node_modules`, a virtual environment (R5-16).
    let runs_programs = hooks > 0
        || r.found[found_before..].iter().any(|p| {
            !(p.key == "include.path"
                || p.key.starts_with("includeif.")
                || p.key == "core.hookspath")
        });
    super::git_tool_trees::add_tool_trees(r, runs_programs);
    runs_programs
}

/// The user's configuration files that make programs run code, relative to the home: what
/// the user's package managers and hook tools read in every project (R8-5).
const USER_TOOL_FILES: &[&str] = &[
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".config/pip/pip.conf",
    ".pip/pip.conf",
    ".config/husky/init.sh",
    ".huskyrc",
    ".bundle/config",
    // rustup reads a toolchain file in every parent directory; cargo its home's config.
    "rust-toolchain.toml",
    "rust-toolchain",
    ".cargo/config.toml",
    ".cargo/config",
    // Cloud and developer tools' own configuration (`~/.aws/config`, `~/.kube/config`, …) is
    // not listed one by one: a workspace that holds the home is read-only to the agent
    // (`shell::user_config`; red-team pass 9, R9-6). Listed here, a file the user
    // had just edited (a rotated key) looked changed to the check after an undo.
];

/// Lists the user's git configuration files `user_configs` (and the XDG `git` directory
/// holding one: its `attributes` select drivers) and [`USER_TOOL_FILES`], when they lie in
/// the workspace: the user's git and tools read them in every repository, so a command
/// writing one (a home workspace) plants a program the user's next `git status` or
/// `npm test` anywhere runs (red-team pass 8, R8-5). Missing ones are listed too: one a
/// command creates is moved aside.
pub(super) fn user_files(r: &mut Reader, user_configs: &[PathBuf]) {
    const KEY: &str = "the user's own git or tool configuration (read in every repository)";
    for f in user_configs {
        r.add(f, KEY);
        if f.ends_with("git/config")
            && let Some(dir) = f.parent()
        {
            r.add(dir, KEY);
        }
    }
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        let home = PathBuf::from(home);
        for f in USER_TOOL_FILES {
            r.add(&home.join(f), KEY);
        }
    }
}
