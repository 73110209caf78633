//! The read-only lane: a command that runs without asking only because the analyser rated it
//! read-only runs in the read-only sandbox (red-team pass 2's structural fix for R7, R9 and
//! every later classifier miss). When such a command tries to write, its result says so, and
//! the same call asks next time, so a person can let it write.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Why a call that tried to write in the read-only lane asks.
pub(super) const ESCALATION_REASON: &str = "it looked read-only, so it ran without asking in the read-only sandbox, and it tried to write; approve to let it write the workspace";

/// The lane's state for one session.
#[derive(Debug, Default)]
pub(super) struct Lane {
    /// Calls running read-only now: call id → approval key (`tool` + summary).
    running: Mutex<HashMap<String, String>>,
    /// Keys of calls that tried to write when they ran read-only.
    tried: Mutex<HashSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Lane {
    /// The call `id` (approval key `key`) runs read-only.
    pub(super) fn started(&self, id: &str, key: String) {
        lock(&self.running).insert(id.to_string(), key);
    }

    /// Whether the call with approval key `key` tried to write when it last ran read-only.
    pub(super) fn tried_to_write(&self, key: &str) -> bool {
        lock(&self.tried).contains(key)
    }

    /// The call `id` finished with `output`. When it ran read-only and a write was refused
    /// there, the note the model reads (and the same call asks next time).
    pub(super) fn finished(&self, id: &str, output: &str) -> Option<String> {
        let key = lock(&self.running).remove(id)?;
        let line = refused_write(output)?;
        lock(&self.tried).insert(key);
        Some(format!(
            "note: this command ran in the read-only sandbox: it was allowed without asking only because it looked read-only, and it tried to write ({line}). If it has to write, run the same command again: the user will be asked to let it write."
        ))
    }
}

/// The first line of `output` showing a write the read-only sandbox refused, shortened.
fn refused_write(output: &str) -> Option<String> {
    let line = output
        .lines()
        .find(|l| l.contains("Read-only file system"))?
        .trim();
    let mut short: String = line.chars().take(160).collect();
    if short.len() < line.len() {
        short.push('…');
    }
    Some(format!("`{short}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_write_is_named_and_the_next_call_asks() {
        let lane = Lane::default();
        lane.started("a", "run_command\0ls".into());
        assert_eq!(lane.finished("a", "exit code: 0\nstdout:\nREADME.md"), None);
        assert!(!lane.tried_to_write("run_command\0ls"));
        lane.started("b", "run_command\0awk".into());
        let note = lane
            .finished(
                "b",
                "exit code: 2\nstderr:\nawk: cmd. line:1: fatal: can't redirect to `f' (Read-only file system)",
            )
            .unwrap_or_default();
        assert!(note.contains("can't redirect to `f'"), "{note}");
        assert!(note.contains("run the same command again"), "{note}");
        assert!(lane.tried_to_write("run_command\0awk"));
        // A call that did not run read-only is not the lane's.
        assert_eq!(lane.finished("c", "Read-only file system"), None);
    }
}
