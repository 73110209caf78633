//! Starting one confined program: [`spawn_command`], the way Keel's command runner (and
//! anything else that starts a program for the model or the repository) gets a child with
//! every mechanism this kernel offers.
//!
//! - As a normal user, the program starts through the [`super::helper`] (a user namespace is
//!   needed, and only a single-threaded process can enter one).
//! - As root, a throw-away thread enters new mount, PID and IPC namespaces and builds the view
//!   ([`super::mounts`]); the child it forks is the PID namespace's first process and, before
//!   `exec`, starts a session of its own (no controlling terminal), asks to die with that
//!   thread, mounts a fresh `/proc`, drops capabilities and applies Landlock and seccomp —
//!   system calls only, everything built beforehand on the thread. The thread then waits until
//!   the returned [`ConfinedChild`] is dropped: it holds the namespaces (so tearing them down
//!   is not on the command's exit path) and, when Keel dies, its death kills the command.
//!   When the command (pid 1) ends, the kernel kills everything else in its namespace.
//! - Where neither works, the thread confines itself (Landlock, seccomp, capabilities) and the
//!   child inherits that.

use std::ffi::OsString;
use std::io;
use std::sync::mpsc;

use tokio::process::Command;

use super::{
    MountMode, SandboxPolicy, WritableRoots, helper_launch, limits, mounts, privileges, rules,
    seccomp, support, view_for,
};

/// A started program and what keeps its confinement alive.
#[derive(Debug)]
pub struct ConfinedChild {
    pub child: tokio::process::Child,
    /// Keep it as long as the child is used: dropping it releases the namespaces (and kills the
    /// child if it still runs).
    pub keeper: NamespaceKeeper,
}

/// Holds a root command's namespaces (see [`spawn_command`]): dropping it ends the thread
/// that holds them, which kills the command if it still runs. Empty for other commands.
#[derive(Debug)]
pub struct NamespaceKeeper {
    /// Dropping it ends the thread's wait.
    _release: Option<mpsc::Sender<()>>,
}

impl ConfinedChild {
    fn plain(child: tokio::process::Child) -> Self {
        Self {
            child,
            keeper: NamespaceKeeper { _release: None },
        }
    }
}

/// Starts `argv` confined by `policy` and `roots`, with `env` as its whole environment.
/// `configure` sets everything else but the program and its arguments (working directory,
/// stdio, `kill_on_drop`; any environment it sets is replaced by `env`); it must not set a
/// process group: each confined program gets its own (as the leader of its own session where
/// the kernel allows), so killing the group `child.id()` ends it and everything it started.
/// Through the unprivileged [`helper`](super::helper) `env` travels inside the policy and is
/// set only at the command's own `exec`: the helper runs unconfined until the sandbox is
/// built, so none of the command's variables may reach it (a repository's `LD_PRELOAD` would
/// run its library there, red-team pass 4, R4-16).
/// Call from within a Tokio runtime.
pub async fn spawn_command(
    policy: SandboxPolicy,
    roots: &WritableRoots,
    argv: &[OsString],
    env: Vec<(OsString, OsString)>,
    configure: impl FnOnce(&mut Command) + Send + 'static,
) -> io::Result<ConfinedChild> {
    let Some((program, args)) = argv.split_first() else {
        return Err(io::Error::other("nothing to run: the command is empty"));
    };
    if let Some(h) = helper_launch(policy, roots, &env) {
        // The sandbox helper, which confines the command and becomes it.
        #[allow(clippy::disallowed_methods)]
        let mut cmd = Command::new(&h.program);
        cmd.args(&h.args).arg(program).args(args);
        configure(&mut cmd);
        cmd.env_clear()
            .env(h.policy_env.0, &h.policy_env.1)
            .process_group(0);
        only_standard_descriptors(&mut cmd);
        return super::spawn_via_helper(|| cmd.spawn()).map(ConfinedChild::plain);
    }
    let configure = move |cmd: &mut Command| {
        configure(cmd);
        cmd.env_clear().envs(env);
    };
    if policy == SandboxPolicy::Off {
        // The confined runner's unconfined policy (`shell.sandbox = false`, the user's own MCP
        // servers).
        #[allow(clippy::disallowed_methods)]
        let mut cmd = Command::new(program);
        cmd.args(args);
        configure(&mut cmd);
        cmd.process_group(0);
        only_standard_descriptors(&mut cmd);
        return cmd.spawn().map(ConfinedChild::plain);
    }
    if support().mount_namespace == Ok(MountMode::InProcess) {
        return in_namespaces(policy, roots, program.clone(), args.to_vec(), configure).await;
    }
    let (program, args) = (program.clone(), args.to_vec());
    let roots = roots.clone();
    // No PID namespace: `RLIMIT_NPROC` stands in for the process limit.
    let limits = limits::Prepared::new(roots.limits, false, true);
    let runtime = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    tokio::task::spawn_blocking(move || {
        super::spawn_confined(policy, &roots, move || {
            let _enter = runtime.enter();
            // Confined by this thread (Landlock, seccomp, capabilities), inherited.
            #[allow(clippy::disallowed_methods)]
            let mut cmd = Command::new(program);
            cmd.args(args);
            configure(&mut cmd);
            cmd.process_group(0);
            only_standard_descriptors(&mut cmd);
            set_limits(&mut cmd, limits);
            cmd.spawn()
        })
    })
    .await
    .map_err(|e| io::Error::other(format!("the spawn task failed: {e}")))?
    .map(ConfinedChild::plain)
}

