//! The HTTP layer shared by the provider clients: one reqwest client per provider (rustls with
//! the ring crypto provider), connect and idle-stream timeouts, HTTP status → [`LlmError`] with
//! the provider's own message and `retry-after`, and a body reader that turns server-sent
//! events into [`StreamEvent`]s through a wire-format [`Decoder`].
//!
//! API keys travel only in request headers. Error texts are built here, never from reqwest's
//! `Display` (which includes the URL), and any occurrence of the key in a provider's message
//! is replaced before the message leaves this module.

use std::collections::VecDeque;
use std::sync::Once;
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use reqwest::header::{CONTENT_TYPE, HeaderMap};

use crate::router::ModelTarget;
use crate::sse::{SseEvent, SseParser};
use crate::{EventStream, LlmError, StreamEvent};

/// An API key read from the environment. Its value never appears in `Debug` output, logs or
/// error messages; only the HTTP layer reads it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key value (trimmed; an empty value is no key).
    pub fn new(value: impl Into<String>) -> Option<Self> {
        let v = value.into().trim().to_string();
        (!v.is_empty()).then_some(Self(v))
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// How long to wait for a connection, and for the next byte of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP + TLS connection set-up.
    pub connect: Duration,
    /// Silence allowed between chunks of a stream, once the reply has begun.
    pub idle: Duration,
    /// Silence allowed before the reply begins (response headers and first chunk; a whole
    /// non-streamed reply): prompt processing on a local server can take minutes.
    pub first_byte: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            idle: Duration::from_secs(120),
            first_byte: Duration::from_secs(120),
        }
    }
}

/// Installs rustls' ring crypto provider for the process. Idempotent; the clients call it
/// before building their first HTTP client.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another provider is already installed: that one is used, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Turns a provider's wire events into [`StreamEvent`]s.
pub(crate) trait Decoder: Send + 'static {
    /// Handles one server-sent event.
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), LlmError>;
    /// Whether the terminal event has arrived (reading stops there).
    fn is_done(&self) -> bool;
    /// The body ended. Complete streams may push final events; incomplete ones are an error.
    fn on_end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), LlmError>;
    /// The server answered with one JSON document instead of a stream.
    fn on_complete_body(&mut self, body: &[u8], out: &mut Vec<StreamEvent>)
    -> Result<(), LlmError>;
}

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

