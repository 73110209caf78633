//! Role routing: from `[llm]` configuration to a concrete endpoint ([`ModelTarget`]) for each
//! role (`main` for the loop, `auxiliary` for summaries, `child` for subagents) and for the
//! fallback list, then to a [`Provider`]. Aliases (`[llm.models.NAME]`) name a provider and a
//! model; a plain model name goes to `llm.provider`.
//!
//! Resolution is pure (no network, no environment) so it can be shown by `keel doctor` and
//! tested; only [`build_provider`] reads the API key, through the lookup it is given.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::anthropic::AnthropicProvider;
use crate::config::LlmConfig;
use crate::http::{ApiKey, Timeouts};
use crate::models::{Price, lookup, price_for};
use crate::openai::OpenAiProvider;
use crate::presets::{
    Capabilities, LOCAL_FIRST_BYTE_SECS, LOCAL_MAX_OUTPUT_TOKENS, PRESETS, WireFormat, preset,
    preset_names,
};
use crate::scripted::ScriptedProvider;
use crate::{LlmError, Provider};

/// What a model is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The agent loop.
    Main,
    /// Summaries for compaction (cheap and fast is fine).
    Auxiliary,
    /// Subagents.
    Child,
}

impl Role {
    /// Every role, in display order.
    pub const ALL: [Role; 3] = [Role::Main, Role::Auxiliary, Role::Child];

    /// `main`, `auxiliary`, `child`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Main => "main",
            Role::Auxiliary => "auxiliary",
            Role::Child => "child",
        }
    }
}

/// A fully resolved model endpoint: everything needed to build its provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTarget {
    /// Provider name as configured (`deepseek`, `work`, `scripted` …).
    pub provider: String,
    pub wire: WireFormat,
    /// API root, without a trailing slash.
    pub base_url: String,
    /// The environment variable holding the key, if the provider uses one.
    pub api_key_env: Option<String>,
    /// Whether a missing key is an error.
    pub key_required: bool,
    /// Model name sent to the provider.
    pub model: String,
    pub caps: Capabilities,
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u32>,
    pub thinking_budget: Option<u32>,
    /// Price used for cost accounting, when known.
    pub price: Option<Price>,
    pub timeouts: Timeouts,
    /// A local-server preset (ollama, vllm, llamacpp): a longer wait for the first byte,
    /// timeouts not resent, a default output limit (see [`crate::presets::LOCAL_FIRST_BYTE_SECS`]).
    pub local: bool,
    /// The script of the scripted provider.
    pub script: Option<PathBuf>,
    /// How it was chosen, for messages: `llm.model`, `alias fast` …
    pub chosen_by: String,
    /// The user's Keel data directory, where what Keel learns about the server is remembered
    /// ([`crate::learned`]); `None`: learned for this process only. Never from a repository's
    /// configuration.
    pub learned_dir: Option<PathBuf>,
}

impl ModelTarget {
    /// `deepseek/deepseek-chat` style label.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

/// Resolves roles, aliases and fallbacks from an [`LlmConfig`].
#[derive(Debug, Clone)]
pub struct Router {
    config: LlmConfig,
    /// Relative script paths are resolved against this directory (the workspace).
    base_dir: PathBuf,
    /// Where learned server facts are kept (the user's data directory).
    learned_dir: Option<PathBuf>,
}

impl Router {
    /// A router over `config`; relative paths in it are relative to `base_dir`.
    pub fn new(config: &LlmConfig, base_dir: &Path) -> Self {
        Self {
            config: config.clone(),
            base_dir: base_dir.to_path_buf(),
            learned_dir: None,
        }
    }

    /// Remembers what is learned about each server in `data_dir` (the user's Keel data
    /// directory: `$KEEL_HOME` or its default, never a repository's path).
    pub fn with_learned_dir(mut self, data_dir: Option<PathBuf>) -> Self {
        self.learned_dir = data_dir;
        self
    }

    /// Whether any provider is configured at all (`llm.provider` or a `main` alias).
    pub fn is_configured(&self) -> bool {
        self.config.provider.is_some() || self.config.models.contains_key("main")
    }

    /// The endpoint for `role`. `main` is `llm.model` (a model of `llm.provider`, or an alias),
    /// else the `main` alias. `auxiliary` and `child` use `llm.auxiliary_model` /
    /// `llm.child_model`, else the `fast` alias, else main.
    pub fn target(&self, role: Role) -> Result<ModelTarget, LlmError> {
        let explicit = match role {
            Role::Main => return self.main(),
            Role::Auxiliary => &self.config.auxiliary_model,
            Role::Child => &self.config.child_model,
        };
        if let Some(reference) = explicit {
            return self.resolve(reference);
        }
        if self.config.models.contains_key("fast") {
            return self.resolve("fast");
        }
        self.main()
    }

