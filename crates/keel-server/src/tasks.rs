//! REST for PRDs, tasks, work and proofs — the same operations as `keel prd`, `keel task` and
//! `keel work`, on the same records (`keel_store::work`) and the same runner
//! (`keel_work::TaskRunner`). Every request may name a `workspace` (default: the
//! server's); records are per workspace.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use keel_engine::runtime::SessionOverrides;
use keel_store::work::{NewTask, TaskEdit, TaskStatus, WorkStore, WorkStores};
use keel_work::{TaskRunner, generate_request, generate_tasks};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody, JsonBody, PathParams, QueryParams};
use crate::hub::Hub;

type HubState = State<Arc<Hub>>;

/// `?workspace=DIR`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WorkspaceQuery {
    /// The workspace (absolute, or relative to the server's directory; default: the server's).
    pub workspace: Option<String>,
    /// A PRD version (`GET /prds/{id}` only; default: the latest).
    pub version: Option<u32>,
}

/// A new PRD, or a new version of one.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrdRequest {
    pub workspace: Option<String>,
    /// Default: the first Markdown heading or line.
    pub title: Option<String>,
    pub body: String,
}

/// A task added by hand.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddTaskRequest {
    pub workspace: Option<String>,
    pub prd: Option<u32>,
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// Checkable statements the work must meet (`criteria` is accepted too; generated tasks
    /// and `keel task add --criterion` fill the same list).
    #[serde(default, alias = "criteria")]
    pub acceptance_criteria: Vec<String>,
    /// xs, s, m, l or xl (default m).
    pub size: Option<String>,
    #[serde(default)]
    pub depends_on: Vec<u32>,
}

/// Changes to a task; unset fields stay.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EditTaskRequest {
    pub workspace: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Replaces every acceptance criterion (`criteria` is accepted too).
    #[serde(default, alias = "criteria")]
    pub acceptance_criteria: Option<Vec<String>>,
    pub size: Option<String>,
    pub depends_on: Option<Vec<u32>>,
    /// ready, blocked, in_progress, done or failed.
    pub status: Option<String>,
}

/// Which model runs the request (as for sessions).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkRequest {
    pub workspace: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The scripted provider's script (relative to the workspace).
    pub script: Option<String>,
    /// `react` or `plan_exec`.
    pub execution_mode: Option<String>,
    /// `generate`: the PRD (default: the latest). `start`: ignored.
    pub prd: Option<u32>,
    /// `start`: the task.
    pub task: Option<u32>,
    /// `start`: run it (default: only return the task layer it would get).
    #[serde(default)]
    pub execute: bool,
    /// `batch`: stop once this task and its dependencies are done.
    pub until: Option<u32>,
}

fn stores(hub: &Hub) -> Result<WorkStores, ApiError> {
    hub.work.get().cloned().ok_or_else(|| {
        ApiError::conflict(
            "unavailable",
            "this server has no task store; PRDs and tasks need the store `keel serve` opens",
        )
    })
}

fn work_store(hub: &Hub) -> Result<Arc<dyn WorkStore>, ApiError> {
    Ok(stores(hub)?.work)
}

fn ws(hub: &Hub, workspace: Option<&str>) -> Result<(PathBuf, String), ApiError> {
    let root = hub.workspace_for(workspace)?;
    let s = root.display().to_string();
    Ok((root, s))
}

fn to_json<T: serde::Serialize>(v: &T) -> Json<Value> {
    Json(serde_json::to_value(v).unwrap_or(Value::Null))
}

/// The PRDs of a workspace, each at its latest version.
#[utoipa::path(get, path = "/api/v1/prds", tag = "tasks", params(WorkspaceQuery),
    responses((status = 200, description = "PRDs", body = Vec<Object>)))]
pub async fn list_prds(
    State(hub): HubState,
    QueryParams(q): QueryParams<WorkspaceQuery>,
) -> Result<Json<Value>, ApiError> {
    let store = work_store(&hub)?;
    let (_, w) = ws(&hub, q.workspace.as_deref())?;
    Ok(to_json(&store.list_prds(&w).await?))
}

/// Stores a new PRD (version 1).
#[utoipa::path(post, path = "/api/v1/prds", tag = "tasks", request_body = PrdRequest,
    responses((status = 201, description = "The PRD", body = Object),
              (status = 400, description = "Empty body", body = ErrorBody)))]
pub async fn add_prd(
    State(hub): HubState,
    JsonBody(req): JsonBody<PrdRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if req.body.trim().is_empty() {
        return Err(ApiError::bad_request("the PRD is empty"));
    }
    let store = work_store(&hub)?;
    let (_, w) = ws(&hub, req.workspace.as_deref())?;
    let title = req.title.unwrap_or_else(|| {
        let line = req
            .body
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("Untitled PRD");
        line.trim_start_matches('#')
            .trim()
            .chars()
            .take(100)
            .collect()
    });
    let prd = store.add_prd(&w, &title, &req.body).await?;
    Ok((StatusCode::CREATED, to_json(&prd)))
}

