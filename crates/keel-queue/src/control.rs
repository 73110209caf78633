//! The control channel: cancelling and answering approvals for turns that workers run.
//!
//! A server that is asked to cancel a turn, or to approve or deny a call the turn waits on,
//! does not know which worker runs it. It writes the op (`Interrupt`, `Approve`, `Deny`) as a
//! row of `keel_turn_control` and sends `NOTIFY keel_control, '<session id>'` in the same
//! transaction. Every worker LISTENs on `keel_control`, and also reads the table every
//! [`POLL`] for the sessions it runs, so a worker that missed the notice (its listener was
//! reconnecting, it had not registered the turn yet) still sees the row on its next check. A
//! worker claims a row (sets `done_at`) before submitting its op to the turn's session handle,
//! so each op is carried out once; the handle does the rest exactly as in a single process
//! (the engine's approval gate, the turn's cancellation, `turn_finished` last).
//!
//! A turn still waiting in the queue is not signalled: [`control`] kills its job
//! ([`Controlled::Dequeued`]) and the server records its `turn_finished`.
//!
//! A row names the session's last stored seq when it was written (`after_seq`); a turn asked
//! for after that (its job's `after_seq` is greater) ignores it: an op meant for a turn that
//! ended before its worker saw it never reaches the next one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apalis_postgres::PgPool;
use keel_engine::runtime::SessionHandle;
use keel_protocol::Op;
use keel_server::{ControlSeqs, Controlled};
use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;

use crate::TURN_QUEUE;

/// The channel servers notify and workers listen on.
pub const CONTROL_CHANNEL: &str = "keel_control";

/// How often a worker reads the control table for the turns it runs, notice or not.
pub const POLL: Duration = Duration::from_secs(1);

/// Creates the control table (idempotent; several processes may do it at once).
pub(crate) async fn setup(pool: &PgPool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('keel_turn_control'))")
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS keel_turn_control (
            id BIGSERIAL PRIMARY KEY,
            session_id TEXT NOT NULL,
            after_seq BIGINT NOT NULL,
            op JSONB NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            done_at TIMESTAMPTZ,
            outcome TEXT
        );
        CREATE INDEX IF NOT EXISTS keel_turn_control_waiting
            ON keel_turn_control (session_id) WHERE done_at IS NULL;
        -- Ops older than a week were carried out or are for turns long over.
        DELETE FROM keel_turn_control WHERE created_at < now() - interval '7 days';",
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// The bytes that identify a turn job of session `id` in `apalis.jobs.job` (the job's JSON
/// starts with its `session_id` field; matching bytes needs no parsing of other queues' jobs).
fn job_marker(session_id: &str) -> Vec<u8> {
    let id = serde_json::to_string(session_id).unwrap_or_else(|_| format!("\"{session_id}\""));
    format!("{{\"session_id\":{id},").into_bytes()
}

/// The server side of [`keel_server::TurnQueue::control`].
pub(crate) async fn control(
    pool: &PgPool,
    session_id: &str,
    op: &Op,
    seqs: ControlSeqs,
) -> Result<Controlled, sqlx::Error> {
    let marker = job_marker(session_id);
    let mut tx = pool.begin().await?;
    if *op == Op::Interrupt {
        // Turns no worker has taken yet (or that wait to be tried again) never run.
        let killed: Vec<String> = sqlx::query_scalar(
            "UPDATE apalis.jobs SET status = 'Killed', done_at = now(),
                 last_result = '\"cancelled before a worker started it\"'::jsonb
             WHERE job_type = $1
               AND (status = 'Pending' OR (status = 'Failed' AND attempts < max_attempts))
               AND position($2::bytea in job) = 1
             RETURNING id",
        )
        .bind(TURN_QUEUE)
        .bind(&marker)
        .fetch_all(&mut *tx)
        .await?;
        if !killed.is_empty() {
            tx.commit().await?;
            return Ok(Controlled::Dequeued(killed.len()));
        }
    }
    // A job the queue still shows running whose turn has stored its `turn_finished` is over
    // (its worker has not reported yet): only the others can take the op.
    let jobs: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT job FROM apalis.jobs
         WHERE job_type = $1 AND status IN ('Queued', 'Running') AND position($2::bytea in job) = 1",
    )
    .bind(TURN_QUEUE)
    .bind(&marker)
    .fetch_all(&mut *tx)
    .await?;
    let running = jobs.iter().any(|job| {
        serde_json::from_slice::<crate::TurnJob>(job)
            .map_or(true, |job| job.after_seq >= seqs.finished)
    });
    if !running {
        return Ok(Controlled::NothingRunning);
    }
    let op = serde_json::to_string(op).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    sqlx::query(
        "INSERT INTO keel_turn_control (session_id, after_seq, op) VALUES ($1, $2, $3::jsonb)",
    )
    .bind(session_id)
    .bind(i64::try_from(seqs.last).unwrap_or(i64::MAX))
    .bind(op)
    .execute(&mut *tx)
    .await?;
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CONTROL_CHANNEL)
        .bind(session_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Controlled::Delivered)
}

