//! Queue mode (`keel serve --database`): cancelling and answering approvals for turns that
//! `keel worker`s run. The server holds no handle on such a turn, so `Interrupt`, `Approve`
//! and `Deny` go through the queue ([`TurnQueue::control`]): a turn still waiting for a worker
//! is removed (and ends with a `turn_finished` `cancelled` recorded here), a running one is
//! reached through the workers' control channel. Everything else a client sees — the
//! `approval_requested` event, the worker's `approval_resolved` and `turn_finished` — arrives
//! through the store, like every other event.

use keel_engine::Emitter;
use keel_engine::runtime::{OpAck, OpError};
use keel_protocol::{Event, EventKind, Op, SessionStatus};
use keel_store::SessionRecord;

use crate::error::ApiError;
use crate::hub::{ControlSeqs, Controlled, Hub, LiveSession, op_error};

impl Hub {
    /// Whether a turn of the session `record` runs: in this process, or (queue mode) in a
    /// worker, as its stored status says (a dead run's `interrupted` session is not running).
    pub fn running(&self, record: &SessionRecord) -> bool {
        self.turn_running(&record.id)
            || (self.queued()
                && record.status == SessionStatus::Running
                && !record.is_interrupted())
    }

    /// Carries out `op` (`Interrupt`, `Approve`, `Deny`) on the session's queued or running
    /// turn through the queue.
    pub(crate) async fn remote(&self, session: &LiveSession, op: Op) -> Result<OpAck, ApiError> {
        let Some(queue) = self.queue.get() else {
            return Err(ApiError::internal("this server has no turn queue"));
        };
        let id = session.id.clone();
        let wanted = id.clone();
        let events = self.store.events(&wanted, 0).await?;
        if let Op::Approve { call_id, .. } | Op::Deny { call_id, .. } = &op
            && !waiting_for_approval(&events, call_id)
        {
            return Err(op_error(&id, OpError::NoPendingApproval(call_id.clone())));
        }
        let seqs = ControlSeqs {
            last: events.last().map_or(0, |e| e.seq),
            finished: events
                .iter()
                .rev()
                .find(|e| matches!(e.kind, EventKind::TurnFinished { .. }))
                .map_or(0, |e| e.seq),
        };
        let done = queue.control(&id, &op, seqs).await.map_err(|e| {
            ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "queue_unavailable",
                format!("cannot reach the session's turn: {e}; check the database (keel doctor)"),
            )
        })?;
        match done {
            Controlled::Delivered => Ok(OpAck::Done),
            Controlled::Dequeued(_) => {
                // No worker will run it: the turn ends here, so clients see it end.
                Emitter::new(id, self.store.clone(), Vec::new())
                    .emit(EventKind::TurnFinished {
                        status: SessionStatus::Cancelled,
                        message: Some("cancelled before a worker started it".into()),
                    })
                    .await?;
                Ok(OpAck::Done)
            }
            Controlled::NothingRunning => Err(op_error(
                &id,
                match op {
                    Op::Approve { call_id, .. } | Op::Deny { call_id, .. } => {
                        OpError::NoPendingApproval(call_id)
                    }
                    _ => OpError::NoTurnRunning(id.clone()),
                },
            )),
        }
    }
}

/// Whether `events` (a session's, in order) show the call `call_id` asked for approval and not
/// answered yet.
fn waiting_for_approval(events: &[Event], call_id: &str) -> bool {
    let mut waiting = false;
    for event in events {
        match &event.kind {
            EventKind::ApprovalRequested { call_id: c, .. } if c == call_id => waiting = true,
            EventKind::ApprovalResolved { call_id: c, .. } if c == call_id => waiting = false,
            // A call id is the model's: the same one in a later turn is another call.
            EventKind::TurnFinished { .. } => waiting = false,
            _ => {}
        }
    }
    waiting
}
