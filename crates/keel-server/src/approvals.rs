//! Answering approvals over REST: a tool call that waits (`approval_requested`) runs after
//! `POST …/approve` and is refused, with the reason given to the model, after `POST …/deny`.
//! The WebSocket answers the same way (`{"type": "approve" | "deny", …}`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use keel_protocol::{ApprovalScope, Op};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody, JsonBody, PathParams};
use crate::hub::Hub;

/// Approves a waiting call.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    /// The `call_id` of the `approval_requested` event.
    pub call_id: String,
    /// `once` (default) or `session`: the same call runs without asking for the rest of the
    /// session.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "once")]
    pub scope: ApprovalScope,
}

/// Denies a waiting call.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyRequest {
    /// The `call_id` of the `approval_requested` event.
    pub call_id: String,
    /// Why, for the model.
    pub reason: Option<String>,
}

/// How the call was answered.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ApprovalAnswer {
    pub call_id: String,
    pub approved: bool,
}

/// Lets a call waiting for approval run.
#[utoipa::path(post, path = "/api/v1/sessions/{id}/approve", tag = "turns",
    params(("id" = String, Path, description = "Session id")),
    request_body = ApproveRequest,
    responses(
        (status = 200, description = "Approved; the call runs", body = ApprovalAnswer),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "No such call is waiting", body = ErrorBody),
    ))]
pub async fn approve(
    State(hub): State<Arc<Hub>>,
    PathParams(id): PathParams<String>,
    JsonBody(req): JsonBody<ApproveRequest>,
) -> Result<Json<ApprovalAnswer>, ApiError> {
    let session = hub.session(&id).await?;
    let op = Op::Approve {
        call_id: req.call_id.clone(),
        scope: req.scope,
    };
    hub.submit(&session, op).await?;
    Ok(Json(ApprovalAnswer {
        call_id: req.call_id,
        approved: true,
    }))
}

/// Refuses a call waiting for approval; the model is told it was denied (and why).
#[utoipa::path(post, path = "/api/v1/sessions/{id}/deny", tag = "turns",
    params(("id" = String, Path, description = "Session id")),
    request_body = DenyRequest,
    responses(
        (status = 200, description = "Denied; the call does not run", body = ApprovalAnswer),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "No such call is waiting", body = ErrorBody),
    ))]
pub async fn deny(
    State(hub): State<Arc<Hub>>,
    PathParams(id): PathParams<String>,
    JsonBody(req): JsonBody<DenyRequest>,
) -> Result<Json<ApprovalAnswer>, ApiError> {
    let session = hub.session(&id).await?;
    let op = Op::Deny {
        call_id: req.call_id.clone(),
        reason: req.reason,
    };
    hub.submit(&session, op).await?;
    Ok(Json(ApprovalAnswer {
        call_id: req.call_id,
        approved: false,
    }))
}
