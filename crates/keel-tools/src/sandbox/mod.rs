//! The kernel sandbox for commands: the security boundary for everything Keel runs because of
//! the model or the repository. On Linux it stacks five mechanisms; the child inherits them and
//! the rest of Keel stays unrestricted:
//!
//! 1. **Namespaces** ([`mounts`], [`devices`], [`init`]): a private mount namespace in which
//!    the workspace's protected paths (`.git`, `.keel`, the constitution's) are read-only and
//!    the directories leading to them pinned (no `mv docs x; mkdir docs`), Keel's own data and
//!    config and the user's secret stores ([`keel_fs::stores`], `shell.hide`) are covered by
//!    empty read-only entries — inside the workspace too, and around it with the workspace
//!    carved back in — `/dev` is a minimal one (no disk,
//!    no other terminal), device files elsewhere are unusable, and `/proc` shows only the
//!    command's processes; its own PID namespace (nothing it starts outlives it, no other
//!    process is reachable) and IPC namespace. Landlock only grants rights (it has no "deny
//!    below a granted directory"), so this is how `.git` stays read-only inside a writable
//!    workspace. The [`helper`] process sets them up, as root directly and as a normal user
//!    inside an unprivileged user namespace; as root without a helper the spawning thread
//!    does (no fresh `/proc`). Where neither works, the protected paths are guarded by the
//!    file tools only and [`support`] says so.
//! 2. **Landlock** ([`rules`]): read and execute anywhere; write only the private temp
//!    directory (read-only policy) or also the workspace and configured tool caches
//!    (workspace-write policy); with network off, no TCP bind/connect (ABI ≥ 4); signals and
//!    abstract UNIX sockets scoped to the sandbox (ABI ≥ 6).
//! 3. **seccomp** ([`seccomp`]): device nodes, inode flags (`chattr`), the kernel keyrings
//!    and terminal injection always denied, and io_uring; with network off, `socket()` only
//!    for `AF_UNIX` stream and seqpacket sockets and no `connect`/`bind`/`listen`/`accept`/
//!    addressed `sendto` (UNIX-socket paths and UDP are what Landlock has no rule for); with
//!    network on, `socket()` only for IPv4, IPv6 and route netlink: no UNIX socket at all, so
//!    none of the user's listeners (tmux, ssh-agent, D-Bus, X11, docker) is reachable; under
//!    the read-only policy also no metadata changes (chmod, chown, utime, xattr families);
//!    without the namespaces also no System V IPC and no calls aimed at other processes.
//! 4. **Privileges** ([`privileges`]): `no_new_privs`; Keel itself non-dumpable and the
//!    command without `CAP_SYS_PTRACE` and the other capabilities that reach outside (devices,
//!    immutable files, other processes, the kernel), which keeps `/proc/<keel>/environ`
//!    unreadable — Landlock alone does not on current kernels.
//!
//! Support is probed once per process ([`support`]); [`describe_enforcement`] says exactly what
//! this kernel enforces (for `keel doctor`). Where a mechanism is missing, commands still run,
//! with the others; without Landlock they run unconfined apart from the namespaces and
//! seccomp, and [`take_unavailable_notice`] yields the one-time notice for users.
//!
//! This module does not decide which policy a command gets: callers (the shell tools, the phase
//! policy, verification) do, through [`crate::shell::exec`], the one command runner.

mod describe;
mod devices;
pub mod fds;
mod git_hooks;
mod git_includes;
mod git_repos;
pub(crate) mod git_secrets;
mod git_tool_trees;
pub(crate) use git_includes::{canonical_prefix, hook_tool_config_of};
pub(crate) use git_tool_trees::{every_dir_configs_by_name, may_be_discovered};
mod helper;
mod hook_words;
mod init;
mod limits;
mod mounts;
mod privileges;
mod roots;
pub(crate) use roots::{links_on_the_way, resolution_of};
mod rules;
mod seccomp;
mod spawn;

use std::io;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

pub use describe::{describe_enforcement, describe_support};
pub use git_includes::{
    GitConfigPath, git_config_path_of, git_config_paths, git_included_files, search_cut,
};
pub(crate) use helper::spawn_watchdog;
pub use helper::{
    HELPER_ARG, HELPER_BIN, HELPER_ENV, POLICY_ENV, helper_main, use_current_exe_as_helper,
};
pub use limits::{
    DEFAULT_MAX_PROCESSES, Limits, MIN_MAX_PROCESSES, default_memory_mb, limit_note,
    pid_max_per_namespace,
};
pub use roots::{
    GIT_DIR_MARKERS, HiddenView, SECRET_STORES, WritableRoots, expand_hidden, expand_hidden_all,
    expand_home, is_git_dir_beneath, is_git_dir_by_names, is_protected, link_targets_to_cover,
    secret_stores, too_wide_to_cover,
};
pub use spawn::{ConfinedChild, NamespaceKeeper, spawn_command};

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
    /// How commands get their private namespaces (mount, PID, IPC) for read-only protected
    /// paths, hidden directories, a minimal `/dev` and process isolation (`Err` says why
    /// neither way works).
    pub mount_namespace: Result<MountMode, String>,
    /// What those namespaces hold on this kernel (all false without them).
    pub isolation: Isolation,
}