/// A reqwest client bound to one provider's key and timeouts.
#[derive(Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    timeouts: Timeouts,
    key: Option<ApiKey>,
    context: ErrorContext,
    /// A server on the user's machine (or a local-server preset): a timed-out request is not
    /// sent again, because the server is still generating the abandoned one and a new one
    /// would queue behind it.
    local: bool,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("timeouts", &self.timeouts)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client for requests to `target`'s API root. Proxies from the environment apply,
    /// except to a server on this machine (a local Ollama or llama.cpp is never reached
    /// through a proxy).
    pub(crate) fn new(target: &ModelTarget, key: Option<ApiKey>) -> Result<Self, LlmError> {
        let timeouts = target.timeouts;
        let base_url = target.base_url.as_str();
        let context = ErrorContext::of(target, key.as_ref());
        install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(timeouts.connect)
            .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")));
        if is_loopback(base_url) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| {
            LlmError::Config(format!("cannot build the HTTP client: {}", chain(&e)))
        })?;
        Ok(Self {
            client,
            timeouts,
            key,
            context,
            local: target.local,
        })
    }

    pub(crate) fn key(&self) -> Option<&ApiKey> {
        self.key.as_ref()
    }

    /// POSTs `body` to `url` and streams the reply through `decoder`. Errors before the body
    /// (connection, HTTP status) come back here; later ones through the stream.
    pub(crate) async fn post_events<D: Decoder>(
        &self,
        url: &str,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
        decoder: D,
    ) -> Result<EventStream, LlmError> {
        let mut request = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header("accept", "text/event-stream")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let shown = display_url(url);
        let first_byte = self.timeouts.first_byte;
        let response = tokio::time::timeout(first_byte, request.send())
            .await
            .map_err(|_| self.silence(&format!("no response from {shown}"), first_byte))?
            .map_err(|e| self.transport_error(&e, &shown))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        if !(200..300).contains(&status) {
            let text = tokio::time::timeout(self.timeouts.idle, response.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(status_error(
                status,
                &headers,
                &text,
                &self.context,
                self.key.as_ref(),
            ));
        }
        let is_json = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            let bytes = tokio::time::timeout(first_byte, response.bytes())
                .await
                .map_err(|_| self.silence(&format!("the reply from {shown} stalled"), first_byte))?
                .map_err(|e| self.transport_error(&e, &shown))?;
            let mut decoder = decoder;
            let mut out = Vec::new();
            decoder.on_complete_body(&bytes, &mut out)?;
            return Ok(stream::iter(out.into_iter().map(Ok)).boxed());
        }
        let body = response
            .bytes_stream()
            .map(|chunk| chunk.map(|b| b.to_vec()))
            .boxed();
        Ok(decode(
            body,
            decoder,
            self.timeouts,
            self.local,
            shown,
            self.key.clone(),
        ))
    }

    /// The error for `waited` of silence: a plain (retryable) timeout, or for a local server
    /// one that is not resent.
    fn silence(&self, what: &str, waited: Duration) -> LlmError {
        silence_error(what, waited, self.local)
    }

    fn transport_error(&self, e: &reqwest::Error, url: &str) -> LlmError {
        let detail = redact(&chain(e), self.key.as_ref());
        if e.is_timeout() {
            LlmError::Timeout(format!("{url}: {detail}"))
        } else if e.is_connect() {
            LlmError::Unreachable {
                url: self.context.base_url.clone(),
                detail: format!("{detail}; check the base URL (--base-url) if it is running"),
            }
        } else {
            LlmError::Connection(format!("{url}: {detail}"))
        }
    }
}

fn silence_error(what: &str, waited: Duration, local: bool) -> LlmError {
    let secs = waited.as_secs();
    if local {
        LlmError::Stalled(format!(
            "{what} for {secs}s; the local server is probably still generating, and a new request would queue behind it, so Keel does not resend it: raise llm.idle_timeout_secs, lower llm.max_output_tokens or use a smaller model"
        ))
    } else {
        LlmError::Timeout(format!("{what} for {secs}s"))
    }
}

/// The error's message and its sources, without the URL reqwest would add.
fn chain(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    let mut first = true;
    while let Some(err) = cur {
        let text = if first {
            // reqwest's top-level Display names the URL; describe the kind instead.
            first = false;
            if e.is_connect() {
                "connection failed".to_string()
            } else if e.is_timeout() {
                "timed out".to_string()
            } else if e.is_body() || e.is_decode() {
                "the reply body broke off".to_string()
            } else if e.is_request() {
                "the request failed".to_string()
            } else {
                "HTTP error".to_string()
            }
        } else {
            err.to_string()
        };
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// Whether `url` points at this machine.
fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or(v6)
    } else {
        host_port.split(':').next().unwrap_or(host_port)
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `url` without user info or query, for messages.
pub(crate) fn display_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let rest = match rest.split_once('/') {
        Some((authority, path)) => {
            let host = authority.rsplit('@').next().unwrap_or(authority);
            format!("{host}/{path}")
        }
        None => rest.rsplit('@').next().unwrap_or(rest).to_string(),
    };
    if scheme.is_empty() {
        rest
    } else {
        format!("{scheme}://{rest}")
    }
}

/// Replaces the key's value wherever it appears.
pub(crate) fn redact(text: &str, key: Option<&ApiKey>) -> String {
    match key {
        Some(k) if k.expose().len() >= 4 => text.replace(k.expose(), "[redacted]"),
        _ => text.to_string(),
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
        // A server that reports a malformed request as a 5xx (llama-cpp-python's validation
        // errors): the same request fails the same way every time.
        500..=599 if is_validation(&kind, &message) => LlmError::BadRequest { status, message },
        500..=599 => LlmError::Server { status, message },
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
        },
    }
}

