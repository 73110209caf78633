//! The OpenAI-compatible Chat Completions client, used for OpenAI, DeepSeek, OpenRouter,
//! Ollama, vLLM and llama.cpp (presets differ only in base URL, key and capability flags):
//! request building and the streaming decoder ([`decode`]).
//!
//! The request serialises `model`, `stream`, `stream_options`, the output limit and `tools`
//! before `messages`, whose first entry is the system prompt: everything up to the first
//! conversation message is the byte-stable head, so the provider's automatic prefix cache hits.
//!
//! DeepSeek's thinking mode requires `reasoning_content` on every assistant message that
//! carried tool calls (even an empty one); with [`crate::presets::Capabilities::reasoning_content`]
//! Keel always sends it there, and never on plain assistant messages.

mod adapt;
mod decode;
mod overrun;

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use keel_protocol::{ContentBlock, Message, Role};
use serde::Serialize;
use serde_json::Value;

use crate::http::{ApiKey, HttpClient};
use crate::learned::ServerMemory;
use crate::presets::Capabilities;
use crate::provider::TemplateProbe;
use crate::router::ModelTarget;
use crate::{ChatRequest, EventStream, LlmError, Provider, ProviderInfo, StreamEvent};

pub(crate) use decode::OpenAiDecoder;

/// A client for one model on an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    http: HttpClient,
    target: ModelTarget,
    url: String,
    /// What was learned about this server and model (whole replies, the tool-result form,
    /// the window, dropped tools), remembered across runs.
    adaptive: Arc<adapt::Adaptive>,
}

impl OpenAiProvider {
    /// A client for `target`, authenticating with `key` when there is one.
    pub fn new(target: &ModelTarget, key: Option<ApiKey>) -> Result<Self, LlmError> {
        Ok(Self {
            http: HttpClient::new(target, key)?,
            url: format!("{}/chat/completions", target.base_url),
            adaptive: Arc::new(adapt::Adaptive::new(
                ServerMemory::open(
                    target.learned_dir.as_deref(),
                    &target.base_url,
                    &target.model,
                ),
                target.local,
            )),
            target: target.clone(),
        })
    }

    /// Whether replies are requested whole rather than streamed (learned from a stream that
    /// ended without a finish reason).
    fn streams(&self) -> bool {
        !self.adaptive.whole_replies()
    }

    /// The capabilities in force: the configured ones plus what was learned.
    fn caps(&self) -> Capabilities {
        let mut caps = self.target.caps;
        caps.tool_results_as_user |= self.adaptive.results_as_user();
        caps
    }

    /// The JSON body Keel sends for `request` (public for request-shape tests and benchmarks).
    /// A request that cannot fit the server's learned window is refused
    /// ([`LlmError::ContextLength`]) rather than sent.
    pub fn request_body(&self, request: &ChatRequest) -> Result<Vec<u8>, LlmError> {
        let limit = self.output_limit(request)?;
        self.body_with(request, limit)
    }

    /// The output limit `request` is sent with: its own or the configured one, fitted to the
    /// window.
    fn output_limit(&self, request: &ChatRequest) -> Result<Option<u32>, LlmError> {
        let limit = request.max_tokens.or(self.target.max_output_tokens);
        self.adaptive
            .fit_max_tokens(request, limit, self.target.context_window)
    }

    fn body_with(&self, request: &ChatRequest, limit: Option<u32>) -> Result<Vec<u8>, LlmError> {
        let body = build_body(&self.target, self.caps(), request, self.streams(), limit);
        serde_json::to_vec(&body)
            .map_err(|e| LlmError::InvalidResponse(format!("cannot serialise the request: {e}")))
    }

    /// Sends `request` as is (no learned adaptation but the stream form) and returns the
    /// prompt size the server reports.
    async fn prompt_tokens(
        &self,
        request: &ChatRequest,
        caps: Capabilities,
    ) -> Result<u64, LlmError> {
        let body = build_body(&self.target, caps, request, false, Some(1));
        let body = serde_json::to_vec(&body)
            .map_err(|e| LlmError::InvalidResponse(format!("cannot serialise the request: {e}")))?;
        let mut events = self.send(body).await?;
        let mut prompt = None;
        while let Some(event) = events.next().await {
            if let StreamEvent::Usage(u) = event? {
                prompt = Some(u.input_tokens);
            }
        }
        prompt.filter(|p| *p > 0).ok_or_else(|| {
            LlmError::InvalidResponse(
                "the server reports no usage, so how it renders tools cannot be measured".into(),
            )
        })
    }

