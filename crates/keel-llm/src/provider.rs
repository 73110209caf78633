//! The provider trait and the request/stream types it speaks.

use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use keel_protocol::{Message, ToolSpec, Usage};

use crate::{LlmError, StopReason};

/// One request to a model: the byte-stable head (system prompt and tools) and the conversation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The system prompt. Part of the cached head: must not contain volatile data.
    pub system: String,
    /// The tool catalog, in a deterministic order. Part of the cached head.
    pub tools: Vec<ToolSpec>,
    /// The conversation so far, oldest first; the first is a user message.
    pub messages: Vec<Message>,
    /// Upper bound on output tokens, if the caller wants one.
    pub max_tokens: Option<u32>,
}

/// One piece of a streamed model reply.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A fragment of answer text.
    TextDelta(String),
    /// A fragment of thinking text.
    ReasoningDelta(String),
    /// The opaque signature that must accompany the thinking when it is sent back. It closes
    /// the current thinking block: reasoning that follows starts a new block.
    ReasoningSignature(String),
    /// A thinking block the provider encrypted (Anthropic `redacted_thinking`): opaque data
    /// that must be sent back unchanged.
    RedactedReasoning(String),
    /// A tool call begins. `index` identifies it among this reply's calls.
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// A fragment of a tool call's JSON arguments.
    ToolCallDelta { index: usize, arguments: String },
    /// Usage so far: a complete snapshot (input, output, cache, cost) replacing any earlier one.
    Usage(Usage),
    /// The reply is complete. Every well-formed stream ends with exactly one of these.
    Finish { stop_reason: StopReason },
    /// The attempt so far failed with a retryable error (`message`, one short line);
    /// everything streamed since the request began is void, and the same request is sent
    /// again after `delay` as attempt `attempt + 1` of `attempts`. Emitted by
    /// [`crate::ReliableProvider`].
    Retry {
        attempt: u32,
        attempts: u32,
        delay: Duration,
        message: String,
    },
    /// Keel adapted to the server, or found something the user should know about it (a chat
    /// template that drops tool results or tools, a file of learned facts ignored): one line,
    /// shown once. Not part of the reply.
    Notice(String),
    /// The model `from` failed after its retries (`message`); the request goes to the next
    /// model of the fallback list, `to`. Everything streamed before is void.
    Fallback {
        from: String,
        to: String,
        message: String,
    },
}

/// A stream of reply events. Ends after [`StreamEvent::Finish`] or an error.
pub type EventStream = BoxStream<'static, Result<StreamEvent, LlmError>>;

/// Static facts about a configured provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderInfo {
    /// Provider name as configured (`scripted`, `anthropic`, `deepseek` …).
    pub provider: String,
    /// Model name sent to the provider.
    pub model: String,
    /// The model's context window in tokens, when known.
    pub context_window: Option<u64>,
}

/// A model endpoint that streams replies.
/// What `keel doctor --ping` found about a server's chat template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateProbe {
    /// The template leaves the tool schemas out of the prompt: the model cannot call tools.
    pub tools_dropped: bool,
    /// The template leaves `role: tool` messages out: results must go as user messages.
    pub results_dropped: bool,
    /// One line per finding, with the prompt sizes it was judged by.
    pub lines: Vec<String>,
}

pub trait Provider: Send + Sync {
    /// Which provider and model this is.
    fn info(&self) -> ProviderInfo;

    /// Sends one request and returns its reply as a stream. Errors before the first byte
    /// (HTTP status, connection) come back here; errors mid-stream come through the stream.
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>>;

    /// What this endpoint needed beyond the plain wire format — configured switches and ones
    /// learned from the server's behaviour — one short phrase each, for `keel doctor --ping`.
    fn adaptations(&self) -> Vec<String> {
        Vec::new()
    }

    /// A resumed session already received these replies (each a
    /// [`crate::scripted::reply_fingerprint`], in order). A provider that replays recorded
    /// replies (the scripted model) continues after them when they are its own first ones; a
    /// live model ignores this.
    fn fast_forward(&self, _played: &[String]) {}

    /// Probes how the server renders tool results and tools (`keel doctor --ping`); what it
    /// finds is learned for later runs. `None` when this provider has nothing to probe (hosted
    /// APIs and Anthropic render both natively; the scripted model).
    fn probe_template(&self) -> BoxFuture<'_, Option<Result<TemplateProbe, LlmError>>> {
        Box::pin(async { None })
    }

    /// How this endpoint counts a request beside Keel's byte estimate, when it checks a
    /// request's size itself before sending (the OpenAI-compatible client: the scale it learned
    /// from the server's prompt sizes and the template's allowance). The engine compacts by the
    /// same figure, so a context it judged small enough is one this client sends. `None`: the
    /// provider does not check (the engine calibrates on reported usage itself).
    fn token_scale(&self) -> Option<crate::tokens::TokenScale> {
        None
    }
}