/// A PRD at its latest version (or `?version=N`).
#[utoipa::path(get, path = "/api/v1/prds/{id}", tag = "tasks",
    params(("id" = u32, Path, description = "PRD id"), WorkspaceQuery),
    responses((status = 200, description = "The PRD", body = Object),
              (status = 404, description = "No such PRD or version", body = ErrorBody)))]
pub async fn get_prd(
    State(hub): HubState,
    PathParams(id): PathParams<u32>,
    QueryParams(q): QueryParams<WorkspaceQuery>,
) -> Result<Json<Value>, ApiError> {
    let store = work_store(&hub)?;
    let (_, w) = ws(&hub, q.workspace.as_deref())?;
    Ok(to_json(&store.prd(&w, Some(id), q.version).await?))
}

/// Stores a new version of a PRD (nothing when the body is unchanged).
#[utoipa::path(put, path = "/api/v1/prds/{id}", tag = "tasks", request_body = PrdRequest,
    params(("id" = u32, Path, description = "PRD id")),
    responses((status = 200, description = "The PRD at its new version", body = Object),
              (status = 404, description = "No such PRD", body = ErrorBody)))]
pub async fn edit_prd(
    State(hub): HubState,
    PathParams(id): PathParams<u32>,
    JsonBody(req): JsonBody<PrdRequest>,
) -> Result<Json<Value>, ApiError> {
    if req.body.trim().is_empty() {
        return Err(ApiError::bad_request("the PRD is empty"));
    }
    let store = work_store(&hub)?;
    let (_, w) = ws(&hub, req.workspace.as_deref())?;
    Ok(to_json(&store.edit_prd(&w, id, &req.body).await?))
}

/// The tasks of a workspace, by id (with dependencies and sessions).
#[utoipa::path(get, path = "/api/v1/tasks", tag = "tasks", params(WorkspaceQuery),
    responses((status = 200, description = "Tasks", body = Vec<Object>)))]
pub async fn list_tasks(
    State(hub): HubState,
    QueryParams(q): QueryParams<WorkspaceQuery>,
) -> Result<Json<Value>, ApiError> {
    let store = work_store(&hub)?;
    let (_, w) = ws(&hub, q.workspace.as_deref())?;
    Ok(to_json(&store.list_tasks(&w).await?))
}

/// Adds a task by hand (dependencies must exist).
#[utoipa::path(post, path = "/api/v1/tasks", tag = "tasks", request_body = AddTaskRequest,
    responses((status = 201, description = "The task", body = Object),
              (status = 409, description = "Unknown dependency or bad size", body = ErrorBody)))]
pub async fn add_task(
    State(hub): HubState,
    JsonBody(req): JsonBody<AddTaskRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let store = work_store(&hub)?;
    let (_, w) = ws(&hub, req.workspace.as_deref())?;
    let task = NewTask {
        title: req.title,
        description: req.description,
        criteria: req.acceptance_criteria,
        size: req.size.unwrap_or_else(|| "m".into()),
        depends_on: req.depends_on,
        after: Vec::new(),
    };
    let prd = req.prd;
    let ids = store.add_tasks(&w, prd, &[task]).await?;
    let t = store.task(&w, ids.first().copied().unwrap_or(0)).await?;
    Ok((StatusCode::CREATED, to_json(&t)))
}

/// A task with its proofs.
#[utoipa::path(get, path = "/api/v1/tasks/{id}", tag = "tasks",
    params(("id" = u32, Path, description = "Task id"), WorkspaceQuery),
    responses((status = 200, description = "`{task, proofs}`", body = Object),
              (status = 404, description = "No such task", body = ErrorBody)))]
pub async fn get_task(
    State(hub): HubState,
    PathParams(id): PathParams<u32>,
    QueryParams(q): QueryParams<WorkspaceQuery>,
) -> Result<Json<Value>, ApiError> {
    let store = work_store(&hub)?;
    let (_, w) = ws(&hub, q.workspace.as_deref())?;
    let (task, proofs) = (store.task(&w, id).await?, store.proofs(&w, id).await?);
    Ok(Json(json!({"task": task, "proofs": proofs})))
}

/// Changes a task (dependencies checked: they exist, no cycle).
#[utoipa::path(patch, path = "/api/v1/tasks/{id}", tag = "tasks", request_body = EditTaskRequest,
    params(("id" = u32, Path, description = "Task id")),
    responses((status = 200, description = "The task", body = Object),
              (status = 409, description = "A cycle, an unknown task or a bad size", body = ErrorBody)))]
