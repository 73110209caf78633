//! The session handle: the one owner of a live session. Front ends submit [`Op`]s; the handle
//! runs turns one at a time, each on its own task, and every event — `turn_finished` last in
//! every turn — goes to the store first, then to the handle's sinks.
//!
//! The rule for a message that arrives during a turn lives here and only here: it is refused
//! ([`OpError::TurnRunning`]); the sender waits for `turn_finished` or interrupts.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;

use futures::FutureExt;
use keel_protocol::{Event, EventKind, Op, SessionStatus};
use keel_store::SessionRecord;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::builder::{SessionBuilder, SessionOverrides};
use super::undo::{UndoError, undo_session};
use crate::{CollectingSink, Emitter, Engine, EngineError, EventSink, RunOptions, RunOutcome};
use keel_approval::{ApprovalGate, Decision};
use keel_phase::ExecutionMode;
use keel_snapshot::UndoReport;

/// Why an op was not carried out. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error(
        "session {0} is already running a turn; wait for its turn_finished event or interrupt it"
    )]
    TurnRunning(String),
    /// Running in another process (or this one, outside this handle).
    #[error("{0}")]
    Busy(String),
    /// Another session runs in this session's workspace.
    #[error("{}", crate::workspace_busy_message(.0))]
    WorkspaceBusy(keel_store::WorkspaceLease),
    #[error("session {0} has no running turn to interrupt")]
    NoTurnRunning(String),
    #[error("no tool call {0} is waiting for approval in this session")]
    NoPendingApproval(String),
    #[error("{0}")]
    NothingToUndo(String),
    /// The op is malformed or does not apply to this session.
    #[error("{0}")]
    Invalid(String),
    /// The op is understood but this handle cannot carry it out.
    #[error("{0}")]
    Unsupported(String),
    #[error("the session is shutting down; no new operations are accepted")]
    ShuttingDown,
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// What an accepted op started or did.
#[derive(Debug)]
pub enum OpAck {
    /// A turn started; its ticket yields how it ended.
    Turn(TurnTicket),
    /// The workspace was restored (`undo` event recorded).
    Undone(UndoReport),
    /// Done at once (interrupt requested, model switched, shut down).
    Done,
}

/// A running turn.
#[derive(Debug)]
pub struct TurnTicket(JoinHandle<TurnResult>);

impl TurnTicket {
    /// Waits for the turn to end (after its `turn_finished` event is stored and published).
    pub async fn finished(self) -> TurnResult {
        self.0.await.unwrap_or_else(|e| TurnResult {
            status: SessionStatus::Failed,
            outcome: None,
            message: Some(format!("the turn's task failed: {e}")),
            events: Vec::new(),
        })
    }
}

/// How a turn ended.
#[derive(Debug, Clone)]
pub struct TurnResult {
    pub status: SessionStatus,
    /// The engine's outcome (absent when the run could not start or the engine failed).
    pub outcome: Option<RunOutcome>,
    /// Why the turn failed outside the run.
    pub message: Option<String>,
    /// Every event of the turn, `turn_finished` last.
    pub events: Vec<Event>,
}

/// Work done at the end of every turn, after the engine's run and before `turn_finished` (a
/// queue worker commits the session's checkout and pushes it): the events it emits belong to
/// the turn, and an `Err` fails the turn with its message.
pub trait TurnEnd: Send + Sync {
    /// The turn ended its run with `status`; `emitter` records events in the turn.
    fn turn_ended<'a>(
        &'a self,
        emitter: &'a Emitter,
        status: SessionStatus,
    ) -> futures::future::BoxFuture<'a, Result<(), String>>;
}

/// How to build this session's engine again (another model, another mode).
#[derive(Debug, Clone)]
struct Rebuild {
    builder: SessionBuilder,
    workspace: PathBuf,
    overrides: SessionOverrides,
}

