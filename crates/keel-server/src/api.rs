//! The REST endpoints under `/api/v1`: sessions, messages, cancel, events, blockers. Each
//! handler's request and response types feed the OpenAPI document.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use keel_protocol::{Event, Usage};
use keel_store::{BlockerRecord, SessionRecord};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody, JsonBody, PathParams, QueryParams};
use crate::hub::{Hub, Sent, SessionSpec, TurnResult};

/// `react` (the default loop) or `plan_exec` (the same loop with the phase policy): how the
/// engine's one `ExecutionMode` appears in the OpenAPI document.
#[derive(ToSchema)]
#[schema(as = ExecutionMode)]
#[allow(dead_code)]
#[serde(rename_all = "snake_case")]
enum ExecutionModeDoc {
    React,
    PlanExec,
}

/// A new session. Every field is optional: the workspace's configuration supplies the rest.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSessionRequest {
    /// The repository to work in (absolute, or relative to the server's directory).
    pub workspace: Option<String>,
    /// Model provider (`scripted`, or a provider of the `[llm]` configuration).
    pub provider: Option<String>,
    /// Model name.
    pub model: Option<String>,
    /// The scripted provider's script file (relative to the workspace), for demos and tests.
    pub script: Option<String>,
    /// `react` (default) or `plan_exec`.
    #[schema(value_type = Option<ExecutionModeDoc>)]
    pub execution_mode: Option<keel_phase::ExecutionMode>,
    /// A git remote to work in instead of a shared workspace (queue mode only): each worker
    /// checks it out into a directory of its own, and the session's changes are pushed to the
    /// remote's branch `keel/<session id>` after every turn.
    pub repo: Option<RepoRequest>,
}

/// A session's git source.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RepoRequest {
    /// The remote: `https://…`, `ssh://…`, `git://…`, `file://…`, `user@host:path` or an
    /// absolute path the workers can reach.
    pub url: String,
    /// The branch, tag or commit to start from (default: the remote's default branch). Later
    /// turns start from the session's own branch `keel/<session id>` once it exists.
    #[serde(rename = "ref")]
    pub git_ref: Option<String>,
}

/// A session as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionView {
    pub id: String,
    pub workspace: String,
    /// The first message (empty until one arrives).
    pub task: String,
    pub provider: String,
    pub model: String,
    pub execution_mode: String,
    /// `idle`, `running`, `completed`, `failed`, `max_steps`, `blocked`, `cancelled`, or
    /// `interrupted` (its process died mid-run).
    pub status: String,
    /// Model requests so far.
    pub iterations: u32,
    /// Tokens and cost so far.
    #[schema(value_type = Object)]
    pub usage: Usage,
    /// Unix milliseconds.
    pub created_at: u64,
    /// Unix milliseconds.
    pub updated_at: u64,
    /// Whether a turn of the session runs now: in this server, or in queue mode
    /// (`keel serve --database`) in a worker.
    pub turn_running: bool,
    /// The git source (`{"url", "ref"}`) workers check the session out of, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub repo: Option<keel_store::RepoSource>,
}

impl SessionView {
    fn new(record: &SessionRecord, turn_running: bool) -> Self {
        Self {
            id: record.id.clone(),
            workspace: record.workspace.clone(),
            task: record.task.clone(),
            provider: record.provider.clone(),
            model: record.model.clone(),
            execution_mode: record.mode.clone(),
            status: record.display_status().to_string(),
            iterations: record.iterations,
            usage: record.usage,
            created_at: record.created_at,
            updated_at: record.updated_at,
            turn_running,
            repo: record.repo.clone(),
        }
    }
}

/// A user message.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessageRequest {
    /// What to tell the agent: the task for a new session, a follow-up otherwise.
    pub content: String,
}

/// The result of one turn.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MessageResponse {
    /// How the turn ended: `completed`, `failed`, `max_steps`, `blocked`, `cancelled`.
    pub status: String,
    /// The agent's final answer (empty unless completed).
    pub final_text: String,
    /// The structured error when the turn failed or was cancelled.
    #[schema(value_type = Option<Object>)]
    pub error: Option<serde_json::Value>,
    /// The question the turn is blocked on.
    #[schema(value_type = Option<Object>)]
    pub blocker: Option<serde_json::Value>,
    /// Model requests in the session so far.
    pub iterations: u32,
    /// Usage of the session so far.
    #[schema(value_type = Object)]
    pub usage: Usage,
    /// Every event of the turn, in order, `turn_finished` last (the same objects the
    /// WebSocket streams and `keel run --json` prints).
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<Event>,
    /// The turn's phase events (plan_exec): every `phase_changed` and `phase_violation`, and
    /// the `checkpoint`, `phase_validation` and `rollback_*` events of the phase machine.
    #[schema(value_type = Vec<Object>)]
    pub phase_events: Vec<Event>,
}

