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

mod decode;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use futures::future::BoxFuture;
use keel_protocol::{ContentBlock, Message, Role};
use serde::Serialize;
use serde_json::Value;

use crate::http::{ApiKey, HttpClient};
use crate::presets::Capabilities;
use crate::router::ModelTarget;
use crate::{ChatRequest, EventStream, LlmError, Provider, ProviderInfo};

pub(crate) use decode::OpenAiDecoder;

/// A client for one model on an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    http: HttpClient,
    target: ModelTarget,
    url: String,
    /// Learned: this server's streams end before a finish reason (llama-cpp-python streaming
    /// a tool call), so replies are requested whole (`"stream": false`).
    whole_replies: Arc<AtomicBool>,
}

impl OpenAiProvider {
    /// A client for `target`, authenticating with `key` when there is one.
    pub fn new(target: &ModelTarget, key: Option<ApiKey>) -> Result<Self, LlmError> {
        Ok(Self {
            http: HttpClient::new(target, key)?,
            url: format!("{}/chat/completions", target.base_url),
            target: target.clone(),
            whole_replies: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Whether replies are requested whole rather than streamed (learned from a stream that
    /// ended without a finish reason).
    fn streams(&self) -> bool {
        !self.whole_replies.load(Ordering::Relaxed)
    }

    /// The JSON body Keel sends for `request` (public for request-shape tests and benchmarks).
    pub fn request_body(&self, request: &ChatRequest) -> Result<Vec<u8>, LlmError> {
        let body = build_body(&self.target, request, self.streams());
        serde_json::to_vec(&body)
            .map_err(|e| LlmError::InvalidResponse(format!("cannot serialise the request: {e}")))
    }

    /// Decodes a recorded reply body (server-sent events) without HTTP, exactly as a live
    /// stream would be: for replaying recordings and for benchmarks.
    pub fn decode_recorded(&self, body: &[u8]) -> Result<Vec<crate::StreamEvent>, LlmError> {
        crate::http::decode_recorded(body, OpenAiDecoder::new(self.target.price))
    }
}

impl Provider for OpenAiProvider {
    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            provider: self.target.provider.clone(),
            model: self.target.model.clone(),
            context_window: self.target.context_window,
        }
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        Box::pin(async move {
            let body = self.request_body(request)?;
            let mut headers = Vec::new();
            if let Some(key) = self.http.key() {
                headers.push(("authorization", format!("Bearer {}", key.expose())));
            }
            let decoder = OpenAiDecoder::new(self.target.price);
            let events = self
                .http
                .post_events(&self.url, headers, body, decoder)
                .await?;
            // A stream that ends before its finish reason: the next attempt (the retry the
            // reliable wrapper makes) asks for the whole reply instead.
            let whole = self.whole_replies.clone();
            Ok(events
                .inspect(move |item| {
                    if let Err(LlmError::Truncated(_)) = item {
                        whole.store(true, Ordering::Relaxed);
                    }
                })
                .boxed())
        })
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
        }
        out
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    /// `"auto"` whenever tools are sent: some servers (llama-cpp-python) leave the tools out
    /// of the prompt without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    messages: Vec<WireMessage<'a>>,
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

fn build_body<'a>(target: &'a ModelTarget, request: &'a ChatRequest, stream: bool) -> Body<'a> {
    let limit = request.max_tokens.or(target.max_output_tokens);
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
        convert_message(message, target.caps, &mut messages);
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
