//! `keel worker`: apalis workers that take turns from the queue and run them.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use apalis::layers::retry::backoff::{ExponentialBackoffMaker, MakeBackoff};
use apalis::layers::retry::{HasherRng, RetryPolicy};
use apalis::prelude::{BoxDynError, Data, WorkerBuilder, WorkerBuilderExt, WorkerError};
use apalis_postgres::{PgPool, PostgresStorage};
use keel_engine::approval::ApprovalGate;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides};
use keel_protocol::{ApprovalScope, EventKind, Op, SessionStatus};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::control::Controls;
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
        }
    }
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// What a worker is doing (its health endpoint shows it).
#[derive(Debug, Default)]
pub struct WorkerStats {
    running: AtomicUsize,
    completed: AtomicU64,
    failed: AtomicU64,
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
    /// Cancelled to cancel running turns (never at a graceful stop: turns finish).
    stop: CancellationToken,
    /// Cancels and approval answers from the servers (the control channel).
    controls: Arc<Controls>,
}

/// Decrements `running` however a turn ends.
struct Running(Arc<WorkerStats>);

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
    let events = store.events(&record.id, 0).await?;
    if events
        .iter()
        .any(|e| e.seq > job.after_seq && matches!(e.kind, EventKind::TurnFinished { .. }))
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
    // The session runs where it was created: a workspace on storage every worker shares.
    let workspace = PathBuf::from(&record.workspace);
    let overrides = SessionOverrides::from_record(&record);
    let engine = Arc::new(state.builder.engine(&workspace, &overrides)?);
    // Risky calls ask as in `keel serve` alone (`[approval]`, its timeout); the answers come
    // from any server through the control channel.
    let gate = Arc::new(ApprovalGate::from_config(engine.config(), None, true));
    // Calls approved "for the session" in earlier turns (other workers' handles) run
    // without asking again.
    for (tool, summary) in approved_for_session(&events) {
        gate.remember(&tool, &summary);
    }
    let handle = SessionHandle::new(engine, record.id.clone(), Vec::new())
        .rebuild_with(state.builder.clone(), &workspace, overrides)
        .approvals(gate)
        .stop_with(&state.stop);
    let handle = Arc::new(handle);
    // A session left running by a dead worker is resumed here (from its last stored event)
    // once its run lease has expired; until then this fails as busy and is retried.
    let ticket = match handle.submit(Op::user_message(job.content.clone())).await {
        Ok(OpAck::Turn(ticket)) => ticket,
        Ok(_) => return Err("the session did not start a turn".into()),
        Err(e) => return Err(e.to_string().into()),
    };
    // Cancels and answers for this turn reach it from now on (and any already sent, now).
    let registered = state
        .controls
        .register(&record.id, handle.clone(), job.after_seq)
        .await;
    let result = ticket.finished().await;
    drop(registered);
    // A cancelled turn has ended as asked: not a failure to retry.
    if result.status != SessionStatus::Cancelled
        && result.outcome.is_none()
        && let Some(m) = result.message
    {
        return Err(m.into());
    }
    Ok(())
}

/// The calls (tool, summary) `events` show approved with scope `session`.
fn approved_for_session(events: &[keel_protocol::Event]) -> Vec<(String, String)> {
    let mut asked = std::collections::HashMap::new();
    let mut approved = Vec::new();
    for e in events {
        match &e.kind {
            EventKind::ApprovalRequested {
                call_id,
                tool,
                summary,
                ..
            } => {
                asked.insert(call_id.clone(), (tool.clone(), summary.clone()));
            }
            EventKind::ApprovalResolved {
                call_id,
                approved: true,
                scope: Some(ApprovalScope::Session),
                ..
            } => {
                if let Some(call) = asked.remove(call_id) {
                    approved.push(call);
                }
            }
            EventKind::ApprovalResolved { call_id, .. } => {
                asked.remove(call_id);
            }
            _ => {}
        }
    }
    approved
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
    let controls = Controls::new(pool.clone());
    let listening = CancellationToken::new();
    let listener = tokio::spawn(controls.clone().run(listening.clone()));
    // However this returns, the listener stops with it.
    let _stop_listening = listening.clone().drop_guard();
    let state = State {
        builder,
        stats,
        stop: CancellationToken::new(),
        controls,
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
    listening.cancel();
    let _ = listener.await;
    match first_error {
        Some(e) => Err(QueueError::Worker(e)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::Event;

    fn event(kind: EventKind) -> Event {
        Event {
            session_id: "s".into(),
            seq: 0,
            ts: 0,
            run_id: "r".into(),
            parent_run_id: None,
            kind,
        }
    }

    fn asked(call: &str, summary: &str) -> Event {
        event(EventKind::ApprovalRequested {
            call_id: call.into(),
            tool: "run_command".into(),
            summary: summary.into(),
            class: "destructive".into(),
        })
    }

    fn resolved(call: &str, approved: bool, scope: Option<ApprovalScope>) -> Event {
        event(EventKind::ApprovalResolved {
            call_id: call.into(),
            approved,
            scope,
            reason: None,
        })
    }

    #[test]
    fn only_calls_approved_for_the_session_are_remembered() {
        let events = [
            asked("a", "rm a"),
            resolved("a", true, Some(ApprovalScope::Session)),
            asked("b", "rm b"),
            resolved("b", true, Some(ApprovalScope::Once)),
            asked("c", "rm c"),
            resolved("c", false, None),
            asked("d", "rm d"),
        ];
        assert_eq!(
            approved_for_session(&events),
            [("run_command".to_string(), "rm a".to_string())]
        );
    }
}
