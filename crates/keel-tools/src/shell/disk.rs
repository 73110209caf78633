//! A bound on the disk a command may fill (red-team pass 6, R6-8: `head -c 100G /dev/zero >
//! f`, or a runaway log, filled the disk the user's other programs — and Keel's own database —
//! write to; the sandbox bounds processes and memory, not bytes). While a command that may write
//! runs, the runner looks at the free space of every file system it can write (the workspace,
//! its private temp dir — often a `tmpfs`, that is memory — and `shell.writable` trees) four
//! times a second, and stops the command when one falls below its **reserve**: 5% of the file
//! system or 1 GiB, whichever is more — but never more than half of what was free when the
//! command started (a disk already nearly full still lets a command write half of what is left).
//! The command's result says which file system and how much was left.
//!
//! Free **inodes** are watched the same way (red-team pass 10, R10-8: empty files took every
//! inode of the file system with most of its bytes still free, and every later write — the
//! store's, the file tools', the user's — failed): the reserve is 5% of the file system's
//! inodes or 100,000, never more than half of those free at the start.
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
            let reserve = match allowance {
                Some(a) => free.saturating_sub(a),
                None => MIN_RESERVE.max(total / 20).min(free / 2),
            };
            let (free_inodes, all_inodes) = inodes(p);
            let inode_reserve = match inode_allowance {
                Some(a) => free_inodes.saturating_sub(a),
                None => MIN_INODES.max(all_inodes / 20).min(free_inodes / 2),
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
