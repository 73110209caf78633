//! What a confined command may reach: its writable roots, protected paths, hidden paths and
//! the network setting ([`WritableRoots`]), and the path rules behind them.

use std::path::{Path, PathBuf};

use super::{GIT_CODE_PATHS, GitProtection, PROTECTED_DIRS, SandboxPolicy};

/// The user's secret stores hidden from every confined command by default (`shell.hide`; `~/`
/// is the user's home): SSH and GPG keys, cloud and cluster credentials, registry and git
/// tokens, keyrings, password stores and browser profiles (session cookies). Directories read
/// as empty, files as empty files; none of them is writable.
pub const SECRET_STORES: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/git/credentials",
    "~/.npmrc",
    "~/.yarnrc.yml",
    "~/.pypirc",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.gem/credentials",
    "~/.config/gh",
    "~/.config/hub",
    "~/.config/glab-cli",
    "~/.vault-token",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.config/rclone",
    "~/.s3cfg",
    "~/.boto",
    "~/.oci",
    "~/.config/doctl",
    "~/.local/share/keyrings",
    "~/.local/share/kwalletd",
    "~/.password-store",
    "~/.config/op",
    "~/.mozilla",
    "~/.config/google-chrome",
    "~/.config/chromium",
    "~/.config/BraveSoftware",
];

