//! Live sessions: the session handle each session runs through, its event channel.
//!
//! Every session's events go to the store first (the engine's emitter), then to the session's
//! broadcast channel, which WebSocket and SSE subscribers read (see [`crate::stream`]). Turns,
//! the busy rule, interrupts, undo and `turn_finished` belong to the engine's
//! [`SessionHandle`]: the server only turns requests into [`Op`]s and the handle's answers
//! into HTTP.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use keel_engine::approval::ApprovalGate;
use keel_engine::runtime::{
    OpAck, OpError, SessionBuilder, SessionHandle, SessionOverrides, TurnTicket,
};
use keel_engine::{EngineError, EventSink};
use keel_phase::ExecutionMode;
use keel_protocol::{Event, Op};
use keel_snapshot::UndoReport;
use keel_store::{SessionRecord, Store};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::ApiError;
use crate::roots::{WorkspaceRoots, without_excerpts};

pub use keel_engine::runtime::TurnResult;

/// Events kept for slow subscribers before they fall back to reading the store.
const CHANNEL_CAPACITY: usize = 4096;

/// How a new session should run (the create request, after defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSpec {
    /// The workspace; relative paths are relative to the server's default workspace.
    pub workspace: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The scripted provider's script file (relative to the workspace).
    pub script: Option<String>,
    pub execution_mode: Option<ExecutionMode>,
    /// A git source to work in (queue mode): workers check it out instead of `workspace`.
    pub repo: Option<keel_store::RepoSource>,
}

/// One session the server knows about in this process.
pub struct LiveSession {
    pub id: String,
    events: broadcast::Sender<Event>,
    /// The last seq published from the store's notices (queue mode, see [`Hub::stored`]).
    forwarded: tokio::sync::Mutex<u64>,
    handle: tokio::sync::Mutex<Option<Arc<SessionHandle>>>,
    /// Cancelled when the session is deleted: its streams end.
    pub(crate) deleted: CancellationToken,
}

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSession")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl LiveSession {
    fn new(id: String) -> Self {
        let (events, _) = broadcast::channel(CHANNEL_CAPACITY);
        Self {
            id,
            events,
            forwarded: tokio::sync::Mutex::new(0),
            handle: tokio::sync::Mutex::new(None),
            deleted: CancellationToken::new(),
        }
    }

    /// A receiver of the events published from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Whether a turn is running.
    pub fn turn_running(&self) -> bool {
        match self.handle.try_lock() {
            Ok(h) => h.as_ref().is_some_and(|h| h.turn_running()),
            Err(_) => true,
        }
    }

    fn sink(&self) -> Arc<dyn EventSink> {
        Arc::new(ChannelSink(self.events.clone()))
    }
}

/// Publishes a session's events to its broadcast channel.
struct ChannelSink(broadcast::Sender<Event>);

impl EventSink for ChannelSink {
    fn publish(&self, event: &Event) {
        // No subscriber is fine: the store has the event.
        let _ = self.0.send(event.clone());
    }
}

/// The server's sessions.
pub struct Hub {
    pub(crate) store: Arc<dyn Store>,
    builder: SessionBuilder,
    default_workspace: PathBuf,
    /// Where sessions may run and scripts may come from.
    roots: WorkspaceRoots,
    live: Mutex<HashMap<String, Arc<LiveSession>>>,
    pub(crate) streams: TaskTracker,
    /// Cancelled at shutdown: no new turns, running ones are cancelled.
    stopping: CancellationToken,
    /// Cancelled once every turn has ended: streams send what they have and close.
    pub(crate) closed: CancellationToken,
    /// PRDs, tasks and proofs (`/api/v1/prds`, `/tasks`, `/work`): the sessions' database.
    pub(crate) work: std::sync::OnceLock<keel_store::work::WorkStores>,
    /// Queue mode: `work/batch` queues its tasks as jobs for the workers.
    pub(crate) task_queue: std::sync::OnceLock<Arc<dyn TaskQueue>>,
    /// Queue mode (`keel serve --database`): turns become jobs that workers run.
    pub(crate) queue: std::sync::OnceLock<Arc<dyn TurnQueue>>,
}

