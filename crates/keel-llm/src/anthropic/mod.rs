//! The Anthropic Messages API client: request building (system prompt, tools, messages with
//! tool results and signed thinking blocks, prompt-cache breakpoints) and the streaming
//! decoder ([`decode`]).
//!
//! Cache discipline: the request serialises `model`, `max_tokens`, `stream`, `thinking`,
//! `system` and `tools` before `messages`, all derived from configuration and the byte-stable
//! head only. One `cache_control` breakpoint closes the head (the system block, or the last tool
//! when there is no system prompt), a second one the last block of the last message, so each
//! turn reads the previous turn's cache.

mod decode;

use std::borrow::Cow;

use futures::future::BoxFuture;
use keel_protocol::{ContentBlock, Message, Role};
use serde::Serialize;
use serde_json::Value;

use crate::http::{ApiKey, HttpClient};
use crate::router::ModelTarget;
use crate::{ChatRequest, EventStream, LlmError, Provider, ProviderInfo};

pub(crate) use decode::AnthropicDecoder;

/// The `anthropic-version` header Keel speaks.
const API_VERSION: &str = "2023-06-01";
/// Output limit when neither the request nor the configuration sets one.
const DEFAULT_MAX_TOKENS: u32 = 8192;

/// A client for one Anthropic model.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    http: HttpClient,
    target: ModelTarget,
    url: String,
}

impl AnthropicProvider {
    /// A client for `target`, authenticating with `key`.
    pub fn new(target: &ModelTarget, key: Option<ApiKey>) -> Result<Self, LlmError> {
        Ok(Self {
            http: HttpClient::new(target, key)?,
            url: format!("{}/v1/messages", target.base_url),
            target: target.clone(),
        })
    }

    /// The JSON body Keel sends for `request` (public for request-shape tests and benchmarks).
    pub fn request_body(&self, request: &ChatRequest) -> Result<Vec<u8>, LlmError> {
        let body = build_body(&self.target, request);
        serde_json::to_vec(&body)
            .map_err(|e| LlmError::InvalidResponse(format!("cannot serialise the request: {e}")))
    }

    /// Decodes a recorded reply body (server-sent events) without HTTP, exactly as a live
    /// stream would be: for replaying recordings and for benchmarks.
    pub fn decode_recorded(&self, body: &[u8]) -> Result<Vec<crate::StreamEvent>, LlmError> {
        crate::http::decode_recorded(body, AnthropicDecoder::new(self.target.price))
    }
}

impl Provider for AnthropicProvider {
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
            let mut headers = vec![("anthropic-version", API_VERSION.to_string())];
            if let Some(key) = self.http.key() {
                headers.push(("x-api-key", key.expose().to_string()));
            }
            let decoder = AnthropicDecoder::new(self.target.price);
            self.http
                .post_events(&self.url, headers, body, decoder)
                .await
        })
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<SystemBlock<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    messages: Vec<WireMessage<'a>>,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

#[derive(Serialize, Clone, Copy)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<WireBlock<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: Cow<'a, str>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

impl WireBlock<'_> {
    fn set_cache_control(&mut self) -> bool {
        match self {
            WireBlock::Text { cache_control, .. } | WireBlock::ToolResult { cache_control, .. } => {
                *cache_control = Some(EPHEMERAL);
                true
            }
            _ => false,
        }
    }
}

fn build_body<'a>(target: &'a ModelTarget, request: &'a ChatRequest) -> Body<'a> {
    let cache = target.caps.cache_control;
    let mut max_tokens = request
        .max_tokens
        .or(target.max_output_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let thinking = target.thinking_budget.map(|budget| {
        // The budget is part of max_tokens and must leave room for the answer.
        max_tokens = max_tokens.max(budget.saturating_add(4096));
        Thinking {
            kind: "enabled",
            budget_tokens: budget,
        }
    });
    let mut system = Vec::new();
    if !request.system.is_empty() {
        system.push(SystemBlock {
            kind: "text",
            text: &request.system,
            cache_control: cache.then_some(EPHEMERAL),
        });
    }
    let tool_count = request.tools.len();
    let tools = request
        .tools
        .iter()
        .enumerate()
        .map(|(i, t)| Tool {
            name: &t.name,
            description: &t.description,
            input_schema: &t.input_schema,
            // Without a system prompt the head ends with the last tool.
            cache_control: (cache && system.is_empty() && i + 1 == tool_count).then_some(EPHEMERAL),
        })
        .collect();
    let mut messages = convert_messages(&request.messages);
    if cache
        && let Some(last) = messages.last_mut()
        && let Some(block) = last.content.last_mut()
    {
        block.set_cache_control();
    }
    Body {
        model: &target.model,
        max_tokens,
        stream: true,
        thinking,
        system,
        tools,
        messages,
    }
}

/// Keel messages → Anthropic messages. Consecutive messages of one role are merged (the API
/// wants alternation); empty text is dropped (the API rejects it); reasoning without a
/// signature (from another provider) cannot be verified by Anthropic and is left out.
fn convert_messages(messages: &[Message]) -> Vec<WireMessage<'_>> {
    let mut out: Vec<WireMessage<'_>> = Vec::with_capacity(messages.len());
    for message in messages {
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let mut blocks = Vec::with_capacity(message.content.len());
        for block in &message.content {
            match block {
                ContentBlock::Text { text } if !text.trim().is_empty() => {
                    blocks.push(WireBlock::Text {
                        text,
                        cache_control: None,
                    });
                }
                ContentBlock::Text { .. } => {}
                ContentBlock::Reasoning {
                    text,
                    signature: Some(signature),
                } => blocks.push(WireBlock::Thinking {
                    thinking: text,
                    signature,
                }),
                ContentBlock::Reasoning {
                    signature: None, ..
                } => {}
                ContentBlock::RedactedReasoning { data } => {
                    blocks.push(WireBlock::RedactedThinking { data });
                }
                ContentBlock::ToolUse { id, name, input } => {
                    blocks.push(WireBlock::ToolUse { id, name, input })
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => blocks.push(WireBlock::ToolResult {
                    tool_use_id,
                    content: if content.is_empty() {
                        Cow::Borrowed("(no output)")
                    } else {
                        Cow::Borrowed(content.as_str())
                    },
                    is_error: *is_error,
                    cache_control: None,
                }),
            }
        }
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(prev) if prev.role == role => prev.content.extend(blocks),
            _ => out.push(WireMessage {
                role,
                content: blocks,
            }),
        }
    }
    out
}
