//! Persistence for Keel: sessions, their messages, their events and their blockers (questions
//! for a human), behind the [`Store`] trait.
//!
//! [`SqliteStore`] is the embedded default (WAL journal, bundled SQLite): an event appended here
//! is committed before the engine publishes it, so a killed process never loses an event anyone
//! saw. [`PgStore`] (cargo feature `postgres`) is the shared server store: the same trait on
//! PostgreSQL, with versioned migrations applied by `keel db migrate`.
//!
//! The trait is async (boxed futures, so `Arc<dyn Store>` works); the SQLite store runs its
//! work on tokio's blocking pool. "Is this session's run alive" is a lease row renewed by a
//! heartbeat ([`RunLease`]), so it holds across processes and machines. This crate holds no
//! policy: it does not decide what a session's status means.

mod delegate;
pub mod eval;
pub mod flow;
mod lease;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
pub mod private;
mod repo;
mod sqlite;
pub mod time;
pub mod work;

use keel_protocol::{Event, Message, SessionStatus, Usage};
use serde::{Deserialize, Serialize};

pub use lease::{ExpiryWatch, LEASE_TTL_MS, RunLease, holder_is_gone, lease_holder};

/// For [`delegate_store!`]'s paths.
#[doc(hidden)]
pub use keel_protocol as __protocol;
pub use memory::{MAX_MEMORY_CHARS, MemoryEntry, MemoryKind};
#[cfg(feature = "postgres")]
pub use postgres::{AppliedMigration, EVENTS_CHANNEL, EventNotices, Notice, PgStore};
pub use repo::{DEFAULT_REF, RemoteAccess, RepoSource, redact_url};
pub use sqlite::{SqliteDb, SqliteStore};

/// A store failure. The message says which operation failed and why.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session store error while {context}: {source}")]
    Sqlite {
        context: String,
        #[source]
        source: rusqlite::Error,
    },
    /// A PostgreSQL store failure (the driver's message, never the connection password).
    #[error("database error while {context}: {reason}")]
    Database { context: String, reason: String },
    /// The database cannot be reached right now (connection refused or lost, the server
    /// shutting down or starting up): retrying once it is back may work.
    #[error(
        "the database is unreachable while {context} ({reason}); it may be restarting: retry shortly"
    )]
    Unavailable { context: String, reason: String },
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
    /// The store's own machinery failed (a worker thread panicked); retrying may help.
    #[error("internal store error: {0}")]
    Internal(String),
}

impl StoreError {
    /// `true` when the database could not be reached (see [`StoreError::Unavailable`]).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
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
    /// The git remote and ref the session's workspace is checked out of (queue mode), if any.
    pub repo: Option<RepoSource>,
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
    /// The run lease of the session, when one is recorded: a running session whose lease
    /// expired lost its run (killed, crashed, power loss).
    #[serde(default)]
    pub lease: Option<Lease>,
    /// The provider's base URL chosen for this session, else empty.
    #[serde(default)]
    pub base_url: String,
    /// The scripted provider's script, else empty.
    #[serde(default)]
    pub script: String,
    /// The git remote and ref a worker checks the session's workspace out of, instead of
    /// `workspace` (queue mode; see `keel-queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<RepoSource>,
}

impl SessionRecord {
    /// `true` when the session says it is running but no live run holds its lease (the
    /// process that ran it was killed, crashed or lost power).
    pub fn is_interrupted(&self) -> bool {
        self.status == SessionStatus::Running && !self.lease.as_ref().is_some_and(Lease::is_live)
    }

    /// The status to show a user: `interrupted` for a running session whose run is gone.
    pub fn display_status(&self) -> &'static str {
        if self.is_interrupted() {
            "interrupted"
        } else {
            self.status.as_str()
        }
    }
}

/// Who runs a session, until when. A holder renews its lease while it runs (a heartbeat) and
/// releases it at the end; a holder that died stops renewing, so its lease expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The run holding it: `host:pid:run id`.
    pub holder: String,
    /// Unix milliseconds.
    pub expires_at: u64,
}

impl Lease {
    /// Not expired yet (by this machine's clock), and its holder's process, when it ran on
    /// this machine, is still there.
    pub fn is_live(&self) -> bool {
        self.expires_at > now_ms() && !lease::holder_is_gone(&self.holder)
    }
}

/// Who works in a workspace now: the session whose run holds the workspace's lease (one run
/// at a time per workspace, whichever process or machine), until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceLease {
    /// The workspace's absolute path.
    pub workspace: String,
    /// The session running there.
    pub session_id: String,
    /// The run holding it: `host:pid:run id`.
    pub holder: String,
    /// Unix milliseconds.
    pub expires_at: u64,
}

