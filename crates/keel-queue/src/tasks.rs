//! Tasks as jobs: `POST /api/v1/work/batch` on `keel serve --database` queues the first ready
//! task of the batch ([`PgTaskQueue`]); the worker that runs it ([`run_task_worker`]) queues
//! the next ready one, so a batch runs one task at a time in the workspace, in dependency
//! order, as `keel work batch` does in one process — but every task is a job: retried with
//! backoff, and taken over by another worker when its worker dies (the task's own session
//! resumes from its last stored event once its run lease has expired).
//!
//! Each job carries an idempotency key `WORKSPACE#TASK#BATCH`: a worker that dies after
//! queueing the next task but before its own job is marked done runs the job again, and the
//! second push of the same next task is refused by the queue's unique key instead of running
//! that task twice.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::{BoxDynError, Data, TaskBuilder, TaskSink};
use apalis_postgres::{PgPool, PostgresStorage};
use futures::future::BoxFuture;
use keel_engine::runtime::{SessionBuilder, SessionOverrides};
use keel_phase::ExecutionMode;
use keel_store::PgStore;
use keel_store::work::{TaskStatus, WorkStores};
use keel_work::TaskRunner;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::supervise::supervised_queue;
use crate::worker::{WorkerOptions, WorkerStats, counted};
use crate::{QueueError, config_for};

/// The apalis queue tasks go to.
pub const TASK_QUEUE: &str = "keel-tasks";

/// One task of a batch to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskJob {
    /// The workspace's canonical path (on storage every worker shares), as tasks are keyed.
    pub workspace: String,
    pub task: u32,
    /// The batch's tasks (`until`'s task and what it depends on); `None`: every task.
    pub scope: Option<Vec<u32>>,
    /// Names this batch in the jobs' idempotency keys.
    pub batch: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub script: Option<String>,
    pub mode: Option<String>,
}

impl TaskJob {
    /// The job for `task` of `workspace` in a new batch run with `overrides`.
    pub fn first(
        workspace: &str,
        task: u32,
        scope: Option<Vec<u32>>,
        overrides: &SessionOverrides,
    ) -> Self {
        Self {
            workspace: workspace.to_string(),
            task,
            scope,
            batch: uuid::Uuid::now_v7().simple().to_string(),
            provider: overrides.provider.clone(),
            model: overrides.model.clone(),
            base_url: overrides.base_url.clone(),
            script: overrides.script.as_ref().map(|p| p.display().to_string()),
            mode: overrides.mode.map(|m| m.as_str().to_string()),
        }
    }

    /// The same batch's job for `task`.
    fn next(&self, task: u32) -> Self {
        Self {
            task,
            ..self.clone()
        }
    }

    fn key(&self) -> String {
        format!("{}#{}#{}", self.workspace, self.task, self.batch)
    }

    fn overrides(&self) -> SessionOverrides {
        SessionOverrides {
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            script: self.script.as_ref().map(Into::into),
            mode: self.mode.as_deref().and_then(ExecutionMode::parse),
            ..SessionOverrides::default()
        }
    }
}

/// Pushes task jobs; [`TaskQueue`](keel_server::TaskQueue) for the server.
#[derive(Clone)]
pub struct PgTaskQueue {
    storage: PostgresStorage<TaskJob>,
    pool: PgPool,
}

impl std::fmt::Debug for PgTaskQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTaskQueue").finish_non_exhaustive()
    }
}

impl PgTaskQueue {
    pub fn new(pool: &PgPool) -> Self {
        let storage = PostgresStorage::new(pool).with_config(config_for(
            TASK_QUEUE,
            Duration::from_secs(30),
            1,
        ));
        Self {
            storage,
            pool: pool.clone(),
        }
    }

    /// Queues `job`; `Ok(false)` when the same batch already queued that task.
    pub async fn push(&self, job: TaskJob) -> Result<bool, QueueError> {
        let key = job.key();
        let task = TaskBuilder::new(job).idempotency_key(&key).build();
        let mut storage = self.storage.clone();
        match storage.push_task(task).await {
            Ok(()) => Ok(true),
            Err(e) if e.to_string().contains("idempotency") => Ok(false),
            Err(e) => Err(QueueError::Push(e.to_string())),
        }
    }

