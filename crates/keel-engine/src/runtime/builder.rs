//! The one place a session's engine is built, for every front end: configuration layers (the
//! user's file, the project's `.keel/config.toml`, the environment, then typed overrides from
//! flags or a request), the provider router with its fallbacks and auxiliary model, then tools
//! and guardrails ([`EngineBuilder`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_llm::{Provider, Role, Router, build_provider};
use keel_store::{SessionRecord, Store};

use crate::{Config, Engine, EngineBuilder, EngineError};
use keel_config::Layer;
use keel_phase::ExecutionMode;

/// How a session should run, over its configuration: what `keel run`'s flags, `keel serve`'s
/// defaults and a create request can choose. Unset fields leave the configuration alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionOverrides {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    /// The scripted provider's script (relative paths are relative to the workspace). Alone,
    /// it also selects the scripted provider.
    pub script: Option<PathBuf>,
    pub mode: Option<ExecutionMode>,
    pub max_iterations: Option<u32>,
}

impl SessionOverrides {
    /// These overrides with `top`'s set fields replacing them.
    pub fn with(mut self, top: &SessionOverrides) -> Self {
        fn pick<T: Clone>(low: &mut Option<T>, high: &Option<T>) {
            if high.is_some() {
                low.clone_from(high);
            }
        }
        pick(&mut self.provider, &top.provider);
        pick(&mut self.model, &top.model);
        pick(&mut self.base_url, &top.base_url);
        pick(&mut self.script, &top.script);
        pick(&mut self.mode, &top.mode);
        pick(&mut self.max_iterations, &top.max_iterations);
        self
    }

    /// What a stored session was started with, so resuming it needs no repeated flags.
    pub fn from_record(record: &SessionRecord) -> Self {
        let set = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Self {
            provider: set(&record.provider),
            model: set(&record.model),
            base_url: set(&record.base_url),
            script: set(&record.script).map(PathBuf::from),
            mode: ExecutionMode::parse(&record.mode),
            max_iterations: None,
        }
    }

    /// What resuming `record` with these flag overrides runs with: the flags win, and a flag
    /// naming another provider (or a script) drops the record's model, base URL and script,
    /// which belonged to its provider.
    pub fn resuming(record: &SessionRecord, flags: &SessionOverrides) -> Self {
        let mut stored = Self::from_record(record);
        if flags.provider.is_some() || flags.script.is_some() {
            stored.provider = None;
            stored.model = None;
            stored.base_url = None;
            stored.script = None;
        }
        stored.with(flags)
    }

    /// The configuration layer these overrides make (the highest one).
    pub fn layer(&self) -> Layer {
        let text = |s: &str| toml::Value::String(s.to_string());
        let mut pairs: Vec<(&str, toml::Value)> = Vec::new();
        if let Some(p) = &self.provider {
            pairs.push(("llm.provider", text(p)));
        }
        if let Some(m) = &self.model {
            pairs.push(("llm.model", text(m)));
        }
        if let Some(u) = &self.base_url {
            pairs.push(("llm.base_url", text(u)));
        }
        if let Some(s) = &self.script {
            pairs.push(("llm.script", text(&s.display().to_string())));
            if self.provider.is_none() {
                pairs.push(("llm.provider", text("scripted")));
            }
        }
        if let Some(m) = self.mode {
            pairs.push(("agent.mode", text(m.as_str())));
        }
        if let Some(n) = self.max_iterations {
            pairs.push(("agent.max_iterations", toml::Value::Integer(i64::from(n))));
        }
        Layer::from_overrides(&pairs)
    }
}

/// Adjusts a loaded configuration before the engine is built (tests switch off the codemap).
pub type ConfigAdjust = Arc<dyn Fn(&mut Config) + Send + Sync>;

/// Reports a problem that does not stop the session (an unavailable auxiliary model).
pub type Warn = Arc<dyn Fn(&str) + Send + Sync>;

/// Builds every session's engine the same way, whichever front end asks.
#[derive(Clone)]
pub struct SessionBuilder {
    store: Arc<dyn Store>,
    user_config: Option<PathBuf>,
    env: Vec<(String, String)>,
    defaults: SessionOverrides,
    adjust: Option<ConfigAdjust>,
    warn: Warn,
    hooks: Vec<Arc<dyn crate::hooks::Hook>>,
    /// The run lease's time-to-live of every session, over the configuration's (a worker's
    /// runs renew theirs as often as it heartbeats, so a killed one is taken over quickly).
    lease_ttl_secs: Option<u64>,
}

