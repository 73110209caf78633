//! Git repositories a command leaves behind: after each command that could write — checked in
//! the one command runner ([`super::exec::run`]), so every runner gets it — the
//! workspace is searched for `.git` entries (at any depth, the top level included) that the
//! command created or changed, and any whose configuration or hooks would run a program is
//! quarantined — its `.git` renamed to `.git-quarantined-by-keel` — and reported in the
//! command's result.
//!
//! Why: the sandbox confines the command, but a repository it plants (`git init vendor/lib &&
//! git -C vendor/lib config core.fsmonitor '…'`) runs its program later, unconfined, when the
//! user's own git, shell prompt or editor looks inside. The file tools refuse every `.git`
//! path ([`crate::sandbox::is_protected`]); a command cannot be refused by name (Landlock
//! matches no names), so what it left is checked afterwards. Its configuration is judged by
//! git itself against an allowlist of harmless keys ([`crate::git_config`]); a repository
//! that runs nothing (`cargo new`'s, `git init`'s, a plain `git clone`'s) is left as it is.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The most directories read per check (a bigger workspace is checked up to here, and the
/// result says so).
const MAX_DIRS: usize = 100_000;
/// The most directory entries read per check.
const MAX_ENTRIES: usize = 5_000_000;
/// The name a quarantined `.git` gets (a number is added when taken).
pub const QUARANTINE_NAME: &str = ".git-quarantined-by-keel";

/// One repository moved out of git's sight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// The directory holding the repository (workspace-relative, `.` for the root).
    pub dir: String,
    /// Where its `.git` (or the entry [`Self::entry`] names) went (workspace-relative).
    pub moved_to: String,
    /// What was moved: `.git`, or a `.gitignore` / `.gitattributes` that is a FIFO or device.
    pub entry: String,
    /// What would have run: config keys, hook names.
    pub reasons: Vec<String>,
}

/// Whether `path` changed at or after `since` (its inode: created, written, renamed, chmod).
fn changed_since(meta: &std::fs::Metadata, since: SystemTime) -> bool {
    let ctime = SystemTime::UNIX_EPOCH
        + Duration::new(
            u64::try_from(meta.ctime()).unwrap_or(0),
            u32::try_from(meta.ctime_nsec()).unwrap_or(0),
        );
    ctime >= since
}

/// The config files git reads in the git directory `git`: its `config`, `config.worktree`
/// (read when `extensions.worktreeConfig` is on — red-team pass 4, R4-1) and those of its
/// linked worktrees.
fn config_files(git: &Path) -> Vec<PathBuf> {
    let mut out = vec![git.join("config"), git.join("config.worktree")];
    if let Ok(trees) = std::fs::read_dir(git.join("worktrees")) {
        for tree in trees.flatten().take(100) {
            out.push(tree.path().join("config"));
            out.push(tree.path().join("config.worktree"));
        }
    }
    out
}

/// The directory the `commondir` file of the git directory `git` names (relative to `git`),
/// when there is one.
fn common_dir(git: &Path) -> Option<PathBuf> {
    let text = keel_fs::project::read_in_dir(&git.join("commondir"), 4096).ok()??;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| git.join(line))
}

/// Whether anything in the repository at `git` (a `.git` directory or file) that could make
/// git run a program changed since `since`: the entry itself when it is not a directory, its
/// config files, `commondir`, `info/attributes`, its hooks.
fn touched(git: &Path, since: SystemTime) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(git) else {
        return false;
    };
    if !meta.is_dir() {
        return changed_since(&meta, since);
    }
    let changed = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| changed_since(&m, since));
    // A work-tree directory that is a git directory by what it holds becomes one again when
    // its `HEAD` comes back (red-team pass 8, R8-3: a restore, or a command's `mv`, put back
    // the `HEAD` the check had moved aside beside an unchanged `commondir`).
    let by_content = !git
        .file_name()
        .is_some_and(|n| n.eq_ignore_ascii_case(".git"));
    if by_content && changed(&git.join("HEAD")) {
        return true;
    }
    if config_files(git).iter().any(|p| changed(p))
        || ["commondir", "info/attributes", "hooks", "worktrees"]
            .iter()
            .any(|p| changed(&git.join(p)))
    {
        return true;
    }
    // Git reads the config and hooks of the directory `commondir` names (R7-9).
    if let Some(common) = common_dir(git)
        && (config_files(&common).iter().any(|p| changed(p)) || changed(&common.join("hooks")))
    {
        return true;
    }
    std::fs::read_dir(git.join("hooks"))
        .map(|hooks| {
            hooks
                .flatten()
                .any(|h| h.metadata().is_ok_and(|m| changed_since(&m, since)))
        })
        .unwrap_or(false)
}

