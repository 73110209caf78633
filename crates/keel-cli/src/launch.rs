//! From flags to a session, in one pass. `keel run`, `keel chat` and `keel work` (and every
//! other command that runs sessions) turn their session flags into [`SessionOverrides`] here
//! ([`overrides`]); `keel run` and `keel chat` then get everything a session needs from one
//! call ([`Launch::open`]): the workspace, the session to continue, the configuration for it,
//! the store and the [`SessionBuilder`] that builds its engine.
//!
//! Precedence is the configuration's own (`keel_config`): these overrides are its
//! highest layer, over accepted project suggestions, over the user's file. A resumed session
//! runs with what it was started with, and flags given again win
//! ([`SessionOverrides::resuming`]).

use std::path::PathBuf;
use std::sync::Arc;

use keel_engine::Config;
use keel_engine::runtime::{SessionBuilder, SessionOverrides};
use keel_store::{SessionRecord, SqliteStore};

use crate::args::{ModeArg, ProviderArgs};
use crate::setup;

/// The session flags as overrides: which model (`--provider`, `--model`, `--base-url`,
/// `--script`), `--mode` and `--max-iterations` (`None` where a command has no such flag).
pub fn overrides(
    llm: &ProviderArgs,
    mode: Option<ModeArg>,
    max_iterations: Option<u32>,
) -> SessionOverrides {
    SessionOverrides {
        provider: llm.provider.clone(),
        model: llm.model.clone(),
        base_url: llm.base_url.clone(),
        // Flag paths are relative to where the user typed them.
        script: llm
            .script
            .as_ref()
            .map(|s| std::path::absolute(s).unwrap_or_else(|_| s.clone())),
        mode: mode.map(ModeArg::mode),
        max_iterations,
    }
}

/// Which session a command continues: `--resume ID`, `--continue` (the workspace's latest),
/// or none (a new one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    New,
    Session(String),
    Latest,
}

impl Resume {
    pub fn from_flags(resume: Option<&str>, cont: bool) -> Self {
        match (resume, cont) {
            (Some(id), _) => Self::Session(id.to_string()),
            (None, true) => Self::Latest,
            (None, false) => Self::New,
        }
    }
}

/// Everything a front end needs to start or continue a session.
pub struct Launch {
    /// Where the session runs: `--workspace`, else a resumed session's own, else here.
    pub workspace: PathBuf,
    /// What the command line asked for.
    pub flags: SessionOverrides,
    /// What the session runs with: the flags over a resumed session's own settings.
    pub overrides: SessionOverrides,
    /// The session to continue, if any.
    pub resumed: Option<SessionRecord>,
    /// The configuration for `workspace` with `overrides` on top.
    pub config: Config,
    pub store: Arc<SqliteStore>,
    pub builder: SessionBuilder,
    /// The workspace (as first named) opened and shared while the configuration was read
    /// ([`setup::load_config_shared`]): keep it alive to reuse that handle and its fence for
    /// the session ([`share_workspace`]); dropping it ends the sharing.
    pub shared: Option<keel_fs::beneath::Shared>,
}

impl Launch {
    /// Resolves the session to continue and the configuration the session runs with, and
    /// opens the store. `workspace` is `--workspace` or the current directory
    /// ([`setup::workspace_dir`]); `pinned` says `--workspace` was given, so a resumed session
    /// runs there rather than where it started. The configuration is read once; a resumed
    /// session that runs elsewhere or with other settings has its own read once more.
    pub fn open(
        workspace: PathBuf,
        pinned: bool,
        flags: SessionOverrides,
        resume: Resume,
    ) -> anyhow::Result<Self> {
        let mut workspace = workspace;
        let (mut config, shared) = setup::load_config_shared(&workspace, flags.layer())?;
        let mut store = setup::open_store(&config)?;
        let resumed = match resume {
            Resume::New => None,
            Resume::Session(id) => Some(setup::find_session(&store, &id)?),
            Resume::Latest => Some(setup::latest_session(&store, &workspace)?),
        };
        let mut overrides = flags.clone();
        if let Some(record) = &resumed {
            // A resumed session runs where it started…
            let here = workspace.clone();
            if !pinned {
                workspace = setup::session_workspace(record)?;
            }
            // …with the provider, model, base URL, script and mode it started with, unless
            // flags say otherwise.
            overrides = SessionOverrides::resuming(record, &flags);
            if workspace != here || overrides != flags {
                let store_path = config.store.path.clone();
                config = setup::load_config(&workspace, overrides.layer())?;
                if config.store.path != store_path {
                    store = setup::open_store(&config)?;
                }
            }
        }
        let builder = setup::session_builder(store.clone());
        Ok(Self {
            workspace,
            flags,
            overrides,
            resumed,
            config,
            store,
            builder,
            shared,
        })
    }
}

/// Shares one handle of `workspace` while the guard lives (`DirHandle::share`): every later
/// open of it in this process — configuration, instructions, tools, index — reuses that handle
/// and its protected-store fence instead of fencing again. `None` when it cannot be opened
/// (each open then fails or succeeds on its own, as without sharing). While [`Launch`]'s own
/// guard lives, this is that handle, its fence holding the session's store registered since.
pub fn share_workspace(workspace: &std::path::Path) -> Option<keel_fs::beneath::Shared> {
    keel_fs::beneath::DirHandle::open(workspace)
        .ok()
        .map(|h| h.share())
}
