//! A mock model server on 127.0.0.1 for tests (feature `mock-server`): it records every
//! request (path, headers, raw body) and answers with scripted replies — recorded SSE bodies
//! sent in chunks with `transfer-encoding: chunked` like the real APIs, JSON errors with any
//! status and headers, a connection dropped mid-stream, or a stream that stalls.
//!
//! Deliberately minimal HTTP/1.1: one request per connection (`connection: close`), bodies
//! by `content-length`. Enough for reqwest; not a general server.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body exactly as sent.
    pub body: String,
}

impl Recorded {
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum MockReply {
    /// `200 text/event-stream`, the body sent in chunks of `chunk` bytes (0 = one chunk).
    Sse { body: Vec<u8>, chunk: usize },
    /// Any status with a body and extra headers.
    Status {
        status: u16,
        content_type: String,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// `200 text/event-stream`, sends `prefix`, then closes the connection without ending the
    /// chunked body (a dropped connection).
    Drop { prefix: Vec<u8> },
    /// `200 text/event-stream`, sends `prefix`, then goes silent for `silence`.
    Stall { prefix: Vec<u8>, silence: Duration },
    /// `200` with `content_type`: sends `prefix`, then `unit` again and again until the client
    /// stops reading (a server that never ends its reply).
    Endless {
        content_type: String,
        prefix: Vec<u8>,
        unit: Vec<u8>,
    },
}

impl MockReply {
    /// An SSE body in 64-byte chunks (splitting JSON mid-token, as networks do).
    pub fn sse(body: impl Into<Vec<u8>>) -> Self {
        MockReply::Sse {
            body: body.into(),
            chunk: 64,
        }
    }

    /// A JSON error reply.
    pub fn error(status: u16, body: impl Into<String>) -> Self {
        MockReply::Status {
            status,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// A JSON error reply with extra headers (e.g. `retry-after`).
    pub fn error_with_headers(
        status: u16,
        body: impl Into<String>,
        headers: &[(&str, &str)],
    ) -> Self {
        MockReply::Status {
            status,
            content_type: "application/json".into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.into(),
        }
    }

    /// A complete JSON reply (a non-streamed completion).
    pub fn json(body: impl Into<String>) -> Self {
        MockReply::Status {
            status: 200,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body: body.into(),
        }
    }
}

type Handler = dyn Fn(&Recorded, usize) -> MockReply + Send + Sync;

/// The running server; stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    /// Answers the requests in order with `replies`; once they run out, HTTP 500 explaining so.
    pub async fn queue(replies: Vec<MockReply>) -> std::io::Result<Self> {
        let queue = Mutex::new(VecDeque::from(replies));
        Self::with_handler(move |_, n| {
            queue
                .lock()
                .ok()
                .and_then(|mut q| q.pop_front())
                .unwrap_or_else(|| {
                    MockReply::error(
                        500,
                        format!(
                            r#"{{"error": {{"message": "mock server: no reply queued for request {}", "type": "mock"}}}}"#,
                            n + 1
                        ),
                    )
                })
        })
        .await
    }

    /// Answers each request with `handler(request, index)`.
    pub async fn with_handler(
        handler: impl Fn(&Recorded, usize) -> MockReply + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let handler = handler.clone();
                let recorded = recorded.clone();
                tokio::spawn(async move {
                    let _ = serve(socket, handler, recorded).await;
                });
            }
        });
        Ok(Self {
            addr,
            requests,
            task,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

async fn serve(
    mut socket: TcpStream,
    handler: Arc<Handler>,
    recorded: Arc<Mutex<Vec<Recorded>>>,
) -> std::io::Result<()> {
    let Some(request) = read_request(&mut socket).await? else {
        return Ok(());
    };
    let index = {
        let mut all = recorded
            .lock()
            .map_err(|_| std::io::Error::other("mock state poisoned"))?;
        all.push(request.clone());
        all.len() - 1
    };
    match handler(&request, index) {
        MockReply::Sse { body, chunk } => {
            write_head(&mut socket, 200, "text/event-stream", &[]).await?;
            let size = if chunk == 0 { body.len().max(1) } else { chunk };
            for part in body.chunks(size) {
                write_chunk(&mut socket, part).await?;
            }
            socket.write_all(b"0\r\n\r\n").await?;
        }
        MockReply::Status {
            status,
            content_type,
            headers,
            body,
        } => {
            write_head(&mut socket, status, &content_type, &headers).await?;
            write_chunk(&mut socket, body.as_bytes()).await?;
            socket.write_all(b"0\r\n\r\n").await?;
        }
        MockReply::Drop { prefix } => {
            write_head(&mut socket, 200, "text/event-stream", &[]).await?;
            write_chunk(&mut socket, &prefix).await?;
            // Announce a chunk that never comes, then close: a broken body, not a clean end.
            socket.write_all(b"400\r\npartial").await?;
            socket.flush().await?;
        }
        MockReply::Stall { prefix, silence } => {
            write_head(&mut socket, 200, "text/event-stream", &[]).await?;
            write_chunk(&mut socket, &prefix).await?;
            tokio::time::sleep(silence).await;
        }
        MockReply::Endless {
            content_type,
            prefix,
            unit,
        } => {
            write_head(&mut socket, 200, &content_type, &[]).await?;
            write_chunk(&mut socket, &prefix).await?;
            // Ends when the client closes the connection (the write fails).
            loop {
                write_chunk(&mut socket, &unit).await?;
            }
        }
    }
    socket.flush().await?;
    socket.shutdown().await
}

async fn read_request(socket: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let header_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[header_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    Ok(Some(Recorded {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }))
}

async fn write_head(
    socket: &mut TcpStream,
    status: u16,
    content_type: &str,
    headers: &[(String, String)],
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n"
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.flush().await
}

async fn write_chunk(socket: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    socket
        .write_all(format!("{:x}\r\n", data.len()).as_bytes())
        .await?;
    socket.write_all(data).await?;
    socket.write_all(b"\r\n").await?;
    socket.flush().await
}

/// Builders of realistic reply streams for mock replies.
pub mod bodies {
    use serde_json::json;

    /// A tool call in a scripted reply: id, name, arguments as JSON text.
    pub type Call<'a> = (&'a str, &'a str, &'a str);

    fn sse(out: &mut String, event: Option<&str>, data: &serde_json::Value) {
        if let Some(e) = event {
            out.push_str("event: ");
            out.push_str(e);
            out.push('\n');
        }
        out.push_str("data: ");
        out.push_str(&data.to_string());
        out.push_str("\n\n");
    }

    /// Splits `s` into pieces of about `n` characters (on char boundaries).
    fn pieces(s: &str, n: usize) -> Vec<String> {
        let chars: Vec<char> = s.chars().collect();
        chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
    }

    /// A Chat Completions stream: reasoning (`reasoning_content`), text, tool calls (split
    /// into fragments), finish reason, a usage chunk and `[DONE]`.
    pub fn openai(reasoning: &str, text: &str, calls: &[Call<'_>], usage: (u64, u64)) -> Vec<u8> {
        let mut out = String::new();
        let chunk = |delta: serde_json::Value, finish: Option<&str>| {
            json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": "mock",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        sse(
            &mut out,
            None,
            &chunk(
                json!({"role": "assistant", "content": null, "reasoning_content": ""}),
                None,
            ),
        );
        for r in pieces(reasoning, 7) {
            sse(
                &mut out,
                None,
                &chunk(json!({"content": null, "reasoning_content": r}), None),
            );
        }
        for t in pieces(text, 5) {
            sse(&mut out, None, &chunk(json!({"content": t}), None));
        }
        for (i, (id, name, args)) in calls.iter().enumerate() {
            sse(
                &mut out,
                None,
                &chunk(
                    json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                                            "function": {"name": name, "arguments": ""}}]}),
                    None,
                ),
            );
            for a in pieces(args, 4) {
                sse(
                    &mut out,
                    None,
                    &chunk(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": a}}]}),
                        None,
                    ),
                );
            }
        }
        let finish = if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        sse(&mut out, None, &chunk(json!({}), Some(finish)));
        sse(
            &mut out,
            None,
            &json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "choices": [],
                    "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
                              "total_tokens": usage.0 + usage.1,
                              "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": usage.0}}),
        );
        out.push_str("data: [DONE]\n\n");
        out.into_bytes()
    }

    /// An Anthropic Messages stream: an optional signed thinking block, text, tool_use blocks
    /// with `input_json_delta` fragments, `message_delta` and `message_stop`.
    pub fn anthropic(
        thinking: Option<(&str, &str)>,
        text: &str,
        calls: &[Call<'_>],
        usage: (u64, u64),
    ) -> Vec<u8> {
        let mut out = String::new();
        sse(
            &mut out,
            Some("message_start"),
            &json!({"type": "message_start", "message": {"id": "msg_mock", "type": "message",
                    "role": "assistant", "content": [], "model": "mock", "stop_reason": null,
                    "usage": {"input_tokens": usage.0, "cache_read_input_tokens": 0,
                              "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
        );
        let mut index = 0;
        if let Some((thought, signature)) = thinking {
            sse(
                &mut out,
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            );
            for t in pieces(thought, 6) {
                sse(
                    &mut out,
                    Some("content_block_delta"),
                    &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "thinking_delta", "thinking": t}}),
                );
            }
            sse(
                &mut out,
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "signature_delta", "signature": signature}}),
            );
            sse(
                &mut out,
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": index}),
            );
            index += 1;
        }
        if !text.is_empty() {
            sse(
                &mut out,
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}}),
            );
            sse(&mut out, Some("ping"), &json!({"type": "ping"}));
            for t in pieces(text, 5) {
                sse(
                    &mut out,
                    Some("content_block_delta"),
                    &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": t}}),
                );
            }
            sse(
                &mut out,
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": index}),
            );
            index += 1;
        }
        for (id, name, args) in calls {
            sse(
                &mut out,
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            );
            for a in pieces(args, 4) {
                sse(
                    &mut out,
                    Some("content_block_delta"),
                    &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": a}}),
                );
            }
            sse(
                &mut out,
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": index}),
            );
            index += 1;
        }
        let stop = if calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        sse(
            &mut out,
            Some("message_delta"),
            &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                    "usage": {"output_tokens": usage.1}}),
        );
        sse(
            &mut out,
            Some("message_stop"),
            &json!({"type": "message_stop"}),
        );
        out.into_bytes()
    }
}