impl WorkspaceLease {
    /// Not expired yet (by this machine's clock), and its holder's process, when it ran on
    /// this machine, is still there.
    pub fn is_live(&self) -> bool {
        self.expires_at > now_ms() && !lease::holder_is_gone(&self.holder)
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

/// A boxed, sendable future of a store operation (keeps [`Store`] usable as `Arc<dyn Store>`).
pub type StoreFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Persistence for sessions, messages, events, blockers and run leases.
///
/// Every method is async: an implementation never blocks the caller's runtime thread (the
/// SQLite store runs its work on tokio's blocking pool).
pub trait Store: Send + Sync {
    /// Records a new session as running.
    fn create_session<'a>(&'a self, session: &'a NewSession) -> StoreFuture<'a, ()>;

    /// Updates a session's status, iteration count and usage.
    fn update_session<'a>(
        &'a self,
        id: &'a str,
        status: SessionStatus,
        iterations: u32,
        usage: &'a Usage,
    ) -> StoreFuture<'a, ()>;

    /// Sets the task of a session created without one (its first message, on the server).
    fn set_session_task<'a>(&'a self, id: &'a str, task: &'a str) -> StoreFuture<'a, ()>;

    /// Records the provider, model and mode a session runs with from now on (a model switch
    /// between turns; a mode chosen before the first message), so resuming it reproduces them.
    fn set_session_model<'a>(
        &'a self,
        id: &'a str,
        provider: &'a str,
        model: &'a str,
        mode: &'a str,
    ) -> StoreFuture<'a, ()>;

    /// Deletes a session with its messages, events, blockers and lease.
    fn delete_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()>;

    /// Durably appends one event with the next `seq` of its session, assigned here, inside
    /// the write (the `seq` the event carries is ignored), so writers in several processes
    /// never produce a duplicate or a gap. Returns the event as stored.
    fn append_event<'a>(&'a self, event: &'a Event) -> StoreFuture<'a, Event>;

    /// Durably appends one message to the session's transcript.
    fn append_message<'a>(
        &'a self,
        session_id: &'a str,
        message: &'a Message,
    ) -> StoreFuture<'a, ()>;

    /// The most recent sessions first, at most `limit`.
    fn list_sessions(&self, limit: usize) -> StoreFuture<'_, Vec<SessionRecord>>;

    /// A session by full id or unique id prefix.
    fn get_session<'a>(&'a self, id_or_prefix: &'a str) -> StoreFuture<'a, SessionRecord>;

    /// A session's events with `seq > since_seq`, in order.
    fn events<'a>(&'a self, session_id: &'a str, since_seq: u64) -> StoreFuture<'a, Vec<Event>>;

    /// A session's messages, in order.
    fn messages<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>>;

    /// The highest stored seq of a session (0 when none).
    fn last_seq<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, u64>;

    /// Records a new, open blocker.
    fn create_blocker<'a>(&'a self, blocker: &'a NewBlocker) -> StoreFuture<'a, ()>;

    /// Blockers, oldest first: of one session or of all, and only open ones unless `all`.
    fn list_blockers<'a>(
        &'a self,
        session_id: Option<&'a str>,
        all: bool,
    ) -> StoreFuture<'a, Vec<BlockerRecord>>;

    /// A blocker by full id or unique id prefix.
    fn get_blocker<'a>(&'a self, id_or_prefix: &'a str) -> StoreFuture<'a, BlockerRecord>;

    /// Stores a human's answer (replacing an earlier one not yet delivered) and returns the
    /// updated blocker.
    fn answer_blocker<'a>(
        &'a self,
        id_or_prefix: &'a str,
        answer: &'a str,
    ) -> StoreFuture<'a, BlockerRecord>;

    /// Marks answered blockers as delivered to the agent.
    fn mark_blockers_delivered<'a>(&'a self, ids: &'a [String]) -> StoreFuture<'a, ()>;

    /// The user memory and promoted lessons to inject into a new session, oldest first.
    fn memory_entries(&self) -> StoreFuture<'_, Vec<MemoryEntry>>;

    /// Keeps a session's oversized tool result whole under `handle` (session working memory).
    fn save_result<'a>(
        &'a self,
        session_id: &'a str,
        handle: &'a str,
        content: &'a str,
    ) -> StoreFuture<'a, ()>;

    /// A session's stored tool results, `(handle, content)`, oldest first.
    fn stored_results<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<(String, String)>>;

    /// Takes (or renews) the run lease of `session_id` for `holder` until `ttl_ms` from now,
    /// unless another holder's lease is still live. `true` when `holder` holds it now.
    fn acquire_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool>;

    /// Extends `holder`'s lease to `ttl_ms` from now. `false` when `holder` no longer holds
    /// it (it expired and another holder took it, or it was released).
    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool>;

    /// Gives up `holder`'s lease (nothing happens when another holder has it).
    fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, ()>;

    /// The session's lease, live or expired, when one is recorded.
    fn lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<Lease>>;

    /// Takes (or renews) the lease of `workspace` for `holder`, a run of `session_id`, until
    /// `ttl_ms` from now, unless another holder's lease is still live. `true` when `holder`
    /// holds it now.
    fn acquire_workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool>;

    /// Extends `holder`'s lease of `workspace` to `ttl_ms` from now. `false` when `holder` no
    /// longer holds it.
    fn renew_workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool>;

    /// Gives up `holder`'s lease of `workspace` (nothing happens when another holder has it).
    fn release_workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
        holder: &'a str,
    ) -> StoreFuture<'a, ()>;

    /// The workspace's lease, live or expired, when one is recorded.
    fn workspace_lease<'a>(&'a self, workspace: &'a str)
    -> StoreFuture<'a, Option<WorkspaceLease>>;
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
