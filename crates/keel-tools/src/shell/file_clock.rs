//! The clock file time stamps come from.
//!
//! The kernel stamps a file's birth and change times from its coarse real-time clock, which
//! advances once a tick (4 ms at HZ=250) and so lags the fine clock `SystemTime::now()` reads
//! by up to a tick: a file a command made in its first milliseconds was stamped *before* the
//! `since` Keel had read just before starting it, and the post-command checks took it for the
//! user's (CI failed on it: a new virtual environment stayed). Slack the other way takes a
//! tree the user made just before the command for the command's own.
//!
//! Newer kernels (6.13 on) also hand out a fine-grained stamp to a file whose times were just
//! read, and never a coarse one older than that ("multigrain" stamps), so the coarse clock
//! alone is not the file clock either (a file made just before a mark could be stamped after
//! it). So a [`Mark`] is read from the file clock itself — the change time a private marker file
//! gets when its times are set to "now" — and the command starts only once a second reading is
//! later ([`Mark::wait_past`]: at once where stamps are fine-grained, at most one tick where
//! they are coarse): everything made before the mark is stamped at or before it, everything the
//! command makes after it.

use std::time::{Duration, SystemTime};

use rustix::fs::{Timestamps, UTIME_NOW, fstat, futimens};
use rustix::time::{ClockId, Timespec, clock_gettime};

/// A reading of the clock file time stamps come from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark(Timespec);

/// The marker file (unnamed, in the temporary directory), opened once.
fn marker() -> Option<&'static std::fs::File> {
    static MARKER: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    MARKER.get_or_init(|| tempfile::tempfile().ok()).as_ref()
}

/// Now, by the file clock: the change time the marker gets (the coarse clock where there is
/// no marker).
fn file_now() -> Timespec {
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: UTIME_NOW,
    };
    marker()
        .and_then(|f| {
            futimens(
                f,
                &Timestamps {
                    last_access: now,
                    last_modification: now,
                },
            )
            .ok()?;
            let st = fstat(f).ok()?;
            Some(Timespec {
                tv_sec: st.st_ctime,
                tv_nsec: i64::try_from(st.st_ctime_nsec).unwrap_or(0),
            })
        })
        .unwrap_or_else(|| clock_gettime(ClockId::RealtimeCoarse))
}

impl Mark {
    pub(crate) fn now() -> Self {
        Self(file_now())
    }

    /// The reading as a time: a file stamped after it was made after the mark.
    pub(crate) fn time(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH
            + Duration::new(
                u64::try_from(self.0.tv_sec).unwrap_or(0),
                u32::try_from(self.0.tv_nsec).unwrap_or(0),
            )
    }

    fn passed(&self) -> bool {
        let now = file_now();
        (now.tv_sec, now.tv_nsec) > (self.0.tv_sec, self.0.tv_nsec)
    }

    /// Returns once the file clock reads later than the mark (bounded: 50 ms, should the
    /// clock not move).
    pub(crate) async fn wait_past(&self) {
        for _ in 0..100 {
            if self.passed() {
                return;
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file made once the wait is over is stamped after the mark; one made before it, not.
    #[tokio::test]
    async fn files_made_after_the_wait_are_stamped_after_the_mark() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for i in 0..20 {
            let before = dir.path().join(format!("b{i}"));
            std::fs::write(&before, "").unwrap_or_else(|e| panic!("{e}"));
            let mark = Mark::now();
            mark.wait_past().await;
            let after = dir.path().join(format!("a{i}"));
            std::fs::write(&after, "").unwrap_or_else(|e| panic!("{e}"));
            let stamp = |p: &std::path::Path| {
                let m = std::fs::metadata(p).unwrap_or_else(|e| panic!("{e}"));
                m.created()
                    .unwrap_or_else(|_| m.modified().unwrap_or_else(|e| panic!("{e}")))
            };
            assert!(stamp(&before) <= mark.time(), "{i}");
            assert!(stamp(&after) > mark.time(), "{i}");
        }
    }
}