/// Where a batch of tasks goes in queue mode (`keel serve --database`): the first ready task
/// becomes a job; the worker that runs it queues the next (tasks run one at a time, in place).
/// Implemented by `keel-queue`.
pub trait TaskQueue: Send + Sync {
    /// Queues task `task` of `workspace` (the batch limited to `scope` when given), run with
    /// `overrides`; returns the job's id. Fails while a batch of the workspace is queued or
    /// running.
    fn enqueue_batch<'a>(
        &'a self,
        workspace: &'a str,
        task: u32,
        scope: Option<Vec<u32>>,
        overrides: &'a keel_engine::runtime::SessionOverrides,
    ) -> futures::future::BoxFuture<'a, Result<String, String>>;
}

/// Where turns go in queue mode (`keel serve --database`): a job queue that `keel worker`s
/// take them from. Implemented by `keel-queue`; this crate does not know the queue library.
pub trait TurnQueue: Send + Sync {
    /// Enqueues the turn "`content` for session `session_id`", asked for when the session's
    /// last stored event was `after_seq`; returns the job's id.
    fn enqueue<'a>(
        &'a self,
        session_id: &'a str,
        content: &'a str,
        after_seq: u64,
    ) -> futures::future::BoxFuture<'a, Result<String, String>>;

    /// Carries out `op` (`Interrupt`, `Approve` or `Deny`) on the turn of session
    /// `session_id`, wherever it is: an `Interrupt` removes the session's turns still waiting
    /// in the queue ([`Controlled::Dequeued`]); otherwise the op reaches the worker running
    /// the turn ([`Controlled::Delivered`], durably: a worker that misses the notice sees it on
    /// its next check). `seqs` say where the session's events stand, so that an op reaches
    /// neither a turn that has already finished nor one asked for later.
    fn control<'a>(
        &'a self,
        session_id: &'a str,
        op: &'a Op,
        seqs: ControlSeqs,
    ) -> futures::future::BoxFuture<'a, Result<Controlled, String>>;
}

/// Where a session's stored events stand when an op is sent to its turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControlSeqs {
    /// The last stored seq: a turn asked for after it (a job's `after_seq` above it) is not
    /// the op's.
    pub last: u64,
    /// The seq of the last `turn_finished` (0: none): a job asked for before it has run its
    /// turn, even while the queue still shows it running.
    pub finished: u64,
}

/// What [`TurnQueue::control`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controlled {
    /// `n` turns waiting for a worker were removed; none of them will run.
    Dequeued(usize),
    /// The op is on its way to the worker running the turn.
    Delivered,
    /// No turn of the session is queued or running.
    NothingRunning,
}

/// What sending a message did.
#[derive(Debug)]
pub enum Sent {
    /// The turn runs in this process.
    Turn(TurnTicket),
    /// The turn is a job in the queue (queue mode); its events arrive on the session's streams.
    Queued { job_id: String },
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("default_workspace", &self.default_workspace)
            .finish_non_exhaustive()
    }
}

impl Hub {
    /// A hub whose sessions `builder` builds (and stores in its store), in workspaces under
    /// `roots`.
    pub fn new(builder: SessionBuilder, default_workspace: PathBuf, roots: WorkspaceRoots) -> Self {
        Self {
            store: builder.store().clone(),
            builder,
            default_workspace,
            roots,
            live: Mutex::new(HashMap::new()),
            streams: TaskTracker::new(),
            stopping: CancellationToken::new(),
            closed: CancellationToken::new(),
            work: std::sync::OnceLock::new(),
            queue: std::sync::OnceLock::new(),
            task_queue: std::sync::OnceLock::new(),
        }
    }

    /// Queue mode: turns are enqueued on `queue` instead of running in this process.
    pub fn set_queue(&self, queue: Arc<dyn TurnQueue>) {
        let _ = self.queue.set(queue);
    }

