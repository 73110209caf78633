//! Persistence for Keel: sessions, their messages, their events and their blockers (questions
//! for a human), behind the [`Store`] trait.
//!
//! [`SqliteStore`] is the embedded default (WAL journal, bundled SQLite): an event appended here
//! is committed before the engine publishes it, so a killed process never loses an event anyone
//! saw. A shared server store (PostgreSQL) can implement the same trait later.
//!
//! The trait is synchronous; async callers run it on a blocking thread. This crate holds no
//! policy: it does not decide what a session's status means.

mod memory;
mod sqlite;
pub mod work;

use keel_protocol::{Event, Message, SessionStatus, Usage};
use serde::{Deserialize, Serialize};

pub use memory::{MAX_MEMORY_CHARS, MemoryEntry, MemoryKind};
pub use sqlite::SqliteStore;

/// A store failure. The message says which operation failed and why.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session store error while {context}: {source}")]
    Sqlite {
        context: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot open the session store at {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("stored data is corrupt ({context}): {reason}")]
    Corrupt { context: String, reason: String },
    #[error("no session matches `{0}`; `keel sessions` lists them")]
    NotFound(String),
    #[error("`{prefix}` matches {count} sessions; give more characters of the id")]
    Ambiguous { prefix: String, count: usize },
    #[error("no blocker matches `{0}`; `keel blocker list --all` lists them")]
    BlockerNotFound(String),
    #[error("`{prefix}` matches {count} blockers; give more characters of the id")]
    AmbiguousBlocker { prefix: String, count: usize },
    /// The operation does not fit the record's state; the message says what to do instead.
    #[error("{0}")]
    Conflict(String),
    /// A PRD or task that does not exist; the message says how to list them.
    #[error("{0}")]
    Missing(String),
}

/// What a new session is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewSession {
    pub id: String,
    pub workspace: String,
    pub task: String,
    pub provider: String,
    pub model: String,
    pub mode: String,
    /// The provider's base URL when one was chosen for this session (`--base-url`), else empty.
    pub base_url: String,
    /// The scripted provider's script, else empty.
    pub script: String,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub workspace: String,
    pub task: String,
    pub provider: String,
    pub model: String,
    pub mode: String,
    pub status: SessionStatus,
    pub iterations: u32,
    pub usage: Usage,
    /// Unix milliseconds.
    pub created_at: u64,
    /// Unix milliseconds.
    pub updated_at: u64,
    /// Process id of the run that last owned the session (to detect interrupted runs).
    pub pid: Option<u32>,
    /// The provider's base URL chosen for this session, else empty.
    #[serde(default)]
    pub base_url: String,
    /// The scripted provider's script, else empty.
    #[serde(default)]
    pub script: String,
}

impl SessionRecord {
    /// `true` when the session says it is running but the process that ran it is gone
    /// (killed, crashed, power loss).
    pub fn is_interrupted(&self) -> bool {
        self.status == SessionStatus::Running && self.pid.is_some_and(|pid| !process_alive(pid))
    }

    /// The status to show a user: `interrupted` for a running session whose process is gone.
    pub fn display_status(&self) -> &'static str {
        if self.is_interrupted() {
            "interrupted"
        } else {
            self.status.as_str()
        }
    }
}

fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

/// Where a blocker is in its life: raised, answered by a human, then delivered to the agent in
/// the session's next run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockerStatus {
    /// Waiting for an answer.
    Open,
    /// Answered; the answer reaches the agent when the session resumes.
    Answered,
    /// The answer was given to the agent.
    Delivered,
}

impl BlockerStatus {
    /// The snake_case name used in JSON and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockerStatus::Open => "open",
            BlockerStatus::Answered => "answered",
            BlockerStatus::Delivered => "delivered",
        }
    }

    /// Parses a stored status name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "open" => BlockerStatus::Open,
            "answered" => BlockerStatus::Answered,
            "delivered" => BlockerStatus::Delivered,
            _ => return None,
        })
    }
}

/// A blocker to record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewBlocker {
    pub id: String,
    pub session_id: String,
    /// The question for the human.
    pub question: String,
    /// Who raised it: `model`, `pattern`, `fix_tracker` or `budget`.
    pub source: String,
    /// What led to it (repeated errors, the matching output line …).
    pub evidence: Vec<String>,
}