impl MessageResponse {
    fn new(turn: TurnResult) -> Self {
        let phase_events = turn
            .events
            .iter()
            .filter(|e| e.kind.is_phase_event())
            .cloned()
            .collect();
        let outcome = turn.outcome;
        let error = outcome
            .as_ref()
            .and_then(|o| o.error.as_ref())
            .and_then(|e| serde_json::to_value(e).ok())
            .or_else(|| {
                turn.message
                    .as_ref()
                    .map(|m| serde_json::json!({"error_code": "internal_error", "message": m}))
            });
        Self {
            status: turn.status.as_str().to_string(),
            final_text: outcome
                .as_ref()
                .map(|o| o.final_text.clone())
                .unwrap_or_default(),
            error,
            blocker: outcome.as_ref().and_then(|o| o.blocker.as_ref()).map(|b| {
                serde_json::json!({
                    "id": b.id,
                    "question": b.question,
                    "source": b.source,
                    "evidence": b.evidence,
                })
            }),
            iterations: outcome.as_ref().map_or(0, |o| o.iterations),
            usage: outcome.as_ref().map(|o| o.usage).unwrap_or_default(),
            events: turn.events,
            phase_events,
        }
    }
}

/// `?since_seq=N`: only events after seq N.
#[derive(Debug, Clone, Copy, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SinceQuery {
    /// Only events with a greater seq (default 0: all).
    pub since_seq: Option<u64>,
}

/// `?limit=N`.
#[derive(Debug, Clone, Copy, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// At most this many sessions, newest first (default 50).
    pub limit: Option<usize>,
}

/// `?all=true`.
#[derive(Debug, Clone, Copy, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BlockersQuery {
    /// Include answered and delivered blockers (default: open ones only).
    pub all: Option<bool>,
}

/// An answer to a blocker.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerRequest {
    /// The answer; the session's next message delivers it to the agent.
    pub answer: String,
}

/// The cancel request was delivered.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CancelResponse {
    /// Always true: the turn ends `cancelled` with a `turn_finished` event.
    pub cancelled: bool,
}

/// A question a blocked session waits on.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BlockerView {
    pub id: String,
    pub session_id: String,
    pub question: String,
    /// `model`, `pattern`, `fix_tracker` or `budget`.
    pub source: String,
    pub evidence: Vec<String>,
    /// `open`, `answered` or `delivered`.
    pub status: String,
    pub answer: Option<String>,
    pub created_at: u64,
    pub answered_at: Option<u64>,
}

impl From<BlockerRecord> for BlockerView {
    fn from(b: BlockerRecord) -> Self {
        Self {
            id: b.id,
            session_id: b.session_id,
            question: b.question,
            source: b.source,
            evidence: b.evidence,
            status: b.status.as_str().to_string(),
            answer: b.answer,
            created_at: b.created_at,
            answered_at: b.answered_at,
        }
    }
}

/// Which turn to restore.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoRequest {
    /// Restore snapshot `turn`: the workspace as it was at the end of that turn, numbered as
    /// the session's `snapshot` events (0: before the session changed anything). Default: one
    /// step back from where the workspace is (repeated calls walk further back).
    pub turn: Option<u32>,
}

/// What an undo restored.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UndoView {
    pub session: String,
    /// The turn whose end state the workspace now has.
    pub turn: u32,
    /// The snapshot commit restored.
    pub commit: String,
    /// Files whose content or mode was put back.
    pub modified: Vec<String>,
    /// Files that had been deleted and were written again.
    pub recreated: Vec<String>,
    /// Files the snapshot did not have, removed.
    pub removed: Vec<String>,
    /// A snapshot of the state the undo replaced, to get it back.
    pub replaced: Option<String>,
}

type HubState = State<Arc<Hub>>;

/// Creates a session (status `idle`); its first message is its task.
#[utoipa::path(post, path = "/api/v1/sessions", tag = "sessions",
    request_body = CreateSessionRequest,
    responses(
        (status = 201, description = "Created", body = SessionView),
        (status = 400, description = "Bad workspace or body", body = ErrorBody),
        (status = 422, description = "Bad configuration, mode or provider", body = ErrorBody),
    ))]
