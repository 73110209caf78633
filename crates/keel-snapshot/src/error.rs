//! What can go wrong with a snapshot, undo or redo; each message says what to do.

/// A snapshot failure. The message says what failed and what to do.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(
        "git is not installed (or not on PATH); snapshots and undo need it: install git (e.g. `apt-get install git`), or set `[snapshots] enabled = false`"
    )]
    GitMissing,
    #[error("`git {command}` failed in {dir}: {message}")]
    Git {
        command: String,
        dir: String,
        message: String,
    },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{0}` cannot name a snapshot: use letters, digits, `-` and `_` only")]
    BadName(String),
    #[error(
        "session {0} has no snapshots in this workspace (it changed no files, or ran with snapshots off); `keel snapshots` lists them"
    )]
    NoSnapshots(String),
    #[error(
        "session {session} changed no files after turn {turn} (its last snapshot is turn {last}); nothing to undo"
    )]
    NothingAfter {
        session: String,
        turn: u32,
        last: u32,
    },
    #[error(
        "the workspace is already at session {session}'s first snapshot (turn {turn}, before it changed anything); there is nothing older to restore (`keel undo --redo` brings back what the last undo replaced)"
    )]
    AtOldest { session: String, turn: u32 },
    #[error("session {0} has no undo to redo")]
    NothingToRedo(String),
    #[error(
        "the workspace changed since session {session}'s last undo, so redoing it would overwrite those changes; the state that undo replaced is kept as commit {commit} (`git checkout {commit} -- .` restores it by hand)"
    )]
    RedoStale { session: String, commit: String },
    #[error("the restore of {commit} did not give the snapshot back exactly: {detail}")]
    Mismatch { commit: String, detail: String },
}
