//! Descriptors a command must not inherit. Landlock checks paths when a file is opened and
//! seccomp stops new connections, but neither stops `read`, `write` or `send` on a descriptor
//! that is already open: a file outside the workspace, a secret, a connected socket that
//! Keel's own parent left open without `O_CLOEXEC` (a jobserver pipe, an editor's IPC socket,
//! `exec 9<>/dev/tcp/…` in a wrapper script) would reach every command. So every program Keel
//! starts gets only its standard input, output and error: [`close_on_exec_above_stderr`]
//! marks every other descriptor close-on-exec in the child, right before `exec`.

use std::io;

const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Marks every descriptor above 2 close-on-exec (`close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`,
/// Linux 5.11; one `fcntl` per open descriptor before that). System calls only, no
/// allocation: it runs between `fork` and `exec`.
#[allow(unsafe_code)]
pub fn close_on_exec_above_stderr() -> io::Result<()> {
    // SAFETY: `close_range` takes three integers and touches no memory of ours.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    // An older kernel: every possible descriptor, one at a time.
    let mut rlim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes one `struct rlimit` into `rlim`, which lives on our stack.
    let limit = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rlim) } == 0 {
        rlim.rlim_cur.min(1 << 20)
    } else {
        1 << 20
    };
    for fd in 3..limit {
        let Ok(fd) = libc::c_int::try_from(fd) else {
            break;
        };
        // SAFETY: `fcntl(F_GETFD/F_SETFD)` on a descriptor number that may or may not be
        // open: an unopened one fails with EBADF, nothing else happens.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            // SAFETY: as above.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}