/// What in the repository at `git` (a `.git` directory or file) would make git run a program:
/// every config key off the allowlist ([`crate::git_config::dangerous_keys`], judged by git
/// itself), a config that is not a regular file or cannot be read, a hook, `commondir`. A
/// `.git` that is a symlink or a file (naming a repository elsewhere) counts too.
fn inspect(git: &Path) -> Vec<String> {
    let Ok(meta) = std::fs::symlink_metadata(git) else {
        return Vec::new();
    };
    if !meta.is_dir() {
        let what = if meta.file_type().is_symlink() {
            "`.git` is a symlink (to a repository elsewhere)"
        } else {
            "`.git` is a file naming a repository elsewhere"
        };
        return vec![what.to_string()];
    }
    let mut reasons: Vec<String> = Vec::new();
    let mut configs = config_files(git);
    if let Some(common) = common_dir(git) {
        configs.extend(config_files(&common));
    }
    for config in configs {
        let name = config.strip_prefix(git).map_or_else(
            |_| config.display().to_string(),
            |p| p.display().to_string(),
        );
        match std::fs::symlink_metadata(&config) {
            Ok(m) if m.is_file() => {
                match keel_fs::project::read_in_dir(&config, crate::git_config::MAX_CONFIG) {
                    Ok(Some(text)) => {
                        for key in crate::git_config::dangerous_keys(text.as_bytes()) {
                            let key = if name == "config" {
                                key
                            } else {
                                format!("{key} (in {name})")
                            };
                            if !reasons.contains(&key) {
                                reasons.push(key);
                            }
                        }
                    }
                    Ok(None) => {}
                    Err(e) => reasons.push(format!("its {name} cannot be read: {e}")),
                }
            }
            Ok(_) => reasons.push(format!("its {name} is not a regular file")),
            Err(_) => {}
        }
    }
    if std::fs::symlink_metadata(git.join("commondir")).is_ok() {
        reasons.push("it names another repository (commondir)".to_string());
    }
    if let Ok(hooks) = std::fs::read_dir(git.join("hooks")) {
        for hook in hooks.flatten() {
            let name = hook.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".sample") {
                reasons.push(format!("hook `{name}`"));
            }
        }
    }
    reasons
}

/// Adds the owner's read and search bits to `dir` (a directory a command left unlistable) and
/// lists it; `None` when that is not possible (not the owner).
fn listable_again(dir: &Path) -> Option<std::fs::ReadDir> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(dir).ok()?;
    if !meta.is_dir() {
        return None;
    }
    let mode = meta.permissions().mode() | 0o500;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).ok()?;
    std::fs::read_dir(dir).ok()
}

/// Names git opens in every directory it walks (`git add`, `git status`, `ls-files
/// --exclude-standard`): a FIFO there makes git wait forever — every snapshot then stalls
/// until its deadline — and a device is opened.
const READ_BY_GIT: &[&str] = &[".gitignore", ".gitattributes"];