/// How commands get their private namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountMode {
    /// Keel holds `CAP_SYS_ADMIN` (root): a throw-away thread sets them up and the command is
    /// the PID namespace's first process (see [`spawn_command`]).
    InProcess,
    /// Keel is unprivileged: this helper program enters a user namespace, sets them up,
    /// applies Landlock and seccomp and runs the command (see [`helper`]).
    UserNamespace(PathBuf),
}

/// What the command's namespaces hold besides its mount namespace (read-only protected paths,
/// hidden secrets), decided once by the probe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Isolation {
    /// Its own PID and IPC namespaces: it reaches no other process (signals, priorities,
    /// limits, `/proc`), no other program's System V IPC, and nothing it starts outlives it.
    pub processes: bool,
    /// A fresh `/proc` listing only its own processes.
    pub fresh_proc: bool,
    /// A minimal `/dev`: no disk, no other terminal.
    pub minimal_dev: bool,
    /// Device files anywhere else on disk unusable (`nodev` on every mount).
    pub nodev: bool,
    /// If Keel dies, the command is killed (a parent-death signal as root, the helper's watch
    /// otherwise).
    pub dies_with_keel: bool,
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

/// How commands get their namespaces, and what those hold: on the spawning thread as root,
/// else through the helper's user namespace.
fn probe_namespaces() -> (Result<MountMode, String>, Isolation) {
    let root = match mounts::probe() {
        Ok(built) => {
            let isolation = Isolation {
                processes: true,
                fresh_proc: built.proc_fs,
                minimal_dev: built.dev,
                nodev: built.nodev,
                dies_with_keel: true,
            };
            return (Ok(MountMode::InProcess), isolation);
        }
        Err(e) => e,
    };
    match helper::probe() {
        Ok(h) => (
            Ok(MountMode::UserNamespace(h.program)),
            Isolation {
                processes: true,
                fresh_proc: h.built.proc_fs,
                minimal_dev: h.built.dev,
                nodev: h.built.nodev,
                dies_with_keel: true,
            },
        ),
        Err(userns) => (Err(format!("{root}; {userns}")), Isolation::default()),
    }
}

