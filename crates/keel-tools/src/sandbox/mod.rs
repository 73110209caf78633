//! The kernel sandbox for commands: the security boundary for everything Keel runs because of
//! the model or the repository. On Linux it stacks four mechanisms, each applied to a fresh,
//! throw-away thread which then spawns the child (the child inherits them; the rest of Keel
//! stays unrestricted):
//!
//! 1. **A private mount namespace** ([`mounts`]) in which the workspace's protected paths
//!    (`.git`, `.keel`, and any extra ones) are bind-mounted read-only. Landlock only grants
//!    rights (it has no "deny below a granted directory"), so this is how `.git` stays read-only
//!    inside a writable workspace, and Keel's own data and config directories
//!    ([`keel_private_dirs`]: server token, session database) are covered by an empty
//!    read-only tmpfs under every policy (and `$KEEL_CONFIG` by an empty file). With
//!    `CAP_SYS_ADMIN` (Keel running as root) the spawning thread sets it up; as a normal user
//!    the command is started through the [`helper`] process, which gets the mount namespace
//!    from an unprivileged user namespace and then applies everything below itself. Where
//!    neither works, the protected paths are guarded by the file tools only and [`support`]
//!    says so.
//! 2. **Landlock** ([`rules`]): read and execute anywhere; write only the private temp
//!    directory (read-only policy) or also the workspace and configured tool caches
//!    (workspace-write policy); with network off, no TCP bind/connect (ABI ≥ 4); signals and
//!    abstract UNIX sockets scoped to the sandbox (ABI ≥ 6).
//! 3. **seccomp** ([`seccomp`]): with network off, `socket()` only for `AF_UNIX` stream and
//!    seqpacket sockets (no UNIX datagram sockets, whose `sendmsg` reaches any named socket)
//!    and no `connect`/`bind`/`listen`/`accept`/addressed `sendto`/io_uring (UNIX-socket paths
//!    and UDP are what Landlock has no rule for); under the read-only policy also no metadata changes
//!    (chmod, chown, utime, xattr families).
//! 4. **Privileges** ([`privileges`]): `no_new_privs`; Keel itself non-dumpable and the
//!    command without `CAP_SYS_PTRACE` (and other capabilities reaching outside), which keeps
//!    `/proc/<keel>/environ` unreadable — Landlock alone does not on current kernels.
//!
//! Support is probed once per process ([`support`]); [`describe_enforcement`] says exactly what
//! this kernel enforces (for `keel doctor`). Where a mechanism is missing, commands still run,
//! with the others; without Landlock they run unconfined apart from the mount namespace and
//! seccomp, and [`take_unavailable_notice`] yields the one-time notice for users.
//!
//! This module does not decide which policy a command gets: callers (the shell tools, the phase
//! policy, verification) do, through [`crate::shell::exec`], the one command runner.

mod describe;
mod helper;
mod mounts;
mod privileges;
mod rules;
mod seccomp;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

pub use describe::{describe_enforcement, describe_support};
pub use helper::{
    HELPER_ARG, HELPER_BIN, HELPER_ENV, POLICY_ENV, helper_main, use_current_exe_as_helper,
};

/// Paths inside the workspace no command and no file tool may change.
pub const PROTECTED_DIRS: &[&str] = &[".git", ".keel"];

/// How much of the workspace's `.git` is read-only to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GitProtection {
    /// All of `.git`: what the model runs (commands, tests, gates, lint).
    #[default]
    Whole,
    /// Only what makes git run code or read settings — `config`, `config.worktree`, `hooks`,
    /// `info`, `modules`, `worktrees` — so a user-configured rollback such as
    /// `git checkout -- .` can update the index and refs.
    CodePaths,
}

/// The parts of `.git` protected under [`GitProtection::CodePaths`].
pub const GIT_CODE_PATHS: &[&str] = &[
    ".git/config",
    ".git/config.worktree",
    ".git/hooks",
    ".git/info",
    ".git/modules",
    ".git/worktrees",
];

/// Where a command may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxPolicy {
    /// No writes except a private temp directory, no metadata changes: for planning and
    /// verification phases.
    ReadOnly,
    /// Writes limited to the workspace (minus its protected paths), a private temp directory
    /// and configured tool caches.
    #[default]
    WorkspaceWrite,
    /// No kernel confinement (the analysis and deny-list still apply).
    Off,
}

impl SandboxPolicy {
    /// `read_only`, `workspace_write` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxPolicy::ReadOnly => "read_only",
            SandboxPolicy::WorkspaceWrite => "workspace_write",
            SandboxPolicy::Off => "off",
        }
    }
}

