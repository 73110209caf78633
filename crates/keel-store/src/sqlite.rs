//! The SQLite implementation of [`Store`].

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use keel_protocol::{Event, Message, SessionStatus, Usage};
use rusqlite::{Connection, OptionalExtension, params};

use crate::{
    BlockerRecord, BlockerStatus, Lease, NewBlocker, NewSession, SessionRecord, StoreError, now_ms,
};

mod leases;
mod store;
mod wal;
pub use store::SqliteStore;

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
/// Append new entries; never edit one that has shipped.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    workspace   TEXT NOT NULL,
    task        TEXT NOT NULL,
    provider    TEXT NOT NULL,
    model       TEXT NOT NULL,
    mode        TEXT NOT NULL,
    status      TEXT NOT NULL,
    iterations  INTEGER NOT NULL DEFAULT 0,
    usage       TEXT NOT NULL DEFAULT '{}',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    pid         INTEGER
);
CREATE INDEX sessions_created ON sessions(created_at DESC);
CREATE TABLE messages (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL,
    role        TEXT NOT NULL,
    body        TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
);
CREATE TABLE events (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    type        TEXT NOT NULL,
    ts          INTEGER NOT NULL,
    body        TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
"#,
    // 2: blockers — questions for a human, raised by the model, by patterns or by the fix
    // tracker; answered ones are delivered into the session's next run.
    r#"
CREATE TABLE blockers (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    question     TEXT NOT NULL,
    source       TEXT NOT NULL,
    evidence     TEXT NOT NULL DEFAULT '[]',
    status       TEXT NOT NULL,
    answer       TEXT,
    created_at   INTEGER NOT NULL,
    answered_at  INTEGER
);
CREATE INDEX blockers_session ON blockers(session_id, created_at);
CREATE INDEX blockers_status ON blockers(status, created_at);
"#,
    // 3: user memory and promoted lessons (`memory`).
    crate::memory::MIGRATION,
    // 4: how a session was started, so resuming it needs no repeated flags.
    r#"
ALTER TABLE sessions ADD COLUMN base_url TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN script TEXT NOT NULL DEFAULT '';
"#,
    // 5: PRDs (versioned), tasks with dependencies, and proofs (see `work/`).
    crate::work::MIGRATION,
    // 6: run leases — who runs a session until when, renewed by a heartbeat.
    r#"
CREATE TABLE run_leases (
    session_id  TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_at  INTEGER NOT NULL
);
"#,
    // 7: flow runs (definition, inputs, state, trace) and their per-node checkpoints.
    crate::flow::MIGRATION,
    // 8: eval runs (`keel eval`), self-contained (see `eval`).
    crate::eval::MIGRATION,
    // 9: a session's git source (`{"url", "ref"}` as JSON), for queue-mode workers.
    "ALTER TABLE sessions ADD COLUMN repo TEXT;",
    // 10: workspace leases — which session's run works in a workspace, until when.
    leases::WORKSPACE_LEASES,
];

/// Sessions, messages and events in one SQLite database file: the synchronous side, whose
/// calls block. [`SqliteStore`] wraps it for async callers; PRDs, tasks and memory are
/// methods here, for synchronous callers and for [`SqliteStore::call`].
pub struct SqliteDb {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteDb").finish_non_exhaustive()
    }
}

pub(crate) fn sql(context: &str) -> impl FnOnce(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        context: context.to_string(),
        source,
    }
}

