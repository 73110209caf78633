//! The PostgreSQL schema, as versioned migrations recorded in `keel_migrations`.
//!
//! `keel db migrate` (and [`super::PgStore::migrate`]) applies the ones not yet recorded, each
//! once, in its own transaction, under an advisory lock so concurrent migrators queue instead
//! of racing. Append new entries; never edit one that has shipped.

use sqlx::{Connection, PgConnection, Row};

use super::db_err;
use crate::{StoreError, now_ms};

/// One schema migration.
pub(crate) struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// A migration this run applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMigration {
    pub version: i64,
    pub name: String,
}

/// The advisory lock key migrators take (an arbitrary constant: "keel" in ASCII, then 1).
const MIGRATION_LOCK: i64 = 0x6b65_656c_0000_0001;

pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "sessions, messages, events, blockers and run leases",
        sql: r#"
CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    workspace     TEXT NOT NULL,
    task          TEXT NOT NULL,
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    mode          TEXT NOT NULL,
    status        TEXT NOT NULL,
    iterations    INTEGER NOT NULL DEFAULT 0,
    usage         TEXT NOT NULL DEFAULT '{}',
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    base_url      TEXT NOT NULL DEFAULT '',
    script        TEXT NOT NULL DEFAULT '',
    -- The session's last event seq and message index: bumped in the statement that inserts,
    -- so the row lock orders concurrent writers and a failed insert leaves no gap.
    last_seq      BIGINT NOT NULL DEFAULT 0,
    message_count BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sessions_created ON sessions(created_at DESC, id DESC);
CREATE TABLE messages (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    idx         BIGINT NOT NULL,
    role        TEXT NOT NULL,
    body        TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
);
CREATE TABLE events (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq         BIGINT NOT NULL,
    type        TEXT NOT NULL,
    ts          BIGINT NOT NULL,
    body        TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE blockers (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    question     TEXT NOT NULL,
    source       TEXT NOT NULL,
    evidence     TEXT NOT NULL DEFAULT '[]',
    status       TEXT NOT NULL,
    answer       TEXT,
    created_at   BIGINT NOT NULL,
    answered_at  BIGINT
);
CREATE INDEX blockers_session ON blockers(session_id, created_at);
CREATE INDEX blockers_status ON blockers(status, created_at);
CREATE TABLE run_leases (
    session_id  TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_at  BIGINT NOT NULL
);
"#,
    },
    Migration {
        version: 2,
        name: "user memory, promoted lessons and stored tool results",
        sql: r#"
CREATE TABLE memory (
    id          BIGSERIAL PRIMARY KEY,
    kind        TEXT NOT NULL,
    text        TEXT NOT NULL,
    source      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX memory_kind ON memory(kind, id);
CREATE TABLE stored_results (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    handle      TEXT NOT NULL,
    content     TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, handle)
);
"#,
    },
    Migration {
        version: 3,
        name: "PRDs, tasks with dependencies and proofs",
        sql: r#"
CREATE TABLE prds (
    workspace   TEXT NOT NULL,
    num         BIGINT NOT NULL,
    title       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (workspace, num)
);
CREATE TABLE prd_versions (
    workspace   TEXT NOT NULL,
    prd         BIGINT NOT NULL,
    version     BIGINT NOT NULL,
    body        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (workspace, prd, version)
);
CREATE TABLE tasks (
    workspace    TEXT NOT NULL,
    num          BIGINT NOT NULL,
    prd          BIGINT,
    title        TEXT NOT NULL,
    description  TEXT NOT NULL,
    criteria     TEXT NOT NULL DEFAULT '[]',
    size         TEXT NOT NULL,
    status       TEXT NOT NULL,
    question     TEXT,
    session_id   TEXT,
    pid          BIGINT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (workspace, num)
);
CREATE TABLE task_deps (
    workspace   TEXT NOT NULL,
    task        BIGINT NOT NULL,
    depends_on  BIGINT NOT NULL,
    PRIMARY KEY (workspace, task, depends_on)
);
CREATE TABLE task_sessions (
    workspace   TEXT NOT NULL,
    task        BIGINT NOT NULL,
    session_id  TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    PRIMARY KEY (workspace, task, session_id)
);
CREATE TABLE proofs (
    id          BIGSERIAL PRIMARY KEY,
    workspace   TEXT NOT NULL,
    task        BIGINT NOT NULL,
    session_id  TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX proofs_task ON proofs(workspace, task, created_at, id);
"#,
    },
    Migration {
        version: 4,
        name: "flow runs and their per-node checkpoints",
        sql: r#"
CREATE TABLE flow_runs (
    id              TEXT PRIMARY KEY,
    workspace       TEXT NOT NULL,
    flow_name       TEXT NOT NULL,
    flow_file       TEXT NOT NULL,
    flow_source     TEXT NOT NULL,
    inputs          TEXT NOT NULL DEFAULT '{}',
    status          TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT '{}',
    trace           TEXT NOT NULL DEFAULT '{}',
    pid             BIGINT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    -- The run's last checkpoint seq: bumped by the statement that inserts a checkpoint.
    last_checkpoint BIGINT NOT NULL DEFAULT 0,
    -- Insertion order, for runs created in the same millisecond.
    pos             BIGSERIAL
);
CREATE INDEX flow_runs_created ON flow_runs(created_at DESC, pos DESC);
CREATE INDEX flow_runs_workspace ON flow_runs(workspace, created_at DESC, pos DESC);
CREATE TABLE flow_checkpoints (
    run_id      TEXT NOT NULL REFERENCES flow_runs(id) ON DELETE CASCADE,
    seq         BIGINT NOT NULL,
    node        TEXT NOT NULL,
    node_state  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"#,
    },
    Migration {
        version: 5,
        name: "eval runs",
        sql: r#"
CREATE TABLE eval_runs (
    id          BIGSERIAL PRIMARY KEY,
    suite       TEXT NOT NULL,
    suite_path  TEXT NOT NULL,
    provider    TEXT NOT NULL,
    model       TEXT NOT NULL,
    results     TEXT NOT NULL DEFAULT '[]',
    created_at  BIGINT NOT NULL,
    wall_ms     BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX eval_runs_created ON eval_runs(created_at DESC);
"#,
    },
    Migration {
        version: 6,
        name: "a session's git source (queue-mode workers check it out)",
        sql: "ALTER TABLE sessions ADD COLUMN repo TEXT;",
    },
    Migration {
        version: 7,
        name: "workspace leases (one running session per workspace)",
        sql: r#"
CREATE TABLE workspace_leases (
    workspace   TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    holder      TEXT NOT NULL,
    expires_at  BIGINT NOT NULL
);
"#,
    },
];

/// Applies the migrations `conn`'s database has not recorded, in order, and returns them.
pub(crate) async fn migrate(conn: &mut PgConnection) -> Result<Vec<AppliedMigration>, StoreError> {
    // A session-level advisory lock: a second migrator waits here until the first is done,
    // then finds everything recorded. The lock goes with the connection if this process dies.
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *conn)
        .await
        .map_err(db_err("waiting for the migration lock"))?;
    let result = apply_pending(conn).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *conn)
        .await
        .map_err(db_err("releasing the migration lock"));
    let applied = result?;
    unlocked?;
    Ok(applied)
}

