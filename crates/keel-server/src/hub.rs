//! Live sessions: the engine each session runs on, its event channel, its one running turn.
//!
//! Every session's events go to the store first (the engine's emitter), then to the session's
//! broadcast channel, which WebSocket and SSE subscribers read (see [`crate::stream`]). A
//! session runs one turn at a time; each turn is its own task, tracked so that shutdown can
//! cancel it and wait until its last event is committed. Every turn a client starts ends with
//! a stored `turn_finished` event.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use keel_engine::snapshot::{SnapshotError, Snapshots, UndoReport};
use keel_engine::{
    CollectingSink, Config, Emitter, Engine, EngineBuilder, EventSink, RunOptions, RunOutcome,
};
use keel_protocol::{Event, EventKind, SessionStatus};
use keel_store::{SessionRecord, Store, StoreError};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::ApiError;
use crate::roots::{WorkspaceRoots, without_excerpts};

/// Events kept for slow subscribers before they fall back to reading the store.
const CHANNEL_CAPACITY: usize = 4096;

/// What the server needs from the program hosting it: the same configuration loading and
/// provider construction `keel run` uses, so a session behaves the same from every entry
/// point.
pub trait SessionSetup: Send + Sync {
    /// The layered configuration of `workspace` with the request's `overrides`
    /// (`("llm.provider", "scripted")`, …) on top.
    fn config(&self, workspace: &Path, overrides: &[(&str, toml::Value)])
    -> Result<Config, String>;

    /// Adds the configured model provider(s) to `builder`.
    fn providers(
        &self,
        config: &Config,
        workspace: &Path,
        builder: EngineBuilder,
    ) -> Result<EngineBuilder, String>;
}

/// How a new session should run (the create request, after defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSpec {
    /// The workspace; relative paths are relative to the server's default workspace.
    pub workspace: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The scripted provider's script file (relative to the workspace).
    pub script: Option<String>,
    /// `react` or `plan_exec`.
    pub execution_mode: Option<String>,
}

/// One session the server knows about in this process.
pub struct LiveSession {
    pub id: String,
    events: broadcast::Sender<Event>,
    engine: tokio::sync::Mutex<Option<Arc<Engine>>>,
    /// The running turn's cancellation, when one runs.
    turn: tokio::sync::Mutex<Option<CancellationToken>>,
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
    fn new(id: String, engine: Option<Arc<Engine>>) -> Self {
        let (events, _) = broadcast::channel(CHANNEL_CAPACITY);
        Self {
            id,
            events,
            engine: tokio::sync::Mutex::new(engine),
            turn: tokio::sync::Mutex::new(None),
            deleted: CancellationToken::new(),
        }
    }

    /// A receiver of the events published from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Whether a turn is running.
    pub fn turn_running(&self) -> bool {
        self.turn.try_lock().map_or(true, |t| t.is_some())
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

/// The server's sessions and turns.
pub struct Hub {
    pub(crate) store: Arc<dyn Store>,
    setup: Arc<dyn SessionSetup>,
    default_workspace: PathBuf,
    /// Where sessions may run and scripts may come from.
    roots: WorkspaceRoots,
    live: Mutex<HashMap<String, Arc<LiveSession>>>,
    turns: TaskTracker,
    pub(crate) streams: TaskTracker,
    /// Cancelled at shutdown: no new turns, running ones are cancelled.
    stopping: CancellationToken,
    /// Cancelled once every turn has ended: streams send what they have and close.
    pub(crate) closed: CancellationToken,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("default_workspace", &self.default_workspace)
            .finish_non_exhaustive()
    }
}

/// Runs a store operation on a blocking thread.
pub(crate) async fn blocking<T: Send + 'static>(
    store: &Arc<dyn Store>,
    f: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || f(store.as_ref()))
        .await
        .map_err(|e| ApiError::internal(format!("store task failed: {e}")))?
        .map_err(ApiError::from)
}

