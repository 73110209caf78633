//! Model providers for Keel.
//!
//! A [`Provider`] turns a [`ChatRequest`] into a stream of [`StreamEvent`]s; [`TurnAssembler`]
//! folds that stream into one [`ModelTurn`] (text, reasoning blocks, tool calls with parsed
//! arguments, stop reason, usage with cost). The clients:
//!
//! - [`AnthropicProvider`]: the Messages API, with prompt-cache breakpoints after the
//!   byte-stable head and signed thinking blocks round-tripped;
//! - [`OpenAiProvider`]: Chat Completions for OpenAI, DeepSeek (with `reasoning_content`
//!   round-tripped), OpenRouter, Ollama, vLLM and llama.cpp — [`presets`] differ only in data;
//! - [`scripted::ScriptedProvider`]: model turns played from a file, for tests and demos.
//!
//! [`ReliableProvider`] adds retries (backoff, jitter, `retry-after`) and the per-model
//! fallback list; [`router::Router`] resolves the `[llm]` [`config`] into a provider per
//! [`router::Role`]; [`models`] holds the built-in context windows and prices. Failures are
//! typed ([`LlmError`]) and never carry an API key.
//!
//! This crate does not decide what to do with a reply (that is the engine's loop) and never
//! executes tools.

mod anthropic;
mod assemble;
pub mod config;
mod error;
pub mod http;
pub mod learned;
#[cfg(feature = "mock-server")]
pub mod mock;
pub mod models;
mod openai;
pub mod presets;
mod provider;
mod reliable;
pub mod retry;
pub mod router;
pub mod scripted;
pub mod sse;
pub mod tokens;
mod wire_errors;

pub use anthropic::AnthropicProvider;
pub use assemble::{ModelTurn, StopReason, TurnAssembler};
pub use error::LlmError;
pub use openai::OpenAiProvider;
pub use provider::{ChatRequest, EventStream, Provider, ProviderInfo, StreamEvent, TemplateProbe};
pub use reliable::{FALLBACK_COOL_DOWN, ReliableProvider};
pub use router::{ModelTarget, Role, Router, build_child_provider, build_provider};
