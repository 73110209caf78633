//! `keel worker`: apalis workers that take turns from the queue and run them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use apalis::prelude::{BoxDynError, Data};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use keel_engine::Emitter;
use keel_engine::approval::ApprovalGate;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides, TurnEnd};
use keel_protocol::{ApprovalScope, EventKind, Op, SessionStatus};
use keel_store::{LEASE_TTL_MS, RunLease, lease_holder};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::TurnJob;
use crate::checkout::{Checkout, Checkouts};
use crate::control::Controls;

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
    /// Defaults for this process: one turn at a time, a 1 s heartbeat (a worker killed with -9
    /// is found dead, and its turn taken over, within about six seconds), 8 retries.
    pub fn new() -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        Self {
            name: format!("keel-{host}-{}", std::process::id()),
            concurrency: 1,
            heartbeat: Duration::from_secs(1),
            retries: 8,
            checkout_dir: default_checkout_dir(),
            git_timeout: Duration::from_secs(300),
        }
    }
}

/// `$KEEL_HOME/checkouts` (Keel's data directory).
pub fn default_checkout_dir() -> PathBuf {
    keel_config::data_dir(&|k| std::env::var(k).ok()).join("checkouts")
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// How long a job waits for a session another run holds before the attempt fails (and is
/// retried with backoff).
const MAX_LEASE_WAIT: Duration = Duration::from_secs(300);

/// How long an expired lease is watched, not renewed, before its session is taken (by
/// default; a worker uses two of its heartbeats): a run that could not renew it while the
/// database was away renews it as soon as the database is back, within one renewal interval.
const LEASE_GRACE: Duration = Duration::from_secs(10);

/// What a worker is doing (its health endpoint shows it).
#[derive(Debug, Default)]
pub struct WorkerStats {
    pub(crate) running: AtomicUsize,
    pub(crate) completed: AtomicU64,
    pub(crate) failed: AtomicU64,
    /// The queue's database did not answer the last probe (or a worker lost it).
    pub(crate) database_down: AtomicBool,
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
    /// Whether the queue's database answers (`up`) or not (`down`: the worker waits for it,
    /// its running turns go on and store their events once it is back).
    pub database: Database,
}

/// The state of the queue's database as a worker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Database {
    Up,
    Down,
}

impl WorkerStats {
    pub fn health(&self) -> WorkerHealth {
        WorkerHealth {
            running: self.running.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            database: if self.database_down.load(Ordering::Relaxed) {
                Database::Down
            } else {
                Database::Up
            },
        }
    }
}

/// The turns running in this process, by session: a job whose worker was restarted while
/// the database was away comes back (re-enqueued) and waits for its turn here.
type RunningTurns =
    Arc<std::sync::Mutex<HashMap<String, Shared<BoxFuture<'static, Result<(), String>>>>>>;

#[derive(Clone)]
pub(crate) struct State {
    pub(crate) builder: SessionBuilder,
    pub(crate) stats: Arc<WorkerStats>,
    /// Cancelled to cancel running turns (never at a graceful stop: turns finish).
    pub(crate) stop: CancellationToken,
    /// One permit per turn this process runs at once.
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
    pub(crate) turns: RunningTurns,
    /// Cancels and approval answers from the servers (the control channel).
    pub(crate) controls: Arc<Controls>,
    /// Where sessions with a git source are checked out.
    pub(crate) checkouts: Checkouts,
    /// How long an expired run lease must stay unrenewed before its session is taken over.
    pub(crate) lease_grace: Duration,
}

impl State {
    pub(crate) fn new(
        builder: SessionBuilder,
        stats: Arc<WorkerStats>,
        concurrency: usize,
        controls: Arc<Controls>,
    ) -> Self {
        Self {
            builder,
            stats,
            stop: CancellationToken::new(),
            slots: Arc::new(tokio::sync::Semaphore::new(concurrency.max(1))),
            turns: Arc::default(),
            controls,
            checkouts: Checkouts::new(default_checkout_dir(), Duration::from_secs(300)),
            lease_grace: LEASE_GRACE,
        }
    }

    /// Takes a session whose run lease expired once it has stayed unrenewed for `grace`.
    pub(crate) fn with_lease_grace(mut self, grace: Duration) -> Self {
        self.lease_grace = grace;
        self
    }

    /// Checks sessions with a git source out with `checkouts`.
    pub(crate) fn with_checkouts(mut self, checkouts: Checkouts) -> Self {
        self.checkouts = checkouts;
        self
    }

    fn running_turn(
        &self,
        session: &str,
    ) -> Option<Shared<BoxFuture<'static, Result<(), String>>>> {
        self.turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(session)
            .cloned()
    }
}

/// Runs one job attempt, counted in `stats` (running while it runs, then completed or
/// failed); a failure is logged with `what` (the job) and returned for apalis to retry.
pub(crate) async fn counted(
    stats: &Arc<WorkerStats>,
    what: impl std::fmt::Display,
    attempt: impl std::future::Future<Output = Result<(), BoxDynError>>,
) -> Result<(), BoxDynError> {
    stats.running.fetch_add(1, Ordering::Relaxed);
    let _running = Running(stats.clone());
    let outcome = attempt.await;
    match &outcome {
        Ok(()) => stats.completed.fetch_add(1, Ordering::Relaxed),
        Err(e) => {
            crate::notice::tell!("keel worker: {what}: attempt failed: {e}");
            stats.failed.fetch_add(1, Ordering::Relaxed)
        }
    };
    outcome
}