/// What the running kernel offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSupport {
    /// The Landlock ABI version in effect (0 when unavailable).
    pub abi: u32,
    /// True when a probe ruleset was fully or partially enforced.
    pub enforced: bool,
    /// One line for humans about Landlock.
    pub detail: String,
    /// seccomp filters can be installed (`Err` says why not).
    pub seccomp: Result<(), String>,
    /// How a private mount namespace is created for read-only protected paths and hidden
    /// directories (`Err` says why neither way works).
    pub mount_namespace: Result<MountMode, String>,
}

/// How commands get their private mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountMode {
    /// Keel holds `CAP_SYS_ADMIN` (root) and sets it up on the spawning thread.
    InProcess,
    /// Keel is unprivileged: this helper program enters a user namespace, sets it up, applies
    /// Landlock and seccomp and `exec`s the command.
    UserNamespace(PathBuf),
}

impl SandboxSupport {
    /// Landlock restricts TCP bind/connect (ABI ≥ 4).
    pub fn net_rules(&self) -> bool {
        self.enforced && self.abi >= 4
    }

    /// Landlock scopes signals and abstract UNIX sockets to the sandbox (ABI ≥ 6).
    pub fn scoping(&self) -> bool {
        self.enforced && self.abi >= 6
    }
}

static SUPPORT: OnceLock<SandboxSupport> = OnceLock::new();
static NOTICE_GIVEN: AtomicBool = AtomicBool::new(false);

/// The kernel's support, probed once per process by restricting throw-away threads.
pub fn support() -> &'static SandboxSupport {
    SUPPORT.get_or_init(|| {
        let (abi, enforced, detail) = rules::probe();
        SandboxSupport {
            abi,
            enforced,
            detail,
            seccomp: seccomp::probe(),
            mount_namespace: match mounts::probe() {
                Ok(()) => Ok(MountMode::InProcess),
                Err(root) => helper::probe()
                    .map(MountMode::UserNamespace)
                    .map_err(|userns| format!("{root}; {userns}")),
            },
        }
    })
}

/// True when commands can be confined by Landlock.
pub fn is_available() -> bool {
    support().enforced
}

/// The notice to show the user the first time a command runs without the sandbox it asked
/// for; `None` when the sandbox works or the notice was already given in this process.
pub fn take_unavailable_notice() -> Option<String> {
    if is_available() || NOTICE_GIVEN.swap(true, Ordering::SeqCst) {
        return None;
    }
    Some(format!(
        "note: no kernel sandbox ({}); commands run unconfined and only the command analysis \
         protects the machine",
        support().detail
    ))
}

/// What a confined command may reach besides what its policy implies.
#[derive(Debug, Clone, Default)]
pub struct WritableRoots {
    /// The workspace root (writable under [`SandboxPolicy::WorkspaceWrite`], except its
    /// protected paths).
    pub workspace: Option<PathBuf>,
    /// The command's private temp directory (writable under every policy).
    pub private_tmp: Option<PathBuf>,
    /// Extra directories writable under [`SandboxPolicy::WorkspaceWrite`] (tool caches such as
    /// `~/.cargo/registry`); missing ones are skipped, and `~/.cargo/bin` (or
    /// `$CARGO_HOME/bin`) is never writable, even below a configured `~/.cargo`.
    pub extra: Vec<PathBuf>,
    /// Allow network access (TCP, UDP, UNIX-socket connections). Off by default.
    pub network: bool,
    /// Paths read-only to commands besides [`PROTECTED_DIRS`] (relative ones are under the
    /// workspace).
    pub protected: Vec<PathBuf>,
    /// How much of `.git` is protected.
    pub git: GitProtection,
    /// Directories hidden from commands (an empty read-only directory in their place) besides
    /// Keel's own ([`keel_private_dirs`], always hidden).
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

