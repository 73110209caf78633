//! The seccomp part of the sandbox: what Landlock has no rule for, and the kernel powers root
//! keeps. Denied calls fail with `EPERM` (the command sees an ordinary error and goes on);
//! everything else is allowed.
//!
//! - Always:
//!   - `ioctl(TIOCSTI/TIOCLINUX)` (typing into the user's terminal);
//!   - `mknod`/`mknodat` of character and block devices (a device node in the workspace
//!     reaches any disk or terminal; FIFOs, sockets and regular files stay allowed: build
//!     scripts and tests use `mkfifo`);
//!   - the inode-flag calls: `ioctl(FS_IOC_SETFLAGS)` (64- and 32-bit request numbers),
//!     `ioctl(FS_IOC_FSSETXATTR)` and `file_setattr` (`chattr +i` makes any file immutable,
//!     `+a` append-only);
//!   - the kernel keyrings: `add_key`, `request_key`, `keyctl` (the user's and session
//!     keyrings are shared with everything else the user runs);
//!   - on x86_64, every x32-ABI call (its numbers would bypass the rules above on kernels
//!     built with x32).
//! - Without a private IPC namespace ([`Filter::ipc_namespace`]): System V IPC
//!   (`shm*`, `msg*`, `sem*`), which would reach other programs' segments and queues.
//! - Without a private PID namespace ([`Filter::pid_namespace`]): `setpriority`,
//!   `ioprio_set`, `prlimit64`, `sched_setaffinity`/`setscheduler`/`setparam`/`setattr`,
//!   `migrate_pages` and `move_pages` aimed at any process but the caller (pid 0). In a
//!   private PID namespace the kernel resolves pids (and the per-user forms of `setpriority`
//!   and `ioprio_set`) inside it, so only the command's own processes are reachable.
//! - Always: io_uring (its operations — sockets, connects, opens — are invisible to seccomp)
//!   and UNIX *datagram* socket pairs (see below).
//! - Network off: `socket()` of any family but `AF_UNIX`, `connect`, `bind`, `listen`,
//!   `accept`, `sendto` with an address and `sendmmsg`. UNIX *datagram* sockets are refused
//!   too, from `socket()` and `socketpair()`: `sendmsg` carries its destination inside a
//!   `msghdr` that seccomp cannot read, and a datagram socket (even one of a pair) sends to
//!   any named socket path given there — the user's D-Bus, systemd or ssh-agent listeners.
//!   Stream and seqpacket sockets cannot send without `connect`, which is denied. Pipes and
//!   stream `socketpair`s keep working.
//! - Network on: `socket()` only for `AF_INET`, `AF_INET6` and `AF_NETLINK` (`NETLINK_ROUTE`,
//!   which `getaddrinfo` uses to list addresses). No `AF_UNIX` socket can be created, so no
//!   UNIX socket of the user's is reachable — tmux, ssh-agent, gpg-agent, the D-Bus buses,
//!   X11, Wayland, docker/podman, systemd — neither by path nor in the abstract namespace:
//!   `connect` cannot be judged by its address (seccomp cannot read it), and Landlock (ABI 7)
//!   has no rule for pathname sockets, so the only sound cut is at `socket()` (red team B20).
//!   glibc's nscd and `nss-resolve` lookups fall back to files and DNS when their socket
//!   fails; stream `socketpair`s (libuv's and Python's child pipes) keep working. Other
//!   families (`AF_VSOCK`, `AF_PACKET`, `AF_ALG`, Bluetooth…) reach the host's hypervisor,
//!   raw links or kernel services rather than the network, and are refused too.
//! - Read-only policy: metadata changes — the chmod, chown, utime and xattr families.

use std::io;

/// What to deny besides what is always denied.
#[derive(Debug, Clone, Copy)]
pub(super) struct Filter {
    /// Network allowed: keep sockets.
    pub network: bool,
    /// Metadata changes allowed (not read-only).
    pub metadata: bool,
    /// The command runs in its own PID namespace: calls aimed at other processes can only
    /// reach its own.
    pub pid_namespace: bool,
    /// The command runs in its own IPC namespace: System V IPC reaches only its own objects.
    pub ipc_namespace: bool,
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
    /// Linux 6.17: sets the `fsxattr` flags (immutable, append-only) by path.
    const SYS_FILE_SETATTR: i64 = 469;