/// Everything the child applies between `fork` and `exec`, built beforehand.
struct InChild {
    proc_fs: bool,
    limits: limits::Prepared,
    capabilities: privileges::Dropped,
    landlock: Option<std::os::fd::OwnedFd>,
    seccomp: seccomp::Prepared,
}

impl InChild {
    /// In the forked child: system calls only, no allocation, no lock.
    fn apply(&self) -> io::Result<()> {
        super::fds::close_on_exec_above_stderr()?;
        rustix::process::setsid()?;
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        if self.proc_fs {
            super::devices::fresh_proc(&self.limits)?;
        }
        privileges::apply_drop(&self.capabilities)?;
        self.limits.apply_to_command()?;
        if let Some(fd) = &self.landlock {
            rules::restrict_with(fd)?;
        }
        seccomp::install(&self.seccomp)
    }
}

/// The root path (see the module documentation).
async fn in_namespaces(
    policy: SandboxPolicy,
    roots: &WritableRoots,
    program: OsString,
    args: Vec<OsString>,
    configure: impl FnOnce(&mut Command) + Send + 'static,
) -> io::Result<ConfinedChild> {
    let s = support();
    let view = view_for(policy, roots, false);
    let writable = roots.for_policy(policy);
    let network = roots.network;
    let landlock = s.enforced;
    let filter = s.seccomp.is_ok().then_some(seccomp::Filter {
        network,
        metadata: policy != SandboxPolicy::ReadOnly,
        pid_namespace: true,
        ipc_namespace: true,
    });
    let proc_fs = s.isolation.fresh_proc;
    let limits = roots.limits;
    let runtime = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    privileges::hide_keel_process();
    let (started_tx, started_rx) =
        tokio::sync::oneshot::channel::<io::Result<tokio::process::Child>>();
    let (keeper, released) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("keel-sandbox-ns".into())
        .spawn(move || {
            let spawned = (|| {
                mounts::enter_in_process(&view)?;
                let in_child = InChild {
                    proc_fs,
                    // The child is the PID namespace's first process; with a fresh `/proc` it
                    // writes the namespace's `pid_max` there.
                    limits: limits::Prepared::new(limits, proc_fs, true),
                    capabilities: privileges::prepare_drop()?,
                    landlock: if landlock {
                        rules::prepare(&writable, network, view.dev)?
                    } else {
                        None
                    },
                    seccomp: match filter {
                        Some(f) => seccomp::prepare(f)?,
                        None => seccomp::Prepared::default(),
                    },
                };
                // Confined in its namespaces and by `in_child` before `exec`.
                #[allow(clippy::disallowed_methods)]
                let mut cmd = Command::new(program);
                cmd.args(args);
                configure(&mut cmd);
                set_pre_exec(&mut cmd, in_child);
                let _enter = runtime.enter();
                cmd.spawn()
            })();
            let started = spawned.is_ok();
            let _ = started_tx.send(spawned);
            if started {
                // Hold the namespaces, and be the thread whose death kills the command.
                let _ = released.recv();
            }
        })?;
    let child = started_rx
        .await
        .map_err(|_| io::Error::other("the sandbox spawn thread ended without a child"))??;
    Ok(ConfinedChild {
        child,
        keeper: NamespaceKeeper {
            _release: Some(keeper),
        },
    })
}

/// The child gets only its standard input, output and error ([`super::fds`]).
#[allow(unsafe_code)]
fn only_standard_descriptors(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child; it makes system calls only, without
    // allocating or taking a lock.
    unsafe {
        cmd.pre_exec(super::fds::close_on_exec_above_stderr);
    }
}

/// The child gets `limits` (no PID namespace: see [`spawn_command`]'s last case).
#[allow(unsafe_code)]
fn set_limits(cmd: &mut Command, limits: limits::Prepared) {
    // SAFETY: the closure runs in the forked child; it makes system calls only, without
    // allocating or taking a lock.
    unsafe {
        cmd.pre_exec(move || limits.apply_to_command());
    }
}

#[allow(unsafe_code)]
fn set_pre_exec(cmd: &mut Command, in_child: InChild) {
    // SAFETY: the closure runs in the forked child of a multi-threaded process, where only
    // async-signal-safe operations are allowed: `InChild::apply` makes system calls on data
    // built before the fork, and neither allocates nor takes a lock.
    unsafe {
        cmd.pre_exec(move || in_child.apply());
    }
}