impl SqliteDb {
    /// Opens (creating if needed) the database at `path`, with WAL journaling. The file and
    /// its companions are readable only by the user (0600), a directory created for it 0700.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(parent) = path.parent() {
            crate::private::create_private_dir(parent).map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                reason: format!("cannot create {}: {e}", parent.display()),
            })?;
        }
        crate::private::prepare_database_file(path).map_err(|e| StoreError::Open {
            path: path.display().to_string(),
            reason: format!("cannot make it readable only by you: {e}"),
        })?;
        let conn = Connection::open(path).map_err(|e| StoreError::Open {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::init(conn, true)
    }

    /// A private in-memory database (tests, ephemeral runs).
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().map_err(sql("opening an in-memory store"))?;
        Self::init(conn, false)
    }

    fn init(conn: Connection, wal: bool) -> Result<Self, StoreError> {
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sql("setting the busy timeout"))?;
        if wal {
            // WAL + NORMAL: a committed transaction survives a process kill; only an OS crash
            // can lose the last few, and it never corrupts the file.
            wal::enable(&conn)?;
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(sql("setting synchronous"))?;
        }
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(sql("enabling foreign keys"))?;
        let store = Self {
            conn: Mutex::new(conn),
        };
        store.migrate()?;
        Ok(store)
    }

    fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql("reading the schema version"))?;
        let version = usize::try_from(version).unwrap_or(0);
        if version > MIGRATIONS.len() {
            return Err(StoreError::Open {
                path: conn.path().unwrap_or("").to_string(),
                reason: format!(
                    "the database has schema version {version}, newer than this keel understands ({}); upgrade keel",
                    MIGRATIONS.len()
                ),
            });
        }
        for (i, migration) in MIGRATIONS.iter().enumerate().skip(version) {
            // IMMEDIATE: two processes opening a fresh database at once must not both apply
            // the same migration; the second waits for the lock and then sees it applied.
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(sql("starting a migration"))?;
            let current: i64 = tx
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(sql("reading the schema version"))?;
            if usize::try_from(current).unwrap_or(0) > i {
                continue;
            }
            tx.execute_batch(migration)
                .map_err(sql("applying a schema migration"))?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)
                .map_err(sql("recording the schema version"))?;
            tx.commit().map_err(sql("committing a migration"))?;
        }
        Ok(())
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent (it has its own
        // transactions), so a poisoned mutex is still safe to use.
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The schema version of this database: how many migrations it has had.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        let version: i64 = self
            .lock()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql("reading the schema version"))?;
        Ok(u32::try_from(version).unwrap_or(0))
    }

    /// The schema version of the database file at `path` without migrating it (`None` when
    /// there is no file yet).
    pub fn schema_version_at(path: &Path) -> Result<Option<u32>, StoreError> {
        if !path.exists() {
            return Ok(None);
        }
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql("reading the schema version"))?;
        Ok(Some(u32::try_from(version).unwrap_or(0)))
    }

    /// Runs `f` with the connection (for crates that add their own tables via migrations here).
    pub fn with_connection<T>(&self, f: impl FnOnce(&Connection) -> T) -> T {
        f(&self.lock())
    }

    fn resolve_id(conn: &Connection, id_or_prefix: &str) -> Result<String, StoreError> {
        resolve_prefix(conn, "sessions", id_or_prefix)?.map_err(|found| match found {
            Found::None => StoreError::NotFound(id_or_prefix.to_string()),
            Found::Many(count) => StoreError::Ambiguous {
                prefix: id_or_prefix.to_string(),
                count,
            },
        })
    }

    fn resolve_blocker_id(conn: &Connection, id_or_prefix: &str) -> Result<String, StoreError> {
        resolve_prefix(conn, "blockers", id_or_prefix)?.map_err(|found| match found {
            Found::None => StoreError::BlockerNotFound(id_or_prefix.to_string()),
            Found::Many(count) => StoreError::AmbiguousBlocker {
                prefix: id_or_prefix.to_string(),
                count,
            },
        })
    }
}

/// Why a prefix named no single row.
enum Found {
    None,
    Many(usize),
}

/// The full id in `table` (a fixed table name, never user input) matching `id_or_prefix`
/// exactly or as a unique prefix.
fn resolve_prefix(
    conn: &Connection,
    table: &str,
    id_or_prefix: &str,
) -> Result<Result<String, Found>, StoreError> {
    let exact: Option<String> = conn
        .query_row(
            &format!("SELECT id FROM {table} WHERE id = ?1"),
            [id_or_prefix],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql("looking up an id"))?;
    if let Some(id) = exact {
        return Ok(Ok(id));
    }
    if id_or_prefix.is_empty() {
        return Ok(Err(Found::None));
    }
    let escaped = id_or_prefix
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    let mut stmt = conn
        .prepare(&format!(
            "SELECT id FROM {table} WHERE id LIKE ?1 || '%' ESCAPE '\\' ORDER BY id"
        ))
        .map_err(sql("looking up an id prefix"))?;
    let ids: Vec<String> = stmt
        .query_map([escaped], |r| r.get(0))
        .map_err(sql("looking up an id prefix"))?
        .collect::<Result<_, _>>()
        .map_err(sql("looking up an id prefix"))?;
    Ok(match ids.len() {
        0 => Err(Found::None),
        1 => Ok(ids.into_iter().next().unwrap_or_default()),
        n => Err(Found::Many(n)),
    })
}

const BLOCKER_COLUMNS: &str =
    "id, session_id, question, source, evidence, status, answer, created_at, answered_at";

