//! Provider error replies → [`LlmError`]: the provider's own message and type from an error
//! body (any provider's shape), `retry-after`, HTTP status → a typed error naming the model,
//! the API root and the key variable where the user has to act, validation errors a server
//! reports as 5xx, and context overflow in any provider's wording.

use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::LlmError;
use crate::http::{ApiKey, display_url, redact};
use crate::router::ModelTarget;

/// What error messages name about the endpoint: the model, the API root and where the key
/// comes from (the variable, never its value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ErrorContext {
    pub(crate) model: String,
    pub(crate) base_url: String,
    pub(crate) key_env: Option<String>,
    pub(crate) has_key: bool,
}

impl ErrorContext {
    /// The context of `target`, sending `key` or none.
    pub(crate) fn of(target: &ModelTarget, key: Option<&ApiKey>) -> Self {
        Self {
            model: target.model.clone(),
            base_url: display_url(&target.base_url),
            key_env: target.api_key_env.clone(),
            has_key: key.is_some(),
        }
    }

    /// What to check after the server refused the key.
    fn key_advice(&self) -> String {
        match (&self.key_env, self.has_key) {
            (Some(var), true) => format!(
                "Keel sent the key from {var} to {}: check that it is valid for this server and model `{}`",
                self.base_url, self.model
            ),
            (Some(var), false) => format!(
                "no key was sent: {var} is not set; export the key for {} as {var}",
                self.base_url
            ),
            (None, _) => format!(
                "{} wants a key: name its variable in llm.providers.NAME.api_key_env",
                self.base_url
            ),
        }
    }
}

/// The provider's own error message and type from an error body (Anthropic
/// `{"error": {"type", "message"}}`, OpenAI `{"error": {"message", "type", "code"}}`, Ollama
/// `{"error": "…"}`), else the body text, shortened.
pub(crate) fn provider_message(body: &str) -> (String, Option<String>) {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        let err = v.get("error").unwrap_or(&v);
        if let Some(s) = err.as_str() {
            return (shorten(s), None);
        }
        // FastAPI/pydantic (llama-cpp-python, some proxies): {"detail": [{"loc", "msg", "type"}]}.
        if let Some(items) = v.get("detail").and_then(|d| d.as_array()) {
            let parts: Vec<String> = items
                .iter()
                .map(|i| {
                    let loc = i
                        .get("loc")
                        .and_then(|l| l.as_array())
                        .map(|l| {
                            l.iter()
                                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_string))
                                .collect::<Vec<_>>()
                                .join(".")
                        })
                        .unwrap_or_default();
                    let msg = i.get("msg").and_then(|m| m.as_str()).unwrap_or("invalid");
                    format!("{loc}: {msg}")
                })
                .collect();
            if !parts.is_empty() {
                return (
                    shorten(&format!("validation error: {}", parts.join("; "))),
                    Some("validation_error".into()),
                );
            }
        }
        let message = err
            .get("message")
            .and_then(|m| m.as_str())
            .map(str::to_string);
        let kind = err
            .get("type")
            .and_then(|t| t.as_str())
            .or_else(|| err.get("code").and_then(|c| c.as_str()))
            .map(str::to_string);
        if let Some(m) = message {
            return (shorten(&m), kind);
        }
    }
    let trimmed = body.trim();
    if trimmed.is_empty() {
        ("(empty reply body)".into(), None)
    } else {
        (shorten(trimmed), None)
    }
}

fn shorten(s: &str) -> String {
    const MAX: usize = 600;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds. HTTP dates are not parsed: the
/// policy's own backoff applies then.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_millis(ms as u64));
    }
    let secs = get("retry-after")?.trim().parse::<f64>().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_millis((secs * 1000.0) as u64))
}

