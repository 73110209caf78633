//! The [`Store`] trait on PostgreSQL.

use keel_protocol::{Event, Message, SessionStatus, Usage};
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Row};

use super::retry::{self, Backoff};
use super::{PgStore, db_err};
use crate::lease::{LeaseRow, RUN_LEASES, WORKSPACE_LEASES};
use crate::{
    BlockerRecord, BlockerStatus, Lease, MemoryEntry, NewBlocker, NewSession, SessionRecord, Store,
    StoreError, StoreFuture, WorkspaceLease, now_ms,
};

/// A session's columns with its lease (`FROM {SESSIONS}`).
const SESSION_COLUMNS: &str = "s.id, s.workspace, s.task, s.provider, s.model, s.mode, s.status, s.iterations, s.usage, s.created_at, s.updated_at, s.base_url, s.script, s.repo, l.holder, l.expires_at";
const SESSIONS: &str = "sessions s LEFT JOIN run_leases l ON l.session_id = s.id";
const BLOCKER_COLUMNS: &str =
    "id, session_id, question, source, evidence, status, answer, created_at, answered_at";

fn session_from_row(r: &PgRow) -> Result<SessionRecord, StoreError> {
    let read = || -> Result<(SessionRecord, String, String), sqlx::Error> {
        let repo: Option<String> = r.try_get(13)?;
        let holder: Option<String> = r.try_get(14)?;
        let expires_at: Option<i64> = r.try_get(15)?;
        Ok((
            SessionRecord {
                id: r.try_get(0)?,
                workspace: r.try_get(1)?,
                task: r.try_get(2)?,
                provider: r.try_get(3)?,
                model: r.try_get(4)?,
                mode: r.try_get(5)?,
                status: SessionStatus::Running,
                iterations: r.try_get::<i32, _>(7)?.max(0) as u32,
                usage: Usage::default(),
                created_at: r.try_get::<i64, _>(9)?.max(0) as u64,
                updated_at: r.try_get::<i64, _>(10)?.max(0) as u64,
                base_url: r.try_get(11)?,
                script: r.try_get(12)?,
                repo: match repo {
                    Some(json) => Some(
                        serde_json::from_str(&json)
                            .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
                    ),
                    None => None,
                },
                lease: match (holder, expires_at) {
                    (Some(holder), Some(expires_at)) => Some(Lease {
                        holder,
                        expires_at: expires_at.max(0) as u64,
                    }),
                    _ => None,
                },
            },
            r.try_get(6)?,
            r.try_get(8)?,
        ))
    };
    let (mut rec, status, usage) = read().map_err(db_err("reading a session"))?;
    rec.status = SessionStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
        context: format!("session {}", rec.id),
        reason: format!("unknown status `{status}`"),
    })?;
    rec.usage = serde_json::from_str(&usage).unwrap_or_default();
    Ok(rec)
}

fn blocker_from_row(r: &PgRow) -> Result<BlockerRecord, StoreError> {
    let read = || -> Result<(BlockerRecord, String, String), sqlx::Error> {
        Ok((
            BlockerRecord {
                id: r.try_get(0)?,
                session_id: r.try_get(1)?,
                question: r.try_get(2)?,
                source: r.try_get(3)?,
                evidence: Vec::new(),
                status: BlockerStatus::Open,
                answer: r.try_get(6)?,
                created_at: r.try_get::<i64, _>(7)?.max(0) as u64,
                answered_at: r.try_get::<Option<i64>, _>(8)?.map(|t| t.max(0) as u64),
            },
            r.try_get(4)?,
            r.try_get(5)?,
        ))
    };
    let (mut rec, evidence, status) = read().map_err(db_err("reading a blocker"))?;
    rec.status = BlockerStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
        context: format!("blocker {}", rec.id),
        reason: format!("unknown status `{status}`"),
    })?;
    rec.evidence = serde_json::from_str(&evidence).unwrap_or_default();
    Ok(rec)
}

/// Why a prefix named no single row.
enum Found {
    None,
    Many(usize),
}