/// Every `.git` entry under `root`, and every directory that is a git directory by what it
/// holds whatever its name ([`crate::sandbox::GIT_DIR_MARKERS`]: a `.git` file's `gitdir:
/// realgit`, `git --git-dir=fixtures/x.git`) — the root itself included (a command can turn
/// the workspace into a bare repository: red-team pass 4, R4-1). Symlinks are not followed;
/// git directories other than the root are not entered. At most [`MAX_DIRS`] directories and
/// [`MAX_ENTRIES`] entries are read (one directory of 310,000 files hid a repository planted
/// beside it when entries counted alone); the `bool` is true when that stopped the search.
/// Also collects into `specials` every [`READ_BY_GIT`] entry that is neither a regular file
/// nor a symlink (git does not follow those), and every directory that cannot be listed even
/// after its owner's read bit is put back, into `tool_configs` every entry that may be a
/// hook tool's configuration read in any directory ([`crate::sandbox::may_be_discovered`]),
/// and into `python` what it met of Python's (virtual environments, bytecode). The trees in
/// `walk.skip` (dependency trees that were read-only while the command ran: it cannot have
/// changed them) are not entered; every dependency tree met is noted in `walk.trees`.
fn find_entries(
    root: &Path,
    specials: &mut Vec<PathBuf>,
    tool_configs: &mut Vec<PathBuf>,
    python: &mut super::venv_startup::Seen,
    walk: &mut Trees,
) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut dirs = 0usize;
    let mut budget = MAX_ENTRIES;
    while let Some(dir) = stack.pop() {
        dirs += 1;
        if dirs > MAX_DIRS {
            return (found, true);
        }
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                // `chmod 111 x` hid `x/sub/.git` from this search while `cd x/sub` still worked
                // (red-team pass 5, R5-10): the owner's read and search bits are put back (a
                // directory of the user's own workspace), else the directory is reported.
                match listable_again(&dir) {
                    Some(e) => e,
                    None => {
                        specials.push(dir.clone());
                        continue;
                    }
                }
            }
            Err(_) => continue,
        };
        let entries: Vec<_> = entries.flatten().collect();
        budget = budget.saturating_sub(entries.len());
        if budget == 0 {
            return (found, true);
        }
        let holds = |name: &str| entries.iter().any(|e| e.file_name() == name);
        // A Python virtual environment, whatever its name ([`super::venv_startup`]).
        if holds("pyvenv.cfg") {
            python.venvs.push(dir.clone());
        }
        if dir != root && super::dependency_trees::is_tree(root, &dir, holds) {
            walk.trees.push(dir.clone());
            walk.walked.push(dir.clone());
        }
        // An environment by its site directory's shape alone (R9-2).
        if let Some(env) = super::dependency_trees::site_root(&dir)
            && env != root
            && env.starts_with(root)
        {
            walk.trees.push(env.clone());
            walk.walked.push(env);
        }
        // A Cargo profile directory the command could write (R8-4).
        if super::dependency_trees::is_cargo_profile(root, &dir, holds) {
            python.cargo.push(dir.clone());
        }
        // A git directory by content is still searched below: `vendor/HEAD`, `vendor/objects`,
        // `vendor/refs` once hid a repository planted at `vendor/lib/.git` from this search.
        if crate::sandbox::is_git_dir_by_names(holds) {
            found.push(dir.clone());
        }
        for entry in entries {
            let name = entry.file_name();
            python.note(&dir, &entry);
            if READ_BY_GIT.iter().any(|n| name == *n)
                && entry
                    .file_type()
                    .is_ok_and(|t| !t.is_file() && !t.is_symlink())
            {
                specials.push(entry.path());
            }
            if name.eq_ignore_ascii_case(".git") {
                found.push(entry.path());
                continue;
            }
            if crate::sandbox::may_be_discovered(&name) {
                tool_configs.push(entry.path());
            }
            if name == ".keel" && dir == root {
                continue;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let path = entry.path();
                if walk.skip.contains(&path) {
                    walk.trees.push(path);
                } else {
                    stack.push(path);
                }
            }
        }
    }
    (found, false)
}

/// Checks the workspace after a command that started at `since`: every `.git` the command
/// created or changed whose configuration or hooks run a program is renamed out of git's
/// sight. Returns what was moved (empty: nothing to report).
pub fn quarantine_new_repositories(workspace: &Path, since: SystemTime) -> Vec<Quarantined> {
    quarantine_in(
        workspace,
        since,
        false,
        &mut Vec::new(),
        &mut Default::default(),
        &mut Trees::default(),
    )
    .0
}

/// The dependency trees of one walk ([`super::dependency_trees`]): those not entered, and
/// every one met.
#[derive(Debug, Default)]
struct Trees {
    skip: Vec<PathBuf>,
    trees: Vec<PathBuf>,
    /// The trees met and entered: they were not read-only while the command ran.
    walked: Vec<PathBuf>,
}