fn row_to_blocker(r: &rusqlite::Row<'_>) -> rusqlite::Result<(BlockerRecord, String, String)> {
    Ok((
        BlockerRecord {
            id: r.get(0)?,
            session_id: r.get(1)?,
            question: r.get(2)?,
            source: r.get(3)?,
            evidence: Vec::new(),
            status: BlockerStatus::Open,
            answer: r.get(6)?,
            created_at: r.get::<_, i64>(7)? as u64,
            answered_at: r.get::<_, Option<i64>>(8)?.map(|t| t as u64),
        },
        r.get(4)?,
        r.get(5)?,
    ))
}

fn finish_blocker(
    (mut rec, evidence, status): (BlockerRecord, String, String),
) -> Result<BlockerRecord, StoreError> {
    rec.status = BlockerStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
        context: format!("blocker {}", rec.id),
        reason: format!("unknown status `{status}`"),
    })?;
    rec.evidence = serde_json::from_str(&evidence).unwrap_or_default();
    Ok(rec)
}

fn read_blocker(conn: &Connection, id: &str) -> Result<BlockerRecord, StoreError> {
    let raw = conn
        .query_row(
            &format!("SELECT {BLOCKER_COLUMNS} FROM blockers WHERE id = ?1"),
            [id],
            row_to_blocker,
        )
        .map_err(sql("reading a blocker"))?;
    finish_blocker(raw)
}

fn row_to_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<(SessionRecord, String, String)> {
    let status: String = r.get(6)?;
    let usage: String = r.get(8)?;
    Ok((
        SessionRecord {
            id: r.get(0)?,
            workspace: r.get(1)?,
            task: r.get(2)?,
            provider: r.get(3)?,
            model: r.get(4)?,
            mode: r.get(5)?,
            status: SessionStatus::Running,
            iterations: r.get(7)?,
            usage: Usage::default(),
            created_at: r.get::<_, i64>(9)? as u64,
            updated_at: r.get::<_, i64>(10)? as u64,
            base_url: r.get(11)?,
            script: r.get(12)?,
            repo: match r.get::<_, Option<String>>(13)? {
                Some(json) => Some(serde_json::from_str(&json).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        13,
                        rusqlite::types::Type::Text,
                        e.into(),
                    )
                })?),
                None => None,
            },
            lease: match (
                r.get::<_, Option<String>>(14)?,
                r.get::<_, Option<i64>>(15)?,
            ) {
                (Some(holder), Some(expires_at)) => Some(Lease {
                    holder,
                    expires_at: expires_at as u64,
                }),
                _ => None,
            },
        },
        status,
        usage,
    ))
}

fn finish_record(
    (mut rec, status, usage): (SessionRecord, String, String),
) -> Result<SessionRecord, StoreError> {
    rec.status = SessionStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
        context: format!("session {}", rec.id),
        reason: format!("unknown status `{status}`"),
    })?;
    rec.usage = serde_json::from_str(&usage).unwrap_or_default();
    Ok(rec)
}

/// A session's columns with its lease (`FROM {SESSIONS}`).
const SESSION_COLUMNS: &str = "s.id, s.workspace, s.task, s.provider, s.model, s.mode, s.status, s.iterations, s.usage, s.created_at, s.updated_at, s.base_url, s.script, s.repo, l.holder, l.expires_at";
const SESSIONS: &str = "sessions s LEFT JOIN run_leases l ON l.session_id = s.id";

/// A new session's git source as stored (JSON), if it has one.
pub(crate) fn repo_json(s: &NewSession) -> Option<String> {
    s.repo.as_ref().and_then(|r| serde_json::to_string(r).ok())
}

impl SqliteDb {
    pub fn create_session(&self, s: &NewSession) -> Result<(), StoreError> {
        let now = now_ms() as i64;
        self.lock()
            .execute(
                "INSERT INTO sessions (id, workspace, task, provider, model, mode, status, created_at, updated_at, base_url, script, repo)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7, ?7, ?8, ?9, ?10)",
                params![s.id, s.workspace, s.task, s.provider, s.model, s.mode, now, s.base_url, s.script, repo_json(s)],
            )
            .map_err(sql("creating a session"))?;
        Ok(())
    }

    pub fn update_session(
        &self,
        id: &str,
        status: SessionStatus,
        iterations: u32,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        let usage = serde_json::to_string(usage).unwrap_or_else(|_| "{}".into());
        let n = self
            .lock()
            .execute(
                "UPDATE sessions SET status = ?2, iterations = ?3, usage = ?4, updated_at = ?5 WHERE id = ?1",
                params![id, status.as_str(), iterations, usage, now_ms() as i64],
            )
            .map_err(sql("updating a session"))?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(())
    }

