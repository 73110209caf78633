//! A bound on the disk a command may fill (red-team pass 6, R6-8: `head -c 100G /dev/zero >
//! f`, or a runaway log, filled the disk the user's other programs — and Keel's own database —
//! write to; the sandbox bounds processes and memory, not bytes). While a command that may write
//! runs, the runner looks at the free space of every file system it can write (the workspace,
//! its private temp dir — often a `tmpfs`, that is memory — and `shell.writable` trees) four
//! times a second, and stops the command when one falls below its **reserve**: 5% of the file
//! system or 1 GiB, whichever is more — but never more than half of what was free when Keel
//! first watched that file system (a disk already nearly full still lets commands write half of
//! what was left; not half again per command, R11-9).
//! The command's result says which file system and how much was left.
//!
//! Free **inodes** are watched the same way (red-team pass 10, R10-8: empty files took every
//! inode of the file system with most of its bytes still free, and every later write — the
//! store's, the file tools', the user's — failed): the reserve is 5% of the file system's
//! inodes or 100,000, never more than half of those free when Keel first watched it.
//!
//! And the machine's **memory** (red-team pass 8, R8-14: the per-process `RLIMIT_DATA` is half
//! the machine; two processes of one command — or a `cargo` reading a config linked to
//! `/dev/zero` — took most of it, and the kernel's OOM killer then picks among the user's
//! programs): the command is stopped when the memory the kernel says is available
//! (`MemAvailable`) falls below 5% of the machine or 512 MiB, whichever is more — never more
//! than half of what was available when it started. One rule for the command's whole tree,
//! whatever its processes, namespaces or user; no cgroup needed.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often free space is looked at.
const EVERY: Duration = Duration::from_millis(250);
/// The least reserve kept on a file system.
const MIN_RESERVE: u64 = 1024 * 1024 * 1024;

/// The least reserve of inodes kept on a file system.
const MIN_INODES: u64 = 100_000;

/// The least memory kept available on the machine.
const MIN_MEMORY: u64 = 512 * 1024 * 1024;

/// The machine's available and total memory in bytes (`/proc/meminfo`), when known.
// The kernel's own file, not a project's or the user's: read as it is.
#[allow(clippy::disallowed_methods)]
fn memory() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kb| kb.saturating_mul(1024))
    };
    Some((field("MemAvailable:")?, field("MemTotal:")?))
}

/// The file systems a command may write, each with the free space and the free inodes it must
/// leave.
#[derive(Debug, Default)]
pub(crate) struct DiskWatch {
    watched: Vec<(PathBuf, u64, u64)>,
    /// The memory to keep available on the machine (bytes), when it can be read.
    memory_reserve: Option<u64>,
}

fn free_and_total(path: &Path) -> Option<(u64, u64, u64)> {
    let st = rustix::fs::statvfs(path).ok()?;
    let unit = st.f_frsize.max(1);
    Some((
        st.f_bavail.saturating_mul(unit),
        st.f_blocks.saturating_mul(unit),
        st.f_fsid,
    ))
}

/// Free inodes (for an unprivileged writer) and all of them; `(0, 0)` where the file system
/// does not count them (a `tmpfs` may not: then they are not watched).
fn inodes(path: &Path) -> (u64, u64) {
    rustix::fs::statvfs(path).map_or((0, 0), |st| (st.f_favail, st.f_files))
}

/// The bytes an unprivileged writer may still put on the file system holding `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    free_and_total(path).map(|(free, _, _)| free)
}

/// The reserve of a file system of `total` (bytes or inodes) of which `first_free` were free
/// when Keel first watched it: 5% or `least`, whichever is more, never more than half of
/// `first_free`.
fn reserve_of(least: u64, total: u64, first_free: u64) -> u64 {
    least.max(total / 20).min(first_free / 2)
}

/// What was free (bytes, inodes) on the file system `fsid` when this process first watched
/// it; `free` and `inodes` when that is now.
fn first_seen(fsid: u64, free: u64, inodes: u64) -> (u64, u64) {
    static FIRST: std::sync::Mutex<Vec<(u64, u64, u64)>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut first) = FIRST.lock() else {
        return (free, inodes);
    };
    if let Some((_, f, i)) = first.iter().find(|(id, _, _)| *id == fsid) {
        return (*f, *i);
    }
    first.push((fsid, free, inodes));
    (free, inodes)
}

