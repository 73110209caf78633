//! The seccomp part of the sandbox: what Landlock has no rule for. Denied calls fail with
//! `EPERM`; everything else is allowed.
//!
//! - Always: `ioctl(TIOCSTI/TIOCLINUX)` (typing into the user's terminal).
//! - Network off: `socket()` of any family but `AF_UNIX`, `connect`, `bind`, `listen`,
//!   `accept`, `sendto` with an address, `sendmmsg`, and io_uring (whose operations seccomp
//!   cannot see). UNIX *datagram* sockets are refused too, from `socket()` and `socketpair()`:
//!   `sendmsg` carries its destination inside a `msghdr` that seccomp cannot read, and a
//!   datagram socket (even one of a pair) sends to any named socket path given there — the
//!   user's D-Bus, systemd or ssh-agent listeners. Stream and seqpacket sockets cannot send
//!   without `connect`, which is denied. Pipes and stream `socketpair`s keep working.
//! - Read-only policy: metadata changes — the chmod, chown, utime and xattr families.

use std::io;

/// What to deny besides the terminal ioctls.
#[derive(Debug, Clone, Copy)]
pub(super) struct Filter {
    /// Network allowed: keep sockets.
    pub network: bool,
    /// Metadata changes allowed (not read-only).
    pub metadata: bool,
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod imp {
    use std::collections::BTreeMap;
    use std::io;

    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    use super::Filter;

    #[cfg(target_arch = "x86_64")]
    const ARCH: TargetArch = TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    const ARCH: TargetArch = TargetArch::aarch64;

    // Newer calls, numbered alike on every architecture, that libc may not name yet.
    const SYS_FCHMODAT2: i64 = 452;
    const SYS_SETXATTRAT: i64 = 463;
    const SYS_REMOVEXATTRAT: i64 = 466;

    const TIOCSTI: u64 = 0x5412;
    /// The socket type bits of `socket()`/`socketpair()`'s second argument (the rest are
    /// `SOCK_NONBLOCK`/`SOCK_CLOEXEC`).
    const SOCK_TYPE_MASK: u64 = 0xf;
    const TIOCLINUX: u64 = 0x541C;

    fn metadata_calls() -> Vec<i64> {
        let mut calls = vec![
            libc::SYS_fchmod,
            libc::SYS_fchmodat,
            SYS_FCHMODAT2,
            libc::SYS_fchown,
            libc::SYS_fchownat,
            libc::SYS_utimensat,
            libc::SYS_setxattr,
            libc::SYS_lsetxattr,
            libc::SYS_fsetxattr,
            libc::SYS_removexattr,
            libc::SYS_lremovexattr,
            libc::SYS_fremovexattr,
            SYS_SETXATTRAT,
            SYS_REMOVEXATTRAT,
        ];
        #[cfg(target_arch = "x86_64")]
        calls.extend([
            libc::SYS_chmod,
            libc::SYS_chown,
            libc::SYS_lchown,
            libc::SYS_utime,
            libc::SYS_utimes,
            libc::SYS_futimesat,
        ]);
        calls
    }

    fn network_calls() -> Vec<i64> {
        vec![
            libc::SYS_connect,
            libc::SYS_bind,
            libc::SYS_listen,
            libc::SYS_accept,
            libc::SYS_accept4,
            libc::SYS_sendmmsg,
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
        ]
    }

    fn cond(
        arg: u8,
        len: SeccompCmpArgLen,
        op: SeccompCmpOp,
        value: u64,
    ) -> io::Result<SeccompCondition> {
        SeccompCondition::new(arg, len, op, value).map_err(io::Error::other)
    }

    fn rule(conditions: Vec<SeccompCondition>) -> io::Result<SeccompRule> {
        SeccompRule::new(conditions).map_err(io::Error::other)
    }

    /// `AF_UNIX` with type `SOCK_DGRAM`, or `SOCK_RAW` (which the kernel turns into a datagram
    /// socket for `AF_UNIX`), whatever the flags.
    fn unix_datagram_rules() -> io::Result<Vec<SeccompRule>> {
        [libc::SOCK_DGRAM, libc::SOCK_RAW]
            .into_iter()
            .map(|kind| {
                rule(vec![
                    cond(
                        0,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::Eq,
                        libc::AF_UNIX as u64,
                    )?,
                    cond(
                        1,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
                        kind as u64,
                    )?,
                ])
            })
            .collect()
    }

    pub(super) fn program(filter: Filter) -> io::Result<BpfProgram> {
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        rules.insert(
            libc::SYS_ioctl,
            vec![
                rule(vec![cond(
                    1,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    TIOCSTI,
                )?])?,
                rule(vec![cond(
                    1,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    TIOCLINUX,
                )?])?,
            ],
        );
        if !filter.network {
            for call in network_calls() {
                // An empty rule list matches every call.
                rules.insert(call, Vec::new());
            }
            let mut socket_rules = vec![rule(vec![cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                libc::AF_UNIX as u64,
            )?])?];
            socket_rules.extend(unix_datagram_rules()?);
            rules.insert(libc::SYS_socket, socket_rules);
            rules.insert(libc::SYS_socketpair, unix_datagram_rules()?);
            // sendto with a destination address is a connect in disguise.
            rules.insert(
                libc::SYS_sendto,
                vec![rule(vec![cond(
                    4,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::Ne,
                    0,
                )?])?],
            );
        }
        if !filter.metadata {
            for call in metadata_calls() {
                rules.insert(call, Vec::new());
            }
        }
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            ARCH,
        )
        .map_err(io::Error::other)?;
        BpfProgram::try_from(filter).map_err(io::Error::other)
    }

    pub(super) fn install(program: &BpfProgram) -> io::Result<()> {
        seccompiler::apply_filter(program)
            .map_err(|e| io::Error::other(format!("cannot install the seccomp filter: {e}")))
    }
}

/// Installs the filter on the calling thread (which must already have `no_new_privs`, set by
/// Landlock, or `CAP_SYS_ADMIN`).
pub(super) fn apply(filter: Filter) -> io::Result<()> {
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    {
        // Without Landlock nobody set no_new_privs yet; seccomp requires it for non-root.
        rustix::thread::set_no_new_privs(true)
            .map_err(|e| io::Error::other(format!("cannot set no_new_privs: {e}")))?;
        imp::install(&imp::program(filter)?)
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    {
        let _ = filter;
        Ok(())
    }
}

/// `Ok` when a filter can be installed (tried on a throw-away thread).
pub(super) fn probe() -> Result<(), String> {
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    {
        std::thread::Builder::new()
            .name("keel-sandbox-probe".into())
            .spawn(|| {
                apply(Filter {
                    network: false,
                    metadata: false,
                })
                .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())
            .and_then(|h| {
                h.join()
                    .map_err(|_| "the probe thread panicked".to_string())
            })?
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    {
        Err("seccomp filters are built only for Linux on x86_64 and aarch64".into())
    }
}
