//! `keel worker`: apalis workers that take turns from the queue and run them.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use apalis::layers::retry::backoff::{ExponentialBackoffMaker, MakeBackoff};
use apalis::layers::retry::{HasherRng, RetryPolicy};
use apalis::prelude::{BoxDynError, Data, WorkerBuilder, WorkerBuilderExt, WorkerError};
use apalis_postgres::{PgPool, PostgresStorage};
use keel_engine::Emitter;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides, TurnEnd};
use keel_protocol::{EventKind, Op, SessionStatus};
use keel_store::{LEASE_TTL_MS, RunLease, lease_holder};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::checkout::{Checkout, Checkouts};
use crate::{QueueError, TurnJob, config};

/// How a worker process runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// This process's name in the queue (unique per process: `keel-HOST-PID`).
    pub name: String,
    /// Turns run at once.
    pub concurrency: usize,
    /// Heartbeat interval; a worker silent for three of them is dead and its jobs are
    /// re-enqueued.
    pub heartbeat: Duration,
    /// Attempts after the first failed one, with exponential backoff.
    pub retries: usize,
    /// Where sessions with a git source are checked out (`<checkout_dir>/<session id>`).
    pub checkout_dir: PathBuf,
    /// How long one git call (clone, fetch, push) may take.
    pub git_timeout: Duration,
}

impl WorkerOptions {
    /// Defaults for this process: one turn at a time, a 5 s heartbeat, 8 retries.
    pub fn new() -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        Self {
            name: format!("keel-{host}-{}", std::process::id()),
            concurrency: 1,
            heartbeat: Duration::from_secs(5),
            retries: 8,
            checkout_dir: default_checkout_dir(),
            git_timeout: Duration::from_secs(300),
        }
    }
}

/// `$KEEL_HOME/checkouts` (Keel's data directory).
pub fn default_checkout_dir() -> PathBuf {
    keel_engine::config::data_dir(&|k| std::env::var(k).ok()).join("checkouts")
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// What a worker is doing (its health endpoint shows it).
#[derive(Debug, Default)]
pub struct WorkerStats {
    pub(crate) running: AtomicUsize,
    pub(crate) completed: AtomicU64,
    pub(crate) failed: AtomicU64,
}

/// A snapshot of [`WorkerStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WorkerHealth {
    /// Turns running now.
    pub running: usize,
    /// Turns run to their end (any status).
    pub completed: u64,
    /// Attempts that failed (retried until the retries run out).
    pub failed: u64,
}

