//! What a confined command may reach: its writable roots, protected paths, hidden paths and
//! the network setting ([`WritableRoots`]), and the path rules behind them.

use std::path::{Path, PathBuf};

use super::{GIT_CODE_PATHS, GitProtection, PROTECTED_DIRS, SandboxPolicy};

pub use keel_fs::stores::SECRET_STORES;

/// The default `shell.hide` list, expanded: [`SECRET_STORES`] under every home (`$HOME` and
/// the account's home) and XDG directory, and the stores environment variables move
/// (`$CARGO_HOME/credentials.toml`, `$GNUPGHOME`, `$KUBECONFIG`…) — see [`keel_fs::stores`].
pub fn secret_stores() -> Vec<PathBuf> {
    keel_fs::stores::secret_stores(&keel_fs::stores::process_env)
}

/// A `shell.hide` entry (absolute, or `~/…`) as the paths it names: one per home, and under
/// the XDG directory that moves it.
pub fn expand_hidden(entry: &str) -> Vec<PathBuf> {
    keel_fs::stores::expand(entry, &keel_fs::stores::process_env)
}

/// Every entry of a `shell.hide` list expanded ([`expand_hidden`]), in order, with the homes
/// looked up once for the list.
pub fn expand_hidden_all<S: AsRef<str>>(entries: &[S]) -> Vec<PathBuf> {
    keel_fs::stores::expand_all(entries, &keel_fs::stores::process_env)
}

/// What a command's view hides (see [`WritableRoots::hidden_view`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HiddenView {
    /// Directories covered by an empty read-only directory, shallowest first.
    pub dirs: Vec<PathBuf>,
    /// Files covered by an empty read-only file.
    pub files: Vec<PathBuf>,
    /// The directories the command works in (workspace, writable trees) that lie inside a
    /// hidden directory: put back at their places on top of the cover, so a worker's checkout
    /// under `$KEEL_HOME/checkouts` sees itself and nothing else of Keel's data.
    pub carve: Vec<PathBuf>,
}

/// What a confined command may reach besides what its policy implies.
#[derive(Debug, Clone, Default)]
pub struct WritableRoots {
    /// Processes and memory the command may take (by default [`super::Limits::default`]).
    pub limits: super::Limits,
    /// The workspace root (writable under [`SandboxPolicy::WorkspaceWrite`], except its
    /// protected paths).
    pub workspace: Option<PathBuf>,
    /// The command's private temp directory (writable under every policy).
    pub private_tmp: Option<PathBuf>,
    /// Extra directories writable under [`SandboxPolicy::WorkspaceWrite`] (tool caches such as
    /// `~/.cargo/registry`); missing ones are skipped, and `~/.cargo/bin` (or
    /// `$CARGO_HOME/bin`) is never writable, even below a configured `~/.cargo`.
    pub extra: Vec<PathBuf>,
    /// Allow network access (TCP and UDP; never the user's UNIX sockets). Off by default.
    pub network: bool,
    /// Paths read-only to commands besides [`PROTECTED_DIRS`] (relative ones are under the
    /// workspace).
    pub protected: Vec<PathBuf>,
    /// How much of `.git` is protected.
    pub git: GitProtection,
    /// Directories and files hidden from commands (an empty read-only directory or file in
    /// their place) besides those of [`keel_fs::stores::always`] (Keel's own, always
    /// hidden): the user's secret stores (`shell.hide`, by default [`secret_stores`]).
    pub hidden: Vec<PathBuf>,
    /// Directories the command reads but may not write that must stay visible when they lie
    /// inside a hidden one (carved back like the workspace, read-only): the work tree of
    /// Keel's staging git, which writes only its own staging directory.
    pub visible: Vec<PathBuf>,
}