    async fn send(&self, body: Vec<u8>) -> Result<EventStream, LlmError> {
        let mut headers = Vec::new();
        if let Some(key) = self.http.key() {
            headers.push(("authorization", format!("Bearer {}", key.expose())));
        }
        let decoder = OpenAiDecoder::new(self.target.price);
        self.http
            .post_events(&self.url, headers, body, decoder)
            .await
    }

    /// `keel doctor --ping`'s template probe: the prompt size of a request with and without
    /// its tools, and with a long and a short tool result; what it finds is learned.
    async fn probe(&self) -> Result<TemplateProbe, LlmError> {
        let plain = Capabilities {
            tool_results_as_user: false,
            ..self.target.caps
        };
        let (with_tools, without_tools, long, short) = probe_requests();
        let a = self.prompt_tokens(&with_tools, plain).await?;
        let b = self.prompt_tokens(&without_tools, plain).await?;
        let tools_est = crate::tokens::estimate_request("", &with_tools.tools, &[]);
        let tools_dropped = a < b + tools_est / 3;
        let c = self.prompt_tokens(&long, plain).await?;
        let d = self.prompt_tokens(&short, plain).await?;
        let result_est = crate::tokens::estimate_text(PROBE_RESULT);
        let results_dropped = c < d + result_est / 3;
        self.adaptive
            .learn_probe(Some(results_dropped), Some(tools_dropped));
        let mut lines = vec![if tools_dropped {
            format!(
                "tools DROPPED by the chat template (prompt {a} tokens with ~{tools_est} tokens of tool schemas, {b} without): the model cannot call tools"
            )
        } else {
            format!("tools rendered (prompt {a} tokens with them, {b} without)")
        }];
        lines.push(if results_dropped {
            format!(
                "tool results (role: tool) DROPPED by the chat template (prompt {c} tokens with ~{result_est} tokens of result, {d} with a short one): Keel sends them as user messages (learned)"
            )
        } else {
            format!("tool results rendered (prompt {c} tokens with a long result, {d} with a short one)")
        });
        Ok(TemplateProbe {
            tools_dropped,
            results_dropped,
            lines,
        })
    }

    /// Decodes a recorded reply body (server-sent events) without HTTP, exactly as a live
    /// stream would be: for replaying recordings and for benchmarks.
    pub fn decode_recorded(&self, body: &[u8]) -> Result<Vec<crate::StreamEvent>, LlmError> {
        crate::http::decode_recorded(body, OpenAiDecoder::new(self.target.price))
    }
}

