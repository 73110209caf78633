//! Built-in providers by name. A preset is only data — a wire format, a base URL, the key
//! variable and capability flags — never a separate client: every OpenAI-compatible server
//! goes through the one OpenAI-compatible client.

/// The request/stream format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// Anthropic Messages API (`POST {base}/v1/messages`).
    Anthropic,
    /// OpenAI Chat Completions (`POST {base}/chat/completions`).
    OpenAi,
    /// Turns played from a file ([`crate::scripted`]).
    Scripted,
}

impl WireFormat {
    /// A short name for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            WireFormat::Anthropic => "anthropic",
            WireFormat::OpenAi => "openai-compatible",
            WireFormat::Scripted => "scripted",
        }
    }
}

/// What an endpoint supports beyond the basic wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// Ask for usage in the stream (`stream_options.include_usage`, OpenAI-compatible).
    pub stream_usage: bool,
    /// Send the model's reasoning back as `reasoning_content` on every assistant message that
    /// carried tool calls, even when empty (DeepSeek thinking mode answers HTTP 400 otherwise).
    pub reasoning_content: bool,
    /// Name the output limit `max_completion_tokens` (OpenAI) rather than `max_tokens`.
    pub max_completion_tokens: bool,
    /// Place prompt-cache breakpoints (`cache_control`, Anthropic).
    pub cache_control: bool,
    /// Send tool results as user messages instead of `role: tool` (for chat templates that
    /// drop tool messages).
    pub tool_results_as_user: bool,
}

/// A built-in provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    pub wire: WireFormat,
    /// The API root: the host for Anthropic, `…/v1` for OpenAI-compatible servers.
    pub base_url: &'static str,
    /// The environment variable holding the key.
    pub key_env: Option<&'static str>,
    /// Whether requests fail without a key (local servers usually need none).
    pub key_required: bool,
    pub caps: Capabilities,
    /// Whether it is a server on the user's machine: requests get [`LOCAL_MAX_OUTPUT_TOKENS`]
    /// unless configured, and a longer wait for the first byte ([`LOCAL_FIRST_BYTE_SECS`]).
    pub local: bool,
    /// One line for `keel doctor` and error messages.
    pub summary: &'static str,
}

const OPENAI_COMPATIBLE: Capabilities = Capabilities {
    stream_usage: true,
    reasoning_content: false,
    max_completion_tokens: false,
    cache_control: false,
    tool_results_as_user: false,
};

/// The output limit sent to local servers when none is configured: without one, a small
/// model can generate until its context is full (minutes on a laptop).
pub const LOCAL_MAX_OUTPUT_TOKENS: u32 = 4096;

/// Seconds a local server may take before the first byte of a reply (prompt processing on a
/// CPU is slow), when `llm.idle_timeout_secs` is left at its default.
pub const LOCAL_FIRST_BYTE_SECS: u64 = 600;

/// Every preset, in the order they are listed to users.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "anthropic",
        wire: WireFormat::Anthropic,
        base_url: "https://api.anthropic.com",
        key_env: Some("ANTHROPIC_API_KEY"),
        key_required: true,
        caps: Capabilities {
            stream_usage: false,
            reasoning_content: false,
            max_completion_tokens: false,
            cache_control: true,
            tool_results_as_user: false,
        },
        local: false,
        summary: "Anthropic Messages API",
    },
    Preset {
        name: "openai",
        wire: WireFormat::OpenAi,
        base_url: "https://api.openai.com/v1",
        key_env: Some("OPENAI_API_KEY"),
        key_required: true,
        caps: Capabilities {
            max_completion_tokens: true,
            ..OPENAI_COMPATIBLE
        },
        local: false,
        summary: "OpenAI Chat Completions",
    },
    Preset {
        name: "deepseek",
        wire: WireFormat::OpenAi,
        base_url: "https://api.deepseek.com",
        key_env: Some("DEEPSEEK_API_KEY"),
        key_required: true,
        caps: Capabilities {
            reasoning_content: true,
            ..OPENAI_COMPATIBLE
        },
        local: false,
        summary: "DeepSeek (reasoning_content round-tripped)",
    },
    Preset {
        name: "openrouter",
        wire: WireFormat::OpenAi,
        base_url: "https://openrouter.ai/api/v1",
        key_env: Some("OPENROUTER_API_KEY"),
        key_required: true,
        caps: OPENAI_COMPATIBLE,
        local: false,
        summary: "OpenRouter",
    },
    Preset {
        name: "ollama",
        wire: WireFormat::OpenAi,
        base_url: "http://localhost:11434/v1",
        key_env: Some("OLLAMA_API_KEY"),
        key_required: false,
        caps: OPENAI_COMPATIBLE,
        local: true,
        summary: "local Ollama server",
    },
    Preset {
        name: "vllm",
        wire: WireFormat::OpenAi,
        base_url: "http://localhost:8000/v1",
        key_env: Some("VLLM_API_KEY"),
        key_required: false,
        caps: OPENAI_COMPATIBLE,
        local: true,
        summary: "vLLM OpenAI-compatible server",
    },
    Preset {
        name: "llamacpp",
        wire: WireFormat::OpenAi,
        base_url: "http://localhost:8080/v1",
        key_env: Some("LLAMA_API_KEY"),
        key_required: false,
        caps: OPENAI_COMPATIBLE,
        local: true,
        summary: "llama.cpp server (llama-server)",
    },
];

/// The preset called `name`.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// `anthropic, openai, …` for messages.
pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}