/// [`SECRET_STORES`] with `~/` expanded from `$HOME`.
pub fn secret_stores() -> Vec<PathBuf> {
    SECRET_STORES.iter().map(|p| expand_home(p)).collect()
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
    /// their place) besides Keel's own ([`keel_private_dirs`], always hidden): the user's
    /// secret stores (`shell.hide`, by default [`SECRET_STORES`]).
    pub hidden: Vec<PathBuf>,
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

    /// Hidden paths that apply: absolute, existing, outside the workspace (commands and file
    /// tools see the same tree), and holding none of the command's workspace or writable
    /// directories; sorted, each once.
    fn hidden_where(
        &self,
        policy: SandboxPolicy,
        paths: impl Iterator<Item = PathBuf>,
        kind: fn(&Path) -> bool,
    ) -> Vec<PathBuf> {
        let mut keep: Vec<PathBuf> = self.for_policy(policy);
        keep.extend(self.workspace.iter().cloned());
        let mut out: Vec<PathBuf> = paths
            .filter(|h| h.is_absolute() && kind(h))
            .filter(|h| !keep.iter().any(|k| k.starts_with(h)))
            .filter(|h| !self.workspace.as_ref().is_some_and(|w| h.starts_with(w)))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The directories hidden from a command under `policy` (an empty read-only directory in
    /// their place): those of [`Self::hidden`] and Keel's own (read from this process's
    /// environment) that apply (see [`Self::hidden_where`]).
    pub fn hidden_dirs(&self, policy: SandboxPolicy) -> Vec<PathBuf> {
        let all = self
            .hidden
            .iter()
            .cloned()
            .chain(keel_private_dirs(&|k| std::env::var(k).ok()));
        self.hidden_where(policy, all, Path::is_dir)
    }

    /// The files hidden from a command under `policy` (they read as empty and cannot be
    /// written): those of [`Self::hidden`] and the user config named by `$KEEL_CONFIG` (read
    /// from this process's environment) that apply.
    pub fn hidden_files(&self, policy: SandboxPolicy) -> Vec<PathBuf> {
        let all = self
            .hidden
            .iter()
            .cloned()
            .chain(keel_private_files(&|k| std::env::var(k).ok()));
        self.hidden_where(policy, all, Path::is_file)
    }

    /// The directories between the workspace root and each protected path below it (both
    /// excluded) that exist and are real directories: the *chain* pinned in place so that
    /// renaming a parent cannot move a protected path out from under its protection.
    pub fn anchors(&self) -> Vec<PathBuf> {
        let Some(w) = &self.workspace else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for p in self.protected_paths() {
            let mut dir = p.parent();
            while let Some(d) = dir {
                if d == w.as_path() || !d.starts_with(w) {
                    break;
                }
                if d.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                    out.push(d.to_path_buf());
                }
                dir = d.parent();
            }
        }
        out.sort();
        out.dedup();
        out
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

/// Keel's own directories, hidden from every confined command: the data directory
/// (`$KEEL_HOME`, else `$XDG_DATA_HOME/keel`, else `~/.local/share/keel`: the server token and
/// the session database) and the user config directory (`$XDG_CONFIG_HOME/keel`, else
/// `~/.config/keel`), which holds nothing a command needs. Relative paths are left out.
pub fn keel_private_dirs(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = set("HOME");
    let data = set("KEEL_HOME")
        .or_else(|| set("XDG_DATA_HOME").map(|x| x.join("keel")))
        .or_else(|| home.as_ref().map(|h| h.join(".local/share/keel")));
    let config = set("XDG_CONFIG_HOME")
        .map(|x| x.join("keel"))
        .or_else(|| home.as_ref().map(|h| h.join(".config/keel")));
    data.into_iter()
        .chain(config)
        .filter(|p| p.is_absolute())
        .collect()
}

/// Keel's own files outside [`keel_private_dirs`]: the user config file named by
/// `$KEEL_CONFIG` (absolute paths only).
pub fn keel_private_files(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    env("KEEL_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .into_iter()
        .collect()
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
pub const GIT_DIR_MARKERS: [&str; 3] = ["HEAD", "objects", "refs"];

/// Whether the directory `rel` beneath `dir` is a git directory by content (see
/// [`GIT_DIR_MARKERS`]): `HEAD` a regular file, `objects` and `refs` directories, none a link.
pub fn is_git_dir_beneath(dir: std::os::fd::BorrowedFd<'_>, rel: &Path) -> bool {
    use rustix::fs::{AtFlags, FileType, statat};
    let kind = |name: &str| {
        statat(dir, rel.join(name), AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| FileType::from_raw_mode(st.st_mode))
    };
    kind("HEAD") == Some(FileType::RegularFile)
        && kind("objects") == Some(FileType::Directory)
        && kind("refs") == Some(FileType::Directory)
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
    fn keel_private_dirs_follow_the_data_and_config_overrides() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            keel_private_dirs(&env(&[("HOME", "/h"), ("KEEL_HOME", "/data")])),
            vec![PathBuf::from("/data"), PathBuf::from("/h/.config/keel")]
        );
        assert_eq!(
            keel_private_dirs(&env(&[
                ("HOME", "/h"),
                ("XDG_DATA_HOME", "/x/d"),
                ("XDG_CONFIG_HOME", "/x/c")
            ])),
            vec![PathBuf::from("/x/d/keel"), PathBuf::from("/x/c/keel")]
        );
        assert_eq!(
            keel_private_dirs(&env(&[("HOME", "/h")])),
            vec![
                PathBuf::from("/h/.local/share/keel"),
                PathBuf::from("/h/.config/keel")
            ]
        );
        assert!(keel_private_dirs(&env(&[("KEEL_HOME", "rel")])).is_empty());
    }

    #[test]
    fn the_keel_config_file_is_hidden_when_absolute() {
        let env = |v: &'static str| move |k: &str| (k == "KEEL_CONFIG").then(|| v.to_string());
        assert_eq!(
            keel_private_files(&env("/c/keel.toml")),
            vec![PathBuf::from("/c/keel.toml")]
        );
        assert!(keel_private_files(&env("rel.toml")).is_empty());
        assert!(keel_private_files(&env("")).is_empty());
    }

    #[test]
    fn a_hidden_dir_holding_the_workspace_is_not_hidden() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        let secret = dir.path().join("secret");
        for d in [&ws, &secret] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        }
        let roots = WritableRoots {
            workspace: Some(ws.clone()),
            hidden: vec![dir.path().to_path_buf(), secret.clone(), ws.join("missing")],
            ..WritableRoots::default()
        };
        let hidden = roots.hidden_dirs(SandboxPolicy::ReadOnly);
        assert!(hidden.contains(&secret), "{hidden:?}");
        assert!(!hidden.contains(&dir.path().to_path_buf()), "{hidden:?}");
        assert!(!hidden.contains(&ws.join("missing")), "{hidden:?}");
    }
}