    /// Whether turns go to a job queue.
    pub fn queued(&self) -> bool {
        self.queue.get().is_some()
    }

    /// Queue mode: event `seq` of session `id` was stored by some process (a store notice).
    /// Publishes it, and any stored event this process has not published yet, to the session's
    /// subscribers; sessions nobody here watches are skipped. Subscribers drop what they have
    /// already seen and read gaps back from the store, so a lost notice only delays events.
    pub async fn stored(&self, id: &str, seq: u64) -> Result<(), ApiError> {
        let Some(session) = self.live_map().get(id).cloned() else {
            return Ok(());
        };
        if session.events.receiver_count() == 0 {
            return Ok(());
        }
        let mut forwarded = session.forwarded.lock().await;
        if seq <= *forwarded {
            return Ok(());
        }
        let since = (*forwarded).max(seq.saturating_sub(1));
        let wanted = id.to_string();
        for event in self.store.events(&wanted, since).await? {
            *forwarded = (*forwarded).max(event.seq);
            let _ = session.events.send(event);
        }
        Ok(())
    }

    /// Queue mode, after the store's notices were cut off (the database restarted): publishes
    /// what every watched session stored meanwhile, since notices sent then are lost.
    pub async fn catch_up(&self) -> Result<(), ApiError> {
        let watched: Vec<Arc<LiveSession>> = self
            .live_map()
            .values()
            .filter(|s| s.events.receiver_count() > 0)
            .cloned()
            .collect();
        for session in watched {
            let last = self.store.last_seq(&session.id).await?;
            if last > 0 {
                self.stored(&session.id, last).await?;
            }
        }
        Ok(())
    }

    /// Serves PRDs, tasks and proofs from `stores` (the same database as the sessions').
    pub fn set_work_store(&self, stores: keel_store::work::WorkStores) {
        let _ = self.work.set(stores);
    }

    /// Queue mode: `POST /api/v1/work/batch` queues tasks for the workers.
    pub fn set_task_queue(&self, queue: Arc<dyn TaskQueue>) {
        let _ = self.task_queue.set(queue);
    }

    /// The builder sessions are built with.
    pub fn builder(&self) -> &SessionBuilder {
        &self.builder
    }

    /// The canonical workspace a request names (default: the server's).
    pub fn workspace_for(&self, workspace: Option<&str>) -> Result<PathBuf, ApiError> {
        self.workspace(&SessionSpec {
            workspace: workspace.map(str::to_string),
            ..SessionSpec::default()
        })
    }

    /// The canonical script file `script` (relative to `workspace`) names, refused outside
    /// the roots — the same rule as a created session's script.
    pub fn script_for(&self, workspace: &Path, script: &str) -> Result<PathBuf, ApiError> {
        self.roots.script(workspace, script)
    }

    fn live_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LiveSession>>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the session list shows `record`: its workspace is under the roots, or it is
    /// checked out of a git source (queue mode) for this server's sessions.
    pub fn lists(&self, record: &SessionRecord) -> bool {
        record.repo.is_some() || self.roots.holds(std::path::Path::new(&record.workspace))
    }

    /// The stored record of session `id` (exact id, never a prefix), refused when the session
    /// list does not show it (a session `keel run` or an eval stored outside the roots in the
    /// same store): this server neither reads, streams, drives nor deletes those.
    pub async fn record(&self, id: &str) -> Result<SessionRecord, ApiError> {
        let wanted = id.to_string();
        let record = self
            .store
            .get_session(&wanted)
            .await
            .map_err(ApiError::from)
            .map_err(|e| match e.code {
                "not_found" | "bad_request" => ApiError::session_not_found(id),
                _ => e,
            })?;
        if record.id != id {
            return Err(ApiError::session_not_found(id));
        }
        if !self.lists(&record) {
            self.roots
                .check_existing(std::path::Path::new(&record.workspace))?;
        }
        Ok(record)
    }