pub async fn edit_task(
    State(hub): HubState,
    PathParams(id): PathParams<u32>,
    JsonBody(req): JsonBody<EditTaskRequest>,
) -> Result<Json<Value>, ApiError> {
    let store = work_store(&hub)?;
    let (_, w) = ws(&hub, req.workspace.as_deref())?;
    let status = match req.status.as_deref() {
        Some(s) => Some(TaskStatus::parse(s).ok_or_else(|| {
            ApiError::bad_request(format!(
                "unknown status `{s}`; use ready, blocked, in_progress, done or failed"
            ))
        })?),
        None => None,
    };
    let edit = TaskEdit {
        title: req.title,
        description: req.description,
        criteria: req.acceptance_criteria,
        size: req.size,
        depends_on: req.depends_on,
        status,
    };
    Ok(to_json(&store.edit_task(&w, id, &edit).await?))
}

/// Deletes a task no other task depends on.
#[utoipa::path(delete, path = "/api/v1/tasks/{id}", tag = "tasks",
    params(("id" = u32, Path, description = "Task id"), WorkspaceQuery),
    responses((status = 204, description = "Deleted"),
              (status = 409, description = "Other tasks depend on it", body = ErrorBody)))]
pub async fn delete_task(
    State(hub): HubState,
    PathParams(id): PathParams<u32>,
    QueryParams(q): QueryParams<WorkspaceQuery>,
) -> Result<StatusCode, ApiError> {
    let store = work_store(&hub)?;
    let (_, w) = ws(&hub, q.workspace.as_deref())?;
    store.remove_task(&w, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The request's provider choices; its script, like a session's, only from inside the roots.
fn overrides(hub: &Hub, root: &Path, req: &WorkRequest) -> Result<SessionOverrides, ApiError> {
    let non_empty = |s: &Option<String>| s.clone().filter(|v| !v.trim().is_empty());
    let mode = match req.execution_mode.as_deref() {
        Some(m) => Some(keel_phase::ExecutionMode::parse(m).ok_or_else(|| {
            ApiError::bad_request(format!(
                "unknown execution_mode `{m}`; use react or plan_exec"
            ))
        })?),
        None => None,
    };
    Ok(SessionOverrides {
        provider: non_empty(&req.provider),
        model: non_empty(&req.model),
        script: match non_empty(&req.script) {
            Some(script) => Some(hub.script_for(root, &script)?),
            None => None,
        },
        mode,
        ..SessionOverrides::default()
    })
}

/// Asks the model to break a PRD into tasks; stored all together, or nothing on error.
#[utoipa::path(post, path = "/api/v1/tasks/generate", tag = "tasks", request_body = WorkRequest,
    responses((status = 201, description = "The new tasks", body = Vec<Object>),
              (status = 422, description = "The model's list was invalid twice", body = ErrorBody)))]
pub async fn generate(
    State(hub): HubState,
    JsonBody(req): JsonBody<WorkRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let store = work_store(&hub)?;
    let (root, w) = ws(&hub, req.workspace.as_deref())?;
    let builder = hub.builder().clone();
    let config = builder.config(&root, &overrides(&hub, &root, &req)?)?;
    let provider = builder.providers(&config, &root)?.main;
    let prd = store.prd(&w, req.prd, None).await?;
    let existing = store
        .list_tasks(&w)
        .await?
        .into_iter()
        .filter(|t| t.prd == Some(prd.id))
        .map(|t| t.title)
        .collect::<Vec<_>>();
    let request = generate_request(&prd.title, &prd.body, &existing);
    let tasks = generate_tasks(provider.as_ref(), &request)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_tasks",
                e.to_string(),
            )
        })?;
    let ids = store.add_tasks(&w, Some(prd.id), &tasks).await?;
    let mut stored = Vec::with_capacity(ids.len());
    for id in ids {
        stored.push(store.task(&w, id).await?);
    }
    Ok((StatusCode::CREATED, to_json(&stored)))
}

fn runner(hub: &Hub, req: &WorkRequest) -> Result<TaskRunner, ApiError> {
    let stores = stores(hub)?;
    let (root, _) = ws(hub, req.workspace.as_deref())?;
    let engine = hub.builder().engine(&root, &overrides(hub, &root, req)?)?;
    Ok(TaskRunner::new(Arc::new(engine), stores, Vec::new()))
}

/// Without `execute`: the task layer the task's run would get (the intent preview). With it:
/// runs the task in a session and returns how it ended with its proof.
#[utoipa::path(post, path = "/api/v1/work/start", tag = "tasks", request_body = WorkRequest,
    responses((status = 200, description = "`{task_layer}` or the run with its proof", body = Object),
              (status = 409, description = "A dependency is not done, or the task is blocked or done", body = ErrorBody)))]