/// [`quarantine_new_repositories`], leaving the root's own `.git` alone when `skip_top`; the
/// `bool` is true when the workspace was too large to search whole. Collects into
/// `tool_configs` the entries that may be a hook tool's configuration (for
/// [`super::git_programs::discovered_after`]), and into `python` what the walk met of
/// Python's (virtual environments, bytecode).
fn quarantine_in(
    workspace: &Path,
    since: SystemTime,
    skip_top: bool,
    tool_configs: &mut Vec<PathBuf>,
    python: &mut super::venv_startup::Seen,
    walk: &mut Trees,
) -> (Vec<Quarantined>, bool) {
    // A second of slack: file systems with coarse timestamps.
    let since = since.checked_sub(Duration::from_secs(1)).unwrap_or(since);
    let mut out = Vec::new();
    let top = workspace.join(".git");
    let mut specials = Vec::new();
    let (found, incomplete) = find_entries(workspace, &mut specials, tool_configs, python, walk);
    // A FIFO or device where git reads its ignore or attribute rules: moved away, or every
    // later snapshot (and the user's `git status`) waits on it.
    for special in specials {
        let Some(parent) = special.parent() else {
            continue;
        };
        let Ok(rel) = special.strip_prefix(workspace) else {
            continue;
        };
        if std::fs::symlink_metadata(&special).is_ok_and(|m| m.is_dir()) {
            // A directory that stayed unlistable: said, since nothing in it was checked.
            out.push(Quarantined {
                dir: rel.display().to_string(),
                moved_to: String::new(),
                entry: String::new(),
                reasons: vec![
                    "it cannot be listed, so Keel could not check it for planted repositories; do not run git inside it".to_string(),
                ],
            });
            continue;
        }
        if let Some(moved) = super::git_programs::quarantine(workspace, rel) {
            out.push(Quarantined {
                dir: parent
                    .strip_prefix(workspace)
                    .ok()
                    .filter(|p| !p.as_os_str().is_empty())
                    .map_or_else(|| ".".to_string(), |p| p.display().to_string()),
                moved_to: moved.display().to_string(),
                entry: special
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                reasons: vec![format!(
                    "`{}` is not a regular file: git would wait on it or open a device",
                    rel.display()
                )],
            });
        }
    }
    for git in found {
        if skip_top && git == top {
            continue;
        }
        // Only what the command could have changed is judged (git runs once per repository).
        if !touched(&git, since) {
            continue;
        }
        let reasons = inspect(&git);
        if reasons.is_empty() {
            continue;
        }
        // The workspace itself, or a work-tree directory that is a git directory by what it
        // holds: its `HEAD` goes, so git no longer takes it for a repository.
        let by_head = git == workspace
            || !git
                .file_name()
                .is_some_and(|n| n.eq_ignore_ascii_case(".git"));
        let parent = if by_head {
            git.as_path()
        } else {
            let Some(parent) = git.parent() else {
                continue;
            };
            parent
        };
        let rel = |p: &Path| match p.strip_prefix(workspace) {
            Ok(r) if r.as_os_str().is_empty() => ".".to_string(),
            Ok(r) => r.display().to_string(),
            Err(_) => p.display().to_string(),
        };
        let Some(moved) = quarantine(workspace, &git) else {
            // Said, not skipped (R7-21): the user must not run git there.
            let mut reasons = reasons;
            reasons.push(
                "it COULD NOT be moved aside; remove it before running git, a shell prompt or an editor there"
                    .to_string(),
            );
            out.push(Quarantined {
                dir: rel(parent),
                moved_to: String::new(),
                entry: String::new(),
                reasons,
            });
            continue;
        };
        out.push(Quarantined {
            dir: rel(parent),
            moved_to: rel(&moved),
            entry: if by_head { "HEAD" } else { ".git" }.to_string(),
            reasons,
        });
    }
    (out, incomplete)
}

/// Renames `git` to a free quarantine name beside it, within the open parent directory.
fn quarantine(workspace: &Path, git: &Path) -> Option<PathBuf> {
    let ws = keel_fs::beneath::DirHandle::open(workspace).ok()?;
    let dot_git = git
        .file_name()
        .is_some_and(|n| n.eq_ignore_ascii_case(".git"));
    let (parent, dir, from, base) = if git == workspace || !dot_git {
        // The workspace, or a directory of the work tree that is a git directory by what it
        // holds (`src/` with a `HEAD` and a `commondir`: R7-9): renaming its `HEAD` unmakes
        // the repository and leaves the directory's files where they are.
        let dir = ws.subdir(git.strip_prefix(workspace).ok()?).ok()?;
        (
            git,
            dir,
            std::ffi::OsStr::new("HEAD"),
            "HEAD-quarantined-by-keel",
        )
    } else {
        let parent = git.parent()?;
        let rel_parent = parent.strip_prefix(workspace).ok()?;
        let dir = ws.subdir(rel_parent).ok()?;
        (parent, dir, git.file_name()?, QUARANTINE_NAME)
    };
    super::git_programs::rename_aside(dir.fd(), from, std::ffi::OsStr::new(base))
        .map(|name| parent.join(name))
}

