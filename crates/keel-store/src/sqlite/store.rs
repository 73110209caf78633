//! [`SqliteStore`]: the async [`Store`] over [`SqliteDb`], each call on tokio's blocking pool
//! so no runtime thread ever waits for SQLite.

use std::path::Path;
use std::sync::Arc;

use keel_protocol::{Event, Message, SessionStatus, Usage};

use super::SqliteDb;
use crate::{
    BlockerRecord, Lease, MemoryEntry, NewBlocker, NewSession, SessionRecord, Store, StoreError,
    StoreFuture, WorkspaceLease,
};

/// The embedded store: one SQLite database file (WAL), shared by every clone.
#[derive(Clone)]
pub struct SqliteStore {
    db: Arc<SqliteDb>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, with WAL journaling.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Ok(Self {
            db: Arc::new(SqliteDb::open(path)?),
        })
    }

    /// A private in-memory database (tests, ephemeral runs).
    pub fn open_in_memory() -> Result<Self, StoreError> {
        Ok(Self {
            db: Arc::new(SqliteDb::open_in_memory()?),
        })
    }

    /// The synchronous database, for callers outside an async runtime (its calls block).
    pub fn db(&self) -> &SqliteDb {
        &self.db
    }

    /// Runs `f` on the database on tokio's blocking pool (PRDs, tasks, memory from async code).
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&SqliteDb) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| StoreError::Internal(format!("the store's worker thread failed: {e}")))?
    }
}

impl Store for SqliteStore {
    fn create_session<'a>(&'a self, session: &'a NewSession) -> StoreFuture<'a, ()> {
        let session = session.clone();
        Box::pin(self.call(move |db| db.create_session(&session)))
    }

