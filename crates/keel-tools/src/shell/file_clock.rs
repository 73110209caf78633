//! The clock file time stamps come from.
//!
//! The kernel stamps a file's birth and change times from its coarse real-time clock, which
//! advances once a tick (4 ms at HZ=250) and so lags the fine clock `SystemTime::now()` reads
//! by up to a tick: a file a command made in its first milliseconds was stamped *before* the
//! `since` Keel had read just before starting it, and the post-command checks took it for the
//! user's (CI failed on it: a new virtual environment stayed). Slack the other way takes a
//! tree the user made just before the command for the command's own.
//!
//! So the checks' `since` is a [`Mark`] of the coarse clock, and the command starts only once
//! that clock has moved past it ([`Mark::wait_past`], at most one tick, most of it spent on
//! the set-up in between): everything made before the mark is stamped at or before it,
//! everything the command makes after it.

use std::time::{Duration, SystemTime};

use rustix::time::{ClockId, Timespec, clock_gettime};

/// A reading of the coarse real-time clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark(Timespec);

impl Mark {
    pub(crate) fn now() -> Self {
        Self(clock_gettime(ClockId::RealtimeCoarse))
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
        let now = clock_gettime(ClockId::RealtimeCoarse);
        (now.tv_sec, now.tv_nsec) > (self.0.tv_sec, self.0.tv_nsec)
    }

    /// Returns once the coarse clock reads later than the mark (bounded: 50 ms, should the
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
                std::fs::metadata(p)
                    .and_then(|m| m.modified())
                    .unwrap_or_else(|e| panic!("{e}"))
            };
            assert!(stamp(&before) <= mark.time(), "{i}");
            assert!(stamp(&after) > mark.time(), "{i}");
        }
    }
}
