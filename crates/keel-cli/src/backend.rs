//! Which store `keel flow` and `keel eval` use: PostgreSQL when a database URL is configured
//! (`KEEL_DATABASE_URL`, else `[database] url`), the local SQLite session database otherwise.
//! Flow runs, eval runs and the sessions their agents run all live in the chosen store.

use std::sync::Arc;

use keel_engine::Config;
use keel_store::eval::EvalStore;
use keel_store::flow::FlowStore;
use keel_store::{PgStore, SqliteStore, Store};

use crate::setup;

/// The PostgreSQL URL to store in, when one is configured (`KEEL_DATABASE_URL`, else
/// `[database] url`).
pub fn database_url(config: &Config) -> Option<String> {
    setup::env_var("KEEL_DATABASE_URL")
        .filter(|u| !u.trim().is_empty())
        .or_else(|| config.database.url.clone())
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
}

/// The opened store.
#[derive(Clone)]
pub enum Backend {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PgStore>),
}

impl Backend {
    /// Opens PostgreSQL when configured (its schema must be migrated: the error says to run
    /// `keel db migrate`), else SQLite. Call it inside the runtime that will use the store:
    /// PostgreSQL connections belong to the runtime that made them.
    pub async fn open(config: &Config) -> anyhow::Result<Self> {
        Ok(match database_url(config) {
            Some(url) => Backend::Postgres(Arc::new(PgStore::open(&url).await?)),
            None => Backend::Sqlite(setup::open_store(config)?),
        })
    }

    /// Sessions, events and blockers (agent nodes and eval tasks run their sessions here).
    pub fn sessions(&self) -> Arc<dyn Store> {
        match self {
            Backend::Sqlite(s) => s.clone(),
            Backend::Postgres(p) => p.clone(),
        }
    }

    /// Flow runs and their checkpoints.
    pub fn flows(&self) -> keel_flow::store::FlowStore {
        let backend: Arc<dyn FlowStore> = match self {
            Backend::Sqlite(s) => s.clone(),
            Backend::Postgres(p) => p.clone(),
        };
        keel_flow::store::FlowStore::from_dyn(backend, Some(self.sessions()))
    }

    /// Eval runs.
    pub fn evals(&self) -> Arc<dyn EvalStore> {
        match self {
            Backend::Sqlite(s) => s.clone(),
            Backend::Postgres(p) => p.clone(),
        }
    }
}