    /// The directories hidden from a command under `policy`: [`Self::hidden`] and Keel's own
    /// (read from this process's environment), those that exist and hold none of the
    /// command's workspace or writable directories.
    pub fn hidden_paths(&self, policy: SandboxPolicy) -> Vec<PathBuf> {
        let mut keep: Vec<PathBuf> = self.for_policy(policy);
        keep.extend(self.workspace.iter().cloned());
        let mut out: Vec<PathBuf> = self
            .hidden
            .iter()
            .cloned()
            .chain(keel_private_dirs(&|k| std::env::var(k).ok()))
            .filter(|h| h.is_absolute() && h.is_dir())
            .filter(|h| !keep.iter().any(|k| k.starts_with(h)))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Keel's own files hidden from every confined command (they read as empty): the user
    /// config named by `$KEEL_CONFIG` (read from this process's environment), if it exists.
    pub fn hidden_files(&self) -> Vec<PathBuf> {
        keel_private_files(&|k| std::env::var(k).ok())
            .into_iter()
            .filter(|f| f.is_file())
            .collect()
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

/// True when `path` (absolute, inside `workspace`) is or lies below a protected path.
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
    protected_dir
        || extra
            .iter()
            .any(|p| rel.starts_with(p) || path.starts_with(p))
}

/// Runs `spawn` on a fresh thread confined by `policy` and `roots`, and returns what it
/// returns. Everything `spawn` starts (a child process) inherits the confinement; the calling
/// thread is not affected. With [`SandboxPolicy::Off`] `spawn` runs unconfined (on the same
/// kind of fresh thread, so behaviour does not depend on support). A mechanism the kernel
/// supports but that fails to apply is an error: nothing runs less confined than reported.
pub fn spawn_confined<T, F>(policy: SandboxPolicy, roots: &WritableRoots, spawn: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let writable = roots.for_policy(policy);
    let protected = if policy == SandboxPolicy::WorkspaceWrite {
        roots.protected_paths()
    } else {
        Vec::new()
    };
    let hidden = roots.hidden_paths(policy);
    let hidden_files = roots.hidden_files();
    let network = roots.network;
    let s = support();
    let confine = policy != SandboxPolicy::Off;
    let landlock = confine && s.enforced;
    let seccomp = confine && s.seccomp.is_ok();
    let mount = confine
        && s.mount_namespace == Ok(MountMode::InProcess)
        && (!protected.is_empty() || !hidden.is_empty() || !hidden_files.is_empty());
    if confine {
        privileges::hide_keel_process();
    }
    let handle = std::thread::Builder::new()
        .name("keel-sandbox-spawn".into())
        .spawn(move || {
            if mount {
                mounts::protect(&protected, &hidden, &hidden_files)?;
            }
            if confine {
                privileges::drop_capabilities()?;
            }
            if landlock {
                rules::restrict_current_thread(&writable, network)?;
            }
            if seccomp {
                seccomp::apply(seccomp::Filter {
                    network,
                    metadata: policy != SandboxPolicy::ReadOnly,
                })?;
            }
            spawn()
        })?;
    handle
        .join()
        .map_err(|_| io::Error::other("the sandbox spawn thread panicked"))?
}

/// A command started through the [`helper`]: run `program` with `args` followed by the
/// command's own argv, and set `policy_env` in its environment (after any `env_clear`).
#[derive(Debug, Clone)]
pub struct HelperLaunch {
    /// The helper program.
    pub program: PathBuf,
    /// The helper's arguments before the command's program and arguments.
    pub args: Vec<std::ffi::OsString>,
    /// `(name, value)` of the environment variable carrying the policy; the helper removes it
    /// before `exec`.
    pub policy_env: (&'static str, String),
}

/// How a command confined by `policy` and `roots` must start: `Some` when it needs a private
/// mount namespace that only the unprivileged [`helper`] can give (Keel is not root), then
/// start it with [`spawn_via_helper`]; `None` for [`spawn_confined`].
pub fn helper_launch(policy: SandboxPolicy, roots: &WritableRoots) -> Option<HelperLaunch> {
    if policy == SandboxPolicy::Off {
        return None;
    }
    let s = support();
    let Ok(MountMode::UserNamespace(program)) = &s.mount_namespace else {
        return None;
    };
    let p = helper::HelperPolicy {
        protected: if policy == SandboxPolicy::WorkspaceWrite {
            roots.protected_paths()
        } else {
            Vec::new()
        },
        hidden: roots.hidden_paths(policy),
        hidden_files: roots.hidden_files(),
        writable: roots.for_policy(policy),
        network: roots.network,
        landlock: s.enforced,
        seccomp: s.seccomp.is_ok(),
        metadata: policy != SandboxPolicy::ReadOnly,
    };
    if p.protected.is_empty() && p.hidden.is_empty() && p.hidden_files.is_empty() {
        return None;
    }
    Some(HelperLaunch {
        program: program.clone(),
        args: vec![HELPER_ARG.into(), "--".into()],
        policy_env: (POLICY_ENV, p.encode()),
    })
}

/// Spawns a command built from a [`HelperLaunch`]: the helper confines it, so `spawn` runs
/// unconfined here (Keel still hides its own process first).
pub fn spawn_via_helper<T, F>(spawn: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T>,
{
    privileges::hide_keel_process();
    spawn()
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
        assert!(!is_protected(ws, Path::new("/w/src/.git"), &[]));
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
        let hidden = roots.hidden_paths(SandboxPolicy::ReadOnly);
        assert!(hidden.contains(&secret), "{hidden:?}");
        assert!(!hidden.contains(&dir.path().to_path_buf()), "{hidden:?}");
        assert!(!hidden.contains(&ws.join("missing")), "{hidden:?}");
    }

    #[test]
    fn description_is_one_line() {
        let d = describe_support();
        assert!(!d.contains('\n'));
        assert!(d.contains("Landlock") || d.contains("unavailable"), "{d}");
        for (name, line) in describe_enforcement() {
            assert!(!line.contains('\n'), "{name}: {line}");
        }
    }
}