    pub fn set_session_task(&self, id: &str, task: &str) -> Result<(), StoreError> {
        let n = self
            .lock()
            .execute(
                "UPDATE sessions SET task = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, task, now_ms() as i64],
            )
            .map_err(sql("setting a session's task"))?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(())
    }

    pub fn set_session_model(
        &self,
        id: &str,
        provider: &str,
        model: &str,
        mode: &str,
    ) -> Result<(), StoreError> {
        let n = self
            .lock()
            .execute(
                "UPDATE sessions SET provider = ?2, model = ?3, mode = ?4, updated_at = ?5 WHERE id = ?1",
                params![id, provider, model, mode, now_ms() as i64],
            )
            .map_err(sql("recording a session's model"))?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(())
    }

    pub fn delete_session(&self, id: &str) -> Result<(), StoreError> {
        // Messages, events and blockers go with it (ON DELETE CASCADE).
        let conn = self.lock();
        conn.execute("DELETE FROM run_leases WHERE session_id = ?1", [id])
            .map_err(sql("deleting a session's lease"))?;
        let n = conn
            .execute("DELETE FROM sessions WHERE id = ?1", [id])
            .map_err(sql("deleting a session"))?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(())
    }

    pub fn append_event(&self, event: &Event) -> Result<Event, StoreError> {
        let mut conn = self.lock();
        // IMMEDIATE takes the database's write lock first: the seq read and the insert are one
        // step for every process sharing the file (others wait up to the busy timeout).
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sql("starting an event append"))?;
        let last: i64 = tx
            .query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?1",
                [&event.session_id],
                |r| r.get(0),
            )
            .map_err(sql("numbering an event"))?;
        let mut stored = event.clone();
        stored.seq = last as u64 + 1;
        let body = serde_json::to_string(&stored).map_err(|e| StoreError::Corrupt {
            context: "serialising an event".into(),
            reason: e.to_string(),
        })?;
        tx.execute(
            "INSERT INTO events (session_id, seq, type, ts, body) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                stored.session_id,
                stored.seq as i64,
                stored.type_name(),
                stored.ts as i64,
                body
            ],
        )
        .map_err(sql("appending an event"))?;
        tx.commit().map_err(sql("committing an event"))?;
        Ok(stored)
    }

    pub fn append_message(&self, session_id: &str, message: &Message) -> Result<(), StoreError> {
        let body = serde_json::to_string(message).map_err(|e| StoreError::Corrupt {
            context: "serialising a message".into(),
            reason: e.to_string(),
        })?;
        let role = match message.role {
            keel_protocol::Role::User => "user",
            keel_protocol::Role::Assistant => "assistant",
        };
        self.lock()
            .execute(
                "INSERT INTO messages (session_id, idx, role, body)
                 VALUES (?1, (SELECT COALESCE(MAX(idx), -1) + 1 FROM messages WHERE session_id = ?1), ?2, ?3)",
                params![session_id, role, body],
            )
            .map_err(sql("appending a message"))?;
        Ok(())
    }

    pub fn list_sessions(&self, limit: usize) -> Result<Vec<SessionRecord>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {SESSION_COLUMNS} FROM {SESSIONS} ORDER BY s.created_at DESC, s.id DESC LIMIT ?1"
            ))
            .map_err(sql("listing sessions"))?;
        let rows = stmt
            .query_map([limit as i64], row_to_record)
            .map_err(sql("listing sessions"))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(finish_record(row.map_err(sql("listing sessions"))?)?);
        }
        Ok(out)
    }

    pub fn get_session(&self, id_or_prefix: &str) -> Result<SessionRecord, StoreError> {
        let conn = self.lock();
        let id = Self::resolve_id(&conn, id_or_prefix)?;
        let raw = conn
            .query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM {SESSIONS} WHERE s.id = ?1"),
                [&id],
                row_to_record,
            )
            .map_err(sql("reading a session"))?;
        finish_record(raw)
    }

    pub fn events(&self, session_id: &str, since_seq: u64) -> Result<Vec<Event>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare("SELECT body FROM events WHERE session_id = ?1 AND seq > ?2 ORDER BY seq")
            .map_err(sql("reading events"))?;
        let rows = stmt
            .query_map(params![session_id, since_seq as i64], |r| {
                r.get::<_, String>(0)
            })
            .map_err(sql("reading events"))?;
        let mut out = Vec::new();
        for row in rows {
            let body = row.map_err(sql("reading events"))?;
            out.push(
                serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                    context: format!("an event of session {session_id}"),
                    reason: e.to_string(),
                })?,
            );
        }
        Ok(out)
    }

    pub fn messages(&self, session_id: &str) -> Result<Vec<Message>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare("SELECT body FROM messages WHERE session_id = ?1 ORDER BY idx")
            .map_err(sql("reading messages"))?;
        let rows = stmt
            .query_map([session_id], |r| r.get::<_, String>(0))
            .map_err(sql("reading messages"))?;
        let mut out = Vec::new();
        for row in rows {
            let body = row.map_err(sql("reading messages"))?;
            out.push(
                serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                    context: format!("a message of session {session_id}"),
                    reason: e.to_string(),
                })?,
            );
        }
        Ok(out)
    }

    pub fn last_seq(&self, session_id: &str) -> Result<u64, StoreError> {
        let seq: i64 = self
            .lock()
            .query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?1",
                [session_id],
                |r| r.get(0),
            )
            .map_err(sql("reading the last event seq"))?;
        Ok(seq as u64)
    }

    pub fn create_blocker(&self, b: &NewBlocker) -> Result<(), StoreError> {
        let evidence = serde_json::to_string(&b.evidence).unwrap_or_else(|_| "[]".into());
        self.lock()
            .execute(
                "INSERT INTO blockers (id, session_id, question, source, evidence, status, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'open', ?6)",
                params![b.id, b.session_id, b.question, b.source, evidence, now_ms() as i64],
            )
            .map_err(sql("creating a blocker"))?;
        Ok(())
    }

    pub fn list_blockers(
        &self,
        session_id: Option<&str>,
        all: bool,
    ) -> Result<Vec<BlockerRecord>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {BLOCKER_COLUMNS} FROM blockers
                 WHERE (?1 IS NULL OR session_id = ?1) AND (?2 OR status = 'open')
                 ORDER BY created_at, id"
            ))
            .map_err(sql("listing blockers"))?;
        let rows = stmt
            .query_map(params![session_id, all], row_to_blocker)
            .map_err(sql("listing blockers"))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(finish_blocker(row.map_err(sql("listing blockers"))?)?);
        }
        Ok(out)
    }

    pub fn get_blocker(&self, id_or_prefix: &str) -> Result<BlockerRecord, StoreError> {
        let conn = self.lock();
        let id = Self::resolve_blocker_id(&conn, id_or_prefix)?;
        read_blocker(&conn, &id)
    }

    pub fn answer_blocker(
        &self,
        id_or_prefix: &str,
        answer: &str,
    ) -> Result<BlockerRecord, StoreError> {
        let conn = self.lock();
        let id = Self::resolve_blocker_id(&conn, id_or_prefix)?;
        let current = read_blocker(&conn, &id)?;
        if current.status == BlockerStatus::Delivered {
            return Err(StoreError::Conflict(format!(
                "blocker {id} was already answered and its answer given to the agent; \
                 continue the session with `keel run --resume {} \"…\"` instead",
                current.session_id
            )));
        }
        conn.execute(
            "UPDATE blockers SET status = 'answered', answer = ?2, answered_at = ?3 WHERE id = ?1",
            params![id, answer, now_ms() as i64],
        )
        .map_err(sql("answering a blocker"))?;
        read_blocker(&conn, &id)
    }

    pub fn memory_entries(&self) -> Result<Vec<crate::MemoryEntry>, StoreError> {
        self.with_connection(|c| crate::memory::list(c, None))
    }

    pub fn save_result(
        &self,
        session_id: &str,
        handle: &str,
        content: &str,
    ) -> Result<(), StoreError> {
        self.with_connection(|c| crate::memory::save_result(c, session_id, handle, content))
    }

    pub fn stored_results(&self, session_id: &str) -> Result<Vec<(String, String)>, StoreError> {
        self.with_connection(|c| crate::memory::results(c, session_id))
    }

    pub fn mark_blockers_delivered(&self, ids: &[String]) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction()
            .map_err(sql("marking blockers delivered"))?;
        for id in ids {
            tx.execute(
                "UPDATE blockers SET status = 'delivered' WHERE id = ?1 AND status = 'answered'",
                [id],
            )
            .map_err(sql("marking blockers delivered"))?;
        }
        tx.commit().map_err(sql("marking blockers delivered"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