impl WritableRoots {
    /// Every directory writable under `policy`.
    pub fn for_policy(&self, policy: SandboxPolicy) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        if let Some(t) = &self.private_tmp {
            out.push(t.clone());
        }
        if policy == SandboxPolicy::WorkspaceWrite {
            if let Some(w) = &self.workspace {
                out.push(w.clone());
            }
            let never = never_writable();
            for extra in &self.extra {
                out.extend(grant_without(extra, &never));
            }
        }
        out.sort();
        out.dedup();
        out.retain(|p| p.exists());
        out
    }

    /// What the command's view hides under `policy`: every path of [`Self::hidden`] and of
    /// [`keel_fs::stores::always`] (Keel's own data, config and registered paths, stores moved
    /// by the environment, the user's registered `shell.hide`) that exists — *inside the
    /// workspace too* (a workspace that is the home directory must not expose `~/.ssh`), and
    /// around it, with the workspace and writable trees carved back in (a checkout under
    /// `$KEEL_HOME` sees nothing else of it). A store that *is* the workspace or a writable
    /// tree is left alone: the user chose to work there. Paths inside another hidden
    /// directory are left out (gone already) unless a carved-back directory holds them.
    pub fn hidden_view(&self, policy: SandboxPolicy) -> HiddenView {
        let mut keep: Vec<PathBuf> = self.for_policy(policy);
        keep.extend(self.workspace.iter().cloned());
        keep.extend(self.visible.iter().cloned());
        keep.sort();
        keep.dedup();
        let env = &keel_fs::stores::process_env;
        if policy == SandboxPolicy::WorkspaceWrite
            && let Some(ws) = &self.workspace
        {
            make_coverable(ws, &keel_fs::stores::dirs_worth_creating(env));
        }
        let mut stores = keel_fs::stores::always(env);
        stores.extend(self.hidden.iter().map(|p| keel_fs::stores::Store {
            path: p.clone(),
            kind: keel_fs::stores::StoreKind::Secret,
        }));
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        let mut cover = |h: PathBuf, meta: &std::fs::Metadata| {
            // Mounts land on the target of a link: compare where it really is.
            let h = h.canonicalize().unwrap_or(h);
            if keep.contains(&h) {
                return;
            }
            if meta.is_dir() {
                dirs.push(h);
            } else if meta.is_file() {
                files.push(h);
            }
        };
        // Most listed stores do not exist: each is looked at once, and only those that do
        // are walked for links (one that does not, or leads nowhere, holds none).
        let mut present = Vec::new();
        for s in stores {
            if !s.path.is_absolute() {
                continue;
            }
            let Ok(meta) = std::fs::metadata(&s.path) else {
                continue;
            };
            cover(s.path.clone(), &meta);
            present.push(s);
        }
        // Where the stores' symlinks lead (a dotfile manager's `~/.ssh/id_ed25519` →
        // `~/dotfiles/ssh/id_ed25519`): covered like the stores (R11).
        for t in link_targets_to_cover(&present, &keel_fs::stores::homes(env)) {
            if let Ok(meta) = std::fs::metadata(&t.target) {
                cover(t.target, &meta);
            }
        }
        dirs.sort_by(|a, b| {
            a.components()
                .count()
                .cmp(&b.components().count())
                .then(a.cmp(b))
        });
        dirs.dedup();
        files.sort();
        files.dedup();
        let carve: Vec<PathBuf> = keep
            .iter()
            .filter(|k| dirs.iter().any(|d| k.starts_with(d) && *k != d))
            .cloned()
            .collect();
        // Gone under a cover, unless a carved-back directory holds it.
        let gone = |p: &PathBuf| {
            dirs.iter().any(|d| {
                p != d
                    && p.starts_with(d)
                    && !carve.iter().any(|k| k.starts_with(d) && p.starts_with(k))
            })
        };
        let kept: Vec<PathBuf> = dirs.iter().filter(|p| !gone(p)).cloned().collect();
        let files: Vec<PathBuf> = files.into_iter().filter(|p| !gone(p)).collect();
        let carve = keep
            .into_iter()
            .filter(|k| kept.iter().any(|d| k.starts_with(d) && k != d))
            .collect();
        HiddenView {
            dirs: kept,
            files,
            carve,
        }
    }

    /// The directories between the workspace root and each protected path below it (both
    /// excluded) that exist and are real directories: the *chain* pinned in place so that
    /// renaming a parent cannot move a protected path out from under its protection.
    pub fn anchors(&self) -> Vec<PathBuf> {
        self.anchors_of(&self.protected_paths())
    }

    /// [`Self::anchors`] of `protected` (what [`Self::protected_paths`] returned: it reads the
    /// repository's git config, so a caller that has it already passes it on).
    ///
    /// A protected path reached through a link is mounted where the link leads, so the chain to its
    /// target is pinned too (red-team pass 7, R7-27: under `.husky -> tools/hooks`, `mv tools
    /// t2 && mkdir -p tools/hooks` would have carried the read-only mount away with `t2` and
    /// left `.husky` leading to the command's directory). The link itself cannot carry a
    /// mount; [`crate::shell`]'s runner puts it back when a command re-points it.
    pub(super) fn anchors_of(&self, protected: &[PathBuf]) -> Vec<PathBuf> {
        let Some(w) = &self.workspace else {
            return Vec::new();
        };
        // Any link on the way counts (`cfg -> dotcfg` with `cfg/hooks` protected).
        let resolved: Vec<PathBuf> = protected
            .iter()
            .filter_map(|p| p.canonicalize().ok().filter(|c| c != p))
            .collect();
        chains_below(std::slice::from_ref(w), protected.iter().chain(&resolved))
    }

    /// Creates the workspace's `.keel/` (empty) when it has none, so the read-only mount of
    /// [`PROTECTED_DIRS`] applies to it from the first command on: a protected path that does
    /// not exist when a command starts cannot be mounted read-only, and a command could then
    /// write the project configuration, rules and flows later sessions load as the
    /// repository's own (red-team R5-7: a git workspace with the index off never had one).
    /// A workspace Keel cannot write is left as it is (its commands cannot write there either).
    pub fn make_keel_dir_protectable(&self) {
        if let Some(w) = &self.workspace {
            let keel = w.join(".keel");
            if keel.symlink_metadata().is_err() {
                let _ = std::fs::create_dir(&keel);
            }
        }
    }

    /// The paths inside the workspace (or absolute extra ones) made read-only to commands,
    /// those that exist.
    pub fn protected_paths(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(w) = &self.workspace {
            match self.git {
                GitProtection::Whole => out.extend(PROTECTED_DIRS.iter().map(|d| w.join(d))),
                GitProtection::CodePaths => {
                    out.extend(GIT_CODE_PATHS.iter().map(|d| w.join(d)));
                    out.extend(
                        PROTECTED_DIRS
                            .iter()
                            .filter(|d| **d != ".git")
                            .map(|d| w.join(d)),
                    );
                }
            }
            out.extend(self.protected.iter().map(|p| w.join(p)));
            // Working-tree files the repository's git config includes (pass 2, R14).
            out.extend(super::git_included_files(w).iter().map(|p| w.join(p)));
        } else {
            out.extend(self.protected.iter().filter(|p| p.is_absolute()).cloned());
        }
        out.retain(|p| p.symlink_metadata().is_ok());
        out
    }
}