/// What the one command runner ([`super::exec::run`]) notes before a command that may write,
/// to check the tree it could write once the command is done. Every workspace-write run goes
/// through it — `run_command`, `run_tests`, verification gates, phase validation and
/// rollback, flow and `keel work` commands, auto-lint, `keel chat`'s `!` — so a new runner
/// cannot forget the check (red-team pass 4, R4-2: gates and lint ran without it).
#[derive(Debug)]
pub(crate) struct Watch {
    root: PathBuf,
    since: SystemTime,
    /// The root's own `.git` as it was (device, inode) when the sandbox keeps all of it
    /// read-only: the command cannot have changed it, so it is not judged (the user's own
    /// repository, which the user may be configuring in another terminal meanwhile).
    sealed_top: Option<(u64, u64)>,
    /// The work-tree programs the user's git runs, as they were ([`super::git_programs`]).
    programs: super::git_programs::Before,
    /// Whether the sandbox confined the run (existing program paths were read-only).
    confined: bool,
    /// Whether a person approved the command ([`super::exec::ExecRequest::approved`]): what
    /// it installs into a workspace virtual environment stays ([`super::venv_startup`]).
    approved: bool,
    /// A restore (undo, redo, a checkpoint), not a command: what it writes back is the
    /// snapshot's content, so the files it restores are not taken for files the session made
    /// and hid (`keel undo` of the user's ignored `.env` had it moved aside as tool
    /// configuration git does not show).
    restore: bool,
    /// Links on the way to protected stores inside the writable trees, as they were
    /// ([`super::store_links`]).
    links: super::store_links::StoreLinks,
    /// Dependency trees that were read-only while the command ran
    /// ([`super::dependency_trees`]): not walked after it.
    trees: Vec<PathBuf>,
}

/// What [`Watch::check`] found: the repositories moved, the program paths moved, the
/// virtual environments' startup files moved, the store links put back, the loaded code moved,
/// and what a bound left unchecked ([`super::bounds`]).
type Checked = (
    Vec<Quarantined>,
    Vec<super::git_programs::Moved>,
    Vec<super::venv_startup::Moved>,
    Vec<String>,
    Vec<super::loaded_code::Moved>,
    Vec<super::bounds::Cut>,
);

impl Watch {
    /// Before a run of `req`, from `since` (a mark of the clock file time stamps come from:
    /// [`super::file_clock`]): `None` when it cannot write (read-only) or names no tree.
    pub(crate) fn before(
        req: &super::exec::ExecRequest,
        trees: &[PathBuf],
        since: SystemTime,
    ) -> Option<Self> {
        use crate::sandbox::{GitProtection, SandboxPolicy};
        if req.policy == SandboxPolicy::ReadOnly {
            return None;
        }
        let root = req.roots.workspace.clone()?;
        let confined = req.policy != SandboxPolicy::Off && crate::sandbox::is_available();
        let sealed_top = (confined && req.roots.git == GitProtection::Whole)
            .then(|| std::fs::symlink_metadata(root.join(".git")).ok())
            .flatten()
            .filter(std::fs::Metadata::is_dir)
            .map(|m| (m.dev(), m.ino()));
        let programs = super::git_programs::Before::note(&root, !confined);
        let links = super::store_links::StoreLinks::note(
            &req.roots.for_policy(req.policy),
            &req.roots.hidden,
            &programs.absolute(&root),
        );
        Some(Self {
            root,
            since,
            sealed_top,
            programs,
            confined,
            approved: req.approved,
            restore: false,
            links,
            trees: trees.to_vec(),
        })
    }

