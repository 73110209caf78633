//! A child's view of the store: everything is the parent's store, except that the child's
//! events are written into the parent's session (they carry the child's `run_id` and the
//! parent's as `parent_run_id`), with the child's `session_started`/`session_resumed` and
//! `session_finished` recorded as `agent_started` and `agent_finished`. The child's transcript,
//! lease and stored results stay under its own session record, whose workspace is marked
//! (`<root>#subagent-a1-of-<parent>`) so that lists of a workspace's sessions (`keel run
//! --continue`, `keel chat`'s picker, `keel sessions --workspace`) never offer a child; reading
//! it back through this store unmarks it.

use std::sync::Arc;

use keel_protocol::{Event, EventKind, Message, SessionStatus, Usage};
use keel_store::{
    BlockerRecord, Lease, MemoryEntry, NewBlocker, NewSession, SessionRecord, Store, StoreFuture,
};

/// Wraps the parent's store for one child.
pub(crate) struct ChildStore {
    pub(crate) inner: Arc<dyn Store>,
    /// The parent's session, where the child's events go.
    pub(crate) parent_session: String,
    pub(crate) agent_id: String,
    pub(crate) role: String,
    pub(crate) model: String,
}

impl ChildStore {
    /// The workspace recorded for the child's session.
    fn marked(&self, workspace: &str) -> String {
        // Recognised by `super::is_subagent_session`.
        format!(
            "{workspace}#subagent-{}-of-{}",
            self.agent_id, self.parent_session
        )
    }

    /// `event` as stored in the parent's session.
    fn adopt(&self, event: &Event) -> Event {
        let (agent_id, role) = (self.agent_id.clone(), self.role.clone());
        let kind = match &event.kind {
            EventKind::SessionStarted { task, model, .. } => EventKind::AgentStarted {
                agent_id,
                role,
                task: task.clone(),
                model: model.clone(),
            },
            EventKind::SessionResumed { message, .. } => EventKind::AgentStarted {
                agent_id,
                role,
                task: message.clone(),
                model: self.model.clone(),
            },
            EventKind::SessionFinished {
                status,
                iterations,
                usage,
                ..
            } => EventKind::AgentFinished {
                agent_id,
                role,
                status: *status,
                iterations: *iterations,
                usage: *usage,
            },
            other => other.clone(),
        };
        Event {
            session_id: self.parent_session.clone(),
            kind,
            ..event.clone()
        }
    }
}

impl Store for ChildStore {
    fn create_session<'a>(&'a self, session: &'a NewSession) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let marked = NewSession {
                workspace: self.marked(&session.workspace),
                ..session.clone()
            };
            self.inner.create_session(&marked).await
        })
    }
    fn update_session<'a>(
        &'a self,
        id: &'a str,
        status: SessionStatus,
        iterations: u32,
        usage: &'a Usage,
    ) -> StoreFuture<'a, ()> {
        self.inner.update_session(id, status, iterations, usage)
    }
    fn set_session_task<'a>(&'a self, id: &'a str, task: &'a str) -> StoreFuture<'a, ()> {
        self.inner.set_session_task(id, task)
    }
    fn set_session_model<'a>(
        &'a self,
        id: &'a str,
        provider: &'a str,
        model: &'a str,
        mode: &'a str,
    ) -> StoreFuture<'a, ()> {
        self.inner.set_session_model(id, provider, model, mode)
    }
    fn delete_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        self.inner.delete_session(id)
    }
    fn append_event<'a>(&'a self, event: &'a Event) -> StoreFuture<'a, Event> {
        Box::pin(async move {
            let adopted = self.adopt(event);
            self.inner.append_event(&adopted).await
        })
    }
    fn append_message<'a>(
        &'a self,
        session_id: &'a str,
        message: &'a Message,
    ) -> StoreFuture<'a, ()> {
        self.inner.append_message(session_id, message)
    }
    fn list_sessions(&self, limit: usize) -> StoreFuture<'_, Vec<SessionRecord>> {
        self.inner.list_sessions(limit)
    }
    fn get_session<'a>(&'a self, id_or_prefix: &'a str) -> StoreFuture<'a, SessionRecord> {
        Box::pin(async move {
            let mut record = self.inner.get_session(id_or_prefix).await?;
            let suffix = self.marked("");
            if let Some(root) = record.workspace.strip_suffix(&suffix) {
                record.workspace = root.to_string();
            }
            Ok(record)
        })
    }
    fn events<'a>(&'a self, session_id: &'a str, since_seq: u64) -> StoreFuture<'a, Vec<Event>> {
        self.inner.events(session_id, since_seq)
    }
    fn messages<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>> {
        self.inner.messages(session_id)
    }
    fn last_seq<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, u64> {
        self.inner.last_seq(session_id)
    }
    fn create_blocker<'a>(&'a self, blocker: &'a NewBlocker) -> StoreFuture<'a, ()> {
        self.inner.create_blocker(blocker)
    }
    fn list_blockers<'a>(
        &'a self,
        session_id: Option<&'a str>,
        all: bool,
    ) -> StoreFuture<'a, Vec<BlockerRecord>> {
        self.inner.list_blockers(session_id, all)
    }
    fn get_blocker<'a>(&'a self, id_or_prefix: &'a str) -> StoreFuture<'a, BlockerRecord> {
        self.inner.get_blocker(id_or_prefix)
    }
    fn answer_blocker<'a>(
        &'a self,
        id_or_prefix: &'a str,
        answer: &'a str,
    ) -> StoreFuture<'a, BlockerRecord> {
        self.inner.answer_blocker(id_or_prefix, answer)
    }
    fn mark_blockers_delivered<'a>(&'a self, ids: &'a [String]) -> StoreFuture<'a, ()> {
        self.inner.mark_blockers_delivered(ids)
    }
    fn memory_entries(&self) -> StoreFuture<'_, Vec<MemoryEntry>> {
        self.inner.memory_entries()
    }
    fn save_result<'a>(
        &'a self,
        session_id: &'a str,
        handle: &'a str,
        content: &'a str,
    ) -> StoreFuture<'a, ()> {
        self.inner.save_result(session_id, handle, content)
    }
    fn stored_results<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<(String, String)>> {
        self.inner.stored_results(session_id)
    }
    fn acquire_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        self.inner.acquire_lease(session_id, holder, ttl_ms)
    }
    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        self.inner.renew_lease(session_id, holder, ttl_ms)
    }
    fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, ()> {
        self.inner.release_lease(session_id, holder)
    }
    fn lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<Lease>> {
        self.inner.lease(session_id)
    }
}
