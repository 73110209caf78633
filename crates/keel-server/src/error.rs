//! API errors: every failure is a JSON body `{"error_code", "message"}` with the status code
//! that fits, including axum's own rejections (bad JSON, wrong content type, oversized body).

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use keel_store::StoreError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorBody {
    /// Machine-readable: `bad_request`, `invalid_json`, `unsupported_media_type`,
    /// `payload_too_large`, `unauthorized`, `forbidden_origin`, `forbidden_host`, `not_found`,
    /// `method_not_allowed`, `turn_running`, `no_turn_running`, `session_busy`, `conflict`,
    /// `config_error`, `provider_error`, `shutting_down`, `database_unavailable` (the shared
    /// database cannot be reached now: retry shortly), `internal_error`.
    pub error_code: String,
    /// What went wrong and what to do about it.
    pub message: String,
}

/// An error an API handler returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
    }

    pub fn session_not_found(id: &str) -> Self {
        Self::not_found(format!(
            "no session `{id}`; GET /api/v1/sessions lists them"
        ))
    }

    /// The JSON body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error_code: self.code.to_string(),
            message: self.message.clone(),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.status, self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(_) | StoreError::BlockerNotFound(_) | StoreError::Missing(_) => {
                Self::not_found(e.to_string())
            }
            StoreError::Ambiguous { .. } | StoreError::AmbiguousBlocker { .. } => {
                Self::bad_request(e.to_string())
            }
            StoreError::Conflict(m) => Self::conflict("conflict", m),
            StoreError::Unavailable { .. } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "database_unavailable",
                e.to_string(),
            ),
            other => Self::internal(other.to_string()),
        }
    }
}

/// A JSON request body whose rejections are [`ApiError`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Self(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    let text = rejection.body_text();
    match rejection {
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as JSON with `Content-Type: application/json`",
        ),
        JsonRejection::JsonSyntaxError(_) => ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("the body is not valid JSON: {text}"),
        ),
        JsonRejection::JsonDataError(_) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad_request",
            format!("the body does not fit this endpoint: {text}"),
        ),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the body is larger than the server accepts ({} bytes)",
                crate::MAX_BODY_BYTES
            ),
        ),
        other => ApiError::new(other.status(), "bad_request", text),
    }
}

/// Query parameters whose rejections are [`ApiError`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueryParams<T>(pub T);

impl<S, T> FromRequestParts<S> for QueryParams<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Self(q.0))
            .map_err(|e: QueryRejection| {
                ApiError::bad_request(format!("bad query parameters: {}", e.body_text()))
            })
    }
}

/// Path parameters whose rejections are [`ApiError`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct PathParams<T>(pub T);

impl<S, T> FromRequestParts<S> for PathParams<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Self(p.0))
            .map_err(|e: PathRejection| {
                ApiError::bad_request(format!("bad path: {}", e.body_text()))
            })
    }
}

/// Unknown routes.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; GET /api/v1/openapi.json lists them")
}

/// Known routes with another method.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not accept that method; GET /api/v1/openapi.json lists them",
    )
}
