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
    Server {
        status: u16,
        message: String,
        /// The server's `retry-after` (a 503 often sends one).
        retry_after: Option<Duration>,
    },
    #[error("the model request timed out: {0}")]
    Timeout(String),
    /// A local server went silent: not resent (it would queue behind the abandoned
    /// generation).
    #[error("the model request timed out: {0}")]
    Stalled(String),
    #[error("connection to the provider failed: {0}")]
    Connection(String),
    /// Nothing answered at the address (connection refused, unknown host): a server that is
    /// not running or a wrong base URL. Retried once, quickly.
    #[error("nothing is listening at {url} — is the server running? ({detail})")]
    Unreachable { url: String, detail: String },
    /// The server does not know the model (HTTP 404): not retried.
    #[error(
        "model `{model}` was not found at {base_url} (HTTP {status}: {message}); check the model name (--model or llm.model) and the base URL (--base-url; OpenAI-compatible servers end in /v1); `keel doctor --ping` tests both"
    )]
    ModelNotFound {
        status: u16,
        model: String,
        base_url: String,
        message: String,
    },
    /// The request is larger than the model's context window, in any provider's wording;
    /// `window` is the size the server reported, when it did.
    #[error("the conversation does not fit the model's context window{}: {message}", window.map(|w| format!(" ({w} tokens)")).unwrap_or_default())]
    ContextLength {
        message: String,
        window: Option<u64>,
    },
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
                | LlmError::Unreachable { .. }
                | LlmError::Truncated(_)
        )
    }

    /// One short line for retry notices: the kind of failure and the start of the
    /// provider's message (the full text stays in the final error).
    pub fn summary(&self) -> String {
        const MAX: usize = 72;
        let (kind, detail) = match self {
            LlmError::RateLimited { message, .. } => ("rate limited".to_string(), message),
            LlmError::Overloaded { message, .. } => ("overloaded".to_string(), message),
            LlmError::Server {
                status, message, ..
            } => (format!("HTTP {status}"), message),
            LlmError::Timeout(m) => ("timed out".to_string(), m),
            LlmError::Connection(m) if m.contains("broke off") => (
                "the connection broke off mid-reply".to_string(),
                &String::new(),
            ),
            LlmError::Connection(m) => ("connection failed".to_string(), m),
            LlmError::Unreachable { url, .. } => {
                (format!("nothing is listening at {url}"), &String::new())
            }
            LlmError::Truncated(m) => ("reply cut off".to_string(), m),
            other => return short(&other.to_string(), MAX + 20),
        };
        if detail.is_empty() {
            kind
        } else {
            format!("{kind}: {}", short(detail, MAX))
        }
    }

    /// The delay the provider asked for before the next attempt, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. }
            | LlmError::Overloaded { retry_after, .. }
            | LlmError::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether this is a timeout (for error classification).
    pub fn is_timeout(&self) -> bool {
        matches!(self, LlmError::Timeout(_) | LlmError::Stalled(_))
    }
}

/// `text` on one line, cut to `max` characters with an ellipsis.
fn short(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        line
    } else {
        let cut: String = line.chars().take(max).collect();
        format!("{}…", cut.trim_end())
    }
}