/// The targets of the symlinks in (and of) `stores` that the sandbox covers
/// ([`keel_fs::stores::link_targets`]): all but `/` and the directories that hold a home
/// (covering those would hide the whole system or every home; `keel doctor` names them).
pub fn link_targets_to_cover(
    stores: &[keel_fs::stores::Store],
    homes: &[PathBuf],
) -> Vec<keel_fs::stores::LinkTarget> {
    keel_fs::stores::link_targets(stores)
        .targets
        .into_iter()
        .filter(|t| !too_wide_to_cover(&t.target, homes))
        .collect()
}

/// Whether covering `target` would hide `/` or a home directory.
pub fn too_wide_to_cover(target: &Path, homes: &[PathBuf]) -> bool {
    target.parent().is_none() || homes.iter().any(|h| h.starts_with(target))
}

/// Creates each of `dirs` that lies inside the writable workspace `ws` and is missing (empty,
/// 0700), so it can be covered ([`keel_fs::stores::dirs_worth_creating`]). Only directories
/// inside the workspace count — a workspace that is the home directory — so an ordinary
/// workspace costs a few path comparisons.
fn make_coverable(ws: &Path, dirs: &[PathBuf]) {
    use std::os::unix::fs::DirBuilderExt;
    for d in dirs {
        if d.starts_with(ws) && d != ws && d.symlink_metadata().is_err() {
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d);
        }
    }
}