impl PgStore {
    /// The full id in `table` (a fixed table name, never user input) matching `id_or_prefix`
    /// exactly or as a unique prefix.
    async fn resolve(
        &self,
        table: &str,
        id_or_prefix: &str,
    ) -> Result<Result<String, Found>, StoreError> {
        let ids: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT id FROM {table} WHERE id = $1
             UNION ALL
             (SELECT id FROM {table} WHERE $1 <> '' AND starts_with(id, $1) AND id <> $1 ORDER BY id LIMIT 50)"
        )))
        .bind(id_or_prefix)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("looking up an id"))?;
        if ids.iter().any(|id| id == id_or_prefix) {
            return Ok(Ok(id_or_prefix.to_string()));
        }
        Ok(match ids.len() {
            0 => Err(Found::None),
            1 => Ok(ids.into_iter().next().unwrap_or_default()),
            n => Err(Found::Many(n)),
        })
    }

    async fn resolve_session(&self, id_or_prefix: &str) -> Result<String, StoreError> {
        self.resolve("sessions", id_or_prefix)
            .await?
            .map_err(|found| match found {
                Found::None => StoreError::NotFound(id_or_prefix.to_string()),
                Found::Many(count) => StoreError::Ambiguous {
                    prefix: id_or_prefix.to_string(),
                    count,
                },
            })
    }

    async fn resolve_blocker(&self, id_or_prefix: &str) -> Result<String, StoreError> {
        self.resolve("blockers", id_or_prefix)
            .await?
            .map_err(|found| match found {
                Found::None => StoreError::BlockerNotFound(id_or_prefix.to_string()),
                Found::Many(count) => StoreError::AmbiguousBlocker {
                    prefix: id_or_prefix.to_string(),
                    count,
                },
            })
    }

    async fn read_blocker(&self, id: &str) -> Result<BlockerRecord, StoreError> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {BLOCKER_COLUMNS} FROM blockers WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err("reading a blocker"))?
        .ok_or_else(|| StoreError::BlockerNotFound(id.to_string()))?;
        blocker_from_row(&row)
    }

    /// Runs an `UPDATE sessions … WHERE id = $1` and reports a missing session.
    async fn update_one(&self, id: &str, rows: u64) -> Result<(), StoreError> {
        if rows == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(())
    }

    async fn answer(&self, id_or_prefix: &str, answer: &str) -> Result<BlockerRecord, StoreError> {
        let id = self.resolve_blocker(id_or_prefix).await?;
        let updated = sqlx::query(
            "UPDATE blockers SET status = 'answered', answer = $2, answered_at = $3
             WHERE id = $1 AND status <> 'delivered'",
        )
        .bind(&id)
        .bind(answer)
        .bind(now_ms() as i64)
        .execute(&self.pool)
        .await
        .map_err(db_err("answering a blocker"))?
        .rows_affected();
        let current = self.read_blocker(&id).await?;
        if updated == 0 {
            return Err(StoreError::Conflict(format!(
                "blocker {id} was already answered and its answer given to the agent; \
                 continue the session with `keel run --resume {} \"…\"` instead",
                current.session_id
            )));
        }
        Ok(current)
    }

    async fn append(&self, event: &Event) -> Result<Event, StoreError> {
        // The body is stored with seq 0; readers take seq from its column.
        let mut stored = event.clone();
        stored.seq = 0;
        let body = serde_json::to_string(&stored).map_err(|e| StoreError::Corrupt {
            context: "serialising an event".into(),
            reason: e.to_string(),
        })?;
        let id = &event.session_id;
        let mut backoff = Backoff::new(self.retry_for);
        // Set when an attempt may have been committed although it failed.
        let mut check = false;
        loop {
            if check {
                let last = sqlx::query_as::<_, (i64, String)>(
                    "SELECT seq, body FROM events WHERE session_id = $1 ORDER BY seq DESC LIMIT 1",
                )
                .bind(id)
                .fetch_optional(&self.pool)
                .await;
                match last {
                    Ok(Some((seq, last))) if last == body => {
                        stored.seq = seq.max(0) as u64;
                        return Ok(stored);
                    }
                    Ok(_) => check = false,
                    Err(e) if retry::is_unreachable(&e) => {
                        if !backoff.wait().await {
                            return Err(db_err("appending an event")(e));
                        }
                        continue;
                    }
                    Err(e) => return Err(db_err("appending an event")(e)),
                }
            }
            let seq: Result<Option<i64>, sqlx::Error> = sqlx::query_scalar(
                // The notice (`seq:session id` on `keel_events`) is delivered at commit, to every
                // listener on this database (`PgStore::listen_events`).
                "WITH n AS (UPDATE sessions SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq),
                      ins AS (INSERT INTO events (session_id, seq, type, ts, body)
                              SELECT $1, n.last_seq, $2, $3, $4 FROM n RETURNING seq)
                 SELECT seq FROM ins, LATERAL (SELECT pg_notify('keel_events', ins.seq::TEXT || ':' || $1)) AS notified",
            )
            .bind(id)
            .bind(event.type_name())
            .bind(event.ts as i64)
            .bind(&body)
            .fetch_optional(&self.pool)
            .await;
            match seq {
                Ok(seq) => {
                    let seq = seq.ok_or_else(|| StoreError::NotFound(id.clone()))?;
                    stored.seq = seq.max(0) as u64;
                    return Ok(stored);
                }
                Err(e) if retry::is_unreachable(&e) => {
                    check |= retry::outcome_unknown(&e);
                    if !backoff.wait().await {
                        return Err(db_err("appending an event")(e));
                    }
                }
                Err(e) => return Err(db_err("appending an event")(e)),
            }
        }
    }

    /// Appends a message (its index from the session's counter); retried like events.
    async fn push_message(
        &self,
        session_id: &str,
        role: &str,
        body: &str,
    ) -> Result<(), StoreError> {
        let mut backoff = Backoff::new(self.retry_for);
        let mut check = false;
        loop {
            if check {
                let last = sqlx::query_scalar::<_, String>(
                    "SELECT body FROM messages WHERE session_id = $1 ORDER BY idx DESC LIMIT 1",
                )
                .bind(session_id)
                .fetch_optional(&self.pool)
                .await;
                match last {
                    Ok(Some(last)) if last == body => return Ok(()),
                    Ok(_) => check = false,
                    Err(e) if retry::is_unreachable(&e) => {
                        if !backoff.wait().await {
                            return Err(db_err("appending a message")(e));
                        }
                        continue;
                    }
                    Err(e) => return Err(db_err("appending a message")(e)),
                }
            }
            let r = sqlx::query(
                "WITH n AS (UPDATE sessions SET message_count = message_count + 1 WHERE id = $1 RETURNING message_count)
                 INSERT INTO messages (session_id, idx, role, body)
                 SELECT $1, n.message_count - 1, $2, $3 FROM n",
            )
            .bind(session_id)
            .bind(role)
            .bind(body)
            .execute(&self.pool)
            .await;
            match r {
                Ok(r) => return self.update_one(session_id, r.rows_affected()).await,
                Err(e) if retry::is_unreachable(&e) => {
                    check |= retry::outcome_unknown(&e);
                    if !backoff.wait().await {
                        return Err(db_err("appending a message")(e));
                    }
                }
                Err(e) => return Err(db_err("appending a message")(e)),
            }
        }
    }

    async fn read_events(
        &self,
        session_id: &str,
        since_seq: u64,
    ) -> Result<Vec<Event>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, body FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq",
        )
        .bind(session_id)
        .bind(since_seq.min(i64::MAX as u64) as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("reading events"))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let seq: i64 = r.try_get(0).map_err(db_err("reading events"))?;
            let body: String = r.try_get(1).map_err(db_err("reading events"))?;
            let mut event: Event =
                serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                    context: format!("an event of session {session_id}"),
                    reason: e.to_string(),
                })?;
            event.seq = seq.max(0) as u64;
            out.push(event);
        }
        Ok(out)
    }

    async fn delete(&self, id: &str) -> Result<(), StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(db_err("deleting a session"))?;
        sqlx::query("DELETE FROM run_leases WHERE session_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db_err("deleting a session's lease"))?;
        // Messages, events, blockers and stored results go with it (ON DELETE CASCADE).
        let n = sqlx::query("DELETE FROM sessions WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db_err("deleting a session"))?
            .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        tx.commit().await.map_err(db_err("deleting a session"))?;
        Ok(())
    }
}