pub async fn start(
    State(hub): HubState,
    JsonBody(req): JsonBody<WorkRequest>,
) -> Result<Json<Value>, ApiError> {
    let id = req
        .task
        .ok_or_else(|| ApiError::bad_request("`task` is required"))?;
    if !req.execute {
        let stores = stores(&hub)?;
        let (_, w) = ws(&hub, req.workspace.as_deref())?;
        let task = stores.work.task(&w, id).await?;
        let layer = keel_work::runner::preview_for(&*stores.sessions, &*stores.work, &w, &task)
            .await
            .map_err(|e| ApiError::conflict("conflict", e.to_string()))?;
        return Ok(Json(json!({"task": task, "task_layer": layer})));
    }
    let run = runner(&hub, &req)?
        .run_task(id)
        .await
        .map_err(|e| ApiError::conflict("conflict", e.to_string()))?;
    Ok(to_json(&run))
}

/// Runs every ready task in dependency order, one at a time in the workspace. In queue mode
/// (`keel serve --database`) the batch's first task is queued for the workers instead (202,
/// `{queued, job_id, task}`; each worker queues the next); `GET /work/status` follows it.
#[utoipa::path(post, path = "/api/v1/work/batch", tag = "tasks", request_body = WorkRequest,
    responses((status = 200, description = "`{runs, stopped}`", body = Object),
              (status = 202, description = "Queue mode: `{queued, job_id, task}`", body = Object),
              (status = 409, description = "A batch of the workspace is already queued", body = ErrorBody)))]
pub async fn batch(
    State(hub): HubState,
    JsonBody(req): JsonBody<WorkRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if let Some(queue) = hub.task_queue.get().cloned() {
        return queue_batch(&hub, queue.as_ref(), &req).await;
    }
    let report = runner(&hub, &req)?
        .run_batch(req.until)
        .await
        .map_err(|e| ApiError::conflict("conflict", e.to_string()))?;
    Ok((StatusCode::OK, to_json(&report)))
}

/// Queues the batch's first ready task (the worker running each task queues the next).
async fn queue_batch(
    hub: &Hub,
    queue: &dyn crate::TaskQueue,
    req: &WorkRequest,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let (root, w) = ws(hub, req.workspace.as_deref())?;
    let flags = overrides(hub, &root, req)?;
    let conflict = |e: keel_engine::EngineError| ApiError::conflict("conflict", e.to_string());
    let runner = TaskRunner::with_builder(
        hub.builder().clone(),
        &root,
        flags.clone(),
        stores(hub)?,
        Vec::new(),
    )
    .map_err(conflict)?;
    let scope = match req.until {
        Some(u) => Some(runner.closure(u).await.map_err(conflict)?),
        None => None,
    };
    let Some(first) = runner.next_task(scope.as_deref()).await.map_err(conflict)? else {
        return Ok((
            StatusCode::OK,
            Json(json!({"queued": false, "runs": [], "stopped": []})),
        ));
    };
    let job_id = queue
        .enqueue_batch(&w, first, scope, &flags)
        .await
        .map_err(|e| ApiError::conflict("batch_running", e))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"queued": true, "job_id": job_id, "task": first})),
    ))
}

/// Where every task stands: counts by status and the tasks.
#[utoipa::path(get, path = "/api/v1/work/status", tag = "tasks", params(WorkspaceQuery),
    responses((status = 200, description = "`{counts, tasks}`", body = Object)))]
pub async fn status(
    State(hub): HubState,
    QueryParams(q): QueryParams<WorkspaceQuery>,
) -> Result<Json<Value>, ApiError> {
    let store = work_store(&hub)?;
    let (_, w) = ws(&hub, q.workspace.as_deref())?;
    let tasks = store.list_tasks(&w).await?;
    let mut counts = serde_json::Map::new();
    // `waiting`: ready, but a dependency is not done yet (it cannot start).
    for s in [
        "ready",
        "waiting",
        "blocked",
        "in_progress",
        "done",
        "failed",
    ] {
        let n = tasks
            .iter()
            .filter(|t| match t.shown_status(&tasks) {
                "interrupted" => s == "in_progress",
                shown => shown == s,
            })
            .count();
        counts.insert(s.into(), json!(n));
    }
    let shown: Vec<Value> = tasks
        .iter()
        .map(|t| {
            let mut v = serde_json::to_value(t).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("shown_status".into(), json!(t.shown_status(&tasks)));
                o.insert("waiting_for".into(), json!(t.waiting_for(&tasks)));
            }
            v
        })
        .collect();
    Ok(Json(json!({"counts": counts, "tasks": shown})))
}

/// After a blocker of `session_id` is answered, its blocked task is ready again.
pub(crate) async fn ready_tasks_of(hub: &Hub, session_id: &str) -> Result<(), ApiError> {
    if let Some(stores) = hub.work.get().cloned() {
        stores.work.ready_tasks_of_session(session_id).await?;
    }
    Ok(())
}