/// A turn this worker process runs.
struct Running {
    handle: Arc<SessionHandle>,
    /// The job's `after_seq`: rows written before the turn was asked for are not its.
    after_seq: u64,
}

/// The worker side: the turns this process runs, and the ops for them.
pub(crate) struct Controls {
    pool: PgPool,
    turns: Mutex<HashMap<String, Running>>,
}

/// Keeps a turn registered with [`Controls`] until dropped.
pub(crate) struct Registered {
    controls: Arc<Controls>,
    session_id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.controls.turns().remove(&self.session_id);
    }
}

impl Controls {
    pub(crate) fn new(pool: PgPool) -> Arc<Self> {
        Arc::new(Self {
            pool,
            turns: Mutex::new(HashMap::new()),
        })
    }

    fn turns(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Ops for session `session_id` reach `handle` until the returned guard is dropped; any
    /// already written are carried out now.
    pub(crate) async fn register(
        self: &Arc<Self>,
        session_id: &str,
        handle: Arc<SessionHandle>,
        after_seq: u64,
    ) -> Registered {
        self.turns()
            .insert(session_id.to_string(), Running { handle, after_seq });
        self.check().await;
        Registered {
            controls: self.clone(),
            session_id: session_id.to_string(),
        }
    }

    /// Carries out the ops written for the turns this process runs.
    pub(crate) async fn check(&self) {
        let sessions: Vec<String> = self.turns().keys().cloned().collect();
        if sessions.is_empty() {
            return;
        }
        if let Err(e) = self.apply(&sessions).await {
            crate::notice::tell!("keel worker: cannot read the turn control table (retrying): {e}");
        }
    }

    async fn apply(&self, sessions: &[String]) -> Result<(), sqlx::Error> {
        let rows: Vec<(i64, String, i64, String)> = sqlx::query_as(
            "SELECT id, session_id, after_seq, op::text FROM keel_turn_control
             WHERE done_at IS NULL AND session_id = ANY($1) ORDER BY id",
        )
        .bind(sessions)
        .fetch_all(&self.pool)
        .await?;
        for (id, session_id, after_seq, op) in rows {
            let target = self.turns().get(&session_id).map(|r| {
                let stale = u64::try_from(after_seq).unwrap_or(0) < r.after_seq;
                (r.handle.clone(), stale)
            });
            let Some((handle, stale)) = target else {
                continue;
            };
            // Claimed once, by one checker.
            let claimed: Option<i64> = sqlx::query_scalar(
                "UPDATE keel_turn_control SET done_at = now() WHERE id = $1 AND done_at IS NULL RETURNING id",
            )
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
            if claimed.is_none() {
                continue;
            }
            let outcome = if stale {
                "ignored: written before this turn was asked for".to_string()
            } else {
                match serde_json::from_str::<Op>(&op) {
                    Ok(op) => match handle.submit(op).await {
                        Ok(_) => "done".to_string(),
                        Err(e) => format!("refused: {e}"),
                    },
                    Err(e) => format!("ignored: not an op ({e})"),
                }
            };
            sqlx::query("UPDATE keel_turn_control SET outcome = $2 WHERE id = $1")
                .bind(id)
                .bind(outcome)
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// Listens on [`CONTROL_CHANNEL`] and checks on every notice and every [`POLL`] until
    /// `stop` is cancelled.
    pub(crate) async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut listener: Option<PgListener> = None;
        let mut warned = false;
        loop {
            if listener.is_none() {
                match listen(&self.pool).await {
                    Ok(l) => {
                        listener = Some(l);
                        warned = false;
                    }
                    Err(e) if !warned => {
                        crate::notice::tell!(
                            "keel worker: cannot listen for turn control notices (reading the table every {} s instead): {e}",
                            POLL.as_secs()
                        );
                        warned = true;
                    }
                    Err(_) => {}
                }
            }
            let lost = {
                let notice = async {
                    match listener.as_mut() {
                        Some(l) => l.recv().await.is_err(),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = stop.cancelled() => return,
                    lost = notice => lost,
                    _ = tokio::time::sleep(POLL) => false,
                }
            };
            if lost {
                listener = None;
            }
            self.check().await;
        }
    }
}

async fn listen(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut l = PgListener::connect_with(pool).await?;
    l.listen(CONTROL_CHANNEL).await?;
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_the_start_of_the_jobs_json() {
        let job = crate::TurnJob {
            session_id: "s-1\"x".into(),
            content: "hi".into(),
            after_seq: 3,
        };
        let json = serde_json::to_vec(&job).unwrap_or_default();
        assert!(json.starts_with(&job_marker("s-1\"x")));
        assert!(!json.starts_with(&job_marker("s-1")));
    }
}