/// Directories no configuration makes writable: where a planted program would be run later by
/// the user (`~/.cargo/bin`, `$CARGO_HOME/bin`, `~/.local/bin`).
fn never_writable() -> Vec<PathBuf> {
    let mut out = vec![expand_home("~/.cargo/bin"), expand_home("~/.local/bin")];
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        out.push(Path::new(&home).join("bin"));
    }
    out
}

/// `root` as writable grants that leave out every path of `never` below it: a root containing a
/// forbidden directory is replaced by its children (recursively along the way), since Landlock
/// cannot take a right away below a granted directory. A root inside a forbidden directory is
/// dropped.
fn grant_without(root: &Path, never: &[PathBuf]) -> Vec<PathBuf> {
    if never.iter().any(|n| root.starts_with(n)) {
        return Vec::new();
    }
    if !never.iter().any(|n| n.starts_with(root)) {
        return vec![root.to_path_buf()];
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        // Only real directories are split further; files and symlinks are granted as they are
        // unless forbidden (a symlink is granted as its target by Landlock, so skip those).
        match entry.file_type() {
            Ok(t) if t.is_dir() => out.extend(grant_without(&path, never)),
            Ok(t) if t.is_file() && !never.iter().any(|n| path.starts_with(n)) => out.push(path),
            _ => {}
        }
    }
    out
}

/// Expands a leading `~/` with `$HOME`.
pub fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// What a git directory holds, whatever its name: git itself takes a directory with a `HEAD`
/// file and `objects/` and `refs/` directories for a repository (`git --git-dir=…`, a `.git`
/// file's `gitdir:`, a bare fixture such as `tests/data/x.git`). Its config and hooks run
/// programs when the user's git looks there, so it is protected like a `.git` directory.
/// `objects` and `refs` may also sit in the directory a `commondir` file names
/// ([`is_git_dir_by_names`]).
pub const GIT_DIR_MARKERS: [&str; 3] = ["HEAD", "objects", "refs"];

/// Whether git takes a directory holding the entries `has` names for a git directory, as
/// git's own `is_git_directory` decides: a `HEAD`, and `objects` and `refs` either beside it
/// or in the directory its `commondir` file names — so `HEAD` + `commondir` alone make one
/// (red-team pass 7, R7-9: `src/HEAD` and `src/commondir` naming `.cache/g`, whose `config`
/// set `core.pager`, made the user's `git log` in `src/` run the model's program). Entries
/// of any type count (git follows links to `objects` and `refs`), so nothing git accepts is
/// missed.
pub fn is_git_dir_by_names(has: impl Fn(&str) -> bool) -> bool {
    has("HEAD") && (has("commondir") || (has("objects") && has("refs")))
}

/// Whether the directory `rel` beneath `dir` is a git directory by content (see
/// [`is_git_dir_by_names`]); with `adding`, whether it would be one once an entry of that
/// name is created in it (a file tool's write that would complete a git directory).
pub fn is_git_dir_beneath(
    dir: std::os::fd::BorrowedFd<'_>,
    rel: &Path,
    adding: Option<&str>,
) -> bool {
    use rustix::fs::{AtFlags, statat};
    is_git_dir_by_names(|name| {
        adding == Some(name) || statat(dir, rel.join(name), AtFlags::SYMLINK_NOFOLLOW).is_ok()
    })
}