async fn apply_pending(conn: &mut PgConnection) -> Result<Vec<AppliedMigration>, StoreError> {
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS keel_migrations (
            version     BIGINT PRIMARY KEY,
            name        TEXT NOT NULL,
            applied_at  BIGINT NOT NULL
        )",
    )
    .execute(&mut *conn)
    .await
    .map_err(db_err("creating the keel_migrations table"))?;
    let rows = sqlx::query("SELECT version FROM keel_migrations ORDER BY version")
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err("reading the applied migrations"))?;
    let mut done = Vec::with_capacity(rows.len());
    for row in rows {
        done.push(
            row.try_get::<i64, _>(0)
                .map_err(db_err("reading the applied migrations"))?,
        );
    }
    let newest = MIGRATIONS.last().map_or(0, |m| m.version);
    if let Some(unknown) = done.iter().find(|v| **v > newest) {
        return Err(StoreError::Conflict(format!(
            "the database has migration {unknown}, newer than this keel knows ({newest}); upgrade keel"
        )));
    }
    let mut applied = Vec::new();
    for m in MIGRATIONS.iter().filter(|m| !done.contains(&m.version)) {
        let context = || format!("applying migration {} ({})", m.version, m.name);
        let mut tx = conn.begin().await.map_err(|e| StoreError::Database {
            context: context(),
            reason: e.to_string(),
        })?;
        sqlx::raw_sql(m.sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::Database {
                context: context(),
                reason: e.to_string(),
            })?;
        sqlx::query("INSERT INTO keel_migrations (version, name, applied_at) VALUES ($1, $2, $3)")
            .bind(m.version)
            .bind(m.name)
            .bind(now_ms() as i64)
            .execute(&mut *tx)
            .await
            .map_err(db_err("recording a migration"))?;
        tx.commit().await.map_err(|e| StoreError::Database {
            context: context(),
            reason: e.to_string(),
        })?;
        applied.push(AppliedMigration {
            version: m.version,
            name: m.name.to_string(),
        });
    }
    Ok(applied)
}

/// `true` when every known migration is recorded in the database.
pub(crate) async fn is_current(conn: &mut PgConnection) -> Result<bool, StoreError> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('keel_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err("checking the schema version"))?;
    if !exists {
        return Ok(false);
    }
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM keel_migrations")
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err("checking the schema version"))?;
    Ok(count as usize >= MIGRATIONS.len())
}