    fn update_session<'a>(
        &'a self,
        id: &'a str,
        status: SessionStatus,
        iterations: u32,
        usage: &'a Usage,
    ) -> StoreFuture<'a, ()> {
        let (id, usage) = (id.to_string(), *usage);
        Box::pin(self.call(move |db| db.update_session(&id, status, iterations, &usage)))
    }

    fn set_session_task<'a>(&'a self, id: &'a str, task: &'a str) -> StoreFuture<'a, ()> {
        let (id, task) = (id.to_string(), task.to_string());
        Box::pin(self.call(move |db| db.set_session_task(&id, &task)))
    }

    fn set_session_model<'a>(
        &'a self,
        id: &'a str,
        provider: &'a str,
        model: &'a str,
        mode: &'a str,
    ) -> StoreFuture<'a, ()> {
        let (id, provider, model, mode) = (
            id.to_string(),
            provider.to_string(),
            model.to_string(),
            mode.to_string(),
        );
        Box::pin(self.call(move |db| db.set_session_model(&id, &provider, &model, &mode)))
    }

    fn delete_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        let id = id.to_string();
        Box::pin(self.call(move |db| db.delete_session(&id)))
    }

    fn append_event<'a>(&'a self, event: &'a Event) -> StoreFuture<'a, Event> {
        let event = event.clone();
        Box::pin(self.call(move |db| db.append_event(&event)))
    }

    fn append_message<'a>(
        &'a self,
        session_id: &'a str,
        message: &'a Message,
    ) -> StoreFuture<'a, ()> {
        let (id, message) = (session_id.to_string(), message.clone());
        Box::pin(self.call(move |db| db.append_message(&id, &message)))
    }

    fn list_sessions(&self, limit: usize) -> StoreFuture<'_, Vec<SessionRecord>> {
        Box::pin(self.call(move |db| db.list_sessions(limit)))
    }

    fn get_session<'a>(&'a self, id_or_prefix: &'a str) -> StoreFuture<'a, SessionRecord> {
        let id = id_or_prefix.to_string();
        Box::pin(self.call(move |db| db.get_session(&id)))
    }

    fn events<'a>(&'a self, session_id: &'a str, since_seq: u64) -> StoreFuture<'a, Vec<Event>> {
        let id = session_id.to_string();
        Box::pin(self.call(move |db| db.events(&id, since_seq)))
    }

    fn messages<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>> {
        let id = session_id.to_string();
        Box::pin(self.call(move |db| db.messages(&id)))
    }

    fn last_seq<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, u64> {
        let id = session_id.to_string();
        Box::pin(self.call(move |db| db.last_seq(&id)))
    }

    fn create_blocker<'a>(&'a self, blocker: &'a NewBlocker) -> StoreFuture<'a, ()> {
        let blocker = blocker.clone();
        Box::pin(self.call(move |db| db.create_blocker(&blocker)))
    }

    fn list_blockers<'a>(
        &'a self,
        session_id: Option<&'a str>,
        all: bool,
    ) -> StoreFuture<'a, Vec<BlockerRecord>> {
        let id = session_id.map(str::to_string);
        Box::pin(self.call(move |db| db.list_blockers(id.as_deref(), all)))
    }

    fn get_blocker<'a>(&'a self, id_or_prefix: &'a str) -> StoreFuture<'a, BlockerRecord> {
        let id = id_or_prefix.to_string();
        Box::pin(self.call(move |db| db.get_blocker(&id)))
    }

    fn answer_blocker<'a>(
        &'a self,
        id_or_prefix: &'a str,
        answer: &'a str,
    ) -> StoreFuture<'a, BlockerRecord> {
        let (id, answer) = (id_or_prefix.to_string(), answer.to_string());
        Box::pin(self.call(move |db| db.answer_blocker(&id, &answer)))
    }

    fn mark_blockers_delivered<'a>(&'a self, ids: &'a [String]) -> StoreFuture<'a, ()> {
        let ids = ids.to_vec();
        Box::pin(self.call(move |db| db.mark_blockers_delivered(&ids)))
    }

    fn memory_entries(&self) -> StoreFuture<'_, Vec<MemoryEntry>> {
        Box::pin(self.call(|db| db.memory_entries()))
    }

    fn save_result<'a>(
        &'a self,
        session_id: &'a str,
        handle: &'a str,
        content: &'a str,
    ) -> StoreFuture<'a, ()> {
        let (id, handle, content) = (
            session_id.to_string(),
            handle.to_string(),
            content.to_string(),
        );
        Box::pin(self.call(move |db| db.save_result(&id, &handle, &content)))
    }

    fn stored_results<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<(String, String)>> {
        let id = session_id.to_string();
        Box::pin(self.call(move |db| db.stored_results(&id)))
    }

    fn acquire_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        let (id, holder) = (session_id.to_string(), holder.to_string());
        Box::pin(self.call(move |db| db.acquire_lease(&id, &holder, ttl_ms)))
    }

    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        let (id, holder) = (session_id.to_string(), holder.to_string());
        Box::pin(self.call(move |db| db.renew_lease(&id, &holder, ttl_ms)))
    }

    fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, ()> {
        let (id, holder) = (session_id.to_string(), holder.to_string());
        Box::pin(self.call(move |db| db.release_lease(&id, &holder)))
    }

    fn lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<Lease>> {
        let id = session_id.to_string();
        Box::pin(self.call(move |db| db.lease(&id)))
    }

    fn acquire_workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        let (ws, id, holder) = (
            workspace.to_string(),
            session_id.to_string(),
            holder.to_string(),
        );
        Box::pin(self.call(move |db| db.acquire_workspace_lease(&ws, &id, &holder, ttl_ms)))
    }

    fn renew_workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        let (ws, holder) = (workspace.to_string(), holder.to_string());
        Box::pin(self.call(move |db| db.renew_workspace_lease(&ws, &holder, ttl_ms)))
    }

    fn release_workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
        holder: &'a str,
    ) -> StoreFuture<'a, ()> {
        let (ws, holder) = (workspace.to_string(), holder.to_string());
        Box::pin(self.call(move |db| db.release_workspace_lease(&ws, &holder)))
    }

    fn workspace_lease<'a>(
        &'a self,
        workspace: &'a str,
    ) -> StoreFuture<'a, Option<WorkspaceLease>> {
        let ws = workspace.to_string();
        Box::pin(self.call(move |db| db.workspace_lease(&ws)))
    }
}
