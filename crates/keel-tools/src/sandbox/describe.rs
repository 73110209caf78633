//! What the sandbox enforces on this kernel, in words for `keel doctor` and notices.

use std::path::Path;

use super::{HELPER_ARG, MountMode, privileges, support};

/// One line for `keel doctor`, e.g. "Landlock ABI 7: enforced (…)" or why it is unavailable.
pub fn describe_support() -> String {
    let s = support();
    if s.enforced {
        format!(
            "Landlock ABI {}: enforced (read-only and workspace-write command sandboxes available)",
            s.abi
        )
    } else {
        format!(
            "unavailable: {}; commands run unconfined and Keel relies on command analysis only",
            s.detail
        )
    }
}

/// What the kernel enforces for commands, one `(mechanism, statement)` per line: file-system
/// confinement, network, signals, metadata changes, protected paths, Keel's own environment.
/// Each statement says "enforced" or exactly what is not.
pub fn describe_enforcement() -> Vec<(&'static str, String)> {
    let s = support();
    let seccomp_ok = s.seccomp.is_ok();
    let mut out = Vec::new();
    out.push((
        "file writes",
        if s.enforced {
            format!(
                "enforced by Landlock ABI {}: read-only commands write only a private temp dir; \
                 workspace-write commands also the workspace and configured caches",
                s.abi
            )
        } else {
            format!(
                "NOT enforced ({}); only the command analysis guards writes",
                s.detail
            )
        },
    ));
    let tcp = if s.net_rules() {
        "TCP bind/connect denied by Landlock"
    } else {
        "no Landlock TCP rules on this kernel (ABI < 4)"
    };
    let other = match &s.seccomp {
        Ok(()) => "other socket families, UNIX datagram sockets, socket connect/bind and io_uring \
             denied by seccomp; `[shell] network = true` turns on TCP and UDP only: even then no \
             UNIX socket can be created (seccomp), so the user's tmux, ssh-agent, D-Bus, X11 and \
             docker sockets stay unreachable"
            .to_string(),
        Err(e) => format!(
            "NO seccomp ({e}): UDP and UNIX-socket connections are not blocked, and with \
             `[shell] network = true` a command reaches the user's UNIX sockets (tmux, \
             ssh-agent, D-Bus, docker) and through them runs anything unconfined"
        ),
    };
    out.push(("network (off by default)", format!("{tcp}; {other}")));
    out.push((
        "signals, abstract sockets",
        if s.scoping() {
            "scoped to the sandbox by Landlock (ABI ≥ 6)".to_string()
        } else {
            "NOT scoped (Landlock ABI < 6): a command may signal other processes of the user"
                .to_string()
        },
    ));
    out.push((
        "metadata (read-only policy)",
        if seccomp_ok {
            "chmod/chown/utime/xattr denied by seccomp".to_string()
        } else {
            "NOT enforced: no seccomp".to_string()
        },
    ));
    let how = match &s.mount_namespace {
        Ok(MountMode::InProcess) => {
            "in private namespaces set up by Keel (it has CAP_SYS_ADMIN: root)".to_string()
        }
        Ok(MountMode::UserNamespace(helper)) => format!(
            "in private namespaces inside an unprivileged user namespace (Keel runs as \
             a normal user; commands start through `{} {HELPER_ARG}`)",
            helper_name(helper)
        ),
        Err(_) => String::new(),
    };
    let no_namespaces = |e: &str| {
        format!(
            "{e}; to enforce, run Keel as root or allow unprivileged user namespaces: sysctl \
             user.max_user_namespaces > 0, kernel.unprivileged_userns_clone = 1 where it \
             exists, kernel.apparmor_restrict_unprivileged_userns = 0 on Ubuntu"
        )
    };
    out.push((
        "protected paths (.git, .keel)",
        match &s.mount_namespace {
            Ok(_) => format!(
                "read-only bind mounts, and the directories leading to them pinned (renaming a \
                 parent cannot move them out from under their protection), {how} (and refused \
                 by the file tools)"
            ),
            Err(e) => format!(
                "refused by the file tools only; NOT read-only to commands ({})",
                no_namespaces(e)
            ),
        },
    ));
    out.push((
        "Keel's data and config dirs",
        match &s.mount_namespace {
            Ok(_) => format!(
                "hidden from commands behind an empty read-only directory {how} (server token, \
                 session database, user config; `$KEEL_CONFIG` reads as empty)"
            ),
            Err(e) => format!(
                "NOT hidden: a command running as you can read the server token, session \
                 database and config ({e})"
            ),
        },
    ));
    let i = s.isolation;
    out.push((
        "processes",
        if i.processes {
            let proc_fs = if i.fresh_proc {
                "a fresh /proc lists only them"
            } else {
                "/proc still lists the host's processes (readable as before, unreachable by \
                 signal, priority or limit calls)"
            };
            let keel = if i.dies_with_keel {
                "and when Keel itself dies"
            } else {
                "but NOT when Keel is killed"
            };
            format!(
                "each command in its own PID and IPC namespaces: it reaches no other process \
                 (kill, renice, prlimit, taskset) and no other program's System V IPC; {proc_fs}; \
                 everything it starts (`setsid -f`, `nohup … &`) is killed when it ends, {keel}"
            )
        } else {
            let denied = if seccomp_ok {
                "seccomp denies System V IPC and priority/limit/affinity calls aimed at other \
                 processes"
            } else {
                "NOT even seccomp: System V IPC and priority/limit calls reach other processes"
            };
            format!(
                "NO PID namespace: background processes a command starts (`setsid -f`) can \
                 outlive it; {denied} ({})",
                no_namespaces(s.mount_namespace.as_ref().err().map_or("", |e| e.as_str()))
            )
        },
    ));
    out.push(("processes and memory", describe_limits(s)));
    out.push((
        "devices",
        match (i.minimal_dev, i.nodev) {
            (true, true) => "a minimal /dev (null, zero, full, random, urandom, tty, its own pts \
                 and shm): no disk, loop device or other terminal is reachable; device files \
                 anywhere else on disk are unusable (nodev)"
                .to_string(),
            (true, false) => "a minimal /dev (null, zero, full, random, urandom, tty, its own pts \
                 and shm): no disk or other terminal under /dev; device files elsewhere on disk \
                 are NOT made unusable (no mount_setattr: Linux < 5.12)"
                .to_string(),
            (false, _) => "NOT isolated: commands see the host's /dev (Landlock still forbids \
                 writing it; reading a readable disk or terminal works)"
                .to_string(),
        },
    ));
    out.push((
        "root powers",
        if seccomp_ok {
            "seccomp denies device nodes (mknod), inode flags (chattr +i/+a: FS_IOC_SETFLAGS, \
             FS_IOC_FSSETXATTR, file_setattr), the kernel keyrings (add_key, keyctl, \
             request_key) and typing into the terminal (TIOCSTI); commands lose CAP_MKNOD, \
             CAP_LINUX_IMMUTABLE, CAP_SYS_ADMIN, CAP_SYS_PTRACE and the other capabilities that \
             reach outside the sandbox"
                .to_string()
        } else {
            "NO seccomp: device nodes, chattr and the keyrings rely on the capability drop \
             alone (CAP_MKNOD, CAP_LINUX_IMMUTABLE…); keyrings are NOT isolated"
                .to_string()
        },
    ));
    out.push((
        "Keel's environment",
        if privileges::keel_hidden() {
            "commands get an allowlisted environment; /proc/<keel>/environ is unreadable \
             (Keel is non-dumpable, commands lose CAP_SYS_PTRACE)"
                .to_string()
        } else {
            "commands get an allowlisted environment; /proc/<keel>/environ is NOT protected \
             (Keel could not mark itself non-dumpable)"
                .to_string()
        },
    ));
    out
}

