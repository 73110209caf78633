//! Turning flags, files and environment into configuration, a store and a provider.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use keel_config::Layer;
use keel_engine::Config;
use keel_engine::EngineError;
use keel_engine::runtime::{OpError, SessionBuilder};
use keel_store::{SessionRecord, SqliteStore, Store, StoreError};

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
    // No program Keel starts (git, the shell, the user's editor and servers) is looked up in
    // the workspace (red-team R23).
    keel_tools::shell::lookup::distrust_canonical(&canonical);
    Ok(canonical)
}

/// Loads the layered configuration for `workspace` with `overrides` from flags on top.
pub fn load_config(workspace: &Path, overrides: Layer) -> anyhow::Result<Config> {
    check_earlier_commands();
    read_config(workspace, overrides)
}

/// [`load_config`] with the workspace opened once and shared (`DirHandle::share`) between
/// the check of earlier commands and the configuration's read: the configuration, and every
/// later open of the workspace while the guard lives, use that handle and its
/// protected-store fence (issue 33: the stores are looked at once per `keel run`, not once
/// for the configuration and again for the session). The guard is `None` when the workspace
/// cannot be opened.
pub fn load_config_shared(
    workspace: &Path,
    overrides: Layer,
) -> anyhow::Result<(Config, Option<keel_fs::beneath::Shared>)> {
    check_earlier_commands();
    // After the check: a store link an earlier command re-pointed is put back first, so the
    // fence is built from where the stores really are.
    let shared = keel_fs::beneath::DirHandle::open(workspace)
        .ok()
        .map(|h| h.share());
    Ok((read_config(workspace, overrides)?, shared))
}

/// What earlier sessions left to check, before anything is read from a workspace.
fn check_earlier_commands() {
    // Directories earlier sessions' commands could write are never trusted for the programs
    // Keel starts unconfined; this session's are added (red-team pass 4, R4-5).
    if let Some(data) = keel_config::user_data_dir(&env_var) {
        keel_tools::shell::lookup::keep_record(&data);
        // Commands an earlier Keel ran and could not check (it was killed): checked now.
        for report in keel_tools::shell::pending::open(&data) {
            tell!("{report}");
        }
    }
}

fn read_config(workspace: &Path, overrides: Layer) -> anyhow::Result<Config> {
    let user = keel_config::user_config_path(&env_var);
    let config = Config::load(user.as_deref(), workspace, std::env::vars(), overrides)
        .map_err(|e| usage(e.to_string()))?;
    for warning in &config.warnings {
        tell!("keel: warning: {warning}");
    }
    Ok(config)
}

/// Opens the session store named by the configuration (or the default location).
pub fn open_store(config: &Config) -> anyhow::Result<Arc<SqliteStore>> {
    let path = match config.store.path.clone() {
        Some(p) => p,
        None => {
            // Keel's own data directory: made private even if it exists with a looser mode.
            let dir = keel_config::data_dir(&env_var);
            keel_store::private::tighten_private_dir(&dir).map_err(|e| {
                anyhow::anyhow!(
                    "cannot make Keel's data directory {} private: {e}",
                    dir.display()
                )
            })?;
            dir.join("keel.db")
        }
    };
    let store = SqliteStore::open(&path)?;
    Ok(Arc::new(store))
}

/// The session builder every command that runs sessions uses: the user's configuration file
/// and this process's environment, sessions stored in `store`.
pub fn session_builder(store: Arc<dyn Store>) -> SessionBuilder {
    // Warnings name repository-controlled things (MCP server names, symlink targets): they
    // go through the cleaned standard error like all output (R20).
    SessionBuilder::from_environment(store).warn(std::sync::Arc::new(|m| {
        tell!("keel: warning: {m}");
    }))
}

/// Waits for a store call from synchronous CLI code (never from inside a runtime: the
/// commands that run one await their store calls instead).
pub fn wait<T>(
    call: impl std::future::Future<Output = Result<T, keel_store::StoreError>>,
) -> Result<T, keel_store::StoreError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            keel_store::StoreError::Internal(format!("cannot start the store's runtime: {e}"))
        })?
        .block_on(call)
}

/// The stored session `id` names (an id or a unique prefix).
pub fn find_session(store: &SqliteStore, id: &str) -> anyhow::Result<SessionRecord> {
    store.db().get_session(id).map_err(store_usage_error)
}

/// Sessions read to find a workspace's newest (the store lists every workspace's, newest
/// first).
const SCAN: usize = 100_000;

/// The stored sessions of `workspace` (every workspace's when `None`), newest first.
pub fn sessions_in(
    store: &dyn Store,
    workspace: Option<&Path>,
    limit: usize,
) -> anyhow::Result<Vec<SessionRecord>> {
    let all = wait(store.list_sessions(if workspace.is_some() {
        SCAN
    } else {
        limit.min(SCAN)
    }))?;
    Ok(all
        .into_iter()
        .filter(|s| workspace.is_none_or(|w| Path::new(&s.workspace) == w))
        .take(limit)
        .collect())
}

/// The newest session that ran in `workspace` (`keel run --continue`).
pub fn latest_session(store: &SqliteStore, workspace: &Path) -> anyhow::Result<SessionRecord> {
    let here = workspace.display().to_string();
    store
        .db()
        .list_sessions(usize::MAX >> 1)?
        .into_iter()
        .find(|r| r.workspace == here)
        .ok_or_else(|| {
            usage(format!(
                "no session has run in {here} yet; start one with keel run \"task\""
            ))
        })
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
        | StoreError::Conflict(_)
        | StoreError::Missing(_) => usage(e.to_string()),
        other => other.into(),
    }
}

/// Engine errors about how a session was named or where it runs are usage errors.
pub fn engine_usage_error(e: EngineError) -> anyhow::Error {
    match e {
        EngineError::Setup(msg) | EngineError::Provider(msg) | EngineError::Busy(msg) => usage(msg),
        EngineError::Config(c) => usage(c.to_string()),
        EngineError::Store(s) => store_usage_error(s),
        other => other.into(),
    }
}

/// An op the session refused because of how it was asked is a usage error.
pub fn op_usage_error(e: OpError) -> anyhow::Error {
    match e {
        OpError::Engine(e) => engine_usage_error(e),
        other => usage(other.to_string()),
    }
}
