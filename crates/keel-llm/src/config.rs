//! The `[llm]` configuration section: which provider and model, named providers, model
//! aliases, roles, fallbacks, prices, timeouts. It lives here, beside the code that reads it,
//! and is embedded in the engine's `Config` as the `llm` section. Every key is documented in
//! `docs/CONFIG.md`. Resolution (alias → provider → endpoint) is [`crate::router`]'s job.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::models::Price;
use crate::presets::{preset, preset_names};

/// `[llm]`: which models to talk to, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// Provider of `model` and of aliases without their own: a preset (`anthropic`, `openai`,
    /// `deepseek`, `openrouter`, `ollama`, `vllm`, `llamacpp`), a `[llm.providers.NAME]`
    /// entry, or `scripted`. No default: Keel never guesses a provider.
    pub provider: Option<String>,
    /// The main model: a model name for `provider`, or an alias from `[llm.models]`.
    pub model: Option<String>,
    /// API root of `provider` (`…/v1` for OpenAI-compatible servers, the host for Anthropic).
    pub base_url: Option<String>,
    /// Script file for the `scripted` provider.
    pub script: Option<PathBuf>,
    /// Retries of a failed model request (rate limits, overload, 5xx, dropped connections).
    pub max_retries: u32,
    /// Models tried in order when the main one still fails after its retries.
    pub fallback: Vec<String>,
    /// Model for the `auxiliary` role (summaries). Default: the `fast` alias, else main.
    pub auxiliary_model: Option<String>,
    /// Model for the `child` role (subagents). Default: the `fast` alias, else main.
    pub child_model: Option<String>,
    /// Output token limit per request for models named directly (Anthropic default 8192).
    pub max_output_tokens: Option<u32>,
    /// Anthropic extended-thinking budget in tokens for models named directly (≥ 1024).
    pub thinking_budget: Option<u32>,
    /// Seconds to wait for a connection.
    pub connect_timeout_secs: u64,
    /// Seconds of silence allowed before the response headers or between stream chunks.
    pub idle_timeout_secs: u64,
    /// Named providers (`[llm.providers.NAME]`), or overrides of a preset's settings.
    pub providers: BTreeMap<String, ProviderEntry>,
    /// Model aliases (`[llm.models.NAME]`): `main`, `fast` and any names you like.
    pub models: BTreeMap<String, ModelEntry>,
    /// Prices in USD per million tokens by model name or prefix (`[llm.prices."gpt-4o"]`).
    pub prices: BTreeMap<String, Price>,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            provider: None,
            model: None,
            base_url: None,
            script: None,
            max_retries: 4,
            fallback: Vec::new(),
            auxiliary_model: None,
            child_model: None,
            max_output_tokens: None,
            thinking_budget: None,
            connect_timeout_secs: 10,
            idle_timeout_secs: 120,
            providers: BTreeMap::new(),
            models: BTreeMap::new(),
            prices: BTreeMap::new(),
        }
    }
}

/// `[llm.providers.NAME]`: a provider endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    /// The preset it is based on (wire format, defaults). Default: the entry's own name when
    /// that is a preset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// API root, overriding the preset's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Environment variable holding the API key, overriding the preset's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Send reasoning back as `reasoning_content` on assistant messages with tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<bool>,
    /// Request usage in the stream (`stream_options.include_usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_usage: Option<bool>,
    /// Send tool results as user messages rather than `role: tool` (for chat templates that
    /// drop tool messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_results_as_user: Option<bool>,
}

/// `[llm.models.NAME]`: a model alias.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Provider name (default: `llm.provider`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model name sent to the provider.
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Send tool results as user messages for this model (overrides the provider's setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_results_as_user: Option<bool>,
}

impl LlmConfig {
    /// Checks values that parse but make no sense; the message names the key and what is
    /// accepted.
    pub fn validate(&self) -> Result<(), String> {
        if self.connect_timeout_secs == 0 || self.idle_timeout_secs == 0 {
            return Err(
                "llm.connect_timeout_secs and llm.idle_timeout_secs must be at least 1".into(),
            );
        }
        if self.max_retries > 20 {
            return Err(format!(
                "llm.max_retries = {} is too many; use 0 to 20",
                self.max_retries
            ));
        }
        if let Some(url) = &self.base_url {
            check_url("llm.base_url", url)?;
        }
        check_budget("llm.thinking_budget", self.thinking_budget)?;
        for (name, entry) in &self.providers {
            let preset_name = entry.preset.as_deref().unwrap_or(name);
            if preset(preset_name).is_none() {
                return Err(match &entry.preset {
                    Some(p) => format!(
                        "llm.providers.{name}.preset = \"{p}\" is not a preset; accepted: {}",
                        preset_names()
                    ),
                    None => format!(
                        "llm.providers.{name} needs `preset` (one of: {}) to say which wire format and defaults it uses",
                        preset_names()
                    ),
                });
            }
            if let Some(url) = &entry.base_url {
                check_url(&format!("llm.providers.{name}.base_url"), url)?;
            }
        }
        for (alias, entry) in &self.models {
            if entry.model.trim().is_empty() {
                return Err(format!("llm.models.{alias}.model is empty; name a model"));
            }
            check_budget(
                &format!("llm.models.{alias}.thinking_budget"),
                entry.thinking_budget,
            )?;
        }
        for reference in self
            .fallback
            .iter()
            .chain(&self.auxiliary_model)
            .chain(&self.child_model)
        {
            if reference.trim().is_empty() {
                return Err(
                    "llm.fallback, llm.auxiliary_model and llm.child_model take model names or aliases; found an empty one".into(),
                );
            }
        }
        for (model, price) in &self.prices {
            let values = [
                Some(price.input),
                Some(price.output),
                price.cache_read,
                price.cache_write,
            ];
            if values.iter().flatten().any(|v| !v.is_finite() || *v < 0.0) {
                return Err(format!(
                    "llm.prices.\"{model}\" has a negative or invalid price; use USD per million tokens"
                ));
            }
        }
        Ok(())
    }
}

fn check_url(key: &str, url: &str) -> Result<(), String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(format!(
            "{key} = \"{url}\" is not an http(s) URL; e.g. \"http://localhost:11434/v1\""
        ))
    }
}

fn check_budget(key: &str, budget: Option<u32>) -> Result<(), String> {
    match budget {
        Some(b) if b < 1024 => Err(format!(
            "{key} = {b} is below Anthropic's minimum; use 1024 or more"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_key() {
        let mut c = LlmConfig::default();
        c.providers.insert("work".into(), ProviderEntry::default());
        let e = c.validate().err().unwrap_or_default();
        assert!(e.contains("llm.providers.work needs `preset`"), "{e}");

        let mut c = LlmConfig::default();
        c.providers.insert(
            "deepseek".into(),
            ProviderEntry {
                base_url: Some("api.deepseek.com".into()),
                ..ProviderEntry::default()
            },
        );
        let e = c.validate().err().unwrap_or_default();
        assert!(e.contains("llm.providers.deepseek.base_url"), "{e}");

        let c = LlmConfig {
            thinking_budget: Some(100),
            ..LlmConfig::default()
        };
        assert!(c.validate().is_err());
        assert!(LlmConfig::default().validate().is_ok());
    }
}