/// A stored blocker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockerRecord {
    pub id: String,
    pub session_id: String,
    pub question: String,
    pub source: String,
    pub evidence: Vec<String>,
    pub status: BlockerStatus,
    pub answer: Option<String>,
    /// Unix milliseconds.
    pub created_at: u64,
    /// Unix milliseconds.
    pub answered_at: Option<u64>,
}

/// Persistence for sessions, messages, events and blockers.
pub trait Store: Send + Sync {
    /// Records a new session as running, owned by this process.
    fn create_session(&self, session: &NewSession) -> Result<(), StoreError>;

    /// Updates a session's status, iteration count and usage, and claims it for this process.
    fn update_session(
        &self,
        id: &str,
        status: SessionStatus,
        iterations: u32,
        usage: &Usage,
    ) -> Result<(), StoreError>;

    /// Sets the task of a session created without one (its first message, on the server).
    fn set_session_task(&self, id: &str, task: &str) -> Result<(), StoreError>;

    /// Records the provider, model and mode a session runs with from now on (a model switch
    /// between turns; a mode chosen before the first message), so resuming it reproduces them.
    fn set_session_model(
        &self,
        id: &str,
        provider: &str,
        model: &str,
        mode: &str,
    ) -> Result<(), StoreError>;

    /// Deletes a session with its messages, events and blockers.
    fn delete_session(&self, id: &str) -> Result<(), StoreError>;

    /// Durably appends one event with the next `seq` of its session, assigned here, inside
    /// the write (the `seq` the event carries is ignored), so writers in several processes
    /// never produce a duplicate or a gap. Returns the event as stored.
    fn append_event(&self, event: &Event) -> Result<Event, StoreError>;

    /// Durably appends one message to the session's transcript.
    fn append_message(&self, session_id: &str, message: &Message) -> Result<(), StoreError>;

    /// The most recent sessions first, at most `limit`.
    fn list_sessions(&self, limit: usize) -> Result<Vec<SessionRecord>, StoreError>;

    /// A session by full id or unique id prefix.
    fn get_session(&self, id_or_prefix: &str) -> Result<SessionRecord, StoreError>;

    /// A session's events with `seq > since_seq`, in order.
    fn events(&self, session_id: &str, since_seq: u64) -> Result<Vec<Event>, StoreError>;

    /// A session's messages, in order.
    fn messages(&self, session_id: &str) -> Result<Vec<Message>, StoreError>;

    /// The highest stored seq of a session (0 when none).
    fn last_seq(&self, session_id: &str) -> Result<u64, StoreError>;

    /// Records a new, open blocker.
    fn create_blocker(&self, blocker: &NewBlocker) -> Result<(), StoreError>;

    /// Blockers, oldest first: of one session or of all, and only open ones unless `all`.
    fn list_blockers(
        &self,
        session_id: Option<&str>,
        all: bool,
    ) -> Result<Vec<BlockerRecord>, StoreError>;

    /// A blocker by full id or unique id prefix.
    fn get_blocker(&self, id_or_prefix: &str) -> Result<BlockerRecord, StoreError>;

    /// Stores a human's answer (replacing an earlier one not yet delivered) and returns the
    /// updated blocker.
    fn answer_blocker(&self, id_or_prefix: &str, answer: &str)
    -> Result<BlockerRecord, StoreError>;

    /// Marks answered blockers as delivered to the agent.
    fn mark_blockers_delivered(&self, ids: &[String]) -> Result<(), StoreError>;

    /// The user memory and promoted lessons to inject into a new session, oldest first.
    /// Stores without a memory table have none.
    fn memory_entries(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        Ok(Vec::new())
    }

    /// Keeps a session's oversized tool result whole under `handle` (session working
    /// memory). Stores without it say so; the engine then keeps it for the run only.
    fn save_result(&self, session_id: &str, handle: &str, content: &str) -> Result<(), StoreError> {
        let _ = (session_id, handle, content);
        Err(StoreError::Conflict(
            "this store cannot keep tool results; they last for the run".into(),
        ))
    }

    /// A session's stored tool results, `(handle, content)`, oldest first.
    fn stored_results(&self, session_id: &str) -> Result<Vec<(String, String)>, StoreError> {
        let _ = session_id;
        Ok(Vec::new())
    }
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
