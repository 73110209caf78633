//! The job queue behind `keel serve --database` and `keel worker`.
//!
//! A turn (a user message for a session) is a job in PostgreSQL, queued and run with
//! [apalis](https://docs.rs/apalis) and its PostgreSQL backend
//! ([apalis-postgres](https://docs.rs/apalis-postgres)); Keel writes no queue of its own:
//!
//! - `keel serve --database URL` pushes a [`TurnJob`] ([`PgTurnQueue`], the server's
//!   [`keel_server::TurnQueue`]) instead of running the turn in-process.
//! - `keel worker --database URL` ([`worker`]) takes jobs, rebuilds the session from its stored
//!   record (workspace, provider, model, mode) with the runtime's session builder and runs the
//!   turn; every event goes to the shared store, whose notices (`PgStore::listen_events`) feed
//!   every server's streams.
//! - A failed attempt is retried with exponential backoff; a job whose worker dies (kill -9,
//!   lost machine) is re-enqueued by apalis once the worker's heartbeats stop, and the next
//!   worker resumes the session from its last stored event (the session's run lease expires
//!   the same way; until it has, the attempt fails as busy and is retried).
//! - Cancelling a turn and answering its approvals go through the control channel
//!   ([`control`]): a queued turn's job is killed, a running turn's worker gets the op.
//! - A session may name a git remote + ref instead of a shared workspace ([`checkout`]): the
//!   worker checks it out into `<checkout_dir>/<session id>`, runs the turn there and pushes
//!   the turn's commit to the remote's `keel/<session id>`, where the next turn starts.

pub mod checkout;
pub mod control;
pub mod flows;
mod notice;
mod supervise;
pub mod tasks;
pub mod worker;

use std::sync::Arc;

use apalis::prelude::TaskSink;
use apalis_postgres::{PgPool, PostgresStorage};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

pub use apalis_postgres::PgPool as QueuePool;
pub use flows::{FLOW_QUEUE, FlowJob, push_flow, run_flow_worker};
pub use supervise::run_worker;
pub use tasks::{PgTaskQueue, TASK_QUEUE, TaskJob, run_task_worker, task_queue};
pub use worker::{Database, WorkerHealth, WorkerOptions, WorkerStats};

/// The apalis queue turns go to.
pub const TURN_QUEUE: &str = "keel-turns";

/// One turn to run: the user message `content` for session `session_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnJob {
    pub session_id: String,
    pub content: String,
    /// The session's last stored seq when the turn was asked for: a `turn_finished` after it
    /// means an earlier attempt already ran the turn (its worker died before reporting).
    pub after_seq: u64,
}

/// Why the queue cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("cannot connect the job queue to {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("cannot set up the job queue's tables (schema `apalis`): {0}")]
    Setup(String),
    #[error("cannot enqueue the turn: {0}")]
    Push(String),
    #[error("the worker stopped with an error: {0}")]
    Worker(String),
}

/// The pool of the queue's database (`postgres://…`), its tables set up (idempotent; several
/// processes may do it at once).
pub async fn connect(url: &str) -> Result<PgPool, QueueError> {
    let shown = keel_store::redact_url(url);
    // A call waits this long for a connection (also while the database restarts) before it
    // fails: the server answers 503, a worker retries.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(std::time::Duration::from_secs(5))
        .connect(url)
        .await
        .map_err(|e| QueueError::Connect {
            url: shown.clone(),
            reason: e.to_string(),
        })?;
    PostgresStorage::<()>::setup(&pool)
        .await
        .map_err(|e| QueueError::Setup(e.to_string()))?;
    control::setup(&pool)
        .await
        .map_err(|e| QueueError::Setup(format!("the turn control table: {e}")))?;
    Ok(pool)
}

/// What `keel doctor` says about the turn queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueStatus {
    /// Turns waiting for a worker.
    pub pending: i64,
    /// Turns a worker runs now.
    pub running: i64,
    /// Workers seen in the last 30 seconds.
    pub live_workers: i64,
}