/// The process and memory limits (`shell.max_processes`, `shell.max_memory_mb`).
fn describe_limits(s: &super::SandboxSupport) -> String {
    let i = s.isolation;
    let root = rustix::process::geteuid().is_root();
    let processes = if i.processes && i.fresh_proc && super::pid_max_per_namespace() {
        "each command runs at most `shell.max_processes` processes and threads (default \
         4096): its PID namespace has its own pid_max, so a fork storm fails inside it and \
         nothing else on the machine runs short"
            .to_string()
    } else if !root {
        "each command runs at most `shell.max_processes` processes and threads (default \
         4096), by RLIMIT_NPROC (this kernel has no per-namespace pid_max: Linux < 6.14, or no \
         fresh /proc)"
            .to_string()
    } else {
        "the process limit is NOT enforced: Keel runs as root, which RLIMIT_NPROC does not \
         bind, and this kernel has no per-namespace pid_max (Linux < 6.14, or no fresh \
         /proc): a fork storm is bounded only by the command's timeout"
            .to_string()
    };
    format!(
        "{processes}; each process may allocate at most `shell.max_memory_mb` (default half \
         of this machine's memory; RLIMIT_DATA) and commands are the OOM killer's first choice \
         (oom_score_adj 1000), never Keel; the total of many processes is NOT capped (no \
         cgroup)"
    )
}

/// How a helper program is named in a statement: `keel` when Keel re-executes itself.
fn helper_name(helper: &Path) -> String {
    if helper == Path::new("/proc/self/exe") {
        "keel".to_string()
    } else {
        helper.display().to_string()
    }
}