impl Provider for OpenAiProvider {
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        Box::pin(async move {
            let adaptive = self.adaptive.clone();
            let notices = adaptive.take_notices();
            let limit = self.output_limit(request)?;
            let body = self.body_with(request, limit)?;
            let observation = adapt::Observation::of(request, self.caps().tool_results_as_user);
            let events = match self.send(body).await {
                Ok(events) => events,
                Err(e) => {
                    if let LlmError::ContextLength {
                        window: Some(w),
                        message,
                    } = &e
                    {
                        adaptive.learn_window(*w, &observation, message);
                    }
                    return Err(e);
                }
            };
            let request = Arc::new(request.clone());
            let mut saw_usage = false;
            let mut output = 0usize;
            // A reply past its output limit ends there, as cut off (see `overrun`).
            let mut cap = overrun::OutputCap::new(limit, adaptive.per_mille());
            let head =
                futures::stream::iter(notices.into_iter().map(|n| Ok(StreamEvent::Notice(n))));
            let body = events.scan(false, move |ended, item| {
                if *ended {
                    return futures::future::ready(None);
                }
                let mut out = Vec::with_capacity(2);
                match item {
                    // A stream that ends before its finish reason: the next attempt (the
                    // retry the reliable wrapper makes) asks for the whole reply instead.
                    Err(LlmError::Truncated(m)) => {
                        adaptive.learn_no_streaming();
                        out.push(Err(LlmError::Truncated(m)));
                    }
                    Ok(StreamEvent::Usage(u)) => {
                        saw_usage = true;
                        adaptive.observe(observation.clone(), u.input_tokens);
                        let over = cap.counted(u.output_tokens);
                        out.push(Ok(StreamEvent::Usage(u)));
                        out.extend(
                            adaptive
                                .take_notices()
                                .into_iter()
                                .chain(over)
                                .map(|n| Ok(StreamEvent::Notice(n))),
                        );
                    }
                    Ok(StreamEvent::Finish { stop_reason }) => {
                        if !saw_usage {
                            // The server ignored `stream_options.include_usage`: estimate.
                            out.push(Ok(StreamEvent::Usage(adapt::estimated_usage(
                                &request, output,
                            ))));
                        }
                        let stop_reason = if cap.over() {
                            crate::StopReason::MaxTokens
                        } else {
                            stop_reason
                        };
                        out.push(Ok(StreamEvent::Finish { stop_reason }));
                    }
                    Ok(event) => {
                        output += adapt::output_bytes(&event);
                        out.push(Ok(event));
                        if let Some(notice) = cap.streamed(output) {
                            // Stop reading: dropping the stream closes the connection.
                            out.push(Ok(StreamEvent::Notice(notice)));
                            if !saw_usage {
                                out.push(Ok(StreamEvent::Usage(adapt::estimated_usage(
                                    &request, output,
                                ))));
                            }
                            out.push(Ok(StreamEvent::Finish {
                                stop_reason: crate::StopReason::MaxTokens,
                            }));
                            *ended = true;
                        }
                    }
                    Err(e) => out.push(Err(e)),
                }
                futures::future::ready(Some(futures::stream::iter(out)))
            });
            let body = body.flatten();
            Ok(head.chain(body).boxed())
        })
    }

    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            provider: self.target.provider.clone(),
            model: self.target.model.clone(),
            // A window the server enforced beats the built-in table.
            context_window: self.adaptive.window().or(self.target.context_window),
        }
    }

    fn token_scale(&self) -> Option<crate::tokens::TokenScale> {
        Some(self.adaptive.scale())
    }

    fn adaptations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.streams() {
            out.push(
                "whole replies (`stream: false`): its reply stream ended before a finish reason"
                    .to_string(),
            );
        }
        if self.target.caps.tool_results_as_user {
            out.push("tool results sent as user messages (tool_results_as_user)".to_string());
        } else if self.adaptive.results_as_user() {
            out.push(
                "tool results sent as user messages: its chat template drops role: tool (learned)"
                    .to_string(),
            );
        }
        if self.adaptive.tools_dropped() {
            out.push("its chat template drops the tool schemas (learned)".to_string());
        }
        if let Some(w) = self.adaptive.window() {
            out.push(format!(
                "a {w}-token context window (learned from the server)"
            ));
        }
        out
    }

    fn probe_template(&self) -> BoxFuture<'_, Option<Result<TemplateProbe, LlmError>>> {
        // Hosted APIs render tools and results natively; their templates are not probed.
        if !self.target.local {
            return Box::pin(async { None });
        }
        Box::pin(async move { Some(self.probe().await) })
    }
}

/// The long tool result of the template probe (about 300 tokens).
const PROBE_RESULT: &str = "fn probe() -> u32 { 42 } // line of a file read by the probe\n";

/// The template probe's four requests: with and without tools; with a long and a short tool
/// result.
fn probe_requests() -> (ChatRequest, ChatRequest, ChatRequest, ChatRequest) {
    let tool = keel_protocol::ToolSpec {
        name: "read_file".into(),
        description: "Read a text file of the workspace and return its lines, numbered. Use it before editing a file, to see its current content; give the path relative to the workspace root. Long files are returned in pages: pass offset and limit to read further.".into(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file's path, relative to the workspace root."},
                "offset": {"type": "integer", "description": "The first line to return, from 1."},
                "limit": {"type": "integer", "description": "How many lines to return at most."}
            },
            "required": ["path"]
        }),
    };
    let user = Message::user_text("Read src/lib.rs.");
    let with_tools = ChatRequest {
        system: "You are a coding agent.".into(),
        tools: vec![tool],
        messages: vec![user.clone()],
        max_tokens: Some(1),
    };
    let without_tools = ChatRequest {
        tools: Vec::new(),
        ..with_tools.clone()
    };
    let conversation = |result: String| ChatRequest {
        messages: vec![
            user.clone(),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "call_probe".into(),
                    name: "read_file".into(),
                    input: serde_json::json!({"path": "src/lib.rs"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "call_probe".into(),
                    content: result,
                    is_error: false,
                }],
            },
        ],
        ..with_tools.clone()
    };
    (
        with_tools.clone(),
        without_tools,
        conversation(PROBE_RESULT.repeat(20)),
        conversation("fn probe() {}".into()),
    )
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    /// `"auto"` whenever tools are sent: some servers (llama-cpp-python) leave the tools out
    /// of the prompt without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    messages: Vec<WireMessage<'a>>,
    /// The output limit comes after the conversation: fitted to a learned window it changes
    /// from turn to turn, and the bytes before the conversation stay identical.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    /// Always a string, empty on an assistant message that has only tool calls: strict
    /// servers reject `null` (llama-cpp-python answers 422/500).
    content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