/// The turn queue's state in the database at `url`; `None` when its tables do not exist yet
/// (`keel db migrate` creates them).
pub async fn status(url: &str) -> Result<Option<QueueStatus>, QueueError> {
    let shown = keel_store::redact_url(url);
    let connect_err = |e: sqlx::Error| QueueError::Connect {
        url: shown.clone(),
        reason: format!(
            "{e}; the database is down or unreachable: check that PostgreSQL is running and the URL is right"
        ),
    };
    // A database that is down fails within seconds (sqlx would retry a refused connection
    // for its whole acquire timeout).
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(std::time::Duration::from_secs(5))
        .connect(url)
        .await
        .map_err(connect_err)?;
    let exists: bool = sqlx::query_scalar(
        "SELECT to_regclass('apalis.jobs') IS NOT NULL AND to_regclass('apalis.workers') IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .map_err(connect_err)?;
    if !exists {
        return Ok(None);
    }
    let (pending, running): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'Pending'), count(*) FILTER (WHERE status = 'Running') FROM apalis.jobs WHERE job_type = $1",
    )
    .bind(TURN_QUEUE)
    .fetch_one(&pool)
    .await
    .map_err(connect_err)?;
    let live_workers: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM apalis.workers WHERE worker_type = $1 AND last_seen > now() - interval '30 seconds'",
    )
    .bind(TURN_QUEUE)
    .fetch_one(&pool)
    .await
    .map_err(connect_err)?;
    pool.close().await;
    Ok(Some(QueueStatus {
        pending,
        running,
        live_workers,
    }))
}

/// The queue's configuration for turns, with `heartbeat` as the workers' heartbeat (a worker
/// silent for three of them is dead and its jobs go back to the queue).
pub fn config(heartbeat: std::time::Duration, batch: usize) -> apalis_postgres::Config {
    config_for(TURN_QUEUE, heartbeat, batch)
}

/// The same for the queue named `queue`.
pub(crate) fn config_for(
    queue: &str,
    heartbeat: std::time::Duration,
    batch: usize,
) -> apalis_postgres::Config {
    apalis_postgres::Config::default()
        .queue(queue)
        .batch_size(batch.max(1))
        .heartbeat_interval(heartbeat)
        .missed_heartbeats(3)
}

/// The server side: pushes turns as jobs.
#[derive(Clone)]
pub struct PgTurnQueue {
    storage: PostgresStorage<TurnJob>,
    pool: PgPool,
}

impl std::fmt::Debug for PgTurnQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTurnQueue").finish_non_exhaustive()
    }
}

impl PgTurnQueue {
    /// Pushes to the turn queue of `pool`'s database.
    pub fn new(pool: &PgPool) -> Self {
        let storage =
            PostgresStorage::new(pool).with_config(config(std::time::Duration::from_secs(30), 1));
        Self {
            storage,
            pool: pool.clone(),
        }
    }

    /// Enqueues `job`; returns its id (`session:after_seq`).
    pub async fn push(&self, job: TurnJob) -> Result<String, QueueError> {
        let id = format!("{}:{}", job.session_id, job.after_seq);
        let mut storage = self.storage.clone();
        storage
            .push(job)
            .await
            .map_err(|e| QueueError::Push(e.to_string()))?;
        Ok(id)
    }
}

impl keel_server::TurnQueue for PgTurnQueue {
    fn enqueue<'a>(
        &'a self,
        session_id: &'a str,
        content: &'a str,
        after_seq: u64,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            self.push(TurnJob {
                session_id: session_id.to_string(),
                content: content.to_string(),
                after_seq,
            })
            .await
            .map_err(|e| e.to_string())
        })
    }

    fn control<'a>(
        &'a self,
        session_id: &'a str,
        op: &'a keel_protocol::Op,
        seqs: keel_server::ControlSeqs,
    ) -> BoxFuture<'a, Result<keel_server::Controlled, String>> {
        Box::pin(async move {
            control::control(&self.pool, session_id, op, seqs)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// The server's queue, shared.
pub fn turn_queue(pool: &PgPool) -> Arc<dyn keel_server::TurnQueue> {
    Arc::new(PgTurnQueue::new(pool))
}