/// The kernel's support, probed once per process by restricting throw-away threads and
/// running the helper's probe.
pub fn support() -> &'static SandboxSupport {
    SUPPORT.get_or_init(|| {
        let (abi, enforced, detail) = rules::probe();
        let (mount_namespace, isolation) = probe_namespaces();
        SandboxSupport {
            abi,
            enforced,
            detail,
            seccomp: seccomp::probe(),
            mount_namespace,
            isolation,
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

/// The command's view under `policy` and `roots`, with the optional parts this kernel
/// supports (`proc_fs`: mounted by the view's builder, which must then be the PID namespace's
/// first process: the helper's init).
fn view_for(policy: SandboxPolicy, roots: &WritableRoots, proc_fs: bool) -> mounts::View {
    let s = support();
    let protected = if policy == SandboxPolicy::WorkspaceWrite {
        roots.make_keel_dir_protectable();
        roots.protected_paths()
    } else {
        Vec::new()
    };
    let mut anchors = roots.anchors_of(&protected);
    let hidden = roots.hidden_view(policy);
    let writable = roots.for_policy(policy);
    // A cover moves with a renamed parent, leaving the path Keel reads next free: pinned
    // like a protected path's chain (red-team pass 6, R6-19: in a home workspace `mv .config
    // .config-old && mkdir -p .config/keel && printf '[shell]\nsandbox = false\n' > …`
    // turned the sandbox off for every later session; `mv home home-old` exposed `.ssh`).
    anchors.extend(roots::chains_below(
        &writable,
        hidden.dirs.iter().chain(&hidden.files),
    ));
    // The real directories on the way to each link met resolving a store (a dotfile
    // manager's `~/.config/keel -> ../dotfiles/keel`): pinned, so the link cannot be moved
    // away with its parent (red-team pass 8, R8-1); the runner puts a re-pointed link back.
    // Every real directory such a resolution walks through is pinned too (R8-20: a link's
    // `../x/..` through a directory `x` the command replaced by a link).
    let (mut links, mut dirs) = (Vec::new(), Vec::new());
    for store in keel_fs::stores::always(&keel_fs::stores::process_env)
        .into_iter()
        .map(|s| s.path)
        .chain(roots.hidden.iter().cloned())
        .filter(|s| s.is_absolute() && s.symlink_metadata().is_ok())
    {
        let (l, d) = roots::resolution_of(&store);
        if !l.is_empty() {
            links.extend(l.into_iter().map(|(link, _)| link));
            dirs.extend(d);
        }
    }
    anchors.extend(roots::chains_below(&writable, links.iter()));
    anchors.extend(
        dirs.into_iter()
            .filter(|d| writable.iter().any(|w| d.starts_with(w) && d != w)),
    );
    anchors.sort();
    anchors.dedup();
    // The user's git configuration without its credentials (R9-12): a scrubbed copy in the
    // command's private temporary directory stands in for each file that holds one.
    let mut hidden_files = hidden.files;
    let replaced_files = match &roots.private_tmp {
        Some(tmp) => {
            let (replaced, unreadable) = git_secrets::replacements(tmp, roots.workspace.as_deref());
            for f in unreadable {
                if !hidden_files.contains(&f) {
                    hidden_files.push(f);
                }
            }
            replaced
                .into_iter()
                .filter(|(f, _)| !hidden_files.contains(f))
                .collect()
        }
        None => Vec::new(),
    };
    mounts::View {
        protected,
        anchors,
        hidden: hidden.dirs,
        hidden_files,
        replaced_files,
        carve: hidden.carve,
        proc_fs: proc_fs && s.isolation.fresh_proc,
        dev: s.isolation.minimal_dev,
        nodev: s.isolation.nodev,
        writable,
    }
}

/// Runs `spawn` on a fresh thread confined by `policy` and `roots`, and returns what it
/// returns. Everything `spawn` starts (a child process) inherits the confinement; the calling
/// thread is not affected. With [`SandboxPolicy::Off`] `spawn` runs unconfined (on the same
/// kind of fresh thread, so behaviour does not depend on support). A mechanism the kernel
/// supports but that fails to apply is an error: nothing runs less confined than reported.
///
/// Prefer [`spawn_command`]: this gives the child the namespaces only as root (the child is
/// their first process, without a fresh `/proc`, a session of its own or death with Keel),
/// and nothing of them through the helper.
pub fn spawn_confined<T, F>(policy: SandboxPolicy, roots: &WritableRoots, spawn: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let writable = roots.for_policy(policy);
    let network = roots.network;
    let s = support();
    let confine = policy != SandboxPolicy::Off;
    let landlock = confine && s.enforced;
    let seccomp = confine && s.seccomp.is_ok();
    let namespaces = confine && s.mount_namespace == Ok(MountMode::InProcess);
    let view = namespaces.then(|| view_for(policy, roots, false));
    if confine {
        privileges::hide_keel_process();
    }
    let handle = std::thread::Builder::new()
        .name("keel-sandbox-spawn".into())
        .spawn(move || {
            if let Some(view) = &view {
                mounts::enter_in_process(view)?;
            }
            if confine {
                privileges::drop_capabilities()?;
            }
            if landlock {
                let private_dev = view.as_ref().is_some_and(|v| v.dev);
                rules::restrict_current_thread(&writable, network, private_dev)?;
            }
            if seccomp {
                seccomp::apply(seccomp::Filter {
                    network,
                    metadata: policy != SandboxPolicy::ReadOnly,
                    pid_namespace: namespaces,
                    ipc_namespace: namespaces,
                })?;
            }
            spawn()
        })?;
    handle
        .join()
        .map_err(|_| io::Error::other("the sandbox spawn thread panicked"))?
}

/// A command started through the [`helper`]: run `program` with `args` followed by the
/// command's own argv, with `policy_env` as its ONLY environment variable (`env_clear` first):
/// the command's environment travels inside the policy (R4-16).
#[derive(Debug, Clone)]
pub struct HelperLaunch {
    /// The helper program.
    pub program: PathBuf,
    /// The helper's arguments before the command's program and arguments.
    pub args: Vec<std::ffi::OsString>,
    /// `(name, value)` of the environment variable carrying the policy (and the command's
    /// environment, which the helper sets at the command's `exec`).
    pub policy_env: (&'static str, String),
}

/// How a command confined by `policy` and `roots`, with the environment `env`, must start:
/// `Some` when the unprivileged [`helper`] gives it its namespaces (Keel is not root), then
/// start it with [`spawn_via_helper`]; `None` otherwise. [`spawn_command`] does all of this.
pub fn helper_launch(
    policy: SandboxPolicy,
    roots: &WritableRoots,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Option<HelperLaunch> {
    if policy == SandboxPolicy::Off {
        return None;
    }
    let s = support();
    let Ok(MountMode::UserNamespace(program)) = &s.mount_namespace else {
        return None;
    };
    let p = helper::HelperPolicy {
        view: view_for(policy, roots, true),
        writable: roots.for_policy(policy),
        network: roots.network,
        landlock: s.enforced,
        seccomp: s.seccomp.is_ok(),
        metadata: policy != SandboxPolicy::ReadOnly,
        user_namespace: true,
        parent: Some(std::process::id()),
        limits: roots.limits,
        env: Some(env.to_vec()),
    };
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
    fn description_is_one_line() {
        let d = describe_support();
        assert!(!d.contains('\n'));
        assert!(d.contains("Landlock") || d.contains("unavailable"), "{d}");
        for (name, line) in describe_enforcement() {
            assert!(!line.contains('\n'), "{name}: {line}");
        }
    }
}