/// Maps a non-2xx reply to a typed error carrying the provider's message, naming the model,
/// the API root and the key variable where the user has to act.
pub(crate) fn status_error(
    status: u16,
    headers: &HeaderMap,
    body: &str,
    ctx: &ErrorContext,
    key: Option<&ApiKey>,
) -> LlmError {
    let (message, kind) = provider_message(body);
    let message = redact(&message, key);
    let retry_after = retry_after(headers);
    let kind = kind.unwrap_or_default();
    if let Some(window) = context_overflow(status, &kind, body) {
        return LlmError::ContextLength { message, window };
    }
    match status {
        429 => LlmError::RateLimited {
            message,
            retry_after,
        },
        529 => LlmError::Overloaded {
            message,
            retry_after,
        },
        _ if kind == "overloaded_error" => LlmError::Overloaded {
            message,
            retry_after,
        },
        401 | 403 => LlmError::Auth {
            status,
            message: format!("{message}; {}", ctx.key_advice()),
        },
        408 => LlmError::Timeout(format!("{} answered HTTP 408: {message}", ctx.base_url)),
        300..=399 => {
            let to = headers
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(|l| redact(&display_url(l), key))
                .unwrap_or_else(|| "an address it did not give".to_string());
            LlmError::BadRequest {
                status,
                message: format!(
                    "{} answered with a redirect (HTTP {status}) to {to}; Keel does not follow redirects for model requests, so your key and prompts reach only the address you configured — set the base URL to the final address if you trust it",
                    ctx.base_url
                ),
            }
        }
        // A server that reports a malformed request as a 5xx (llama-cpp-python's validation
        // errors): the same request fails the same way every time.
        500..=599 if is_validation(&kind, &message) => LlmError::BadRequest { status, message },
        500..=599 => LlmError::Server {
            status,
            message,
            retry_after,
        },
        404 => LlmError::ModelNotFound {
            status,
            model: ctx.model.clone(),
            base_url: ctx.base_url.clone(),
            message,
        },
        _ => LlmError::BadRequest { status, message },
    }
}

/// Whether an error reply says the request itself is invalid (it will not pass on retry).
fn is_validation(kind: &str, message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    matches!(kind, "validation_error" | "invalid_request_error")
        || m.contains("validation error")
        || m.contains("input should be")
        || m.contains("field required")
}

/// When the reply says the request is larger than the context window (OpenAI and vLLM
/// `context_length_exceeded` / "maximum context length is N tokens", llama.cpp
/// `exceed_context_size_error` with `n_ctx`, llama-cpp-python "exceed context window of N",
/// Anthropic "prompt is too long"): the window the server reported, if any.
pub(crate) fn context_overflow(status: u16, kind: &str, body: &str) -> Option<Option<u64>> {
    if !(400..500).contains(&status) && !(500..600).contains(&status) {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    let matched = matches!(
        kind,
        "context_length_exceeded" | "exceed_context_size_error"
    ) || lower.contains("context_length_exceeded")
        || lower.contains("maximum context length")
        || lower.contains("exceeds the available context size")
        || lower.contains("exceed context window")
        || lower.contains("context window of")
        || lower.contains("prompt is too long")
        || lower.contains("context length exceeded");
    if !matched {
        return None;
    }
    let from_field = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("error")
                .and_then(|e| e.get("n_ctx"))
                .and_then(|n| n.as_u64())
        });
    Some(from_field.or_else(|| window_in_text(&lower)))
}