/// True when `path` (absolute, inside `workspace`) is or lies below a protected path: the
/// top-level [`PROTECTED_DIRS`], any `.git` at any depth (any case: a nested repository's
/// config or hooks run programs when the user's git, shell prompt or editor looks there
/// later), or one of `extra`.
pub fn is_protected(workspace: &Path, path: &Path, extra: &[PathBuf]) -> bool {
    let Ok(rel) = path.strip_prefix(workspace) else {
        return false;
    };
    let first = rel.components().next();
    let protected_dir = first.is_some_and(|c| {
        PROTECTED_DIRS
            .iter()
            .any(|d| c.as_os_str().eq_ignore_ascii_case(d))
    });
    let nested_git = rel
        .components()
        .any(|c| c.as_os_str().eq_ignore_ascii_case(".git"));
    protected_dir
        || nested_git
        || extra
            .iter()
            .any(|p| rel.starts_with(p) || path.starts_with(p))
        // By its real name too: `sql/a.sql` protected, `sql -> data/sql`, the file tools
        // asked for `data/sql/a.sql` (red-team pass 11, R10-13 rest).
        || extra.iter().any(|p| {
            let abs = workspace.join(p);
            super::canonical_prefix(&abs).is_some_and(|real| real != abs && path.starts_with(&real))
        })
}

/// The most links followed while resolving one path (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Every symlink met while resolving the absolute `path` as the kernel would (each with the
/// text it holds, in the order met): links inside an earlier link's target included, a
/// relative target resolved from the link's directory, `..` taken physically. Stops at the
/// first missing component or after [`MAX_LINKS`] links.
pub(crate) fn links_on_the_way(path: &Path) -> Vec<(PathBuf, PathBuf)> {
    resolve(path).0
}

/// [`links_on_the_way`], and every real directory the resolution walked through (a link's
/// `../x/..` included: red-team pass 8, R8-20), each once, in the order met.
pub(crate) fn resolution_of(path: &Path) -> (Vec<(PathBuf, PathBuf)>, Vec<PathBuf>) {
    resolve(path)
}

fn resolve(path: &Path) -> (Vec<(PathBuf, PathBuf)>, Vec<PathBuf>) {
    let mut dirs: Vec<PathBuf> = Vec::new();
    use std::collections::VecDeque;
    use std::path::Component;
    let mut out = Vec::new();
    let mut pending: VecDeque<std::ffi::OsString> = VecDeque::new();
    let push_all = |pending: &mut VecDeque<std::ffi::OsString>, p: &Path, front: bool| {
        let parts: Vec<std::ffi::OsString> = p
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        if front {
            for part in parts.into_iter().rev() {
                pending.push_front(part);
            }
        } else {
            pending.extend(parts);
        }
    };
    if !path.is_absolute() {
        return (out, dirs);
    }
    push_all(&mut pending, path, false);
    let mut at = PathBuf::from("/");
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&part);
        let Ok(meta) = std::fs::symlink_metadata(&next) else {
            break;
        };
        if meta.file_type().is_symlink() {
            let Ok(target) = std::fs::read_link(&next) else {
                break;
            };
            if out.len() >= MAX_LINKS {
                break;
            }
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            push_all(&mut pending, &target, true);
            out.push((next, target));
            continue;
        }
        if !meta.is_dir() && !pending.is_empty() {
            break;
        }
        if meta.is_dir() && !dirs.contains(&next) {
            dirs.push(next.clone());
        }
        at = next;
    }
    (out, dirs)
}