impl DiskWatch {
    /// Notes the free space of the file systems holding `paths` now. `allowance`: the most
    /// bytes the command may take from each (a test's small bound); `None`: the reserve rule.
    /// `inode_allowance`: likewise for inodes.
    pub(crate) fn new(
        paths: &[PathBuf],
        allowance: Option<u64>,
        inode_allowance: Option<u64>,
        memory_allowance: Option<u64>,
    ) -> Self {
        let mut seen = Vec::new();
        let mut watched = Vec::new();
        for p in paths {
            let Some((free, total, fsid)) = free_and_total(p) else {
                continue;
            };
            if seen.contains(&fsid) || total == 0 {
                continue;
            }
            seen.push(fsid);
            let (free_inodes, all_inodes) = inodes(p);
            // Half of what was free when Keel first watched this file system, not when this
            // command started: halving per command let seven commands fill a disk to 0
            // (red-team pass 11, R11-9).
            let (first_free, first_inodes) = first_seen(fsid, free, free_inodes);
            let reserve = match allowance {
                Some(a) => free.saturating_sub(a),
                None => reserve_of(MIN_RESERVE, total, first_free),
            };
            let inode_reserve = match inode_allowance {
                Some(a) => free_inodes.saturating_sub(a),
                None => reserve_of(MIN_INODES, all_inodes, first_inodes),
            };
            watched.push((p.clone(), reserve, inode_reserve));
        }
        let memory_reserve = memory().map(|(available, total)| match memory_allowance {
            Some(a) => available.saturating_sub(a),
            None => MIN_MEMORY.max(total / 20).min(available / 2),
        });
        Self {
            watched,
            memory_reserve,
        }
    }

    /// Resolves when a watched file system's free space falls below its reserve, with the
    /// note for the command's result; never when nothing is watched.
    pub(crate) async fn exhausted(&self) -> String {
        if self.watched.is_empty() && self.memory_reserve.is_none() {
            return std::future::pending().await;
        }
        loop {
            tokio::time::sleep(EVERY).await;
            if let Some(reserve) = self.memory_reserve
                && let Some((available, _)) = memory()
                && available < reserve
            {
                return format!(
                    "keel: the command was stopped: while it ran, the memory available on this machine fell to {} MiB (Keel keeps {} MiB available for everything else). Use less memory (fewer parallel jobs, smaller inputs), or ask the user to run it.",
                    available / (1024 * 1024),
                    reserve / (1024 * 1024)
                );
            }
            for (path, reserve, inode_reserve) in &self.watched {
                let Some((free, _, _)) = free_and_total(path) else {
                    continue;
                };
                let (free_inodes, all_inodes) = inodes(path);
                if all_inodes > 0 && free_inodes < *inode_reserve {
                    return format!(
                        "keel: the command was stopped: it created files on the file system holding {} until only {free_inodes} inodes (files) were left free (Keel keeps {inode_reserve} free there for everything else). Create fewer files, and remove those it made.",
                        path.display(),
                    );
                }
                if free < *reserve {
                    return format!(
                        "keel: the command was stopped: it filled the file system holding {} until only {} MiB were left free (Keel keeps {} MiB free there for everything else). Write less, or write large outputs elsewhere and say so to the user.",
                        path.display(),
                        free / (1024 * 1024),
                        reserve / (1024 * 1024)
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod reserve_tests {
    use super::*;

    /// Seven commands that each write down to the reserve leave half of what was free at the
    /// first, not 0 (R11-9: 113, 55, 27, 16, 5, 5, 13 MiB filled a 230 MiB disk).
    #[test]
    fn commands_one_after_another_never_take_the_reserve() {
        let mib = 1024 * 1024;
        let (total, first) = (230 * mib, 220 * mib);
        let mut free = first;
        for _ in 0..7 {
            let floor = reserve_of(MIN_RESERVE, total, first);
            free = free.min(floor);
        }
        assert_eq!(free, 110 * mib);
        assert_eq!(first_seen(u64::MAX - 7, 10, 20), (10, 20));
        assert_eq!(first_seen(u64::MAX - 7, 4, 5), (10, 20));
    }
}
