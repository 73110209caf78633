//! [`WorkStore`]: PRDs, tasks and proofs behind one async trait, implemented by the SQLite
//! store (its `SqliteDb` methods on the blocking pool) and, with the `postgres` feature, by
//! `PgStore` — so code that holds an `Arc<dyn WorkStore>` runs on either.

use std::sync::Arc;

use super::{NewTask, PrdRecord, ProofRecord, TaskEdit, TaskRecord, TaskStatus};
use crate::{SqliteStore, Store, StoreFuture};

/// One backend seen both ways: its sessions (and blockers) and its PRDs and tasks — what
/// running tasks needs, on SQLite or PostgreSQL alike.
#[derive(Clone)]
pub struct WorkStores {
    pub sessions: Arc<dyn Store>,
    pub work: Arc<dyn WorkStore>,
}

impl WorkStores {
    /// Both views of `store`.
    pub fn of<S: Store + WorkStore + 'static>(store: Arc<S>) -> Self {
        Self {
            sessions: store.clone(),
            work: store,
        }
    }
}

impl std::fmt::Debug for WorkStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkStores").finish_non_exhaustive()
    }
}

/// PRDs (versioned), tasks with dependencies and their proofs, per workspace.
pub trait WorkStore: Send + Sync {
    /// Stores a new PRD as version 1 and returns it.
    fn add_prd<'a>(
        &'a self,
        ws: &'a str,
        title: &'a str,
        body: &'a str,
    ) -> StoreFuture<'a, PrdRecord>;
    /// Stores `body` as the PRD's next version (nothing when it is unchanged).
    fn edit_prd<'a>(&'a self, ws: &'a str, id: u32, body: &'a str) -> StoreFuture<'a, PrdRecord>;
    /// A PRD (the latest one when `id` is `None`) at `version` (default: its latest).
    fn prd<'a>(
        &'a self,
        ws: &'a str,
        id: Option<u32>,
        version: Option<u32>,
    ) -> StoreFuture<'a, PrdRecord>;
    /// Every PRD of the workspace at its latest version, oldest first.
    fn list_prds<'a>(&'a self, ws: &'a str) -> StoreFuture<'a, Vec<PrdRecord>>;
    /// Stores `tasks` for `prd` all or nothing and returns their ids in order.
    fn add_tasks<'a>(
        &'a self,
        ws: &'a str,
        prd: Option<u32>,
        tasks: &'a [NewTask],
    ) -> StoreFuture<'a, Vec<u32>>;
    /// A task by id.
    fn task<'a>(&'a self, ws: &'a str, id: u32) -> StoreFuture<'a, TaskRecord>;
    /// Every task of the workspace, by id.
    fn list_tasks<'a>(&'a self, ws: &'a str) -> StoreFuture<'a, Vec<TaskRecord>>;
    /// Changes a task's definition (dependencies checked: they exist, no cycle).
    fn edit_task<'a>(
        &'a self,
        ws: &'a str,
        id: u32,
        edit: &'a TaskEdit,
    ) -> StoreFuture<'a, TaskRecord>;
    /// Deletes a task no other task depends on, with its proofs.
    fn remove_task<'a>(&'a self, ws: &'a str, id: u32) -> StoreFuture<'a, ()>;
    /// Marks a task `in_progress` in `session_id`, owned by process `pid`.
    fn claim_task<'a>(
        &'a self,
        ws: &'a str,
        id: u32,
        session_id: &'a str,
        pid: u32,
    ) -> StoreFuture<'a, TaskRecord>;
    /// Records how a task's run ended (`question` for a blocked one).
    fn finish_task<'a>(
        &'a self,
        ws: &'a str,
        id: u32,
        status: TaskStatus,
        question: Option<&'a str>,
    ) -> StoreFuture<'a, ()>;
    /// The tasks (workspace, id) that ran in `session_id`.
    fn tasks_of_session<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<(String, u32)>>;
    /// Blocked tasks of `session_id` become ready again (after an answer); returns them.
    fn ready_tasks_of_session<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<u32>>;
    /// Stores a proof for a task's run.
    fn add_proof<'a>(
        &'a self,
        ws: &'a str,
        task: u32,
        session_id: &'a str,
        body: &'a serde_json::Value,
    ) -> StoreFuture<'a, ()>;
    /// A task's proofs, oldest first.
    fn proofs<'a>(&'a self, ws: &'a str, task: u32) -> StoreFuture<'a, Vec<ProofRecord>>;
}