impl WorkerStats {
    pub fn health(&self) -> WorkerHealth {
        WorkerHealth {
            running: self.running.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

#[derive(Clone)]
struct State {
    builder: SessionBuilder,
    stats: Arc<WorkerStats>,
    checkouts: Checkouts,
    /// Cancelled to cancel running turns (never at a graceful stop: turns finish).
    stop: CancellationToken,
}

/// Decrements `running` however a turn ends.
pub(crate) struct Running(pub(crate) Arc<WorkerStats>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs one turn job.
async fn run_turn(job: TurnJob, state: Data<State>) -> Result<(), BoxDynError> {
    state.stats.running.fetch_add(1, Ordering::Relaxed);
    let _running = Running(state.stats.clone());
    let outcome = turn(&job, &state).await;
    match &outcome {
        Ok(()) => state.stats.completed.fetch_add(1, Ordering::Relaxed),
        Err(e) => {
            eprintln!(
                "keel worker: session {}: attempt failed: {e}",
                job.session_id
            );
            state.stats.failed.fetch_add(1, Ordering::Relaxed)
        }
    };
    outcome
}

async fn turn(job: &TurnJob, state: &State) -> Result<(), BoxDynError> {
    let store = state.builder.store().clone();
    let record = store.get_session(&job.session_id).await?;
    // An earlier attempt may have finished the turn and died before reporting it.
    let since = store.events(&record.id, job.after_seq).await?;
    if since
        .iter()
        .any(|e| matches!(e.kind, EventKind::TurnFinished { .. }))
    {
        return Ok(());
    }
    // A run still holds the session (a dead worker's lease has not expired yet, or another
    // process runs it): fail this attempt without touching the session; it is retried.
    if let Some(lease) = record.lease.as_ref().filter(|l| l.is_live()) {
        return Err(format!(
            "session {} is held by {} for a few more seconds; retrying",
            record.id, lease.holder
        )
        .into());
    }
    // The session runs where it was created (a workspace on storage every worker shares), or
    // in this worker's checkout of its git source.
    let (workspace, checkout) = match &record.repo {
        None => (PathBuf::from(&record.workspace), None),
        Some(repo) => match state.checkouts.prepare(&record.id, repo).await {
            Ok(c) => (c.dir().to_path_buf(), Some(c)),
            Err(e) => {
                let message = format!(
                    "cannot check out {} at `{}` for this turn: {e}",
                    repo.shown_url(),
                    repo.git_ref
                );
                eprintln!("keel worker: session {}: {message}", record.id);
                fail_turn(&store, &record, &job.content, message).await?;
                return Ok(());
            }
        },
    };
    let overrides = SessionOverrides::from_record(&record);
    let engine = Arc::new(state.builder.engine(&workspace, &overrides)?);
    let mut handle = SessionHandle::new(engine, record.id.clone(), Vec::new())
        .rebuild_with(state.builder.clone(), &workspace, overrides)
        .stop_with(&state.stop);
    if let Some(checkout) = checkout {
        handle = handle.on_turn_end(Arc::new(Publish {
            checkout,
            store: store.clone(),
            session_id: record.id.clone(),
        }));
    }
    // A session left running by a dead worker is resumed here (from its last stored event)
    // once its run lease has expired; until then this fails as busy and is retried.
    let ticket = match handle.submit(Op::user_message(job.content.clone())).await {
        Ok(OpAck::Turn(ticket)) => ticket,
        Ok(_) => return Err("the session did not start a turn".into()),
        Err(e) => return Err(e.to_string().into()),
    };
    let result = ticket.finished().await;
    if result.outcome.is_none()
        && let Some(m) = result.message
    {
        return Err(m.into());
    }
    Ok(())
}

/// A turn that could not start (its checkout failed) ends `failed` with `message`. A session
/// whose first turn it was is marked failed with the message as its task: it never started.
async fn fail_turn(
    store: &Arc<dyn keel_store::Store>,
    record: &keel_store::SessionRecord,
    content: &str,
    message: String,
) -> Result<(), BoxDynError> {
    if record.status == SessionStatus::Idle {
        store.set_session_task(&record.id, content).await?;
        store
            .update_session(&record.id, SessionStatus::Failed, 0, &record.usage)
            .await?;
    }
    Emitter::new(record.id.clone(), store.clone(), Vec::new())
        .emit(EventKind::TurnFinished {
            status: SessionStatus::Failed,
            message: Some(message),
        })
        .await?;
    Ok(())
}

/// Commits and pushes a session's checkout at the end of each turn, holding the session's
/// run lease meanwhile: the run has given it back, and a next turn (on any worker) must not
/// check the remote out before this push (its attempt fails as busy and is retried).
struct Publish {
    checkout: Checkout,
    store: Arc<dyn keel_store::Store>,
    session_id: String,
}

impl TurnEnd for Publish {
    fn turn_ended<'a>(
        &'a self,
        emitter: &'a Emitter,
        _status: SessionStatus,
    ) -> futures::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let url = self.checkout.repo().shown_url();
            // Not taken (another run holds it): the push goes on; it never overwrites a branch
            // that moved (a rejected push fails the turn).
            let lease = RunLease::acquire(
                self.store.clone(),
                &self.session_id,
                lease_holder(&format!("push-{}", self.session_id)),
                LEASE_TTL_MS,
                CancellationToken::new(),
            )
            .await
            .ok()
            .flatten();
            let published = self.checkout.publish().await;
            if let Some(lease) = lease {
                let _ = lease.release().await;
            }
            match published {
                Ok(None) => Ok(()),
                Ok(Some(pushed)) => emitter
                    .emit(EventKind::WorkspacePushed {
                        url,
                        branch: pushed.branch,
                        commit: pushed.commit,
                    })
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string()),
                Err(e) => Err(format!("the turn's changes were not pushed to {url}: {e}")),
            }
        })
    }
}

/// Runs `options.concurrency` apalis workers on the turn queue of `pool`'s database until
/// `stop` is cancelled; running turns then finish before this returns.
pub async fn run_worker(
    pool: PgPool,
    builder: SessionBuilder,
    options: WorkerOptions,
    stats: Arc<WorkerStats>,
    stop: CancellationToken,
) -> Result<(), QueueError> {
    let state = State {
        builder,
        stats,
        checkouts: Checkouts::new(&options.checkout_dir, options.git_timeout),
        stop: CancellationToken::new(),
    };
    let mut workers = tokio::task::JoinSet::new();
    for i in 0..options.concurrency.max(1) {
        let storage = PostgresStorage::<TurnJob>::new(&pool)
            .with_config(config(options.heartbeat, 1))
            .with_pubsub();
        let backoff = ExponentialBackoffMaker::new(
            Duration::from_millis(500),
            Duration::from_secs(10),
            0.5,
            HasherRng::default(),
        )
        .map_err(|e| QueueError::Worker(format!("bad backoff: {e}")))?
        .make_backoff();
        let worker = WorkerBuilder::new(format!("{}-{i}", options.name))
            .backend(storage)
            // The slot is outside the retries: a retrying turn keeps its slot (the other way
            // round, the worker readying its next fetch takes the only permit and the retry
            // waits for it forever).
            .concurrency(1)
            .retry(RetryPolicy::retries(options.retries).with_backoff(backoff))
            .data(state.clone())
            .build(run_turn);
        let stop = stop.clone();
        workers.spawn(async move {
            worker
                .run_until(async move {
                    stop.cancelled().await;
                    Ok::<(), WorkerError>(())
                })
                .await
        });
    }
    let mut first_error = None;
    while let Some(done) = workers.join_next().await {
        let err = match done {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        // One worker failing (the database went away for good) stops them all.
        stop.cancel();
        first_error.get_or_insert(err);
    }
    match first_error {
        Some(e) => Err(QueueError::Worker(e)),
        None => Ok(()),
    }
}