/// The existing real directories strictly between a writable tree and each path below it:
/// the chain that must be pinned (bind-mounted onto itself, so it cannot be renamed or
/// removed) for a mount on that path to stay where Keel reads it.
pub(super) fn chains_below<'a>(
    writable: &[PathBuf],
    paths: impl Iterator<Item = &'a PathBuf>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        for root in writable.iter().filter(|r| p.starts_with(r) && p != *r) {
            let mut dir = p.parent();
            while let Some(d) = dir {
                if d == root.as_path() || !d.starts_with(root) {
                    break;
                }
                if d.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                    out.push(d.to_path_buf());
                }
                dir = d.parent();
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_depend_on_policy() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let roots = WritableRoots {
            workspace: Some(dir.path().to_path_buf()),
            private_tmp: Some(dir.path().join("missing")),
            ..WritableRoots::default()
        };
        assert!(
            roots.for_policy(SandboxPolicy::ReadOnly).is_empty(),
            "missing dirs are skipped and the workspace is not writable read-only"
        );
        let w = roots.for_policy(SandboxPolicy::WorkspaceWrite);
        assert_eq!(w, vec![dir.path().to_path_buf()]);
        assert!(
            !w.contains(&PathBuf::from("/tmp")),
            "the shared /tmp is never writable"
        );
    }

    #[test]
    fn a_cache_containing_a_bin_dir_is_granted_without_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cargo = dir.path().join("cargo");
        for d in ["bin", "registry/cache", "git"] {
            std::fs::create_dir_all(cargo.join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(cargo.join("config.toml"), "").unwrap_or_else(|e| panic!("{e}"));
        let never = vec![cargo.join("bin")];
        let mut got = grant_without(&cargo, &never);
        got.sort();
        assert_eq!(
            got,
            vec![
                cargo.join("config.toml"),
                cargo.join("git"),
                cargo.join("registry")
            ]
        );
        assert!(grant_without(&cargo.join("bin"), &never).is_empty());
        assert_eq!(
            grant_without(&cargo.join("git"), &never),
            vec![cargo.join("git")]
        );
    }

    #[test]
    fn protected_paths_are_recognised_case_insensitively() {
        let ws = Path::new("/w");
        assert!(is_protected(ws, Path::new("/w/.git/config"), &[]));
        assert!(is_protected(ws, Path::new("/w/.GIT/hooks/pre-commit"), &[]));
        assert!(is_protected(ws, Path::new("/w/.keel/config.toml"), &[]));
        assert!(is_protected(ws, Path::new("/w/.keel"), &[]));
        // Nested repositories too (red-team B16), but not names that merely start with `.git`.
        assert!(is_protected(ws, Path::new("/w/src/.git"), &[]));
        assert!(is_protected(ws, Path::new("/w/a/b/.Git/config"), &[]));
        assert!(!is_protected(ws, Path::new("/w/src/.gitignore"), &[]));
        assert!(!is_protected(
            ws,
            Path::new("/w/.github/workflows/ci.yml"),
            &[]
        ));
        assert!(is_protected(
            ws,
            Path::new("/w/CONSTITUTION.md"),
            &[PathBuf::from("CONSTITUTION.md")]
        ));
    }

    #[test]
    fn stores_inside_and_around_the_workspace_are_hidden_with_the_workspace_carved_back() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let base = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        // A checkout inside a data directory, holding a store of its own; a sibling store.
        let data = base.join("data");
        let ws = data.join("checkouts/a");
        let inner = ws.join(".ssh");
        let netrc = ws.join(".netrc");
        let sibling = base.join("secret");
        for d in [&ws, &inner, &sibling] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(&netrc, "x").unwrap_or_else(|e| panic!("{e}"));
        let roots = WritableRoots {
            workspace: Some(ws.clone()),
            hidden: vec![
                data.clone(),
                inner.clone(),
                netrc.clone(),
                sibling.clone(),
                ws.clone(),
                ws.join("missing"),
                data.join("checkouts/b"),
            ],
            ..WritableRoots::default()
        };
        let v = roots.hidden_view(SandboxPolicy::WorkspaceWrite);
        assert!(v.dirs.contains(&data), "{v:?}");
        assert!(v.dirs.contains(&inner), "inside the workspace too: {v:?}");
        assert!(v.dirs.contains(&sibling), "{v:?}");
        assert!(v.files.contains(&netrc), "{v:?}");
        assert!(!v.dirs.contains(&ws), "the workspace itself stays: {v:?}");
        assert_eq!(v.carve, vec![ws.clone()], "{v:?}");
        let at = |p: &PathBuf| v.dirs.iter().position(|d| d == p);
        assert!(at(&data) < at(&inner), "outer covers first: {v:?}");
    }
}

#[cfg(test)]
mod protected_link_tests {
    use super::*;

    #[test]
    fn a_protected_path_is_protected_by_its_real_name() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(ws.join("data/sql")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("data/sql/a.sql"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("data/sql", ws.join("sql")).unwrap_or_else(|e| panic!("{e}"));
        let protected = [PathBuf::from("sql/a.sql")];
        assert!(is_protected(&ws, &ws.join("data/sql/a.sql"), &protected));
        assert!(!is_protected(&ws, &ws.join("data/sql/b.sql"), &protected));
        assert!(is_protected(&ws, &ws.join("sql/a.sql"), &protected));
    }
}