fn s(v: &str) -> String {
    v.to_string()
}

impl WorkStore for SqliteStore {
    fn add_prd<'a>(
        &'a self,
        ws: &'a str,
        title: &'a str,
        body: &'a str,
    ) -> StoreFuture<'a, PrdRecord> {
        let (ws, title, body) = (s(ws), s(title), s(body));
        Box::pin(self.call(move |db| db.add_prd(&ws, &title, &body)))
    }

    fn edit_prd<'a>(&'a self, ws: &'a str, id: u32, body: &'a str) -> StoreFuture<'a, PrdRecord> {
        let (ws, body) = (s(ws), s(body));
        Box::pin(self.call(move |db| db.edit_prd(&ws, id, &body)))
    }

    fn prd<'a>(
        &'a self,
        ws: &'a str,
        id: Option<u32>,
        version: Option<u32>,
    ) -> StoreFuture<'a, PrdRecord> {
        let ws = s(ws);
        Box::pin(self.call(move |db| db.prd(&ws, id, version)))
    }

    fn list_prds<'a>(&'a self, ws: &'a str) -> StoreFuture<'a, Vec<PrdRecord>> {
        let ws = s(ws);
        Box::pin(self.call(move |db| db.list_prds(&ws)))
    }

    fn add_tasks<'a>(
        &'a self,
        ws: &'a str,
        prd: Option<u32>,
        tasks: &'a [NewTask],
    ) -> StoreFuture<'a, Vec<u32>> {
        let (ws, tasks) = (s(ws), tasks.to_vec());
        Box::pin(self.call(move |db| db.add_tasks(&ws, prd, &tasks)))
    }

    fn task<'a>(&'a self, ws: &'a str, id: u32) -> StoreFuture<'a, TaskRecord> {
        let ws = s(ws);
        Box::pin(self.call(move |db| db.task(&ws, id)))
    }

    fn list_tasks<'a>(&'a self, ws: &'a str) -> StoreFuture<'a, Vec<TaskRecord>> {
        let ws = s(ws);
        Box::pin(self.call(move |db| db.list_tasks(&ws)))
    }

    fn edit_task<'a>(
        &'a self,
        ws: &'a str,
        id: u32,
        edit: &'a TaskEdit,
    ) -> StoreFuture<'a, TaskRecord> {
        let (ws, edit) = (s(ws), edit.clone());
        Box::pin(self.call(move |db| db.edit_task(&ws, id, &edit)))
    }

    fn remove_task<'a>(&'a self, ws: &'a str, id: u32) -> StoreFuture<'a, ()> {
        let ws = s(ws);
        Box::pin(self.call(move |db| db.remove_task(&ws, id)))
    }

    fn claim_task<'a>(
        &'a self,
        ws: &'a str,
        id: u32,
        session_id: &'a str,
        pid: u32,
    ) -> StoreFuture<'a, TaskRecord> {
        let (ws, session_id) = (s(ws), s(session_id));
        Box::pin(self.call(move |db| db.claim_task(&ws, id, &session_id, pid)))
    }

    fn finish_task<'a>(
        &'a self,
        ws: &'a str,
        id: u32,
        status: TaskStatus,
        question: Option<&'a str>,
    ) -> StoreFuture<'a, ()> {
        let (ws, question) = (s(ws), question.map(s));
        Box::pin(self.call(move |db| db.finish_task(&ws, id, status, question.as_deref())))
    }

    fn tasks_of_session<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<(String, u32)>> {
        let session_id = s(session_id);
        Box::pin(self.call(move |db| db.tasks_of_session(&session_id)))
    }

    fn ready_tasks_of_session<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<u32>> {
        let session_id = s(session_id);
        Box::pin(self.call(move |db| db.ready_tasks_of_session(&session_id)))
    }

    fn add_proof<'a>(
        &'a self,
        ws: &'a str,
        task: u32,
        session_id: &'a str,
        body: &'a serde_json::Value,
    ) -> StoreFuture<'a, ()> {
        let (ws, session_id, body) = (s(ws), s(session_id), body.clone());
        Box::pin(self.call(move |db| db.add_proof(&ws, task, &session_id, &body)))
    }

    fn proofs<'a>(&'a self, ws: &'a str, task: u32) -> StoreFuture<'a, Vec<ProofRecord>> {
        let ws = s(ws);
        Box::pin(self.call(move |db| db.proofs(&ws, task)))
    }
}