    /// The fallback list, resolved, in order.
    pub fn fallbacks(&self) -> Result<Vec<ModelTarget>, LlmError> {
        self.config
            .fallback
            .iter()
            .map(|r| self.resolve(r))
            .collect()
    }

    /// Builds the provider for `role` (no retries: wrap it in [`crate::ReliableProvider`], as
    /// the engine builder does for the main model).
    pub fn build(
        &self,
        role: Role,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<dyn Provider>, LlmError> {
        build_provider(&self.target(role)?, env)
    }

    fn main(&self) -> Result<ModelTarget, LlmError> {
        if let Some(model) = &self.config.model {
            return self.resolve(model);
        }
        if self.config.models.contains_key("main") {
            return self.resolve("main");
        }
        match self.config.provider.as_deref() {
            Some("scripted") => self.target_for("scripted", "scripted", None, "llm.provider"),
            Some(p) => Err(LlmError::Config(format!(
                "no model is set for provider `{p}`: pass --model NAME or set `[llm] model`"
            ))),
            None => Err(LlmError::Config(not_configured_message())),
        }
    }

    /// Resolves a model reference: an alias from `[llm.models]`, else a model name for
    /// `llm.provider`.
    pub fn resolve(&self, reference: &str) -> Result<ModelTarget, LlmError> {
        if let Some(entry) = self.config.models.get(reference) {
            let provider = entry
                .provider
                .as_deref()
                .or(self.config.provider.as_deref())
                .ok_or_else(|| {
                    LlmError::Config(format!(
                        "alias `{reference}` has no provider: set llm.models.{reference}.provider or llm.provider"
                    ))
                })?;
            let mut t = self.target_for(
                provider,
                &entry.model,
                Some(entry),
                &format!("alias {reference}"),
            )?;
            if entry.context_window.is_some() {
                t.context_window = entry.context_window;
            }
            return Ok(t);
        }
        let provider = self.config.provider.as_deref().ok_or_else(|| {
            LlmError::Config(format!(
                "`{reference}` is not an alias in [llm.models] and no llm.provider is set to serve it"
            ))
        })?;
        self.target_for(provider, reference, None, "llm.model")
    }

    fn target_for(
        &self,
        provider: &str,
        model: &str,
        alias: Option<&crate::config::ModelEntry>,
        chosen_by: &str,
    ) -> Result<ModelTarget, LlmError> {
        let c = &self.config;
        let timeouts = Timeouts {
            connect: Duration::from_secs(c.connect_timeout_secs),
            idle: Duration::from_secs(c.idle_timeout_secs),
            first_byte: Duration::from_secs(c.idle_timeout_secs),
        };
        let (max_output_tokens, thinking_budget, context_window) = match alias {
            Some(a) => (a.max_output_tokens, a.thinking_budget, a.context_window),
            // The engine's `agent.context_window` overrides the window of the main model.
            None => (c.max_output_tokens, c.thinking_budget, None),
        };
        if provider == "scripted" {
            let script = c.script.as_ref().map(|s| {
                if s.is_absolute() {
                    s.clone()
                } else {
                    self.base_dir.join(s)
                }
            });
            return Ok(ModelTarget {
                provider: "scripted".into(),
                wire: WireFormat::Scripted,
                base_url: String::new(),
                api_key_env: None,
                key_required: false,
                model: model.to_string(),
                caps: Capabilities::default(),
                context_window,
                max_output_tokens,
                thinking_budget,
                price: None,
                timeouts,
                local: false,
                script,
                chosen_by: chosen_by.to_string(),
                learned_dir: None,
            });
        }
        let entry = c.providers.get(provider);
        let preset_name = entry.and_then(|e| e.preset.as_deref()).unwrap_or(provider);
        let preset = preset(preset_name).ok_or_else(|| {
            LlmError::Config(format!(
                "unknown provider `{provider}`; built in: {}, scripted; or define [llm.providers.{provider}] with a preset and base_url",
                preset_names()
            ))
        })?;
        let base_url = match (c.provider.as_deref() == Some(provider), &c.base_url) {
            (true, Some(url)) => url.clone(),
            _ => entry
                .and_then(|e| e.base_url.clone())
                .unwrap_or_else(|| preset.base_url.to_string()),
        };
        let mut caps = preset.caps;
        if let Some(e) = entry {
            if let Some(v) = e.reasoning_content {
                caps.reasoning_content = v;
            }
            if let Some(v) = e.stream_usage {
                caps.stream_usage = v;
            }
            if let Some(v) = e.tool_results_as_user {
                caps.tool_results_as_user = v;
            }
        }
        if let Some(v) = alias.and_then(|a| a.tool_results_as_user) {
            caps.tool_results_as_user = v;
        }
        let api_key_env = entry
            .and_then(|e| e.api_key_env.clone())
            .or_else(|| preset.key_env.map(str::to_string));
        let local = preset.local;
        let mut timeouts = timeouts;
        if local && c.idle_timeout_secs == LlmConfig::default().idle_timeout_secs {
            timeouts.first_byte = Duration::from_secs(LOCAL_FIRST_BYTE_SECS);
        }
        let max_output_tokens = match max_output_tokens {
            None if local => Some(LOCAL_MAX_OUTPUT_TOKENS),
            other => other,
        };
        Ok(ModelTarget {
            provider: provider.to_string(),
            wire: preset.wire,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key_env,
            key_required: preset.key_required,
            model: model.to_string(),
            caps,
            context_window: context_window.or_else(|| lookup(model).map(|f| f.context_window)),
            max_output_tokens,
            thinking_budget,
            price: price_for(model, &c.prices),
            timeouts,
            local,
            script: None,
            chosen_by: chosen_by.to_string(),
            learned_dir: self.learned_dir.clone(),
        })
    }
}

/// Builds the provider for `target`, reading its key through `env`. A required key that is
/// missing is a [`LlmError::Config`] naming the variable (never a value).
pub fn build_provider(
    target: &ModelTarget,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, LlmError> {
    let key = target
        .api_key_env
        .as_deref()
        .and_then(env)
        .and_then(ApiKey::new);
    if key.is_none() && target.key_required {
        let var = target
            .api_key_env
            .as_deref()
            .unwrap_or("the API key variable");
        return Err(LlmError::Config(format!(
            "{var} is not set: export your {} API key as {var}, or name another variable in llm.providers.{}.api_key_env",
            target.provider, target.provider
        )));
    }
    Ok(match target.wire {
        WireFormat::Anthropic => Arc::new(AnthropicProvider::new(target, key)?),
        WireFormat::OpenAi => Arc::new(OpenAiProvider::new(target, key)?),
        WireFormat::Scripted => {
            let Some(script) = &target.script else {
                return Err(LlmError::Config(
                    "the scripted provider needs a script: pass --script FILE or set `[llm] script`"
                        .into(),
                ));
            };
            let mut p = ScriptedProvider::load(script)?;
            if target.context_window.is_some() && p.script().context_window.is_none() {
                p = p.with_context_window(target.context_window);
            }
            Arc::new(p)
        }
    })
}

/// The provider of the `index`th subagent (from 0) a session opens with `target`: a scripted
/// target plays the script's `children[index]`; any other is built like [`build_provider`].
pub fn build_child_provider(
    target: &ModelTarget,
    env: &dyn Fn(&str) -> Option<String>,
    index: usize,
) -> Result<Arc<dyn Provider>, LlmError> {
    match (&target.wire, &target.script) {
        (WireFormat::Scripted, Some(script)) => {
            Ok(Arc::new(crate::scripted::load_child(script, index)?))
        }
        _ => build_provider(target, env),
    }
}

/// What to tell a user who has configured no provider.
pub fn not_configured_message() -> String {
    let mut lines = vec![
        "no model provider is configured. Either:".to_string(),
        "  - pass one: keel run --provider anthropic --model claude-sonnet-4-5 \"task\"   (key in ANTHROPIC_API_KEY)".to_string(),
        "  - or set it in .keel/config.toml or ~/.config/keel/config.toml:".to_string(),
        "        [llm]".to_string(),
        "        provider = \"deepseek\"".to_string(),
        "        model = \"deepseek-chat\"".to_string(),
        "  - or KEEL_LLM__PROVIDER / KEEL_LLM__MODEL in the environment".to_string(),
        "  - or try the scripted demo: keel run --provider scripted --script examples/demo.yaml \"task\"".to_string(),
        "Built-in providers (key variable):".to_string(),
    ];
    for p in PRESETS {
        lines.push(format!(
            "  {:<11} {}{}",
            p.name,
            p.key_env
                .map(|k| format!("{k}{}", if p.key_required { "" } else { " (optional)" }))
                .unwrap_or_default(),
            format_args!(" — {} at {}", p.summary, p.base_url)
        ));
    }
    lines.push(
        "Any other OpenAI-compatible server: --provider vllm --base-url http://HOST:PORT/v1 --model NAME"
            .to_string(),
    );
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ModelEntry, ProviderEntry};

    fn config(text: &str) -> LlmConfig {
        let v: toml_like::Config = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        v.llm
    }

    mod toml_like {
        #[derive(serde::Deserialize)]
        pub struct Config {
            pub llm: crate::config::LlmConfig,
        }
    }

    #[test]
    fn roles_resolve_through_aliases_with_defaults() {
        let c = config(
            r#"{"llm": {"provider": "anthropic", "model": "claude-sonnet-4-5",
                "models": {"fast": {"provider": "deepseek", "model": "deepseek-chat"}},
                "fallback": ["fast", "claude-haiku-4-5"]}}"#,
        );
        let r = Router::new(&c, Path::new("/w"));
        let main = r.target(Role::Main).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(main.label(), "anthropic/claude-sonnet-4-5");
        assert_eq!(main.base_url, "https://api.anthropic.com");
        assert_eq!(main.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        assert_eq!(main.context_window, Some(200_000));
        assert!(main.price.is_some());
        let aux = r.target(Role::Auxiliary).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(aux.label(), "deepseek/deepseek-chat");
        assert!(aux.caps.reasoning_content);
        assert_eq!(aux.chosen_by, "alias fast");
        let child = r.target(Role::Child).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(child, aux);
        let fb: Vec<String> = r
            .fallbacks()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .map(ModelTarget::label)
            .collect();
        assert_eq!(fb, ["deepseek/deepseek-chat", "anthropic/claude-haiku-4-5"]);
    }