struct DecodeState<D> {
    body: BoxStream<'static, Result<Vec<u8>, reqwest::Error>>,
    parser: SseParser,
    decoder: D,
    pending: VecDeque<Result<StreamEvent, LlmError>>,
    done: bool,
    timeouts: Timeouts,
    /// Whether a chunk has arrived (the idle timeout applies from then on).
    started: bool,
    local: bool,
    url: String,
    key: Option<ApiKey>,
}

/// Reads the body chunk by chunk (each within the idle timeout), parses SSE and decodes it.
fn decode<D: Decoder>(
    body: BoxStream<'static, Result<Vec<u8>, reqwest::Error>>,
    decoder: D,
    timeouts: Timeouts,
    local: bool,
    url: String,
    key: Option<ApiKey>,
) -> EventStream {
    let state = DecodeState {
        body,
        parser: SseParser::new(),
        decoder,
        pending: VecDeque::new(),
        done: false,
        timeouts,
        started: false,
        local,
        url,
        key,
    };
    stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Some((item, st));
            }
            if st.done {
                return None;
            }
            let wait = if st.started {
                st.timeouts.idle
            } else {
                st.timeouts.first_byte
            };
            let next = tokio::time::timeout(wait, st.body.next()).await;
            st.started = true;
            let mut sse = Vec::new();
            let mut out = Vec::new();
            let result = match next {
                Err(_) => Err(silence_error(
                    &format!("the reply stream from {} was silent", st.url),
                    wait,
                    st.local,
                )),
                Ok(Some(Err(e))) => Err(LlmError::Connection(format!(
                    "the connection to {} broke off mid-reply: {}",
                    st.url,
                    redact(&chain(&e), st.key.as_ref())
                ))),
                Ok(Some(Ok(bytes))) => {
                    st.parser.push(&bytes, &mut sse);
                    feed(&mut st.decoder, sse, &mut out)
                }
                Ok(None) => {
                    st.parser.finish(&mut sse);
                    st.done = true;
                    feed(&mut st.decoder, sse, &mut out).and_then(|()| {
                        if st.decoder.is_done() {
                            Ok(())
                        } else {
                            st.decoder.on_end(&mut out)
                        }
                    })
                }
            };
            st.pending.extend(out.into_iter().map(Ok));
            match result {
                Ok(()) => {
                    if st.decoder.is_done() {
                        st.done = true;
                    }
                }
                Err(e) => {
                    st.pending.push_back(Err(e));
                    st.done = true;
                }
            }
        }
    })
    .boxed()
}

/// Runs a whole recorded body through the SSE parser and `decoder`.
pub(crate) fn decode_recorded<D: Decoder>(
    body: &[u8],
    mut decoder: D,
) -> Result<Vec<StreamEvent>, LlmError> {
    let mut parser = SseParser::new();
    let mut sse = Vec::new();
    parser.push(body, &mut sse);
    parser.finish(&mut sse);
    let mut out = Vec::new();
    feed(&mut decoder, sse, &mut out)?;
    if !decoder.is_done() {
        decoder.on_end(&mut out)?;
    }
    Ok(out)
}

fn feed<D: Decoder>(
    decoder: &mut D,
    events: Vec<SseEvent>,
    out: &mut Vec<StreamEvent>,
) -> Result<(), LlmError> {
    for event in events {
        if decoder.is_done() {
            break;
        }
        decoder.on_event(event, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_servers_are_recognised() {
        assert!(is_loopback("http://localhost:11434/v1"));
        assert!(is_loopback("http://127.0.0.1:8080/v1"));
        assert!(is_loopback("http://[::1]:8000/v1"));
        assert!(!is_loopback("https://api.openai.com/v1"));
        assert!(!is_loopback("https://localhost.evil.com/v1"));
    }

    #[test]
    fn urls_lose_credentials_and_queries() {
        assert_eq!(
            display_url("https://user:secret@api.example.com/v1/chat?key=abc"),
            "https://api.example.com/v1/chat"
        );
        assert_eq!(
            display_url("http://127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080/v1"
        );
    }

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
