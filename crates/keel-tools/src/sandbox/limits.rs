//! How many processes and how much memory one confined command may take (red team B9: a fork
//! storm exhausted the machine's PIDs and a memory hog woke the OOM killer, which may pick
//! Keel or the user's other programs).
//!
//! - **Processes**: the command's own PID namespace gets a `pid_max` of its own (Linux ≥ 6.14
//!   namespaces it): past [`Limits::processes`] processes and threads, `fork` and `clone`
//!   fail with `EAGAIN` inside the command while the rest of the machine is untouched. It is
//!   written by the namespace's first process, which holds `CAP_SYS_ADMIN` over it (root's
//!   command itself, the helper's init in its user namespace), before `/proc/sys` is made
//!   read-only. On older kernels the value would be the whole machine's, so it is never
//!   written there: a normal user's command gets `RLIMIT_NPROC` instead (counted in its own
//!   user namespace), and root's has no process limit (the kernel ignores `RLIMIT_NPROC` for
//!   root) — `keel doctor` says which holds.
//! - **Memory**: every process of the command gets `RLIMIT_DATA` = [`Limits::memory_mb`]
//!   (its heap and private writable mappings; reservations without access, as V8, the JVM and
//!   Go make them, do not count) and `oom_score_adj` 1000, so that if the machine runs out of
//!   memory anyway (many processes each under the limit) the kernel kills the command first,
//!   never Keel.
//!
//! Everything here runs between `fork` and `exec` too: system calls on data prepared before.

use std::io;

/// The default process limit: processes and threads of one command (a parallel build of a
/// large project stays far below it; a fork storm stops at it).
pub const DEFAULT_MAX_PROCESSES: u32 = 4096;

/// The smallest process limit the kernel accepts as a namespace's `pid_max` (301, minus the
/// namespace's first process).
pub const MIN_MAX_PROCESSES: u32 = 300;

/// What one confined command may take; 0 means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Processes and threads alive at once (`shell.max_processes`).
    pub processes: u32,
    /// Memory per process in MiB (`shell.max_memory_mb`).
    pub memory_mb: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            processes: DEFAULT_MAX_PROCESSES,
            memory_mb: default_memory_mb(),
        }
    }
}

impl Limits {
    /// No limit at all (the user's own unconfined programs).
    pub const NONE: Limits = Limits {
        processes: 0,
        memory_mb: 0,
    };
}