impl Hub {
    pub fn new(
        store: Arc<dyn Store>,
        setup: Arc<dyn SessionSetup>,
        default_workspace: PathBuf,
        roots: WorkspaceRoots,
    ) -> Self {
        Self {
            store,
            setup,
            default_workspace,
            roots,
            live: Mutex::new(HashMap::new()),
            turns: TaskTracker::new(),
            streams: TaskTracker::new(),
            stopping: CancellationToken::new(),
            closed: CancellationToken::new(),
        }
    }

    fn live_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LiveSession>>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The stored record of session `id` (exact id, never a prefix).
    pub async fn record(&self, id: &str) -> Result<SessionRecord, ApiError> {
        let wanted = id.to_string();
        let record = blocking(&self.store, move |s| s.get_session(&wanted))
            .await
            .map_err(|e| match e.code {
                "not_found" | "bad_request" => ApiError::session_not_found(id),
                _ => e,
            })?;
        if record.id != id {
            return Err(ApiError::session_not_found(id));
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
            .or_insert_with(|| Arc::new(LiveSession::new(id.to_string(), None)))
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

    /// Builds the engine for a session in `workspace` with these `[llm]`/`[agent]` overrides:
    /// configuration and providers exactly as `keel run` builds them.
    fn build_engine(
        &self,
        workspace: &Path,
        overrides: &[(&str, toml::Value)],
    ) -> Result<Engine, ApiError> {
        // Errors go to a client: parsers' quotes of the files (config, script) are left out.
        let config = self.setup.config(workspace, overrides).map_err(|m| {
            ApiError::new(
                axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                "config_error",
                without_excerpts(&m),
            )
        })?;
        let builder = EngineBuilder::new(config.clone(), workspace).store(self.store.clone());
        let builder = self
            .setup
            .providers(&config, workspace, builder)
            .map_err(|m| {
                let message = if m.contains("invalid script") {
                    "the script is not a valid Keel script (YAML with a `turns` list); run it with `keel run --script FILE` on the server to see where".to_string()
                } else {
                    without_excerpts(&m)
                };
                ApiError::new(
                    axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                    "provider_error",
                    message,
                )
            })?;
        Ok(builder.build()?)
    }

    /// Creates a session: its engine is built now (so a bad workspace, mode or provider is an
    /// error of this request) and its record stored `idle`.
    pub async fn create(&self, spec: SessionSpec) -> Result<SessionRecord, ApiError> {
        if self.stopping.is_cancelled() {
            return Err(shutting_down());
        }
        let workspace = self.workspace(&spec)?;
        let text = |s: &str| toml::Value::String(s.to_string());
        let mut overrides: Vec<(&str, toml::Value)> = Vec::new();
        if let Some(p) = spec.provider.as_deref().filter(|p| !p.is_empty()) {
            overrides.push(("llm.provider", text(p)));
        }
        if let Some(m) = spec.model.as_deref().filter(|m| !m.is_empty()) {
            overrides.push(("llm.model", text(m)));
        }
        if let Some(s) = spec.script.as_deref().filter(|s| !s.is_empty()) {
            let script = self.roots.script(&workspace, s)?;
            overrides.push(("llm.script", text(&script.display().to_string())));
            if spec.provider.is_none() {
                overrides.push(("llm.provider", text("scripted")));
            }
        }
        if let Some(m) = spec.execution_mode.as_deref().filter(|m| !m.is_empty()) {
            overrides.push(("agent.mode", text(m)));
        }
        let engine = Arc::new(self.build_engine(&workspace, &overrides)?);
        let record = engine.create_session().await?;
        self.live_map().insert(
            record.id.clone(),
            Arc::new(LiveSession::new(record.id.clone(), Some(engine))),
        );
        Ok(record)
    }

    /// The session's engine; for a session this process did not create, rebuilt from its
    /// record (workspace, provider, model, mode) and the workspace's configuration.
    async fn engine(&self, session: &LiveSession) -> Result<Arc<Engine>, ApiError> {
        let mut slot = session.engine.lock().await;
        if let Some(e) = slot.as_ref() {
            return Ok(e.clone());
        }
        let record = self.record(&session.id).await?;
        let workspace = PathBuf::from(&record.workspace);
        self.roots.check_existing(&workspace)?;
        let text = |s: &str| toml::Value::String(s.to_string());
        let overrides = [
            ("llm.provider", text(&record.provider)),
            ("llm.model", text(&record.model)),
            ("agent.mode", text(&record.mode)),
        ];
        let engine = self.build_engine(&workspace, &overrides).map_err(|e| {
            ApiError::new(
                e.status,
                e.code,
                format!(
                    "session {} was created by another process and cannot be rebuilt here: {}",
                    record.id, e.message
                ),
            )
        })?;
        let engine = Arc::new(engine);
        *slot = Some(engine.clone());
        Ok(engine)
    }

    /// Starts a turn: `content` is the session's next user message (its task if it is the
    /// first). Fails with 409 while another turn of the session runs. The turn runs on its
    /// own task; the handle yields its result.
    pub async fn start_turn(
        &self,
        session: &Arc<LiveSession>,
        content: String,
    ) -> Result<JoinHandle<TurnResult>, ApiError> {
        if self.stopping.is_cancelled() {
            return Err(shutting_down());
        }
        if content.trim().is_empty() {
            return Err(ApiError::bad_request(
                "the message is empty; say what the agent should do",
            ));
        }
        let engine = self.engine(session).await?;
        let mut slot = session.turn.lock().await;
        if slot.is_some() {
            return Err(turn_running(&session.id));
        }
        let record = self.record(&session.id).await?;
        if record.status == SessionStatus::Running && !record.is_interrupted() {
            return Err(ApiError::conflict(
                "session_busy",
                format!(
                    "session {} is running in another process ({}); wait for it to finish",
                    record.id,
                    record
                        .pid
                        .map_or_else(|| "?".into(), |p| format!("pid {p}"))
                ),
            ));
        }
        let cancel = self.stopping.child_token();
        *slot = Some(cancel.clone());
        drop(slot);

        let session = session.clone();
        let store = self.store.clone();
        Ok(self.turns.spawn(async move {
            let collect = CollectingSink::new();
            let channel: Arc<dyn EventSink> = Arc::new(ChannelSink(session.events.clone()));
            let options = RunOptions {
                sinks: vec![channel.clone(), collect.clone()],
                cancel,
                ..RunOptions::default()
            };
            let run = AssertUnwindSafe(engine.continue_session(&session.id, &content, options))
                .catch_unwind()
                .await;
            let (status, outcome, message) = match run {
                Ok(Ok(outcome)) => (outcome.status, Some(outcome), None),
                Ok(Err(e)) => (SessionStatus::Failed, None, Some(e.to_string())),
                Err(_) => (
                    SessionStatus::Failed,
                    None,
                    Some("the engine crashed while running this turn".to_string()),
                ),
            };
            // Store and publish turn_finished while holding the turn slot, so the next turn's
            // events can only follow it.
            let mut slot = session.turn.lock().await;
            let finished = finish_turn(
                &store,
                &session.id,
                status,
                message.clone(),
                vec![channel, collect.clone()],
            )
            .await;
            *slot = None;
            drop(slot);
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
        }))
    }

    /// Cancels the running turn of `session`.
    pub async fn cancel(&self, session: &LiveSession) -> Result<(), ApiError> {
        match session.turn.lock().await.as_ref() {
            Some(token) => {
                token.cancel();
                Ok(())
            }
            None => Err(ApiError::conflict(
                "no_turn_running",
                format!("session {} has no running turn to cancel", session.id),
            )),
        }
    }

    /// Restores the session's workspace to the end of `turn` (its last turn that changed
    /// files when `None`) from the automatic snapshots, and records an `undo` event. Refused
    /// while a turn runs.
    pub async fn undo(
        &self,
        session: &LiveSession,
        turn: Option<u32>,
    ) -> Result<UndoReport, ApiError> {
        // Holding the slot keeps a turn from starting while files are restored.
        let slot = session.turn.lock().await;
        if slot.is_some() {
            return Err(turn_running(&session.id));
        }
        let record = self.record(&session.id).await?;
        self.roots.check_existing(Path::new(&record.workspace))?;
        if record.status == SessionStatus::Running && !record.is_interrupted() {
            return Err(ApiError::conflict(
                "session_busy",
                format!(
                    "session {} is running in another process; undo it when it has finished",
                    record.id
                ),
            ));
        }
        let (workspace, id) = (PathBuf::from(&record.workspace), record.id.clone());
        let report = tokio::task::spawn_blocking(move || {
            Snapshots::open(&workspace).and_then(|s| s.undo(&id, turn))
        })
        .await
        .map_err(|e| ApiError::internal(format!("the undo task failed: {e}")))?
        .map_err(|e| match e {
            SnapshotError::NoSnapshots(_)
            | SnapshotError::NothingAfter { .. }
            | SnapshotError::AtOldest { .. } => {
                ApiError::conflict("nothing_to_undo", e.to_string())
            }
            other => ApiError::internal(other.to_string()),
        })?;
        let last = {
            let id = session.id.clone();
            blocking(&self.store, move |s| s.last_seq(&id)).await?
        };
        let sink: Arc<dyn EventSink> = Arc::new(ChannelSink(session.events.clone()));
        let emitter = Emitter::new(session.id.clone(), last, self.store.clone(), vec![sink]);
        emitter
            .emit(EventKind::Undo {
                turn: report.turn,
                commit: report.commit.clone(),
                modified: report.changes.modified.clone(),
                recreated: report.changes.recreated.clone(),
                removed: report.changes.removed.clone(),
            })
            .await?;
        drop(slot);
        Ok(report)
    }

    /// Deletes a session that is not running a turn, with everything stored about it.
    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        let session = self.session(id).await?;
        let slot = session.turn.lock().await;
        if slot.is_some() {
            return Err(turn_running(id));
        }
        let wanted = id.to_string();
        blocking(&self.store, move |s| s.delete_session(&wanted)).await?;
        self.live_map().remove(id);
        session.deleted.cancel();
        Ok(())
    }

    /// Starts shutting down: refuses new turns and sessions, cancels running turns, waits
    /// until each has committed its last event, then tells streams to flush and close.
    pub async fn shutdown(&self) {
        self.stopping.cancel();
        self.turns.close();
        self.turns.wait().await;
        self.closed.cancel();
    }

    /// Waits (at most `limit`) for the streams to send their last events and close.
    pub async fn wait_for_streams(&self, limit: std::time::Duration) {
        self.streams.close();
        let _ = tokio::time::timeout(limit, self.streams.wait()).await;
    }
}

/// Stores `turn_finished` after the session's last event and publishes it.
async fn finish_turn(
    store: &Arc<dyn Store>,
    id: &str,
    status: SessionStatus,
    message: Option<String>,
    sinks: Vec<Arc<dyn EventSink>>,
) -> Result<(), String> {
    let sid = id.to_string();
    let last = blocking(store, move |s| s.last_seq(&sid))
        .await
        .map_err(|e| e.message)?;
    let emitter = Emitter::new(id.to_string(), last, store.clone(), sinks);
    emitter
        .emit(EventKind::TurnFinished { status, message })
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn turn_running(id: &str) -> ApiError {
    ApiError::conflict(
        "turn_running",
        format!(
            "session {id} is already running a turn; wait for its turn_finished event or cancel it (POST /api/v1/sessions/{id}/cancel)"
        ),
    )
}

fn shutting_down() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "shutting_down",
        "the server is shutting down; try again when it is back",
    )
}