    /// The live session `id`, attached from the store if this process has not seen it yet.
    pub async fn session(&self, id: &str) -> Result<Arc<LiveSession>, ApiError> {
        if let Some(s) = self.live_map().get(id) {
            return Ok(s.clone());
        }
        self.record(id).await?;
        let mut live = self.live_map();
        Ok(live
            .entry(id.to_string())
            .or_insert_with(|| Arc::new(LiveSession::new(id.to_string())))
            .clone())
    }

    /// Whether session `id` runs a turn in this process.
    pub fn turn_running(&self, id: &str) -> bool {
        self.live_map().get(id).is_some_and(|s| s.turn_running())
    }

    /// The workspace a spec names, canonical and under the server's roots.
    fn workspace(&self, spec: &SessionSpec) -> Result<PathBuf, ApiError> {
        let path = match spec.workspace.as_deref().map(str::trim) {
            None | Some("") => self.default_workspace.clone(),
            Some(w) => self.default_workspace.join(w),
        };
        self.roots.workspace(&path)
    }

    /// A handle on `session` running in `workspace` with `overrides`, built exactly as
    /// `keel run` builds its sessions.
    fn handle_for(
        &self,
        session: &LiveSession,
        workspace: &Path,
        overrides: SessionOverrides,
    ) -> Result<SessionHandle, ApiError> {
        let engine = Arc::new(self.builder.engine(workspace, &overrides)?);
        Ok(self.wrap(session, engine, workspace, overrides))
    }

    /// The handle of `session` on `engine`: events to its channel, approvals answered by
    /// clients (`[approval] policy`, interactive), stopped with the server.
    fn wrap(
        &self,
        session: &LiveSession,
        engine: Arc<keel_engine::Engine>,
        workspace: &Path,
        overrides: SessionOverrides,
    ) -> SessionHandle {
        let gate = Arc::new(ApprovalGate::from_config(engine.config(), None, true));
        SessionHandle::new(engine, session.id.clone(), vec![session.sink()])
            .rebuild_with(self.builder.clone(), workspace, overrides)
            .approvals(gate)
            .stop_with(&self.stopping)
    }

    /// Creates a session: its engine is built now (so a bad workspace, mode or provider is an
    /// error of this request) and its record stored `idle`.
    pub async fn create(&self, spec: SessionSpec) -> Result<SessionRecord, ApiError> {
        if self.stopping.is_cancelled() {
            return Err(shutting_down());
        }
        if spec.repo.is_some() && !self.queued() {
            return Err(ApiError::bad_request(
                "`repo` needs queue mode: start the server with `keel serve --database postgres://…` and run `keel worker`s, which check the repository out; on a single server, clone it yourself and pass its directory as `workspace`",
            ));
        }
        let workspace = self.workspace(&spec)?;
        let non_empty = |s: &Option<String>| s.clone().filter(|v| !v.trim().is_empty());
        let overrides = SessionOverrides {
            provider: non_empty(&spec.provider),
            model: non_empty(&spec.model),
            script: match non_empty(&spec.script) {
                Some(s) => Some(self.roots.script(&workspace, &s)?),
                None => None,
            },
            mode: spec.execution_mode,
            ..SessionOverrides::default()
        };
        let engine = Arc::new(self.builder.engine(&workspace, &overrides)?);
        let record = match spec.repo {
            Some(repo) => engine.create_repo_session(repo).await?,
            None => engine.create_session().await?,
        };
        let session = Arc::new(LiveSession::new(record.id.clone()));
        // A session with a git source runs only on workers: no handle here (see `handle`).
        if record.repo.is_none() {
            let handle = self.wrap(&session, engine, &workspace, overrides);
            *session.handle.lock().await = Some(Arc::new(handle));
        }
        self.live_map().insert(record.id.clone(), session);
        Ok(record)
    }