/// Half of this machine's physical memory in MiB (0 when unknown: no limit).
pub fn default_memory_mb() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sysconf` takes an integer and returns one.
        #[allow(unsafe_code)]
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        match (u64::try_from(pages), u64::try_from(size)) {
            (Ok(p), Ok(s)) if p > 0 && s > 0 => p.saturating_mul(s) / 2 / (1024 * 1024),
            _ => 0,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// True when this kernel keeps a `pid_max` per PID namespace (Linux 6.14 and later), so that
/// writing it inside the command's namespace limits that namespace only.
pub fn pid_max_per_namespace() -> bool {
    #[cfg(not(target_os = "linux"))]
    return false;
    #[cfg(target_os = "linux")]
    let release = rustix::system::uname();
    let release = release.release().to_string_lossy();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (6, 14)
}

/// [`Limits`] ready to apply without allocating.
#[derive(Debug, Clone, Default)]
pub(super) struct Prepared {
    /// The namespace's `pid_max`, as the text written to `/proc/sys/kernel/pid_max`.
    pid_max: Option<([u8; 12], usize)>,
    /// `RLIMIT_NPROC` when the namespace's `pid_max` is not available.
    nproc: Option<u64>,
    /// `RLIMIT_DATA` in bytes.
    data: Option<u64>,
    /// Raise `oom_score_adj` to 1000.
    oom_first: bool,
}

impl Prepared {
    /// For a command in its own PID namespace when `pid_namespace` (else `RLIMIT_NPROC`
    /// stands in for the process limit).
    pub(super) fn new(limits: Limits, pid_namespace: bool, confined: bool) -> Self {
        let mut out = Prepared {
            oom_first: confined,
            ..Prepared::default()
        };
        if !confined {
            return out;
        }
        if limits.processes > 0 {
            let n = limits.processes.max(MIN_MAX_PROCESSES);
            if pid_namespace && pid_max_per_namespace() {
                // Pids 1 (the namespace's first process) to n + 1.
                let text = (u64::from(n) + 2).to_string();
                let mut buf = [0u8; 12];
                let len = text.len().min(buf.len());
                buf[..len].copy_from_slice(&text.as_bytes()[..len]);
                out.pid_max = Some((buf, len));
            } else {
                out.nproc = Some(u64::from(n));
            }
        }
        if limits.memory_mb > 0 {
            out.data = Some(limits.memory_mb.saturating_mul(1024 * 1024));
        }
        out
    }

    /// True when the process limit is the namespace's `pid_max`.
    #[cfg(test)]
    fn uses_pid_max(&self) -> bool {
        self.pid_max.is_some()
    }

    /// In the PID namespace's first process, while it holds `CAP_SYS_ADMIN` over the namespace
    /// and `/proc/sys` is still writable: the namespace's `pid_max`.
    pub(super) fn apply_pid_max(&self) -> io::Result<()> {
        let Some((buf, len)) = &self.pid_max else {
            return Ok(());
        };
        write_proc(c"/proc/sys/kernel/pid_max", &buf[..*len])
            .map_err(|e| io::Error::new(e.kind(), format!("cannot limit processes: {e}")))
    }

    /// In the command's process before `exec` (inherited by everything it starts): the
    /// rlimits and the OOM score.
    pub(super) fn apply_to_command(&self) -> io::Result<()> {
        use rustix::process::{Resource, Rlimit, setrlimit};
        let limit = |n: u64| Rlimit {
            current: Some(n),
            maximum: Some(n),
        };
        if let Some(n) = self.nproc {
            setrlimit(Resource::Nproc, limit(n))?;
        }
        if let Some(n) = self.data {
            setrlimit(Resource::Data, limit(n))?;
        }
        if self.oom_first {
            // Raising one's own score needs no privilege; a kernel without the file is fine.
            match write_proc(c"/proc/self/oom_score_adj", b"1000") {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Writes `value` to a `/proc` file. System calls only.
fn write_proc(path: &std::ffi::CStr, value: &[u8]) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags, open};
    let fd = open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, value)?;
    Ok(())
}

/// The note for a command that seems to have run into `limits`, judged by its `output` and
/// how it ended (`killed`: by `SIGKILL`, not by Keel).
pub fn limit_note(limits: Limits, output: &str, killed: bool) -> Option<String> {
    const FORK: &[&str] = &[
        "Resource temporarily unavailable",
        "fork: retry",
        "Cannot fork",
        "BlockingIOError",
        "can't fork",
        "failed to spawn thread",
        "pthread_create failed",
        "unable to create native thread",
    ];
    const MEMORY: &[&str] = &[
        "Cannot allocate memory",
        "MemoryError",
        "memory allocation of",
        "std::bad_alloc",
        "out of memory",
        "Out of memory",
    ];
    let has = |needles: &[&str]| needles.iter().any(|n| output.contains(n));
    if limits.processes > 0 && has(FORK) {
        return Some(format!(
            "note: the command may have hit Keel's limit of {} processes and threads per \
             command (`shell.max_processes` in your own config; starting more fails with \
             \"Resource temporarily unavailable\"). Run fewer at once (e.g. a lower -j), or \
             raise the limit.",
            limits.processes.max(MIN_MAX_PROCESSES)
        ));
    }
    if limits.memory_mb > 0 && (has(MEMORY) || killed) {
        return Some(format!(
            "note: the command may have run out of memory: Keel limits each of its processes \
             to {} MiB (`shell.max_memory_mb` in your own config; allocations past it fail), \
             and when the machine runs short the kernel kills commands before anything else. \
             Use less memory, or raise the limit.",
            limits.memory_mb
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_names_the_limit_that_was_hit() {
        let limits = Limits {
            processes: 500,
            memory_mb: 256,
        };
        let fork = limit_note(
            limits,
            "bash: fork: retry: Resource temporarily unavailable",
            false,
        )
        .unwrap_or_default();
        assert!(fork.contains("500 processes"), "{fork}");
        assert!(fork.contains("shell.max_processes"), "{fork}");
        let mem = limit_note(limits, "MemoryError\n", false).unwrap_or_default();
        assert!(mem.contains("256 MiB"), "{mem}");
        let killed = limit_note(limits, "", true).unwrap_or_default();
        assert!(killed.contains("shell.max_memory_mb"), "{killed}");
        assert_eq!(limit_note(limits, "all fine\n", false), None);
        assert_eq!(limit_note(Limits::NONE, "MemoryError", true), None);
    }

    #[test]
    fn pid_max_is_only_used_where_the_kernel_namespaces_it() {
        let limits = Limits {
            processes: 10,
            memory_mb: 0,
        };
        let p = Prepared::new(limits, true, true);
        assert_eq!(p.uses_pid_max(), pid_max_per_namespace());
        if let Some((buf, len)) = p.pid_max {
            // Clamped to the kernel's minimum.
            assert_eq!(&buf[..len], b"302");
        } else {
            assert_eq!(p.nproc, Some(u64::from(MIN_MAX_PROCESSES)));
        }
        let outside = Prepared::new(limits, false, true);
        assert!(!outside.uses_pid_max());
        assert_eq!(outside.nproc, Some(300));
        assert!(!Prepared::new(limits, true, false).oom_first);
    }
}