    /// After the run: quarantines what the command planted (blocking: it walks the tree)
    /// and returns the report for its result. Run once per command, by whoever claims it
    /// first ([`super::pending`]: the call, a dropped call, Keel's exit, the next start).
    pub(crate) fn check_and_report(self) -> Option<String> {
        let root = self.root.clone();
        let checked = self.check();
        // Fails closed and is told to the user, whoever runs the check ([`super::bounds`]).
        super::bounds::settle(&root, &checked.5);
        let unchecked = checked.5.iter().any(|c| c.covered.is_none());
        let report = Self::report(checked);
        if let Some(text) = &report {
            super::bounds::tell(
                &root,
                super::bounds::Notice {
                    unchecked,
                    text: text.clone(),
                },
            );
        }
        report
    }

    /// The tree the command could write.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// What the journal keeps of this check ([`super::pending`]).
    pub(crate) fn entry(&self) -> super::pending::Entry {
        let (since_secs, since_nanos) = super::pending::since_parts(self.since);
        super::pending::Entry {
            root: super::pending::path_bytes(&self.root),
            since_secs,
            since_nanos,
            sealed_top: self.sealed_top,
            confined: self.confined,
            approved: self.approved,
            programs: self.programs.entries(),
            links: self.links.entries(),
            trees: self
                .trees
                .iter()
                .map(|t| super::pending::path_bytes(t))
                .collect(),
        }
    }

    /// The check a journal entry describes.
    pub(crate) fn from_entry(e: super::pending::Entry) -> Self {
        let root = super::pending::bytes_path(&e.root);
        Self {
            root: root.clone(),
            since: SystemTime::UNIX_EPOCH + Duration::new(e.since_secs, e.since_nanos),
            sealed_top: e.sealed_top,
            programs: super::git_programs::Before::from_entries(e.programs, &root),
            confined: e.confined,
            approved: e.approved,
            restore: false,
            links: super::store_links::StoreLinks::from_entries(e.links, &root),
            trees: e
                .trees
                .iter()
                .map(|t| super::pending::bytes_path(t))
                .collect(),
        }
    }

    /// The quarantine itself (blocking: it walks the tree the command could write).
    fn check(self) -> Checked {
        let top = self.root.join(".git");
        let still_sealed = self.sealed_top.is_some_and(|id| {
            std::fs::symlink_metadata(&top).is_ok_and(|m| (m.dev(), m.ino()) == id)
        });
        // Links first: what the paths lead to is judged as the user's git will see it.
        let relinked = self.links.restore();
        let mut tool_configs = Vec::new();
        let mut python = super::venv_startup::Seen::default();
        python.code.root = Some(self.root.clone());
        // Every file the command changed, for the session's default-deny: by the mark of the
        // file clock the command started after ([`super::file_clock`]), no slack.
        if !self.approved && !self.restore {
            python.code.since = Some(self.since);
        }
        let mut walk = Trees {
            skip: self.trees,
            trees: Vec::new(),
            walked: Vec::new(),
        };
        let repos = quarantine_in(
            &self.root,
            self.since,
            still_sealed,
            &mut tool_configs,
            &mut python,
            &mut walk,
        );
        let (repos, walk_cut) = repos;
        let mut cuts = Vec::new();
        if walk_cut {
            cuts.push(super::bounds::Cut::new(
                "planted repositories",
                format!("the tree holds more than {MAX_DIRS} directories (or {MAX_ENTRIES} entries); git repositories planted beyond them were not looked for (hook tools' configuration was, by name) — do not run git in directories this session created without checking their `.git/config`"),
            ));
        }
        // Trees the command created go first (and before the list is remembered): what is
        // in them is not judged file by file.
        let mut loaded = if self.approved {
            Vec::new()
        } else {
            let known = super::dependency_trees::remembered(&self.root);
            super::loaded_code::check_new_trees(
                &self.root,
                &walk.walked,
                known.as_deref(),
                self.since,
            )
        };
        if walk_cut {
            // The walk stopped at its bound: the hook tools' configuration it may not have
            // reached is looked for by name (R7-31).
            let by_name = crate::sandbox::every_dir_configs_by_name(&self.root);
            tool_configs.extend(by_name.unwrap_or_default());
        } else {
            super::dependency_trees::remember(&self.root, walk.trees);
        }
        let mut programs = self.programs.after(&self.root, self.since, self.confined);
        // Hook tools' configuration in any directory (lint-staged's): what the command
        // created or changed (R6-9).
        let more =
            super::git_programs::discovered_after(&self.root, self.since, &tool_configs, &programs);
        programs.extend(more);
        let (startup, venv_cuts) =
            super::venv_startup::check(&self.root, &python, self.since, self.approved);
        cuts.extend(venv_cuts);
        if !self.approved {
            loaded.extend(super::loaded_code::loaded_after(
                &self.root, &python, self.since,
            ));
        }
        // What the session made that git does not show now, whichever command hid it (R9-7).
        let slack = self.since.checked_sub(Duration::from_secs(1));
        let mut skip: Vec<PathBuf> = walk.walked.iter().chain(&walk.skip).cloned().collect();
        skip.extend(python.venvs.iter().chain(&python.cargo).cloned());
        skip.push(self.root.join(super::loaded_code::KEEL_TARGET));
        // Past the walk's bounds, git's listing of every untracked file (R10-22).
        if !self.approved
            && let Some((moved, cut)) = super::listing::past_the_bounds(
                &self.root,
                &python.code,
                walk_cut,
                &skip,
                slack.unwrap_or(self.since),
            )
        {
            loaded.extend(moved);
            cuts.push(cut);
        }
        let (hidden, hidden_cut) = super::session_hidden::check(
            &self.root,
            &python.code,
            &skip,
            slack.unwrap_or(self.since),
            !self.approved && !self.restore,
        );
        loaded.extend(hidden);
        cuts.extend(hidden_cut);
        (repos, programs, startup, relinked, loaded, cuts)
    }

