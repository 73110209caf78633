//! The HTTP layer shared by the provider clients: one reqwest client per provider (rustls with
//! the ring crypto provider), connect, first-byte and idle-stream timeouts, transport failures
//! → [`LlmError`] (HTTP error replies: the `wire_errors` module), and a body reader that turns
//! server-sent events into [`StreamEvent`]s through a wire-format [`Decoder`].
//!
//! Every reply body is read through one bound, [`MAX_REPLY_BYTES`] (an error body through
//! [`MAX_ERROR_BODY_BYTES`]): a server that never stops sending — content, reasoning or tool-call
//! arguments, streamed or as one JSON document — fails the request with an error naming the
//! limit instead of growing Keel's memory until it is killed (red-team R4-17).
//!
//! API keys travel only in request headers. Error texts are built here, never from reqwest's
//! `Display` (which includes the URL), and any occurrence of the key in a provider's message
//! is replaced before the message leaves this module.

use std::collections::VecDeque;
use std::sync::Once;
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use reqwest::header::CONTENT_TYPE;

use crate::router::ModelTarget;
use crate::sse::{SseEvent, SseParser};
pub(crate) use crate::wire_errors::{ErrorContext, status_error, stream_error};
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

/// The most of one reply Keel reads: content, reasoning and tool-call arguments with the wire
/// format around them. A 128,000-token reply streamed one token per event is about 32 MB.
pub const MAX_REPLY_BYTES: u64 = 64 * 1024 * 1024;

/// The most of an error reply's body Keel reads (its message is shown, not kept).
pub const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;

/// The error for a reply from `url` that passed [`MAX_REPLY_BYTES`].
fn too_large(url: &str) -> LlmError {
    LlmError::InvalidResponse(format!(
        "the reply from {url} passed Keel's limit of {} MiB for one model reply and was cut off; the server keeps sending (a model stuck repeating itself, or not a model server): check the endpoint, or lower llm.max_output_tokens",
        MAX_REPLY_BYTES / (1024 * 1024)
    ))
}

/// Reads `response`'s body up to `limit` bytes: `Ok(None)` when it is longer.
async fn read_bounded(
    mut response: reqwest::Response,
    limit: u64,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
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

/// Whether `base_url` is reached over TLS.
fn is_https(base_url: &str) -> bool {
    base_url
        .get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

/// The TLS configuration of every https client of the process: the system's CA certificates
/// are read once, on the first https client (not for plain-http local servers).
fn shared_tls() -> Result<rustls::ClientConfig, LlmError> {
    static TLS: std::sync::OnceLock<Result<rustls::ClientConfig, String>> =
        std::sync::OnceLock::new();
    TLS.get_or_init(|| {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
            .map_err(|e| format!("cannot load the system's CA certificates: {e}"))?;
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot configure TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(std::sync::Arc::new(verifier))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    })
    .clone()
    .map_err(|e| {
        LlmError::Config(format!(
            "{e}; https model servers need them (install the ca-certificates package, or set SSL_CERT_FILE)"
        ))
    })
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
        // No redirect is followed: the key and the conversation go only to the host the user
        // chose (red-team pass 7, R7-23: a 307 to another host received the Anthropic
        // `x-api-key` and every prompt). A redirect is an error naming where it pointed.
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeouts.connect)
            .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")));
        if is_loopback(base_url) {
            builder = builder.no_proxy();
        }
        builder = if is_https(base_url) {
            builder.tls_backend_preconfigured(shared_tls()?)
        } else {
            // Plain http (a local server): no certificate store is read at all, so a machine
            // without CA certificates still runs a local model.
            builder.tls_certs_only(Vec::new())
        };
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
            let text = tokio::time::timeout(
                self.timeouts.idle,
                read_bounded(response, MAX_ERROR_BODY_BYTES),
            )
            .await
            .ok()
            .and_then(Result::ok)
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
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
            let bytes = tokio::time::timeout(first_byte, read_bounded(response, MAX_REPLY_BYTES))
                .await
                .map_err(|_| self.silence(&format!("the reply from {shown} stalled"), first_byte))?
                .map_err(|e| self.transport_error(&e, &shown))?
                .ok_or_else(|| too_large(&shown))?;
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

struct DecodeState<D> {
    body: BoxStream<'static, Result<Vec<u8>, reqwest::Error>>,
    parser: SseParser,
    decoder: D,
    pending: VecDeque<Result<StreamEvent, LlmError>>,
    done: bool,
    timeouts: Timeouts,
    /// Whether a chunk has arrived (the idle timeout applies from then on).
    started: bool,
    /// Bytes of the body read so far (at most [`MAX_REPLY_BYTES`]).
    received: u64,
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
        received: 0,
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
                    st.received += bytes.len() as u64;
                    if st.received > MAX_REPLY_BYTES {
                        Err(too_large(&st.url))
                    } else {
                        st.parser.push(&bytes, &mut sse);
                        feed(&mut st.decoder, sse, &mut out)
                    }
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
}