    #[test]
    fn base_url_flag_applies_to_the_selected_provider_and_entries_override_presets() {
        let mut c = LlmConfig {
            provider: Some("openai".into()),
            model: Some("gpt-4o".into()),
            base_url: Some("http://127.0.0.1:9/v1/".into()),
            ..LlmConfig::default()
        };
        c.providers.insert(
            "work".into(),
            ProviderEntry {
                preset: Some("vllm".into()),
                base_url: Some("https://llm.internal/v1".into()),
                api_key_env: Some("WORK_KEY".into()),
                reasoning_content: Some(true),
                stream_usage: Some(false),
                tool_results_as_user: None,
            },
        );
        c.models.insert(
            "local".into(),
            ModelEntry {
                provider: Some("work".into()),
                model: "qwen3-coder".into(),
                context_window: Some(32_768),
                ..ModelEntry::default()
            },
        );
        let r = Router::new(&c, Path::new("/w"));
        let main = r.target(Role::Main).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(main.base_url, "http://127.0.0.1:9/v1");
        assert!(main.caps.max_completion_tokens);
        let local = r.resolve("local").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(local.base_url, "https://llm.internal/v1");
        assert_eq!(local.api_key_env.as_deref(), Some("WORK_KEY"));
        assert!(local.caps.reasoning_content && !local.caps.stream_usage);
        assert!(!local.key_required);
        assert_eq!(local.context_window, Some(32_768));
    }