pub async fn create_session(
    State(hub): HubState,
    JsonBody(req): JsonBody<CreateSessionRequest>,
) -> Result<(StatusCode, Json<SessionView>), ApiError> {
    let spec = SessionSpec {
        workspace: req.workspace,
        provider: req.provider,
        model: req.model,
        script: req.script,
        execution_mode: req.execution_mode,
        repo: match req.repo {
            Some(r) => Some(
                keel_store::RepoSource::new(&r.url, r.git_ref.as_deref())
                    .map_err(ApiError::bad_request)?,
            ),
            None => None,
        },
    };
    let record = hub.create(spec).await?;
    Ok((StatusCode::CREATED, Json(SessionView::new(&record, false))))
}

/// Lists the sessions of this server's workspace roots, newest first (sessions `keel run`,
/// an eval or another server stored elsewhere in the same database are not listed).
#[utoipa::path(get, path = "/api/v1/sessions", tag = "sessions", params(ListQuery),
    responses((status = 200, description = "Sessions", body = Vec<SessionView>)))]
pub async fn list_sessions(
    State(hub): HubState,
    QueryParams(q): QueryParams<ListQuery>,
) -> Result<Json<Vec<SessionView>>, ApiError> {
    let limit = q.limit.unwrap_or(50).clamp(1, 1000);
    // Read more than asked: some of the newest may be outside the roots.
    let records = hub.store.list_sessions(limit.saturating_mul(5)).await?;
    Ok(Json(
        records
            .iter()
            // A subagent's own record: its events are in its parent's session.
            .filter(|r| !keel_engine::agents::is_subagent_session(&r.workspace))
            .filter(|r| hub.lists(r))
            .take(limit)
            .map(|r| SessionView::new(r, hub.running(r)))
            .collect(),
    ))
}

/// One session.
#[utoipa::path(get, path = "/api/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The session", body = SessionView),
        (status = 404, description = "No such session", body = ErrorBody),
    ))]
pub async fn get_session(
    State(hub): HubState,
    PathParams(id): PathParams<String>,
) -> Result<Json<SessionView>, ApiError> {
    let record = hub.record(&id).await?;
    Ok(Json(SessionView::new(&record, hub.running(&record))))
}

/// Deletes a session with its events, messages and blockers.
#[utoipa::path(delete, path = "/api/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "A turn is running", body = ErrorBody),
    ))]
pub async fn delete_session(
    State(hub): HubState,
    PathParams(id): PathParams<String>,
) -> Result<StatusCode, ApiError> {
    hub.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Sends a message and runs the turn to completion: the result, every event of the turn and
/// its phase events. The same engine as the CLI and the WebSocket, in either mode.
#[utoipa::path(post, path = "/api/v1/sessions/{id}/messages", tag = "turns",
    params(("id" = String, Path, description = "Session id")),
    request_body = SendMessageRequest,
    responses(
        (status = 200, description = "The turn ran (see `status` for how it ended)", body = MessageResponse),
        (status = 202, description = "Queue mode (`keel serve --database`): the turn is a job for the workers; its events arrive on the session's streams", body = QueuedResponse),
        (status = 400, description = "Empty message or bad body", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "A turn of this session is running", body = ErrorBody),
        (status = 503, description = "The server is shutting down", body = ErrorBody),
    ))]
pub async fn send_message(
    State(hub): HubState,
    PathParams(id): PathParams<String>,
    JsonBody(req): JsonBody<SendMessageRequest>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let session = hub.session(&id).await?;
    match hub.send(&session, req.content).await? {
        Sent::Turn(ticket) => {
            // The turn runs on its own task: a client that goes away does not stop it.
            let turn = ticket.finished().await;
            Ok(Json(MessageResponse::new(turn)).into_response())
        }
        Sent::Queued { job_id } => Ok((
            StatusCode::ACCEPTED,
            Json(QueuedResponse {
                queued: true,
                session_id: id,
                job_id,
            }),
        )
            .into_response()),
    }
}

/// A turn enqueued for the workers (queue mode).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct QueuedResponse {
    /// Always true.
    pub queued: bool,
    pub session_id: String,
    /// The job's id in the queue.
    pub job_id: String,
}

/// Cancels the running turn; it ends `cancelled` with a `turn_finished` event.
#[utoipa::path(post, path = "/api/v1/sessions/{id}/cancel", tag = "turns",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 202, description = "Cancellation requested", body = CancelResponse),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "No turn is running", body = ErrorBody),
    ))]
pub async fn cancel_turn(
    State(hub): HubState,
    PathParams(id): PathParams<String>,
) -> Result<(StatusCode, Json<CancelResponse>), ApiError> {
    let session = hub.session(&id).await?;
    hub.cancel(&session).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(CancelResponse { cancelled: true }),
    ))
}

