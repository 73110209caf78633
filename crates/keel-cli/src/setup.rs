//! Turning flags, files and environment into configuration, a store and a provider.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use keel_engine::EngineError;
use keel_engine::config::{self, Layer};
use keel_engine::{Config, EngineBuilder};
use keel_llm::{Provider, Role, Router, build_provider};
use keel_store::{SessionRecord, SqliteStore, Store, StoreError};

use crate::ProviderArgs;

/// A mistake in how keel was invoked or configured (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

pub fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The workspace directory: `--workspace` or the current directory, canonicalised.
pub fn workspace_dir(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match flag {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let canonical = dir.canonicalize().map_err(|e| {
        usage(format!(
            "workspace `{}` cannot be opened: {e}",
            dir.display()
        ))
    })?;
    if !canonical.is_dir() {
        return Err(usage(format!(
            "workspace `{}` is not a directory",
            dir.display()
        )));
    }
    Ok(canonical)
}

/// Loads the layered configuration for `workspace` with `overrides` from flags on top.
pub fn load_config(workspace: &Path, overrides: Layer) -> anyhow::Result<Config> {
    let user = config::user_config_path(&env_var);
    let config = Config::load(user.as_deref(), workspace, std::env::vars(), overrides)
        .map_err(|e| usage(e.to_string()))?;
    for warning in &config.warnings {
        eprintln!("keel: warning: {warning}");
    }
    Ok(config)
}

/// Opens the session store named by the configuration (or the default location).
pub fn open_store(config: &Config) -> anyhow::Result<Arc<SqliteStore>> {
    let path = config
        .store
        .path
        .clone()
        .unwrap_or_else(|| config::data_dir(&env_var).join("keel.db"));
    let store = SqliteStore::open(&path)?;
    Ok(Arc::new(store))
}

/// `[llm]` overrides from the provider flags shared by `keel run` and `keel doctor`.
pub fn llm_overrides(args: &ProviderArgs) -> Vec<(&'static str, toml::Value)> {
    let mut overrides = Vec::new();
    let text = |v: &str| toml::Value::String(v.to_string());
    if let Some(p) = &args.provider {
        overrides.push(("llm.provider", text(p)));
    }
    if let Some(m) = &args.model {
        overrides.push(("llm.model", text(m)));
    }
    if let Some(u) = &args.base_url {
        overrides.push(("llm.base_url", text(u)));
    }
    if let Some(s) = &args.script {
        // Flag paths are relative to where the user typed them.
        let abs = std::path::absolute(s).unwrap_or_else(|_| s.clone());
        overrides.push(("llm.script", text(&abs.display().to_string())));
        if args.provider.is_none() {
            overrides.push(("llm.provider", text("scripted")));
        }
    }
    overrides
}

/// The main model's provider and the fallback list, bare (the engine adds retries), and the
/// auxiliary role's provider when it is a different model than main.
pub struct Providers {
    pub main: Arc<dyn Provider>,
    pub fallbacks: Vec<Arc<dyn Provider>>,
    pub auxiliary: Option<Arc<dyn Provider>>,
}

impl Providers {
    /// Gives `builder` these providers (what `keel run` and `keel serve` sessions run on).
    pub fn attach(self, builder: EngineBuilder) -> EngineBuilder {
        let builder = builder
            .provider(self.main)
            .fallback_providers(self.fallbacks);
        match self.auxiliary {
            Some(auxiliary) => builder.auxiliary_provider(auxiliary),
            None => builder,
        }
    }
}

/// Builds the configured providers. With none configured, says how to configure one; a
/// missing key names its variable.
pub fn providers(config: &Config, workspace: &Path) -> anyhow::Result<Providers> {
    let router = Router::new(&config.llm, workspace);
    if !router.is_configured() {
        return Err(usage(keel_llm::router::not_configured_message()));
    }
    let main = router
        .build(Role::Main, &env_var)
        .map_err(|e| usage(e.to_string()))?;
    let fallbacks = router
        .fallbacks()
        .and_then(|targets| {
            targets
                .iter()
                .map(|t| build_provider(t, &env_var))
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| usage(format!("llm.fallback: {e}")))?;
    // The auxiliary model only writes summaries, and the engine falls back to the main model
    // for them: a broken one is worth a warning, not a refusal to run.
    let auxiliary = match (router.target(Role::Main), router.target(Role::Auxiliary)) {
        (Ok(main), Ok(aux)) if main != aux => match build_provider(&aux, &env_var) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!(
                    "keel: warning: the auxiliary model {} is unavailable ({e}); summaries will use the main model",
                    aux.label()
                );
                None
            }
        },
        (_, Err(e)) => {
            eprintln!("keel: warning: no auxiliary model ({e}); summaries will use the main model");
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

/// A stored session's record (to resume or undo it from anywhere).
pub fn session_record(cwd: &Path, session: &str) -> anyhow::Result<SessionRecord> {
    let config = load_config(cwd, Layer::from_overrides(&[]))?;
    let store = open_store(&config)?;
    store.get_session(session).map_err(store_usage_error)
}

/// The workspace a stored session ran in (for `--resume`/`--session` without `--workspace`).
pub fn session_workspace(record: &SessionRecord) -> anyhow::Result<PathBuf> {
    workspace_dir(Some(Path::new(&record.workspace)))
}

/// A store error caused by what the user typed (an unknown or ambiguous id) is a usage error.
pub fn store_usage_error(e: StoreError) -> anyhow::Error {
    match e {
        StoreError::NotFound(_)
        | StoreError::Ambiguous { .. }
        | StoreError::BlockerNotFound(_)
        | StoreError::AmbiguousBlocker { .. }
        | StoreError::Conflict(_) => usage(e.to_string()),
        other => other.into(),
    }
}

/// Engine errors about how a session was named or where it runs are usage errors.
pub fn engine_usage_error(e: EngineError) -> anyhow::Error {
    match e {
        EngineError::Setup(msg) => usage(msg),
        EngineError::Store(s) => store_usage_error(s),
        other => other.into(),
    }
}