/// The rows an UPDATE/INSERT/DELETE changed.
fn affected(
    r: Result<sqlx::postgres::PgQueryResult, sqlx::Error>,
    context: &str,
) -> Result<u64, StoreError> {
    r.map(|r| r.rows_affected()).map_err(db_err(context))
}

impl Store for PgStore {
    fn create_session<'a>(&'a self, s: &'a NewSession) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let now = now_ms() as i64;
            sqlx::query(
                "INSERT INTO sessions (id, workspace, task, provider, model, mode, status, created_at, updated_at, base_url, script, repo)
                 VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $7, $8, $9, $10)",
            )
            .bind(&s.id)
            .bind(&s.workspace)
            .bind(&s.task)
            .bind(&s.provider)
            .bind(&s.model)
            .bind(&s.mode)
            .bind(now)
            .bind(&s.base_url)
            .bind(&s.script)
            .bind(crate::sqlite::repo_json(s))
            .execute(&self.pool)
            .await
            .map_err(db_err("creating a session"))?;
            Ok(())
        })
    }

    fn update_session<'a>(
        &'a self,
        id: &'a str,
        status: SessionStatus,
        iterations: u32,
        usage: &'a Usage,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.retrying(move || async move {
            let usage = serde_json::to_string(usage).unwrap_or_else(|_| "{}".into());
            let r = sqlx::query(
                "UPDATE sessions SET status = $2, iterations = $3, usage = $4, updated_at = $5 WHERE id = $1",
            )
            .bind(id)
            .bind(status.as_str())
            .bind(iterations.min(i32::MAX as u32) as i32)
            .bind(usage)
            .bind(now_ms() as i64)
            .execute(&self.pool)
            .await;
            let n = affected(r, "updating a session")?;
            self.update_one(id, n).await
        }))
    }

    fn set_session_task<'a>(&'a self, id: &'a str, task: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.retrying(move || async move {
            let r = sqlx::query("UPDATE sessions SET task = $2, updated_at = $3 WHERE id = $1")
                .bind(id)
                .bind(task)
                .bind(now_ms() as i64)
                .execute(&self.pool)
                .await;
            let n = affected(r, "setting a session's task")?;
            self.update_one(id, n).await
        }))
    }

    fn set_session_model<'a>(
        &'a self,
        id: &'a str,
        provider: &'a str,
        model: &'a str,
        mode: &'a str,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.retrying(move || async move {
            let r = sqlx::query(
                "UPDATE sessions SET provider = $2, model = $3, mode = $4, updated_at = $5 WHERE id = $1",
            )
            .bind(id)
            .bind(provider)
            .bind(model)
            .bind(mode)
            .bind(now_ms() as i64)
            .execute(&self.pool)
            .await;
            let n = affected(r, "recording a session's model")?;
            self.update_one(id, n).await
        }))
    }

    fn delete_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.delete(id))
    }

    fn append_event<'a>(&'a self, event: &'a Event) -> StoreFuture<'a, Event> {
        Box::pin(self.append(event))
    }

    fn append_message<'a>(
        &'a self,
        session_id: &'a str,
        message: &'a Message,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let body = serde_json::to_string(message).map_err(|e| StoreError::Corrupt {
                context: "serialising a message".into(),
                reason: e.to_string(),
            })?;
            let role = match message.role {
                keel_protocol::Role::User => "user",
                keel_protocol::Role::Assistant => "assistant",
            };
            self.push_message(session_id, role, &body).await
        })
    }

    fn list_sessions(&self, limit: usize) -> StoreFuture<'_, Vec<SessionRecord>> {
        Box::pin(async move {
            let rows = sqlx::query(AssertSqlSafe(format!(
                "SELECT {SESSION_COLUMNS} FROM {SESSIONS} ORDER BY s.created_at DESC, s.id DESC LIMIT $1"
            )))
            .bind(limit.min(i64::MAX as usize) as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("listing sessions"))?;
            rows.iter().map(session_from_row).collect()
        })
    }

    fn get_session<'a>(&'a self, id_or_prefix: &'a str) -> StoreFuture<'a, SessionRecord> {
        Box::pin(self.retrying(move || async move {
            let id = self.resolve_session(id_or_prefix).await?;
            let row = sqlx::query(AssertSqlSafe(format!(
                "SELECT {SESSION_COLUMNS} FROM {SESSIONS} WHERE s.id = $1"
            )))
            .bind(&id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err("reading a session"))?
            .ok_or(StoreError::NotFound(id))?;
            session_from_row(&row)
        }))
    }

    fn events<'a>(&'a self, session_id: &'a str, since_seq: u64) -> StoreFuture<'a, Vec<Event>> {
        Box::pin(self.retrying(move || self.read_events(session_id, since_seq)))
    }

    fn messages<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>> {
        Box::pin(self.retrying(move || async move {
            let bodies: Vec<String> =
                sqlx::query_scalar("SELECT body FROM messages WHERE session_id = $1 ORDER BY idx")
                    .bind(session_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_err("reading messages"))?;
            bodies
                .iter()
                .map(|body| {
                    serde_json::from_str(body).map_err(|e| StoreError::Corrupt {
                        context: format!("a message of session {session_id}"),
                        reason: e.to_string(),
                    })
                })
                .collect()
        }))
    }

    fn last_seq<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, u64> {
        Box::pin(self.retrying(move || async move {
            let seq: i64 = sqlx::query_scalar(
                "SELECT COALESCE(MAX(seq), 0)::BIGINT FROM events WHERE session_id = $1",
            )
            .bind(session_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_err("reading the last event seq"))?;
            Ok(seq.max(0) as u64)
        }))
    }

    fn create_blocker<'a>(&'a self, b: &'a NewBlocker) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let evidence = serde_json::to_string(&b.evidence).unwrap_or_else(|_| "[]".into());
            sqlx::query(
                "INSERT INTO blockers (id, session_id, question, source, evidence, status, created_at)
                 VALUES ($1, $2, $3, $4, $5, 'open', $6)",
            )
            .bind(&b.id)
            .bind(&b.session_id)
            .bind(&b.question)
            .bind(&b.source)
            .bind(evidence)
            .bind(now_ms() as i64)
            .execute(&self.pool)
            .await
            .map_err(db_err("creating a blocker"))?;
            Ok(())
        })
    }

    fn list_blockers<'a>(
        &'a self,
        session_id: Option<&'a str>,
        all: bool,
    ) -> StoreFuture<'a, Vec<BlockerRecord>> {
        Box::pin(self.retrying(move || async move {
            let rows = sqlx::query(AssertSqlSafe(format!(
                "SELECT {BLOCKER_COLUMNS} FROM blockers
                 WHERE ($1::TEXT IS NULL OR session_id = $1) AND ($2 OR status = 'open')
                 ORDER BY created_at, id"
            )))
            .bind(session_id)
            .bind(all)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("listing blockers"))?;
            rows.iter().map(blocker_from_row).collect()
        }))
    }

    fn get_blocker<'a>(&'a self, id_or_prefix: &'a str) -> StoreFuture<'a, BlockerRecord> {
        Box::pin(async move {
            let id = self.resolve_blocker(id_or_prefix).await?;
            self.read_blocker(&id).await
        })
    }

    fn answer_blocker<'a>(
        &'a self,
        id_or_prefix: &'a str,
        answer: &'a str,
    ) -> StoreFuture<'a, BlockerRecord> {
        Box::pin(self.answer(id_or_prefix, answer))
    }

    fn mark_blockers_delivered<'a>(&'a self, ids: &'a [String]) -> StoreFuture<'a, ()> {
        Box::pin(self.retrying(move || async move {
            sqlx::query(
                "UPDATE blockers SET status = 'delivered' WHERE id = ANY($1) AND status = 'answered'",
            )
            .bind(ids)
            .execute(&self.pool)
            .await
            .map_err(db_err("marking blockers delivered"))?;
            Ok(())
        }))
    }

    fn memory_entries(&self) -> StoreFuture<'_, Vec<MemoryEntry>> {
        Box::pin(self.memory_list())
    }

    fn save_result<'a>(
        &'a self,
        session_id: &'a str,
        handle: &'a str,
        content: &'a str,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.retrying(move || async move {
            sqlx::query(
                "INSERT INTO stored_results (session_id, handle, content, created_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (session_id, handle) DO UPDATE SET content = EXCLUDED.content, created_at = EXCLUDED.created_at",
            )
            .bind(session_id)
            .bind(handle)
            .bind(content)
            .bind(now_ms() as i64)
            .execute(&self.pool)
            .await
            .map_err(db_err("saving a stored tool result"))?;
            Ok(())
        }))
    }

    fn stored_results<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<(String, String)>> {
        Box::pin(self.retrying(move || async move {
            let rows = sqlx::query(
                "SELECT handle, content FROM stored_results WHERE session_id = $1 ORDER BY created_at, handle",
            )
            .bind(session_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("reading stored tool results"))?;
            rows.iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<Result<_, sqlx::Error>>()
                .map_err(db_err("reading stored tool results"))
        }))
    }

    fn acquire_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.take_lease(&RUN_LEASES, session_id, None, holder, ttl_ms))
    }

    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.renew_lease_in(&RUN_LEASES, session_id, holder, ttl_ms))
    }

    fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.release_lease_in(&RUN_LEASES, session_id, holder))
    }

    fn lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move {
            let row = self.read_lease(&RUN_LEASES, session_id).await?;
            Ok(row.map(LeaseRow::into_lease))
        })
    }

    fn acquire_workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.take_lease(
            &WORKSPACE_LEASES,
            workspace,
            Some(session_id),
            holder,
            ttl_ms,
        ))
    }

    fn renew_workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.renew_lease_in(&WORKSPACE_LEASES, workspace, holder, ttl_ms))
    }

    fn release_workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
        holder: &'a str,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.release_lease_in(&WORKSPACE_LEASES, workspace, holder))
    }

    fn workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
    ) -> StoreFuture<'a, Option<WorkspaceLease>> {
        Box::pin(async move {
            let row = self.read_lease(&WORKSPACE_LEASES, workspace).await?;
            Ok(row.map(|row| row.into_workspace_lease(workspace)))
        })
    }
}