/// The stored events of a session with `seq > since_seq`, in order.
#[utoipa::path(get, path = "/api/v1/sessions/{id}/events", tag = "events",
    params(("id" = String, Path, description = "Session id"), SinceQuery),
    responses(
        (status = 200, description = "Events (flat JSON objects with `type` and `seq`)", body = Vec<Object>),
        (status = 404, description = "No such session", body = ErrorBody),
    ))]
pub async fn list_events(
    State(hub): HubState,
    PathParams(id): PathParams<String>,
    QueryParams(q): QueryParams<SinceQuery>,
) -> Result<Json<Vec<Event>>, ApiError> {
    hub.record(&id).await?;
    let since = q.since_seq.unwrap_or(0);
    let events = hub.store.events(&id, since).await?;
    Ok(Json(events))
}

/// The session's blockers (questions it waits on), oldest first.
#[utoipa::path(get, path = "/api/v1/sessions/{id}/blockers", tag = "blockers",
    params(("id" = String, Path, description = "Session id"), BlockersQuery),
    responses(
        (status = 200, description = "Blockers", body = Vec<BlockerView>),
        (status = 404, description = "No such session", body = ErrorBody),
    ))]
pub async fn list_blockers(
    State(hub): HubState,
    PathParams(id): PathParams<String>,
    QueryParams(q): QueryParams<BlockersQuery>,
) -> Result<Json<Vec<BlockerView>>, ApiError> {
    hub.record(&id).await?;
    let all = q.all.unwrap_or(false);
    let blockers = hub.store.list_blockers(Some(&id), all).await?;
    Ok(Json(blockers.into_iter().map(BlockerView::from).collect()))
}

/// Answers a blocker; the session's next message delivers the answer to the agent.
#[utoipa::path(post, path = "/api/v1/sessions/{id}/blockers/{blocker_id}/answer", tag = "blockers",
    params(
        ("id" = String, Path, description = "Session id"),
        ("blocker_id" = String, Path, description = "Blocker id"),
    ),
    request_body = AnswerRequest,
    responses(
        (status = 200, description = "Answered", body = BlockerView),
        (status = 400, description = "Empty answer", body = ErrorBody),
        (status = 404, description = "No such session or blocker", body = ErrorBody),
        (status = 409, description = "Already delivered", body = ErrorBody),
    ))]
pub async fn answer_blocker(
    State(hub): HubState,
    PathParams((id, blocker_id)): PathParams<(String, String)>,
    JsonBody(req): JsonBody<AnswerRequest>,
) -> Result<Json<BlockerView>, ApiError> {
    let answer = req.answer.trim().to_string();
    if answer.is_empty() {
        return Err(ApiError::bad_request(
            "the answer is empty; say what the agent should know or do",
        ));
    }
    hub.record(&id).await?;
    let not_found = || {
        ApiError::not_found(format!(
            "session {id} has no blocker `{blocker_id}`; GET /api/v1/sessions/{id}/blockers?all=true lists them"
        ))
    };
    let wanted = blocker_id.clone();
    let blocker = hub
        .store
        .get_blocker(&wanted)
        .await
        .map_err(|_| not_found())?;
    if blocker.session_id != id || blocker.id != blocker_id {
        return Err(not_found());
    }
    let updated = hub.store.answer_blocker(&blocker.id, &answer).await?;
    // A task blocked on this question is ready again.
    crate::tasks::ready_tasks_of(&hub, &updated.session_id).await?;
    Ok(Json(updated.into()))
}

/// Restores the session's workspace to the end of a turn, from the snapshots taken before the
/// session's writes (an `undo` event records it).
#[utoipa::path(post, path = "/api/v1/sessions/{id}/undo", tag = "turns",
    params(("id" = String, Path, description = "Session id")),
    request_body = UndoRequest,
    responses(
        (status = 200, description = "Restored", body = UndoView),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "A turn is running, or nothing to undo", body = ErrorBody),
    ))]
pub async fn undo(
    State(hub): HubState,
    PathParams(id): PathParams<String>,
    JsonBody(req): JsonBody<UndoRequest>,
) -> Result<Json<UndoView>, ApiError> {
    let session = hub.session(&id).await?;
    let r = hub.undo(&session, req.turn).await?;
    Ok(Json(UndoView {
        session: r.session,
        turn: r.turn,
        commit: r.commit,
        modified: r.changes.modified,
        recreated: r.changes.recreated,
        removed: r.changes.removed,
        replaced: r.replaced,
    }))
}