    #[test]
    fn missing_configuration_is_explained() {
        let r = Router::new(&LlmConfig::default(), Path::new("/w"));
        assert!(!r.is_configured());
        let e = r
            .target(Role::Main)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("--provider anthropic"), "{e}");
        assert!(e.contains("DEEPSEEK_API_KEY"), "{e}");
        assert!(e.contains("ollama"), "{e}");

        let c = LlmConfig {
            provider: Some("nope".into()),
            model: Some("m".into()),
            ..LlmConfig::default()
        };
        let e = Router::new(&c, Path::new("/w"))
            .target(Role::Main)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("unknown provider `nope`"), "{e}");

        let c = LlmConfig {
            provider: Some("openai".into()),
            ..LlmConfig::default()
        };
        let e = Router::new(&c, Path::new("/w"))
            .target(Role::Main)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("--model"), "{e}");
    }

    #[test]
    fn a_missing_key_names_the_variable_and_local_servers_need_none() {
        let c = LlmConfig {
            provider: Some("deepseek".into()),
            model: Some("deepseek-chat".into()),
            ..LlmConfig::default()
        };
        let t = Router::new(&c, Path::new("/w"))
            .target(Role::Main)
            .unwrap_or_else(|e| panic!("{e}"));
        let e = build_provider(&t, &|_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("DEEPSEEK_API_KEY is not set"), "{e}");
        assert!(build_provider(&t, &|_| Some("sk-x".into())).is_ok());

        let c = LlmConfig {
            provider: Some("ollama".into()),
            model: Some("qwen3:8b".into()),
            ..LlmConfig::default()
        };
        let t = Router::new(&c, Path::new("/w"))
            .target(Role::Main)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.base_url, "http://localhost:11434/v1");
        assert!(build_provider(&t, &|_| None).is_ok());
    }
}
