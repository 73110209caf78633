//! Typed provider failures.

use std::time::Duration;

/// Why a model request failed. Messages never contain API keys.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("rate limited by the provider: {message}")]
    RateLimited {
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("the provider is overloaded: {message}")]
    Overloaded {
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("provider server error (HTTP {status}): {message}")]
    Server { status: u16, message: String },
    #[error("the model request timed out: {0}")]
    Timeout(String),
    #[error("connection to the provider failed: {0}")]
    Connection(String),
    #[error("the provider rejected the API key (HTTP {status}): {message}")]
    Auth { status: u16, message: String },
    #[error("the provider rejected the request (HTTP {status}): {message}")]
    BadRequest { status: u16, message: String },
    #[error("the reply stream ended before it was complete: {0}")]
    Truncated(String),
    /// Not produced by [`crate::TurnAssembler`], which passes unparseable arguments on to the
    /// agent loop as text (to repair, or to return to the model with the schema); kept for
    /// callers that need a strict turn.
    #[error("the arguments of tool call `{name}` are not valid JSON ({reason})")]
    InvalidToolArguments {
        name: String,
        raw: String,
        reason: String,
    },
    #[error("the provider sent a reply Keel cannot read: {0}")]
    InvalidResponse(String),
    #[error("the scripted model has no turn left: {0}")]
    ScriptExhausted(String),
    #[error("provider configuration error: {0}")]
    Config(String),
}

impl LlmError {
    /// Whether sending the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. }
                | LlmError::Overloaded { .. }
                | LlmError::Server { .. }
                | LlmError::Timeout(_)
                | LlmError::Connection(_)
                | LlmError::Truncated(_)
        )
    }

    /// The delay the provider asked for before the next attempt, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. }
            | LlmError::Overloaded { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether this is a timeout (for error classification).
    pub fn is_timeout(&self) -> bool {
        matches!(self, LlmError::Timeout(_))
    }
}