#[cfg(feature = "postgres")]
impl WorkStore for crate::PgStore {
    fn add_prd<'a>(
        &'a self,
        ws: &'a str,
        title: &'a str,
        body: &'a str,
    ) -> StoreFuture<'a, PrdRecord> {
        Box::pin(crate::PgStore::add_prd(self, ws, title, body))
    }

    fn edit_prd<'a>(&'a self, ws: &'a str, id: u32, body: &'a str) -> StoreFuture<'a, PrdRecord> {
        Box::pin(crate::PgStore::edit_prd(self, ws, id, body))
    }

    fn prd<'a>(
        &'a self,
        ws: &'a str,
        id: Option<u32>,
        version: Option<u32>,
    ) -> StoreFuture<'a, PrdRecord> {
        Box::pin(crate::PgStore::prd(self, ws, id, version))
    }

    fn list_prds<'a>(&'a self, ws: &'a str) -> StoreFuture<'a, Vec<PrdRecord>> {
        Box::pin(crate::PgStore::list_prds(self, ws))
    }

    fn add_tasks<'a>(
        &'a self,
        ws: &'a str,
        prd: Option<u32>,
        tasks: &'a [NewTask],
    ) -> StoreFuture<'a, Vec<u32>> {
        Box::pin(crate::PgStore::add_tasks(self, ws, prd, tasks))
    }

    fn task<'a>(&'a self, ws: &'a str, id: u32) -> StoreFuture<'a, TaskRecord> {
        Box::pin(crate::PgStore::task(self, ws, id))
    }

    fn list_tasks<'a>(&'a self, ws: &'a str) -> StoreFuture<'a, Vec<TaskRecord>> {
        Box::pin(crate::PgStore::list_tasks(self, ws))
    }

    fn edit_task<'a>(
        &'a self,
        ws: &'a str,
        id: u32,
        edit: &'a TaskEdit,
    ) -> StoreFuture<'a, TaskRecord> {
        Box::pin(crate::PgStore::edit_task(self, ws, id, edit))
    }

    fn remove_task<'a>(&'a self, ws: &'a str, id: u32) -> StoreFuture<'a, ()> {
        Box::pin(crate::PgStore::remove_task(self, ws, id))
    }

    fn claim_task<'a>(
        &'a self,
        ws: &'a str,
        id: u32,
        session_id: &'a str,
        pid: u32,
    ) -> StoreFuture<'a, TaskRecord> {
        Box::pin(crate::PgStore::claim_task(self, ws, id, session_id, pid))
    }

    fn finish_task<'a>(
        &'a self,
        ws: &'a str,
        id: u32,
        status: TaskStatus,
        question: Option<&'a str>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(crate::PgStore::finish_task(self, ws, id, status, question))
    }

    fn tasks_of_session<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<(String, u32)>> {
        Box::pin(crate::PgStore::tasks_of_session(self, session_id))
    }

    fn ready_tasks_of_session<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<u32>> {
        Box::pin(crate::PgStore::ready_tasks_of_session(self, session_id))
    }

    fn add_proof<'a>(
        &'a self,
        ws: &'a str,
        task: u32,
        session_id: &'a str,
        body: &'a serde_json::Value,
    ) -> StoreFuture<'a, ()> {
        Box::pin(crate::PgStore::add_proof(self, ws, task, session_id, body))
    }

    fn proofs<'a>(&'a self, ws: &'a str, task: u32) -> StoreFuture<'a, Vec<ProofRecord>> {
        Box::pin(crate::PgStore::proofs(self, ws, task))
    }
}