    /// The session's handle; for a session this process did not create, rebuilt from its
    /// record (workspace, provider, model, mode) and the workspace's configuration.
    async fn handle(&self, session: &LiveSession) -> Result<Arc<SessionHandle>, ApiError> {
        let mut slot = session.handle.lock().await;
        if let Some(h) = slot.as_ref() {
            return Ok(h.clone());
        }
        let record = self.record(&session.id).await?;
        if let Some(repo) = &record.repo {
            return Err(ApiError::new(
                axum::http::StatusCode::NOT_IMPLEMENTED,
                "unsupported",
                format!(
                    "session {} works in checkouts of {} on the workers; this server cannot run operations on it here (send messages, which the workers run)",
                    record.id,
                    repo.shown_url()
                ),
            ));
        }
        let workspace = PathBuf::from(&record.workspace);
        // A stored session may have been started by `keel run` anywhere: it is driven here
        // only inside the roots, and so is its script.
        self.roots.check_existing(&workspace)?;
        let mut overrides = SessionOverrides::from_record(&record);
        if let Some(script) = overrides.script.take() {
            overrides.script = Some(
                self.roots
                    .script(&workspace, &script.display().to_string())?,
            );
        }
        let handle = self
            .handle_for(session, &workspace, overrides)
            .map_err(|e| {
                ApiError::new(
                    e.status,
                    e.code,
                    format!(
                        "session {} was created by another process and cannot be rebuilt here: {}",
                        record.id, e.message
                    ),
                )
            })?;
        let handle = Arc::new(handle);
        *slot = Some(handle.clone());
        Ok(handle)
    }

    /// Carries out `op` on `session`.
    pub async fn submit(&self, session: &LiveSession, op: Op) -> Result<OpAck, ApiError> {
        if self.stopping.is_cancelled() {
            return Err(shutting_down());
        }
        if self.queued() && matches!(op, Op::Interrupt | Op::Approve { .. } | Op::Deny { .. }) {
            // The turn runs in some worker: the op goes through the queue.
            return self.remote(session, op).await;
        }
        let handle = self.handle(session).await?;
        handle
            .submit(op)
            .await
            .map_err(|e| op_error(&session.id, e))
    }

    /// Sends the session's next user message: a turn in this process, or in queue mode a job
    /// for the workers. Fails with 409 while another turn of the session runs.
    pub async fn send(&self, session: &LiveSession, content: String) -> Result<Sent, ApiError> {
        let Some(queue) = self.queue.get() else {
            return self.start_turn(session, content).await.map(Sent::Turn);
        };
        if self.stopping.is_cancelled() {
            return Err(shutting_down());
        }
        if content.trim().is_empty() {
            return Err(ApiError::bad_request(
                "the message is empty; say what the agent should do",
            ));
        }
        let record = self.record(&session.id).await?;
        if record.status == keel_protocol::SessionStatus::Running && !record.is_interrupted() {
            return Err(op_error(
                &session.id,
                OpError::TurnRunning(session.id.clone()),
            ));
        }
        let wanted = session.id.clone();
        let after_seq = self.store.last_seq(&wanted).await?;
        let job_id = queue
            .enqueue(&session.id, &content, after_seq)
            .await
            .map_err(|e| {
                ApiError::new(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "queue_unavailable",
                    format!("cannot enqueue the turn: {e}; check the database (keel doctor)"),
                )
            })?;
        Ok(Sent::Queued { job_id })
    }

    /// Starts a turn: `content` is the session's next user message (its task if it is the
    /// first). Fails with 409 while another turn of the session runs.
    pub async fn start_turn(
        &self,
        session: &LiveSession,
        content: String,
    ) -> Result<TurnTicket, ApiError> {
        if content.trim().is_empty() {
            return Err(ApiError::bad_request(
                "the message is empty; say what the agent should do",
            ));
        }
        match self.submit(session, Op::user_message(content)).await? {
            OpAck::Turn(ticket) => Ok(ticket),
            _ => Err(ApiError::internal("the session did not start a turn")),
        }
    }

    /// Cancels the running turn of `session` (in queue mode, its queued or running turn).
    pub async fn cancel(&self, session: &LiveSession) -> Result<(), ApiError> {
        self.submit(session, Op::Interrupt).await.map(drop)
    }