impl<'a> WireMessage<'a> {
    fn text(role: &'static str, content: String) -> Self {
        Self {
            role,
            content,
            reasoning_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    /// The arguments as a JSON string, as the API wants them.
    arguments: String,
}

fn build_body<'a>(
    target: &'a ModelTarget,
    caps: Capabilities,
    request: &'a ChatRequest,
    stream: bool,
    limit: Option<u32>,
) -> Body<'a> {
    let (max_completion_tokens, max_tokens) = if target.caps.max_completion_tokens {
        (limit, None)
    } else {
        (None, limit)
    };
    let tools = request
        .tools
        .iter()
        .map(|t| Tool {
            kind: "function",
            function: Function {
                name: &t.name,
                description: &t.description,
                parameters: &t.input_schema,
            },
        })
        .collect::<Vec<_>>();
    let tool_choice = (!tools.is_empty()).then_some("auto");
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(WireMessage::text("system", request.system.clone()));
    }
    for message in &request.messages {
        convert_message(message, caps, &mut messages);
    }
    Body {
        model: &target.model,
        stream,
        stream_options: (stream && target.caps.stream_usage).then_some(StreamOptions {
            include_usage: true,
        }),
        max_completion_tokens,
        max_tokens,
        tools,
        tool_choice,
        messages,
    }
}

/// One Keel message → one or more Chat Completions messages: tool results become `tool`
/// messages (first, as they answer the previous assistant message), text the user message.
/// With [`Capabilities::tool_results_as_user`] the results open the user message instead,
/// each labelled with its call id.
fn convert_message<'a>(message: &'a Message, caps: Capabilities, out: &mut Vec<WireMessage<'a>>) {
    let send_reasoning = caps.reasoning_content;
    let mut texts: Vec<&str> = Vec::new();
    let mut results_as_text: Vec<String> = Vec::new();
    match message.role {
        Role::User => {
            for block in &message.content {
                match block {
                    ContentBlock::Text { text } => texts.push(text),
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } if caps.tool_results_as_user => results_as_text.push(format!(
                        "[result of tool call {tool_use_id}{}]\n{content}",
                        if *is_error { ", an error" } else { "" }
                    )),
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => out.push(WireMessage {
                        tool_call_id: Some(tool_use_id),
                        ..WireMessage::text(
                            "tool",
                            if *is_error {
                                format!("Error: {content}")
                            } else {
                                content.clone()
                            },
                        )
                    }),
                    _ => {}
                }
            }
            if !texts.is_empty() || !results_as_text.is_empty() {
                let all: Vec<&str> = results_as_text
                    .iter()
                    .map(String::as_str)
                    .chain(texts)
                    .collect();
                out.push(WireMessage::text("user", all.join("\n\n")));
            }
        }
        Role::Assistant => {
            let mut reasoning = String::new();
            let mut tool_calls = Vec::new();
            for block in &message.content {
                match block {
                    ContentBlock::Text { text } => texts.push(text),
                    ContentBlock::Reasoning { text, .. } => reasoning.push_str(text),
                    ContentBlock::ToolUse { id, name, input } => tool_calls.push(WireToolCall {
                        id,
                        kind: "function",
                        function: WireFunctionCall {
                            name,
                            arguments: input.to_string(),
                        },
                    }),
                    _ => {}
                }
            }
            let text = texts.join("");
            let has_calls = !tool_calls.is_empty();
            out.push(WireMessage {
                role: "assistant",
                content: text,
                reasoning_content: (send_reasoning && has_calls).then_some(reasoning),
                tool_calls,
                tool_call_id: None,
            });
        }
    }
}