/// Decrements `running` however a turn ends.
pub(crate) struct Running(pub(crate) Arc<WorkerStats>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What an attempt did.
enum Outcome {
    /// The turn ran to its end.
    Ran,
    /// An earlier attempt had already finished the turn.
    AlreadyDone,
}

/// Runs one turn job. The turn runs in a task of its own: should this job's apalis worker
/// stop (the database went away), the turn goes on, stores its events once the database is
/// back (the store retries), and the job, re-enqueued, finds it finished.
pub(crate) async fn run_turn(job: TurnJob, state: Data<State>) -> Result<(), BoxDynError> {
    if let Some(earlier) = state.running_turn(&job.session_id) {
        let _ = earlier.await;
    }
    let permit = state
        .slots
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| format!("the worker is stopping: {e}"))?;
    let (tx, rx) = tokio::sync::oneshot::channel::<Result<(), String>>();
    let done: BoxFuture<'static, Result<(), String>> = Box::pin(async move {
        rx.await
            .unwrap_or_else(|_| Err("the turn's task ended without an answer".into()))
    });
    let done = done.shared();
    state
        .turns
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(job.session_id.clone(), done.clone());
    let task_state = (*state).clone();
    tokio::spawn(async move {
        let _permit = permit;
        let state = task_state;
        state.stats.running.fetch_add(1, Ordering::Relaxed);
        let running = Running(state.stats.clone());
        let outcome = turn(&job, &state).await;
        match &outcome {
            Ok(Outcome::Ran) => {
                state.stats.completed.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Outcome::AlreadyDone) => {}
            Err(e) => {
                crate::notice::tell!(
                    "keel worker: session {}: attempt failed: {e}",
                    job.session_id
                );
                state.stats.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        drop(running);
        state
            .turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&job.session_id);
        let _ = tx.send(outcome.map(drop).map_err(|e| e.to_string()));
    });
    done.await.map_err(Into::into)
}

async fn turn(job: &TurnJob, state: &State) -> Result<Outcome, BoxDynError> {
    let store = state.builder.store().clone();
    // A run elsewhere still holds the session: another worker's turn that went on through a
    // database outage while this job was handed back, or a dead worker whose lease has not
    // expired yet. Wait while its lease is renewed (bounded), then look again.
    let waiting_since = tokio::time::Instant::now();
    let mut watch = keel_store::ExpiryWatch::new(state.lease_grace);
    let (record, events) = loop {
        let record = store.get_session(&job.session_id).await?;
        // An earlier attempt may have finished the turn and died before reporting it.
        let events = store.events(&record.id, 0).await?;
        if events
            .iter()
            .any(|e| e.seq > job.after_seq && matches!(e.kind, EventKind::TurnFinished { .. }))
        {
            return Ok(Outcome::AlreadyDone);
        }
        let Some(lease) = record
            .lease
            .as_ref()
            .filter(|l| watch.holds(&l.holder, l.expires_at))
        else {
            // Said, so a session taken from a run that was only cut off shows in the logs.
            if let Some(lease) = &record.lease {
                crate::notice::tell!(
                    "keel worker: session {}: its run lease ({}) expired and stayed unrenewed for {} ms; taking the session over",
                    record.id,
                    lease.holder,
                    state.lease_grace.as_millis()
                );
            }
            break (record, events);
        };
        if waiting_since.elapsed() > MAX_LEASE_WAIT {
            return Err(format!(
                "session {} is still held by {} after {} s; retrying",
                record.id,
                lease.holder,
                MAX_LEASE_WAIT.as_secs()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
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
                crate::notice::tell!("keel worker: session {}: {message}", record.id);
                fail_turn(&store, &record, &job.content, message).await?;
                return Ok(Outcome::Ran);
            }
        },
    };
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
    let mut handle = SessionHandle::new(engine, record.id.clone(), Vec::new())
        .rebuild_with(state.builder.clone(), &workspace, overrides)
        .approvals(gate)
        .stop_with(&state.stop)
        // Jobs of sessions sharing a workspace take turns in it (one running session per
        // workspace), instead of failing.
        .wait_for_workspace();
    if let Some(checkout) = checkout {
        handle = handle.on_turn_end(Arc::new(Publish {
            checkout,
            store: store.clone(),
            session_id: record.id.clone(),
        }));
    }
    let handle = Arc::new(handle);
    // A session left running by a dead worker is resumed here (from its last stored event)
    // once its run lease has expired; should another run take it first, this fails as busy
    // and is retried.
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
    Ok(Outcome::Ran)
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
/// check the remote out before this push (it waits for the lease).
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
    ) -> BoxFuture<'a, Result<(), String>> {
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
            reason: String::new(),
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