    fn report(checked: Checked) -> Option<String> {
        let (moved, programs, startup, relinked, loaded, cuts) = checked;
        let parts: Vec<String> = [
            report(&moved),
            super::git_programs::report(&programs),
            super::venv_startup::report(&startup),
            super::loaded_code::report(&loaded),
            super::store_links::report(&relinked),
            super::bounds::report(&cuts),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!parts.is_empty()).then(|| parts.join("\n"))
    }
}

/// A restore from a snapshot (`keel undo`, redo, a checkpoint's rollback), checked as a writer
/// nobody approved (red-team pass 8, R8-3): a snapshot taken while a command ran captured
/// what the post-command checks then removed — a `pytest.pyc`, a planted `src/HEAD` with its
/// `commondir` — and the restore wrote it back. Noted before the restore, checked after it:
/// the same walk and checks as after a command.
#[derive(Debug)]
pub struct RestoreWatch(Watch);

impl RestoreWatch {
    /// Before restoring into `workspace`.
    pub fn before(workspace: &Path) -> Self {
        // The root's own `.git` is not the restore's to change (snapshots leave it out).
        let sealed_top = std::fs::symlink_metadata(workspace.join(".git"))
            .ok()
            .filter(std::fs::Metadata::is_dir)
            .map(|m| (m.dev(), m.ino()));
        Self(Watch {
            root: workspace.to_path_buf(),
            since: SystemTime::now(),
            sealed_top,
            programs: super::git_programs::Before::note(workspace, true),
            confined: false,
            approved: false,
            restore: true,
            links: super::store_links::StoreLinks::default(),
            trees: Vec::new(),
        })
    }

    /// After the restore: what it wrote that the checks move aside, and the report (`None`:
    /// nothing).
    pub fn check_and_report(self) -> Option<String> {
        self.0.check_and_report()
    }
}

/// The report of what was quarantined, for the command's result (and so the user's view).
pub fn report(moved: &[Quarantined]) -> Option<String> {
    if moved.is_empty() {
        return None;
    }
    let mut text = String::from(
        "keel: the command left git repositories whose configuration runs programs, or files git cannot read safely; Keel moved them out of git's sight (any git, shell prompt or editor opening them would have run those programs or waited forever):",
    );
    for q in moved {
        if q.moved_to.is_empty() {
            text.push_str(&format!("\n- {}: {}", q.dir, q.reasons.join(", ")));
            continue;
        }
        text.push_str(&format!(
            "\n- {} ({}): `{}` moved to `{}`",
            q.dir,
            q.reasons.join(", "),
            q.entry,
            q.moved_to
        ));
    }
    text.push_str("\nDo not create repositories with hooks or program-running settings; the user may inspect and restore them.");
    Some(text)
}