    /// Restores the session's workspace to the end of `turn` (its last turn that changed
    /// files when `None`) and records an `undo` event. Refused while a turn runs.
    pub async fn undo(
        &self,
        session: &LiveSession,
        turn: Option<u32>,
    ) -> Result<UndoReport, ApiError> {
        match self.submit(session, Op::Undo { to_turn: turn }).await? {
            OpAck::Undone(report) => Ok(report),
            _ => Err(ApiError::internal("the session did not undo")),
        }
    }

    /// Deletes a session that is not running a turn, with everything stored about it.
    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        let session = self.session(id).await?;
        let slot = session.handle.lock().await;
        if slot.as_ref().is_some_and(|h| h.turn_running()) {
            return Err(op_error(id, OpError::TurnRunning(id.to_string())));
        }
        let wanted = id.to_string();
        self.store.delete_session(&wanted).await?;
        self.live_map().remove(id);
        session.deleted.cancel();
        drop(slot);
        Ok(())
    }

    /// Starts shutting down: refuses new turns and sessions, cancels running turns, waits
    /// until each has committed its last event, then tells streams to flush and close.
    pub async fn shutdown(&self) {
        self.stopping.cancel();
        let sessions: Vec<Arc<LiveSession>> = self.live_map().values().cloned().collect();
        for s in sessions {
            let handle = s.handle.lock().await.clone();
            if let Some(h) = handle {
                h.shutdown().await;
            }
        }
        self.closed.cancel();
    }

    /// Waits (at most `limit`) for the streams to send their last events and close.
    pub async fn wait_for_streams(&self, limit: std::time::Duration) {
        self.streams.close();
        let _ = tokio::time::timeout(limit, self.streams.wait()).await;
    }
}

/// A refused op as an HTTP error.
pub(crate) fn op_error(id: &str, e: OpError) -> ApiError {
    use axum::http::StatusCode;
    match e {
        OpError::TurnRunning(_) => ApiError::conflict(
            "turn_running",
            format!(
                "session {id} is already running a turn; wait for its turn_finished event or cancel it (POST /api/v1/sessions/{id}/cancel)"
            ),
        ),
        OpError::Busy(m) => ApiError::conflict("session_busy", m),
        OpError::WorkspaceBusy(_) => ApiError::conflict("workspace_busy", e.to_string()),
        OpError::NoTurnRunning(_) => ApiError::conflict("no_turn_running", e.to_string()),
        OpError::NoPendingApproval(_) => ApiError::conflict("no_pending_approval", e.to_string()),
        OpError::NothingToUndo(m) => ApiError::conflict("nothing_to_undo", m),
        OpError::Invalid(m) => ApiError::bad_request(m),
        OpError::Unsupported(m) => ApiError::new(StatusCode::NOT_IMPLEMENTED, "unsupported", m),
        OpError::ShuttingDown => shutting_down(),
        OpError::Engine(e) => e.into(),
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        use axum::http::StatusCode;
        match e {
            // Errors go to a client: parsers' quotes of the files (config, script) are left
            // out.
            EngineError::Config(c) => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "config_error",
                without_excerpts(&c.to_string()),
            ),
            EngineError::Provider(m) => {
                let message = if m.contains("invalid script") {
                    "the script is not a valid Keel script (YAML with a `turns` list); run it with `keel run --script FILE` on the server to see where".to_string()
                } else {
                    without_excerpts(&m)
                };
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "provider_error", message)
            }
            EngineError::Store(s) => s.into(),
            EngineError::Workspace(w) => Self::bad_request(w.to_string()),
            EngineError::Setup(m) | EngineError::Busy(m) => Self::conflict("session_busy", m),
            EngineError::WorkspaceBusy(_) => Self::conflict("workspace_busy", e.to_string()),
            EngineError::Internal(m) => Self::internal(m),
        }
    }
}

fn shutting_down() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "shutting_down",
        "the server is shutting down; try again when it is back",
    )
}