    /// Task jobs of `workspace` waiting, running or due for a retry.
    pub async fn active(&self, workspace: &str) -> Result<i64, QueueError> {
        sqlx::query_scalar(
            "SELECT count(*) FROM apalis.jobs WHERE job_type = $1 \
             AND left(idempotency_key, length($2) + 1) = $2 || '#' \
             AND (status IN ('Pending', 'Queued', 'Running') \
                  OR (status = 'Failed' AND attempts < max_attempts))",
        )
        .bind(TASK_QUEUE)
        .bind(workspace)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| QueueError::Push(e.to_string()))
    }
}

impl keel_server::TaskQueue for PgTaskQueue {
    fn enqueue_batch<'a>(
        &'a self,
        workspace: &'a str,
        task: u32,
        scope: Option<Vec<u32>>,
        overrides: &'a SessionOverrides,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            if self.active(workspace).await.map_err(|e| e.to_string())? > 0 {
                return Err(format!(
                    "a batch of {workspace} is already queued or running; wait for it (GET /api/v1/work/status)"
                ));
            }
            let job = TaskJob::first(workspace, task, scope, overrides);
            let key = job.key();
            self.push(job).await.map_err(|e| e.to_string())?;
            Ok(key)
        })
    }
}

#[derive(Clone)]
struct State {
    builder: SessionBuilder,
    stores: WorkStores,
    queue: PgTaskQueue,
    stats: Arc<WorkerStats>,
}

async fn run_task_job(job: TaskJob, state: Data<State>) -> Result<(), BoxDynError> {
    let what = format!("task #{} of {}", job.task, job.workspace);
    counted(&state.stats, what, task_job(&job, &state)).await
}

async fn task_job(job: &TaskJob, state: &State) -> Result<(), BoxDynError> {
    let runner = TaskRunner::with_builder(
        state.builder.clone(),
        Path::new(&job.workspace),
        job.overrides(),
        state.stores.clone(),
        Vec::new(),
    )?
    .taking_over();
    let task = state.stores.work.task(&job.workspace, job.task).await?;
    let mut cancelled = false;
    match task.status {
        TaskStatus::Ready | TaskStatus::InProgress => {
            // A dead worker's session is still leased for a few seconds: retry later rather
            // than start the task over in a new session.
            if task.status == TaskStatus::InProgress
                && let Some(session) = &task.session_id
                && let Some(lease) = state.stores.sessions.lease(session).await?
                && lease.is_live()
            {
                return Err(format!(
                    "task #{}'s session {session} is held by {} for a few more seconds; retrying",
                    job.task, lease.holder
                )
                .into());
            }
            let run = runner.run_task(job.task).await?;
            cancelled = run.status == TaskStatus::Ready;
        }
        // An earlier attempt ran it and died before its job was marked done.
        TaskStatus::Done | TaskStatus::Failed | TaskStatus::Blocked => {}
    }
    if !cancelled && let Some(next) = runner.next_task(job.scope.as_deref()).await? {
        state.queue.push(job.next(next)).await?;
    }
    Ok(())
}

/// Runs task jobs of `pool`'s database (one at a time per worker process: tasks run in
/// place) until `stop` is cancelled; a running task then finishes before this returns. After
/// a database failure the apalis worker is started again once the database answers.
pub async fn run_task_worker(
    pool: PgPool,
    builder: SessionBuilder,
    store: Arc<PgStore>,
    options: WorkerOptions,
    stats: Arc<WorkerStats>,
    stop: CancellationToken,
) -> Result<(), QueueError> {
    let state = State {
        builder,
        stores: WorkStores::of(store),
        queue: PgTaskQueue::new(&pool),
        stats,
    };
    supervised_queue!(
        TaskJob,
        TASK_QUEUE,
        "tasks",
        run_task_job,
        pool,
        options,
        state,
        stop
    )
}

/// The server's task queue, shared.
pub fn task_queue(pool: &PgPool) -> Arc<dyn keel_server::TaskQueue> {
    Arc::new(PgTaskQueue::new(pool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_carries_the_batch_and_its_overrides_to_the_next_task() {
        let overrides = SessionOverrides {
            provider: Some("scripted".into()),
            script: Some("/w/s.yaml".into()),
            mode: Some(ExecutionMode::PlanExec),
            ..SessionOverrides::default()
        };
        let first = TaskJob::first("/w", 1, Some(vec![1, 2]), &overrides);
        let next = first.next(2);
        assert_eq!(next.batch, first.batch);
        assert_eq!(next.scope, Some(vec![1, 2]));
        assert_eq!(next.overrides(), overrides);
        assert_eq!(next.key(), format!("/w#2#{}", first.batch));
        // Another batch of the same workspace and task is another job.
        assert_ne!(TaskJob::first("/w", 1, None, &overrides).key(), first.key());
    }
}
