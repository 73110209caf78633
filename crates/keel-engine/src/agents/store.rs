//! A child's view of the store: everything is the parent's store, except that the child's
//! events are written into the parent's session (they carry the child's `run_id` and the
//! parent's as `parent_run_id`), with the child's `session_started`/`session_resumed` and
//! `session_finished` recorded as `agent_started` and `agent_finished`. The child's transcript,
//! lease and stored results stay under its own session record, whose workspace is marked
//! (`<root>#subagent-a1-of-<parent>`) so that lists of a workspace's sessions (`keel run
//! --continue`, `keel chat`'s picker, `keel sessions --workspace`) never offer a child; reading
//! it back through this store unmarks it.

use std::sync::Arc;

use keel_protocol::{Event, EventKind};
use keel_store::{NewSession, SessionRecord, Store, StoreFuture};

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
    keel_store::delegate_store!(inner;
        update_session set_session_task set_session_model delete_session append_message
        list_sessions events messages last_seq create_blocker list_blockers get_blocker
        answer_blocker mark_blockers_delivered memory_entries save_result stored_results
        acquire_lease renew_lease release_lease lease workspace_lease
    );
    // A child works in its parent's workspace while the parent's run holds the lease: it
    // takes nothing, and gives nothing up.
    fn acquire_workspace_lease<'a>(
        &'a self,
        _workspace: &'a str,
        _session_id: &'a str,
        _holder: &'a str,
        _ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async { Ok(true) })
    }
    fn renew_workspace_lease<'a>(
        &'a self,
        _workspace: &'a str,
        _holder: &'a str,
        _ttl_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async { Ok(true) })
    }
    fn release_workspace_lease<'a>(
        &'a self,
        _workspace: &'a str,
        _holder: &'a str,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn create_session<'a>(&'a self, session: &'a NewSession) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let marked = NewSession {
                workspace: self.marked(&session.workspace),
                ..session.clone()
            };
            self.inner.create_session(&marked).await
        })
    }
    fn append_event<'a>(&'a self, event: &'a Event) -> StoreFuture<'a, Event> {
        Box::pin(async move {
            let adopted = self.adopt(event);
            self.inner.append_event(&adopted).await
        })
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
}