impl std::fmt::Debug for SessionBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionBuilder")
            .field("user_config", &self.user_config)
            .field("defaults", &self.defaults)
            .finish_non_exhaustive()
    }
}

impl SessionBuilder {
    /// Reads the user's configuration file and the `KEEL_*` variables and API keys from this
    /// process's environment.
    pub fn from_environment(store: Arc<dyn Store>) -> Self {
        let env: Vec<(String, String)> = std::env::vars().collect();
        let lookup = |name: &str| std::env::var(name).ok();
        Self {
            store,
            user_config: keel_config::user_config_path(&lookup),
            env,
            defaults: SessionOverrides::default(),
            adjust: None,
            warn: Arc::new(|m| eprintln!("keel: warning: {m}")),
            hooks: Vec::new(),
            lease_ttl_secs: None,
        }
    }

    /// No user file and no environment: only the project's file and the overrides count.
    pub fn isolated(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            user_config: None,
            env: Vec::new(),
            defaults: SessionOverrides::default(),
            adjust: None,
            warn: Arc::new(|_| {}),
            hooks: Vec::new(),
            lease_ttl_secs: None,
        }
    }

    /// Overrides under every session's own (`keel serve --provider …`).
    pub fn defaults(mut self, defaults: SessionOverrides) -> Self {
        self.defaults = defaults;
        self
    }

    /// Adjusts each loaded configuration.
    pub fn adjust(mut self, adjust: ConfigAdjust) -> Self {
        self.adjust = Some(adjust);
        self
    }

    /// Adds a custom hook to every session this builder makes (after the built-in
    /// guardrails, before final verification and approval; see [`crate::hooks`]).
    pub fn hook(mut self, hook: Arc<dyn crate::hooks::Hook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Every session's run lease lives `secs` without a heartbeat (renewed every third of
    /// it), whatever the configuration says.
    pub fn lease_ttl_secs(mut self, secs: u64) -> Self {
        self.lease_ttl_secs = Some(secs.max(1));
        self
    }

    /// Where warnings go (standard error by default).
    pub fn warn(mut self, warn: Warn) -> Self {
        self.warn = warn;
        self
    }

    /// The store sessions are written to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Where what Keel learns about model servers is remembered: the user's data directory
    /// (none without a home, rather than a directory in the workspace).
    fn learned_dir(&self) -> Option<std::path::PathBuf> {
        keel_config::user_data_dir(&|name: &str| self.env_var(name))
    }

    fn env_var(&self, name: &str) -> Option<String> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    /// The merged configuration for a session in `workspace` with `overrides` on top.
    pub fn config(
        &self,
        workspace: &Path,
        overrides: &SessionOverrides,
    ) -> Result<Config, EngineError> {
        let all = self.defaults.clone().with(overrides);
        let mut config = Config::load(
            self.user_config.as_deref(),
            workspace,
            self.env.clone(),
            all.layer(),
        )?;
        if let Some(adjust) = &self.adjust {
            adjust(&mut config);
        }
        if let Some(ttl) = self.lease_ttl_secs {
            config.store.lease_ttl_secs = ttl;
        }
        // Project settings that were refused (a project may only tighten security keys).
        for w in &config.warnings {
            (self.warn)(&w.to_string());
        }
        Ok(config)
    }

    /// The engine for a session in `workspace` with `overrides` on top of its configuration.
    pub fn engine(
        &self,
        workspace: &Path,
        overrides: &SessionOverrides,
    ) -> Result<Engine, EngineError> {
        let config = self.config(workspace, overrides)?;
        self.engine_with(config, workspace)
    }

    /// The engine for an already loaded configuration.
    pub fn engine_with(&self, config: Config, workspace: &Path) -> Result<Engine, EngineError> {
        let providers = self.providers(&config, workspace)?;
        let children = self.child_providers(&config, workspace);
        let mut builder = EngineBuilder::new(config, workspace)
            .store(self.store.clone())
            .provider(providers.main)
            .fallback_providers(providers.fallbacks);
        if let Some(aux) = providers.auxiliary {
            builder = builder.auxiliary_provider(aux);
        }
        for hook in &self.hooks {
            builder = builder.hook(hook.clone());
        }
        let engine = builder.child_providers(children).build()?;
        // Instruction files the system prompt left out (a link out, a FIFO, too large).
        for note in engine.project_notes() {
            (self.warn)(&format!("{note} (left out of the model's instructions)"));
        }
        for note in engine.setup_notes() {
            (self.warn)(note);
        }
        // A home as the workspace: read-only to the agent (the way out is named).
        if let Some(w) = keel_tools::shell::user_config::home_warning(workspace) {
            (self.warn)(&w);
        }
        // MCP servers that did not start, unreadable `.mcp.json` files, skipped schemas.
        for w in engine
            .mcp()
            .map(|m| m.warnings.as_slice())
            .unwrap_or_default()
        {
            (self.warn)(w);
        }
        Ok(engine)
    }

    /// Subagents' providers: the model `agent_open` names, else the `child` model role
    /// (`llm.child_model`, else the `fast` alias, else the main model). A scripted session's
    /// children play its script's `children:` scripts, in the order they are opened.
    fn child_providers(&self, config: &Config, workspace: &Path) -> crate::agents::ChildProviders {
        let router = Router::new(&config.llm, workspace).with_learned_dir(self.learned_dir());
        let env = self.env.clone();
        let opened = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        Arc::new(move |model: Option<&str>| {
            let target = match model {
                Some(m) => router.resolve(m),
                None => router.target(Role::Child),
            }
            .map_err(|e| e.to_string())?;
            let index = opened.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            keel_llm::build_child_provider(&target, &lookup, index).map_err(|e| e.to_string())
        })
    }

    /// The configured main provider, fallback list and auxiliary model, bare (the engine adds
    /// retries). With none configured, says how to configure one; a missing key names its
    /// variable.
    pub fn providers(&self, config: &Config, workspace: &Path) -> Result<Providers, EngineError> {
        let env = |name: &str| self.env_var(name);
        let router = Router::new(&config.llm, workspace).with_learned_dir(self.learned_dir());
        if !router.is_configured() {
            return Err(EngineError::Provider(
                keel_llm::router::not_configured_message(),
            ));
        }
        let main = router
            .build(Role::Main, &env)
            .map_err(|e| EngineError::Provider(e.to_string()))?;
        let fallbacks = router
            .fallbacks()
            .and_then(|targets| {
                targets
                    .iter()
                    .map(|t| build_provider(t, &env))
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| EngineError::Provider(format!("llm.fallback: {e}")))?;
        // The auxiliary model only writes summaries, and the engine falls back to the main
        // model for them: a broken one is worth a warning, not a refusal to run.
        let auxiliary = match (router.target(Role::Main), router.target(Role::Auxiliary)) {
            (Ok(main), Ok(aux)) if main != aux => match build_provider(&aux, &env) {
                Ok(p) => Some(p),
                Err(e) => {
                    (self.warn)(&format!(
                        "the auxiliary model {} is unavailable ({e}); summaries will use the main model",
                        aux.label()
                    ));
                    None
                }
            },
            (_, Err(e)) => {
                (self.warn)(&format!(
                    "no auxiliary model ({e}); summaries will use the main model"
                ));
                None
            }
            _ => None,
        };
        Ok(Providers {
            main,
            fallbacks,
            auxiliary,
        })
    }
}

/// The main model's provider, the fallback list and the auxiliary model (when it differs).
pub struct Providers {
    pub main: Arc<dyn Provider>,
    pub fallbacks: Vec<Arc<dyn Provider>>,
    pub auxiliary: Option<Arc<dyn Provider>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_overrides_win_field_by_field() {
        let low = SessionOverrides {
            provider: Some("deepseek".into()),
            model: Some("deepseek-chat".into()),
            ..SessionOverrides::default()
        };
        let high = SessionOverrides {
            model: Some("deepseek-reasoner".into()),
            mode: Some(ExecutionMode::PlanExec),
            ..SessionOverrides::default()
        };
        let both = low.with(&high);
        assert_eq!(both.provider.as_deref(), Some("deepseek"));
        assert_eq!(both.model.as_deref(), Some("deepseek-reasoner"));
        assert_eq!(both.mode, Some(ExecutionMode::PlanExec));
    }

    #[test]
    fn a_script_alone_selects_the_scripted_provider() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store: Arc<dyn Store> = Arc::new(
            keel_store::SqliteStore::open(&dir.path().join("k.db"))
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let b = SessionBuilder::isolated(store);
        let overrides = SessionOverrides {
            script: Some("s.yaml".into()),
            max_iterations: Some(7),
            ..SessionOverrides::default()
        };
        let config = b
            .config(dir.path(), &overrides)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.llm.provider.as_deref(), Some("scripted"));
        assert_eq!(config.agent.max_iterations, 7);
        // No provider at all is an error that says how to configure one.
        let err = b
            .engine(dir.path(), &SessionOverrides::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("no model provider is configured"), "{err}");
    }
}