    const TIOCSTI: u64 = 0x5412;
    const TIOCLINUX: u64 = 0x541C;
    /// `_IOW('f', 2, long)`: set the inode flags (`chattr`).
    const FS_IOC_SETFLAGS: u64 = 0x4008_6602;
    /// `_IOW('f', 2, int)`: the same request as a 32-bit program numbers it.
    const FS_IOC32_SETFLAGS: u64 = 0x4004_6602;
    /// `_IOW('X', 32, struct fsxattr)` (28 bytes): set the extended inode flags.
    const FS_IOC_FSSETXATTR: u64 = 0x401c_5820;
    /// The socket type bits of `socket()`/`socketpair()`'s second argument (the rest are
    /// `SOCK_NONBLOCK`/`SOCK_CLOEXEC`).
    const SOCK_TYPE_MASK: u64 = 0xf;
    const S_IFMT: u64 = 0o170_000;
    const S_IFCHR: u64 = 0o020_000;
    const S_IFBLK: u64 = 0o060_000;
    /// `PRIO_PROCESS` of `setpriority`.
    const PRIO_PROCESS: u64 = 0;
    /// `IOPRIO_WHO_PROCESS` of `ioprio_set`.
    const IOPRIO_WHO_PROCESS: u64 = 1;

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
        ]
    }

    /// io_uring performs socket, connect and open operations the filter never sees.
    fn io_uring_calls() -> Vec<i64> {
        vec![
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
        ]
    }

    /// With the network on: a `socket()` of any family but IPv4, IPv6 and route netlink.
    fn non_network_socket_rules() -> io::Result<Vec<SeccompRule>> {
        let family_ne =
            |family: libc::c_int| cond(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family as u64);
        Ok(vec![
            rule(vec![
                family_ne(libc::AF_INET)?,
                family_ne(libc::AF_INET6)?,
                family_ne(libc::AF_NETLINK)?,
            ])?,
            rule(vec![
                cond(
                    0,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    libc::AF_NETLINK as u64,
                )?,
                cond(
                    2,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Ne,
                    libc::NETLINK_ROUTE as u64,
                )?,
            ])?,
        ])
    }

    /// Calls denied whatever their arguments.
    fn always_denied() -> Vec<i64> {
        vec![
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_keyctl,
            SYS_FILE_SETATTR,
        ]
    }

    fn sysv_ipc_calls() -> Vec<i64> {
        vec![
            libc::SYS_shmget,
            libc::SYS_shmat,
            libc::SYS_shmctl,
            libc::SYS_shmdt,
            libc::SYS_msgget,
            libc::SYS_msgsnd,
            libc::SYS_msgrcv,
            libc::SYS_msgctl,
            libc::SYS_semget,
            libc::SYS_semop,
            libc::SYS_semctl,
            libc::SYS_semtimedop,
        ]
    }

    /// Calls whose first argument names a process (0: the caller).
    fn pid_first_calls() -> Vec<i64> {
        vec![
            libc::SYS_prlimit64,
            libc::SYS_sched_setaffinity,
            libc::SYS_sched_setscheduler,
            libc::SYS_sched_setparam,
            libc::SYS_sched_setattr,
            libc::SYS_migrate_pages,
            libc::SYS_move_pages,
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

    /// One rule per value: 32-bit argument `arg` equal to it.
    fn any_of(arg: u8, values: &[u64]) -> io::Result<Vec<SeccompRule>> {
        values
            .iter()
            .map(|v| {
                rule(vec![cond(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    *v,
                )?])
            })
            .collect()
    }

    /// Denies a call unless 32-bit argument `arg` is 0 (and, when given, argument 0 equals
    /// `kind`): a call aimed at another process.
    fn not_self(arg: u8, kind: Option<u64>) -> io::Result<Vec<SeccompRule>> {
        let mut out = vec![rule(vec![cond(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            0,
        )?])?];
        if let Some(kind) = kind {
            out.push(rule(vec![cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                kind,
            )?])?);
        }
        Ok(out)
    }

    /// A device node: the file-type bits of mode argument `arg` are a character or block
    /// device.
    fn device_mode(arg: u8) -> io::Result<Vec<SeccompRule>> {
        [S_IFCHR, S_IFBLK]
            .into_iter()
            .map(|kind| {
                rule(vec![cond(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(S_IFMT),
                    kind,
                )?])
            })
            .collect()
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
            any_of(
                1,
                &[
                    TIOCSTI,
                    TIOCLINUX,
                    FS_IOC_SETFLAGS,
                    FS_IOC32_SETFLAGS,
                    FS_IOC_FSSETXATTR,
                ],
            )?,
        );
        rules.insert(libc::SYS_mknodat, device_mode(2)?);
        #[cfg(target_arch = "x86_64")]
        rules.insert(libc::SYS_mknod, device_mode(1)?);
        for call in always_denied() {
            // An empty rule list matches every call.
            rules.insert(call, Vec::new());
        }
        if !filter.ipc_namespace {
            for call in sysv_ipc_calls() {
                rules.insert(call, Vec::new());
            }
        }
        if !filter.pid_namespace {
            for call in pid_first_calls() {
                rules.insert(call, not_self(0, None)?);
            }
            rules.insert(libc::SYS_setpriority, not_self(1, Some(PRIO_PROCESS))?);
            rules.insert(libc::SYS_ioprio_set, not_self(1, Some(IOPRIO_WHO_PROCESS))?);
        }
        for call in io_uring_calls() {
            rules.insert(call, Vec::new());
        }
        // A datagram pair sends to any named socket given in `sendmsg` (network on or off).
        rules.insert(libc::SYS_socketpair, unix_datagram_rules()?);
        if filter.network {
            rules.insert(libc::SYS_socket, non_network_socket_rules()?);
        } else {
            for call in network_calls() {
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

    /// `program` behind a guard that refuses (`ENOSYS`) every call made through the x32 ABI
    /// on x86_64: their numbers carry bit 30 and would match none of `program`'s rules. (Other
    /// architectures are killed by `program`'s own architecture check.)
    pub(super) fn with_x32_guard(program: BpfProgram) -> BpfProgram {
        #[cfg(target_arch = "x86_64")]
        {
            use seccompiler::sock_filter;
            const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
            const X32_SYSCALL_BIT: u32 = 0x4000_0000;
            // BPF_LD | BPF_W | BPF_ABS, BPF_JMP | BPF_JEQ | BPF_K, BPF_JMP | BPF_JSET | BPF_K,
            // BPF_RET | BPF_K. struct seccomp_data: nr at 0, arch at 4.
            const LD_W_ABS: u16 = 0x20;
            const JEQ_K: u16 = 0x15;
            const JSET_K: u16 = 0x45;
            const RET_K: u16 = 0x06;
            let op = |code: u16, k: u32, jt: u8, jf: u8| sock_filter { code, jt, jf, k };
            let mut out = vec![
                op(LD_W_ABS, 4, 0, 0),
                // Not x86_64: on to `program`, whose own check kills it.
                op(JEQ_K, AUDIT_ARCH_X86_64, 0, 3),
                op(LD_W_ABS, 0, 0, 0),
                op(JSET_K, X32_SYSCALL_BIT, 0, 1),
                op(RET_K, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32, 0, 0),
            ];
            out.extend(program);
            out
        }
        #[cfg(not(target_arch = "x86_64"))]
        program
    }

    pub(super) fn install(program: &BpfProgram) -> io::Result<()> {
        seccompiler::apply_filter(program)
            .map_err(|e| io::Error::other(format!("cannot install the seccomp filter: {e}")))
    }
}

/// A filter built beforehand, for [`install`] between `fork` and `exec` (the default: none).
#[derive(Debug, Default)]
pub(super) struct Prepared {
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    program: Option<seccompiler::BpfProgram>,
}

/// Builds the filters for `filter`.
pub(super) fn prepare(filter: Filter) -> io::Result<Prepared> {
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    {
        Ok(Prepared {
            program: Some(imp::with_x32_guard(imp::program(filter)?)),
        })
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    {
        let _ = filter;
        Ok(Prepared::default())
    }
}

/// Installs [`prepare`]d filters on the calling thread (setting `no_new_privs`). System calls
/// only, no allocation on success.
pub(super) fn install(prepared: &Prepared) -> io::Result<()> {
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    {
        let Some(program) = &prepared.program else {
            return Ok(());
        };
        seccompiler::apply_filter(program).map_err(|e| match e {
            seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
            _ => io::Error::from_raw_os_error(libc::EINVAL),
        })
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    {
        let _ = prepared;
        Ok(())
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
        imp::install(&imp::with_x32_guard(imp::program(filter)?))
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
                    pid_namespace: false,
                    ipc_namespace: false,
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

/// The filter by itself (without the namespaces that normally come with it): each call is made
/// on a throw-away thread that installed it, and must fail with `EPERM` exactly when denied.
#[cfg(all(
    test,
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[allow(unsafe_code, clippy::unwrap_used, clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// Runs `f` on a fresh thread confined by `filter`; `f` returns each call's errno (0: ok).
    fn under(
        filter: Filter,
        f: impl FnOnce() -> Vec<(&'static str, i32)> + Send + 'static,
    ) -> Vec<(&'static str, i32)> {
        std::thread::spawn(move || {
            apply(filter).unwrap();
            f()
        })
        .join()
        .unwrap()
    }

    fn errno(rc: i64) -> i32 {
        if rc < 0 {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
        } else {
            0
        }
    }

    const NO_NAMESPACES: Filter = Filter {
        network: true,
        metadata: true,
        pid_namespace: false,
        ipc_namespace: false,
    };

    fn calls(other: i32, dir: std::path::PathBuf) -> Vec<(&'static str, i32)> {
        let node = |name: &str| std::ffi::CString::new(dir.join(name).to_str().unwrap()).unwrap();
        let (null, fifo, file) = (node("null"), node("fifo"), node("file"));
        std::fs::write(dir.join("file"), "x").unwrap();
        let mut out = Vec::new();
        // SAFETY: plain system calls with valid pointers to live locals or null where the
        // kernel accepts it; nothing they return is dereferenced.
        unsafe {
            out.push((
                "mknod char",
                errno(libc::mknodat(
                    libc::AT_FDCWD,
                    null.as_ptr(),
                    libc::S_IFCHR | 0o600,
                    libc::makedev(1, 3),
                ) as i64),
            ));
            out.push((
                "mknod fifo",
                errno(
                    libc::mknodat(libc::AT_FDCWD, fifo.as_ptr(), libc::S_IFIFO | 0o600, 0) as i64,
                ),
            ));
            let fd = libc::open(file.as_ptr(), libc::O_RDONLY);
            let mut flags: libc::c_long = 0;
            out.push((
                "getflags",
                errno(libc::ioctl(fd, 0x8008_6601, &mut flags) as i64),
            ));
            out.push((
                "setflags",
                errno(libc::ioctl(fd, 0x4008_6602, &flags) as i64),
            ));
            libc::close(fd);
            out.push(("keyctl", errno(libc::syscall(libc::SYS_keyctl, 0, -4, 0))));
            let shm = libc::shmget(libc::IPC_PRIVATE, 4096, 0o600);
            if shm >= 0 {
                libc::shmctl(shm, libc::IPC_RMID, std::ptr::null_mut());
            }
            out.push(("shmget", errno(shm as i64)));
            out.push((
                "setpriority self",
                errno(libc::setpriority(libc::PRIO_PROCESS, 0, 0) as i64),
            ));
            out.push((
                "setpriority other",
                errno(libc::setpriority(libc::PRIO_PROCESS, other as libc::id_t, 0) as i64),
            ));
            let mut old = std::mem::zeroed::<libc::rlimit64>();
            out.push((
                "prlimit other",
                errno(
                    libc::prlimit64(other, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) as i64,
                ),
            ));
            out.push((
                "prlimit self",
                errno(libc::prlimit64(0, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) as i64),
            ));
        }
        out
    }

    /// `socket(family, type, protocol)`'s errno (0: created, then closed).
    fn socket(family: i32, kind: i32, protocol: i32) -> i32 {
        // SAFETY: plain system calls on integers.
        unsafe {
            let fd = libc::socket(family, kind, protocol);
            if fd >= 0 {
                libc::close(fd);
            }
            errno(fd as i64)
        }
    }

    fn socketpair(kind: i32) -> i32 {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a live array of two descriptors.
        unsafe {
            let rc = libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr());
            if rc == 0 {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
            errno(rc as i64)
        }
    }

    #[test]
    fn with_the_network_on_only_ip_sockets_can_be_created() {
        let got = under(NO_NAMESPACES, || {
            vec![
                ("unix stream", socket(libc::AF_UNIX, libc::SOCK_STREAM, 0)),
                (
                    "unix stream cloexec",
                    socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0),
                ),
                (
                    "unix seqpacket",
                    socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0),
                ),
                ("unix dgram", socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0)),
                ("vsock", socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0)),
                ("packet", socket(libc::AF_PACKET, libc::SOCK_DGRAM, 0)),
                (
                    "netlink audit",
                    socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_AUDIT),
                ),
                ("pair dgram", socketpair(libc::SOCK_DGRAM)),
                ("tcp", socket(libc::AF_INET, libc::SOCK_STREAM, 0)),
                ("udp6", socket(libc::AF_INET6, libc::SOCK_DGRAM, 0)),
                (
                    "netlink route",
                    socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE),
                ),
                ("pair stream", socketpair(libc::SOCK_STREAM)),
                ("io_uring", {
                    // SAFETY: a null params pointer is rejected by the kernel, never read.
                    errno(unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, 0) })
                }),
            ]
        });
        let get = |name: &str| got.iter().find(|(n, _)| *n == name).unwrap().1;
        for name in [
            "unix stream",
            "unix stream cloexec",
            "unix seqpacket",
            "unix dgram",
            "vsock",
            "packet",
            "netlink audit",
            "pair dgram",
            "io_uring",
        ] {
            assert_eq!(get(name), libc::EPERM, "{name}: {got:?}");
        }
        for name in ["tcp", "udp6", "netlink route", "pair stream"] {
            assert_eq!(get(name), 0, "{name}: {got:?}");
        }
    }

    #[test]
    fn without_namespaces_other_processes_and_ipc_are_denied_too() {
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = other.id() as i32;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        let denied = under(NO_NAMESPACES, move || calls(pid, d));
        let d = dir.path().join("ns");
        std::fs::create_dir(&d).unwrap();
        let namespaced = under(
            Filter {
                pid_namespace: true,
                ipc_namespace: true,
                ..NO_NAMESPACES
            },
            move || calls(pid, d),
        );
        let _ = other.kill();
        let _ = other.wait();
        let get = |v: &[(&str, i32)], name: &str| v.iter().find(|(n, _)| *n == name).unwrap().1;
        for name in [
            "mknod char",
            "setflags",
            "keyctl",
            "shmget",
            "setpriority other",
            "prlimit other",
        ] {
            assert_eq!(get(&denied, name), libc::EPERM, "{name}: {denied:?}");
        }
        for name in ["mknod fifo", "getflags", "setpriority self", "prlimit self"] {
            assert_eq!(get(&denied, name), 0, "{name}: {denied:?}");
        }
        // With namespaces, the process calls and System V IPC are the kernel's to scope.
        for name in ["shmget", "setpriority other", "prlimit other"] {
            assert_eq!(get(&namespaced, name), 0, "{name}: {namespaced:?}");
        }
        for name in ["mknod char", "setflags", "keyctl"] {
            assert_eq!(
                get(&namespaced, name),
                libc::EPERM,
                "{name}: {namespaced:?}"
            );
        }
    }
}