/// The one owner of a live session.
pub struct SessionHandle {
    id: String,
    engine: tokio::sync::Mutex<Arc<Engine>>,
    rebuild: tokio::sync::Mutex<Option<Rebuild>>,
    sinks: Vec<Arc<dyn EventSink>>,
    /// Asks before risky calls; `Approve` and `Deny` answer it.
    approvals: Option<Arc<ApprovalGate>>,
    /// The running turn's cancellation, when one runs.
    turn: TurnSlot,
    /// Cancelled at shutdown: no new ops, the running turn is cancelled.
    stop: CancellationToken,
    turns: TaskTracker,
    /// Run at the end of every turn, before `turn_finished`.
    turn_end: Option<Arc<dyn TurnEnd>>,
    /// A turn in a workspace where another session runs waits for it instead of being
    /// refused (a queue worker's jobs, `keel run --wait`).
    wait_for_workspace: bool,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl SessionHandle {
    /// A handle on the stored session `id`, run by `engine`, publishing to `sinks`.
    pub fn new(engine: Arc<Engine>, id: impl Into<String>, sinks: Vec<Arc<dyn EventSink>>) -> Self {
        Self {
            id: id.into(),
            engine: tokio::sync::Mutex::new(engine),
            rebuild: tokio::sync::Mutex::new(None),
            sinks,
            approvals: None,
            turn: Arc::new(tokio::sync::Mutex::new(None)),
            stop: CancellationToken::new(),
            turns: TaskTracker::new(),
            turn_end: None,
            wait_for_workspace: false,
        }
    }

    /// Turns wait while another session runs in the workspace, instead of being refused.
    pub fn wait_for_workspace(mut self) -> Self {
        self.wait_for_workspace = true;
        self
    }

    /// Records a new session of `engine` (idle until its first message) and a handle on it.
    pub async fn create(
        engine: Arc<Engine>,
        sinks: Vec<Arc<dyn EventSink>>,
    ) -> Result<(Self, SessionRecord), EngineError> {
        let record = engine.create_session().await?;
        Ok((Self::new(engine, record.id.clone(), sinks), record))
    }

    /// Lets `SetModel` and `SetMode` rebuild the engine with `builder` for `workspace`, from
    /// the `overrides` the session was built with.
    pub fn rebuild_with(
        mut self,
        builder: SessionBuilder,
        workspace: impl Into<PathBuf>,
        overrides: SessionOverrides,
    ) -> Self {
        self.rebuild = tokio::sync::Mutex::new(Some(Rebuild {
            builder,
            workspace: workspace.into(),
            overrides,
        }));
        self
    }

    /// Asks `gate` before risky tool calls; `Approve` and `Deny` ops answer it.
    pub fn approvals(mut self, gate: Arc<ApprovalGate>) -> Self {
        self.approvals = Some(gate);
        self
    }

    /// The session's approval gate, if it has one.
    pub fn approval_gate(&self) -> Option<&Arc<ApprovalGate>> {
        self.approvals.as_ref()
    }

    /// Runs `end` at the end of every turn, before its `turn_finished`.
    pub fn on_turn_end(mut self, end: Arc<dyn TurnEnd>) -> Self {
        self.turn_end = Some(end);
        self
    }

    /// Ties the handle to `parent`: cancelling it shuts the handle down (a server stopping).
    pub fn stop_with(mut self, parent: &CancellationToken) -> Self {
        self.stop = parent.child_token();
        self
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether a turn is running.
    pub fn turn_running(&self) -> bool {
        self.turn.try_lock().map_or(true, |t| t.is_some())
    }

    /// The engine the next turn runs on.
    pub async fn engine(&self) -> Arc<Engine> {
        self.engine.lock().await.clone()
    }

    /// Carries out `op`.
    pub async fn submit(&self, op: Op) -> Result<OpAck, OpError> {
        if self.stop.is_cancelled() && op != Op::Shutdown {
            return Err(OpError::ShuttingDown);
        }
        match op {
            Op::UserMessage { text, attachments } => {
                let mut message = text;
                for a in attachments {
                    message.push_str(&format!(
                        "\n\n<attachment name=\"{}\">\n{}\n</attachment>",
                        a.name, a.content
                    ));
                }
                self.start_turn(message).await.map(OpAck::Turn)
            }
            Op::Interrupt => match self.turn.lock().await.as_ref() {
                Some(token) => {
                    token.cancel();
                    Ok(OpAck::Done)
                }
                None => Err(OpError::NoTurnRunning(self.id.clone())),
            },
            Op::Approve { call_id, scope } => self.decide(&call_id, Decision::Approve(scope)),
            Op::Deny { call_id, reason } => {
                let reason = reason.filter(|r| !r.trim().is_empty());
                self.decide(&call_id, Decision::Deny(reason))
            }
            Op::AnswerBlocker { id, answer } => self.answer_blocker(id, answer).await,
            Op::Undo { to_turn } => self.undo(to_turn).await.map(OpAck::Undone),
            Op::SetModel { model } => {
                if model.trim().is_empty() {
                    return Err(OpError::Invalid("the model name is empty".into()));
                }
                self.switch(|o| o.model = Some(model.trim().to_string()))
                    .await
                    .map(|()| OpAck::Done)
            }
            Op::SetMode { mode } => {
                let Some(mode) = ExecutionMode::parse(mode.trim()) else {
                    return Err(OpError::Invalid(format!(
                        "unknown mode `{mode}`; use react or plan_exec"
                    )));
                };
                let record = self.record().await?;
                if record.status != SessionStatus::Idle && record.mode != mode.as_str() {
                    return Err(OpError::Invalid(format!(
                        "session {} has started in {} mode; a session keeps its mode (start a new one in {mode} mode)",
                        self.id, record.mode
                    )));
                }
                self.switch(|o| o.mode = Some(mode))
                    .await
                    .map(|()| OpAck::Done)
            }
            Op::Compact => self.compact().await.map(|_| OpAck::Done),
            Op::Shutdown => {
                self.shutdown().await;
                Ok(OpAck::Done)
            }
        }
    }

    /// Cancels the running turn, refuses further ops and waits until the turn has stored its
    /// last event.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.turns.close();
        self.turns.wait().await;
    }

    /// Answers the call `call_id` waiting for approval.
    fn decide(&self, call_id: &str, decision: Decision) -> Result<OpAck, OpError> {
        match &self.approvals {
            Some(gate) if gate.resolve(call_id, decision) => Ok(OpAck::Done),
            _ => Err(OpError::NoPendingApproval(call_id.to_string())),
        }
    }

    async fn record(&self) -> Result<SessionRecord, OpError> {
        let engine = self.engine().await;
        Ok(engine
            .store()
            .get_session(&self.id)
            .await
            .map_err(EngineError::from)?)
    }

    /// Starts a turn with `message` (the session's task if it is its first). The one place
    /// that decides whether a turn may start.
    async fn start_turn(&self, message: String) -> Result<TurnTicket, OpError> {
        let mut slot = self.turn.lock().await;
        if slot.is_some() {
            return Err(OpError::TurnRunning(self.id.clone()));
        }
        let record = self.record().await?;
        let engine = self.engine().await;
        crate::session::ensure_resumable(&engine, &record).map_err(|e| match e {
            EngineError::Busy(m) => OpError::Busy(m),
            EngineError::Setup(m) => OpError::Invalid(m),
            other => OpError::Engine(other),
        })?;
        if message.trim().is_empty() && record.status == SessionStatus::Idle {
            return Err(OpError::Invalid(
                "the message is empty; say what the agent should do".into(),
            ));
        }
        // One running session per workspace: refused here, with the other session's id,
        // before anything is recorded (the run takes the lease itself when it starts).
        if !self.wait_for_workspace
            && let Some(other) = crate::session::workspace_busy(
                engine.store().as_ref(),
                engine.workspace().root(),
                Some(&self.id),
            )
            .await?
        {
            return Err(OpError::WorkspaceBusy(other));
        }
        let cancel = self.stop.child_token();
        *slot = Some(cancel.clone());
        drop(slot);

        let options = RunOptions {
            sinks: self.sinks.clone(),
            cancel,
            approvals: self.approvals.clone(),
            run_id: Some(crate::time::new_run_id()),
            wait_for_workspace: self.wait_for_workspace,
            ..RunOptions::default()
        };
        let (id, slot) = (self.id.clone(), self.turn.clone());
        let end = self.turn_end.clone();
        Ok(TurnTicket(
            self.turns
                .spawn(run_turn(engine, id, message, options, slot, end)),
        ))
    }

    /// Answers the session's blocker `id` and goes on with the answer (a turn).
    async fn answer_blocker(&self, id: String, answer: String) -> Result<OpAck, OpError> {
        if answer.trim().is_empty() {
            return Err(OpError::Invalid(
                "the answer is empty; say what the agent should know or do".into(),
            ));
        }
        if self.turn_running() {
            return Err(OpError::TurnRunning(self.id.clone()));
        }
        let engine = self.engine().await;
        let blocker = engine
            .store()
            .get_blocker(&id)
            .await
            .map_err(EngineError::from)?;
        if blocker.session_id != self.id {
            return Err(OpError::Invalid(format!(
                "blocker {id} belongs to session {}, not {}",
                blocker.session_id, self.id
            )));
        }
        engine
            .store()
            .answer_blocker(&blocker.id, answer.trim())
            .await
            .map_err(EngineError::from)?;
        // An empty message continues the session; the stored answer travels with it.
        self.start_turn(String::new()).await.map(OpAck::Turn)
    }

    /// Restores the workspace from the session's snapshots; refused while a turn runs.
    async fn undo(&self, turn: Option<u32>) -> Result<UndoReport, OpError> {
        // Holding the slot keeps a turn from starting while files are restored.
        let slot = self.turn.lock().await;
        if slot.is_some() {
            return Err(OpError::TurnRunning(self.id.clone()));
        }
        let record = self.record().await?;
        let engine = self.engine().await;
        let report = undo_session(engine.store(), &record, turn, self.sinks.clone())
            .await
            .map_err(|e| match e {
                UndoError::NothingToUndo(m) => OpError::NothingToUndo(m),
                UndoError::Busy(m) => OpError::Busy(m),
                UndoError::Snapshot(s) => OpError::Engine(EngineError::Internal(s.to_string())),
                UndoError::Engine(e) => OpError::Engine(e),
            })?;
        drop(slot);
        Ok(report)
    }

    /// Compacts the session's working context now (a `compaction` event with the checkpoint
    /// the next turns start from); refused while a turn runs.
    async fn compact(&self) -> Result<crate::compaction::CompactReport, OpError> {
        // Holding the slot keeps a turn from starting while the context is compacted.
        let slot = self.turn.lock().await;
        if slot.is_some() {
            return Err(OpError::TurnRunning(self.id.clone()));
        }
        let engine = self.engine().await;
        let options = RunOptions {
            sinks: self.sinks.clone(),
            cancel: self.stop.child_token(),
            run_id: Some(crate::time::new_run_id()),
            ..RunOptions::default()
        };
        let report = engine
            .compact_session(&self.id, options)
            .await
            .map_err(|e| match e {
                EngineError::Busy(m) => OpError::Busy(m),
                other => OpError::Engine(other),
            })?;
        drop(slot);
        Ok(report)
    }

    /// Rebuilds the engine with changed overrides between turns and records the session's new
    /// provider, model and mode.
    async fn switch(&self, change: impl FnOnce(&mut SessionOverrides)) -> Result<(), OpError> {
        let slot = self.turn.lock().await;
        if slot.is_some() {
            return Err(OpError::TurnRunning(self.id.clone()));
        }
        let mut rebuild = self.rebuild.lock().await;
        let Some(r) = rebuild.as_mut() else {
            return Err(OpError::Unsupported(
                "this session's engine was given to it ready-made; it cannot switch models or modes".into(),
            ));
        };
        let mut overrides = r.overrides.clone();
        change(&mut overrides);
        let engine = Arc::new(r.builder.engine(&r.workspace, &overrides)?);
        let info = engine.provider.info();
        engine
            .store()
            .set_session_model(
                &self.id,
                &info.provider,
                &info.model,
                engine.mode().as_str(),
            )
            .await
            .map_err(EngineError::from)?;
        r.overrides = overrides;
        *self.engine.lock().await = engine;
        drop(slot);
        Ok(())
    }
}

/// The running turn's cancellation, shared with the turn's task (which frees it).
type TurnSlot = Arc<tokio::sync::Mutex<Option<CancellationToken>>>;

/// Runs one turn: the engine's run, then `turn_finished` stored and published while the slot
/// is still held, so the next turn's events can only follow it.
async fn run_turn(
    engine: Arc<Engine>,
    id: String,
    message: String,
    mut options: RunOptions,
    slot: TurnSlot,
    end: Option<Arc<dyn TurnEnd>>,
) -> TurnResult {
    let collect = CollectingSink::new();
    options.sinks.push(collect.clone());
    let all = options.sinks.clone();
    let (run_id, parent) = (options.run_id.clone(), options.parent_run_id.clone());
    let run = AssertUnwindSafe(engine.continue_session(&id, &message, options))
        .catch_unwind()
        .await;
    let (mut status, outcome, mut message) = match run {
        Ok(Ok(outcome)) => (outcome.status, Some(outcome), None),
        // Lost the race for the workspace to another session's turn started at the same
        // time: a structured refusal naming it, as the check before the turn gives.
        Ok(Err(EngineError::WorkspaceBusy(other))) => {
            let text = crate::workspace_busy_message(&other);
            let outcome = RunOutcome {
                session_id: id.clone(),
                status: SessionStatus::Failed,
                iterations: 0,
                usage: Default::default(),
                final_text: String::new(),
                error: Some(keel_protocol::ErrorInfo {
                    error_code: keel_protocol::ErrorCode::WorkspaceBusy,
                    message: text.clone(),
                    suggestions: Vec::new(),
                    retryable: true,
                    original_error: None,
                }),
                blocker: None,
            };
            (SessionStatus::Failed, Some(outcome), Some(text))
        }
        Ok(Err(e)) => (SessionStatus::Failed, None, Some(e.to_string())),
        Err(_) => (
            SessionStatus::Failed,
            None,
            Some("the engine crashed while running this turn".to_string()),
        ),
    };
    if let Some(end) = end {
        let emitter = Emitter::new(id.clone(), engine.store().clone(), all.clone())
            .in_run(run_id.clone(), parent.clone());
        let ended = AssertUnwindSafe(end.turn_ended(&emitter, status))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err("the end of the turn crashed".to_string()));
        if let Err(e) = ended {
            status = SessionStatus::Failed;
            if let Some(o) = &outcome {
                // Best effort: `turn_finished` below says how the turn ended either way.
                let _ = engine
                    .store()
                    .update_session(&id, status, o.iterations, &o.usage)
                    .await;
            }
            message = Some(match message {
                Some(m) => format!("{m}; {e}"),
                None => e,
            });
        }
    }
    let mut held = slot.lock().await;
    let finished = finish_turn(&engine, &id, status, message.clone(), all, run_id, parent).await;
    *held = None;
    drop(held);
    let message = match finished {
        Ok(()) => message,
        Err(e) => Some(format!(
            "{}the turn's end could not be recorded: {e}",
            message.map(|m| format!("{m}; ")).unwrap_or_default()
        )),
    };
    TurnResult {
        status,
        outcome,
        message,
        events: collect.events(),
    }
}

/// Stores `turn_finished` after the session's last event and publishes it.
async fn finish_turn(
    engine: &Engine,
    id: &str,
    status: SessionStatus,
    message: Option<String>,
    sinks: Vec<Arc<dyn EventSink>>,
    run_id: Option<String>,
    parent_run_id: Option<String>,
) -> Result<(), EngineError> {
    let emitter =
        Emitter::new(id.to_string(), engine.store().clone(), sinks).in_run(run_id, parent_run_id);
    emitter
        .emit(EventKind::TurnFinished { status, message })
        .await
        .map(|_| ())
}
