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
             denied by seccomp"
            .to_string(),
        Err(e) => format!("NO seccomp ({e}): UDP and UNIX-socket connections are not blocked"),
    };
    out.push((
        "network (off by default)",
        format!("{tcp}; {other}; `[shell] network = true` turns it on"),
    ));
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
            "in a private mount namespace set up by Keel (it has CAP_SYS_ADMIN: root)".to_string()
        }
        Ok(MountMode::UserNamespace(helper)) => format!(
            "in a private mount namespace inside an unprivileged user namespace (Keel runs as \
             a normal user; commands start through `{} {HELPER_ARG}`)",
            if helper == Path::new("/proc/self/exe") {
                "keel".to_string()
            } else {
                helper.display().to_string()
            }
        ),
        Err(_) => String::new(),
    };
    out.push((
        "protected paths (.git, .keel)",
        match &s.mount_namespace {
            Ok(_) => format!("read-only bind mounts {how} (and refused by the file tools)"),
            Err(e) => format!(
                "refused by the file tools only; NOT read-only to commands ({e}; to enforce, \
                 run Keel as root or allow unprivileged user namespaces: sysctl \
                 user.max_user_namespaces > 0, kernel.unprivileged_userns_clone = 1 where it \
                 exists, kernel.apparmor_restrict_unprivileged_userns = 0 on Ubuntu)"
            ),
        },
    ));
    out.push((
        "Keel's data and config dirs",
        match &s.mount_namespace {
            Ok(_) => format!(
                "hidden from commands behind an empty read-only tmpfs {how} (server token, \
                 session database, user config; `$KEEL_CONFIG` reads as empty)"
            ),
            Err(e) => format!(
                "NOT hidden: a command running as you can read the server token, session \
                 database and config ({e})"
            ),
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