/// The number after "maximum context length is", "context size (" or "context window of".
fn window_in_text(lower: &str) -> Option<u64> {
    [
        "maximum context length is",
        "available context size (",
        "context window of",
    ]
    .iter()
    .find_map(|marker| {
        let rest = &lower[lower.find(marker)? + marker.len()..];
        let digits: String = rest
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// Maps an error reported inside a stream (Anthropic `event: error`, an OpenAI-compatible
/// chunk with `error`) by its type.
pub(crate) fn stream_error(kind: &str, message: String) -> LlmError {
    match kind {
        "overloaded_error" => LlmError::Overloaded {
            message,
            retry_after: None,
        },
        "rate_limit_error" | "rate_limit_exceeded" | "rate_limit" => LlmError::RateLimited {
            message,
            retry_after: None,
        },
        "authentication_error" | "permission_error" => LlmError::Auth {
            status: 401,
            message,
        },
        "context_length_exceeded" | "exceed_context_size_error" => LlmError::ContextLength {
            message,
            window: None,
        },
        "invalid_request_error" => LlmError::BadRequest {
            status: 400,
            message,
        },
        // api_error, server_error and anything unknown: the provider failed mid-reply.
        _ => LlmError::Server {
            status: 500,
            message,
            retry_after: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_debug_and_messages_hide_the_value() {
        let key = ApiKey::new("sk-test-1234567890").unwrap_or_else(|| panic!("key"));
        assert!(!format!("{key:?}").contains("1234567890"));
        let err = status_error(
            401,
            &HeaderMap::new(),
            r#"{"error": {"message": "Incorrect API key provided: sk-test-1234567890", "type": "invalid_request_error"}}"#,
            &ErrorContext::default(),
            Some(&key),
        );
        let text = format!("{err} {err:?}");
        assert!(!text.contains("sk-test-1234567890"), "{text}");
        assert!(matches!(err, LlmError::Auth { status: 401, .. }));
    }

    #[test]
    fn statuses_map_to_typed_errors_with_the_provider_message() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "7".parse().unwrap_or_else(|_| panic!()));
        let e = status_error(
            429,
            &h,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
            &ErrorContext::default(),
            None,
        );
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        assert!(e.to_string().contains("per-minute rate limit"), "{e}");
        let e = status_error(
            529,
            &HeaderMap::new(),
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            &ErrorContext::default(),
            None,
        );
        assert!(matches!(e, LlmError::Overloaded { .. }));
        let e = status_error(
            503,
            &HeaderMap::new(),
            "upstream down",
            &ErrorContext::default(),
            None,
        );
        assert!(matches!(e, LlmError::Server { status: 503, .. }) && e.is_retryable());
        assert_eq!(e.retry_after(), None);
        // A 503 that says when to come back is waited for as asked.
        let mut h = HeaderMap::new();
        h.insert("retry-after", "1".parse().unwrap_or_else(|_| panic!()));
        let e = status_error(503, &h, "upstream down", &ErrorContext::default(), None);
        assert_eq!(e.retry_after(), Some(Duration::from_secs(1)));
        assert_eq!(
            crate::retry::RetryPolicy::default().delay_for(1, &e),
            Some(Duration::from_secs(1))
        );
        let e = status_error(
            400,
            &HeaderMap::new(),
            r#"{"error":"model not found"}"#,
            &ErrorContext::default(),
            None,
        );
        assert!(matches!(e, LlmError::BadRequest { .. }) && !e.is_retryable());
        assert!(e.to_string().contains("model not found"));
        let mut h = HeaderMap::new();
        h.insert("retry-after-ms", "250".parse().unwrap_or_else(|_| panic!()));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
    }

    fn ctx() -> ErrorContext {
        ErrorContext {
            model: "qwen3-coder".into(),
            base_url: "http://localhost:8080/v1".into(),
            key_env: Some("LLAMA_API_KEY".into()),
            has_key: false,
        }
    }

    #[test]
    fn not_found_and_auth_name_the_model_url_and_key_variable() {
        let e = status_error(
            404,
            &HeaderMap::new(),
            r#"{"error":{"message":"model 'qwen3-coder' not found","type":"not_found_error"}}"#,
            &ctx(),
            None,
        );
        let text = e.to_string();
        assert!(matches!(e, LlmError::ModelNotFound { .. }) && !e.is_retryable());
        assert!(
            text.contains("`qwen3-coder`") && text.contains("http://localhost:8080/v1"),
            "{text}"
        );
        let e = status_error(
            401,
            &HeaderMap::new(),
            r#"{"error":"unauthorized"}"#,
            &ctx(),
            None,
        );
        let text = e.to_string();
        assert!(text.contains("LLAMA_API_KEY is not set"), "{text}");
        assert!(!e.is_retryable());
    }

    #[test]
    fn validation_errors_reported_as_5xx_are_not_retryable() {
        // llama-cpp-python's answer to `"content": null` on an assistant message.
        let body = r#"{"detail":[{"type":"string_type","loc":["body","messages",2,"content"],"msg":"Input should be a valid string","input":null}]}"#;
        let e = status_error(500, &HeaderMap::new(), body, &ctx(), None);
        assert!(
            matches!(e, LlmError::BadRequest { status: 500, .. }),
            "{e:?}"
        );
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("body.messages.2.content"), "{e}");
        let e = status_error(422, &HeaderMap::new(), body, &ctx(), None);
        assert!(!e.is_retryable());
    }

    #[test]
    fn context_overflow_in_every_wording_carries_the_window() {
        let cases = [
            (
                400,
                r#"{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}"#,
                Some(4096),
            ),
            (
                400,
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
                Some(8192),
            ),
            (
                400,
                r#"{"error":{"message":"Requested tokens (5000) exceed context window of 2048","type":"internal_server_error"}}"#,
                Some(2048),
            ),
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
                None,
            ),
        ];
        for (status, body, window) in cases {
            let e = status_error(status, &HeaderMap::new(), body, &ctx(), None);
            assert_eq!(
                e,
                LlmError::ContextLength {
                    message: provider_message(body).0,
                    window
                },
                "{body}"
            );
            assert!(!e.is_retryable());
        }
    }
}
